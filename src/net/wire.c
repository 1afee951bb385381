/* The wire format of deployment (include/dpfl/net.h): versioned, length-prefixed, checksummed frames with a strict
 * decoder.  Everything a peer sends is outside input: the decoder checks the header, the length against the
 * bytes actually present, the checksum, then the type's exact layout and every value's range, before anything of
 * the frame is used.  Encoding refuses what decoding would refuse, so an accepted frame re-encodes to the same
 * bytes (the fuzz harness checks it). */
#include "dpfl/net.h"
#include "core/bytes.h"

#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The fields go through core/bytes.h; the float vectors are copied as they are in memory (and read back in place by
 * dpfl_wire_floats), little-endian on a little-endian host only. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire is little-endian; add byte swaps here");

enum {
    HELLO_BYTES = 32 * 3 + 8 + 4 + 4,
    ROUND_FIXED = 4 + 4 + 8 * 3 + 32 + 32 + 4 * 3 + 8 + 32 + 8 + 8,
    UPDATE_FIXED = 4 + 4 + 32 + 8 * 4 + 8,
    HEARTBEAT_BYTES = 4,
    TEXT_FIXED = 4 + 4,
    SECAGG_MIN = 4 + 12,
    SYNC_FIXED = 4 + 32 + 8
};

const char *dpfl_wire_type_name(uint32_t type)
{
    switch (type) {
    case DPFL_WIRE_HELLO: return "hello";
    case DPFL_WIRE_ROUND: return "round";
    case DPFL_WIRE_UPDATE: return "update";
    case DPFL_WIRE_HEARTBEAT: return "heartbeat";
    case DPFL_WIRE_ERROR: return "error";
    case DPFL_WIRE_BYE: return "bye";
    case DPFL_WIRE_SECAGG: return "secagg";
    case DPFL_WIRE_SYNC: return "sync";
    default: return "unknown";
    }
}

static int text_ok(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || (unsigned char)t[i] > 0x7e) return 0;
    return 1;
}

/* The checks both directions share: the values a type carries, given its payload length.  `vec` (nparam floats,
 * possibly unaligned) is checked for finiteness in updates. */
static dpfl_status check_values(const dpfl_wire_msg *m, const uint8_t *vec, const float *fvec, size_t textlen,
                                dpfl_error *err)
{
    const char *t = dpfl_wire_type_name(m->type);
    switch (m->type) {
    case DPFL_WIRE_HELLO:
        if (m->released > m->rounds && m->sender == DPFL_WIRE_SERVER)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: %u rounds released of %u", t, m->released, m->rounds);
        if (m->sender != DPFL_WIRE_SERVER && (m->nparam || m->rounds || m->released))
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: a client's hello carries only its config digest", t);
        return DPFL_OK;
    case DPFL_WIRE_ROUND:
        if (m->sender != DPFL_WIRE_SERVER)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: sent by client %u (only the server sends rounds)", t,
                             m->sender);
        if (m->round == 0 || m->released >= m->round)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: round %u with %u rounds released", t, m->round,
                             m->released);
        if (!(m->lr >= 0) || isinf(m->lr) || !(m->update_clip > 0) || !(m->record_z >= 0) || isinf(m->record_z))
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: lr %g, update clip %g, record noise %g out of range", t,
                             m->lr, m->update_clip, m->record_z);
        if (m->cohort == 0) {
            static const uint8_t zero[32];
            if (m->index || m->threshold || m->client_z != 0 || memcmp(m->ddp_seed, zero, 32))
                return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: distributed-DP values without a cohort", t);
        } else if (m->cohort > 10000u || m->index >= m->cohort || m->threshold < 2 || m->threshold > m->cohort ||
                   !(m->client_z > 0) || isinf(m->client_z)) {
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: client %u of a cohort of %u, threshold %u, noise %g out "
                                                "of range", t, m->index, m->cohort, m->threshold, m->client_z);
        }
        if (m->ncontrol != 0 && m->ncontrol != m->nparam)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: a control variate of %llu values for %llu parameters", t,
                             (unsigned long long)m->ncontrol, (unsigned long long)m->nparam);
        for (uint64_t i = 0; i < m->ncontrol; i++) {
            float v;
            if (m->fcvec) v = m->fcvec[i];
            else memcpy(&v, m->cvec + 4 * i, 4);
            if (!isfinite(v))
                return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: value %llu of the control variate is not finite", t,
                                 (unsigned long long)i);
        }
        break;
    case DPFL_WIRE_UPDATE:
        if (m->sender == DPFL_WIRE_SERVER)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: sent by the server", t);
        if (m->round == 0) return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: round 0", t);
        if (m->flags & ~DPFL_WIRE_STATS) return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: unknown flags 0x%x", t, m->flags);
        if (m->steps < 0 || m->examples < 0 || m->clipped < 0 || m->clipped > m->examples || !isfinite(m->loss_sum) ||
            m->loss_sum < 0)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: steps %lld, examples %lld, clipped %lld, loss %g out of "
                                                "range", t, (long long)m->steps, (long long)m->examples,
                             (long long)m->clipped, m->loss_sum);
        if (!(m->flags & DPFL_WIRE_STATS) && (m->examples || m->clipped || m->loss_sum != 0))
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: statistics without the stats flag", t);
        for (uint64_t i = 0; i < m->nparam; i++) {
            float v;
            if (fvec) v = fvec[i];
            else memcpy(&v, vec + 4 * i, 4);
            if (!isfinite(v))
                return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: value %llu of the update is not finite", t,
                                 (unsigned long long)i);
        }
        break;
    case DPFL_WIRE_SYNC:
        if (m->sender != DPFL_WIRE_SERVER)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: sent by client %u (only the server syncs)", t, m->sender);
        break;
    case DPFL_WIRE_HEARTBEAT:
        return DPFL_OK;
    case DPFL_WIRE_SECAGG:
        if (m->round == 0) return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: round 0", t);
        if (m->data_len < SECAGG_MIN - 4)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: a message of %zu bytes (its header alone has 12)", t,
                             m->data_len);
        return DPFL_OK;
    case DPFL_WIRE_ERROR:
    case DPFL_WIRE_BYE:
        if (textlen > DPFL_WIRE_MAX_TEXT)
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: text of %zu bytes (at most %u)", t, textlen,
                             DPFL_WIRE_MAX_TEXT);
        if (!text_ok(m->text, textlen))
            return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: text is not printable ASCII", t);
        return DPFL_OK;
    default:
        return dpfl_fail(err, DPFL_EFORMAT, "unknown frame type %u", (unsigned)m->type);
    }
    if (m->nparam == 0) return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: no parameters", t);
    return DPFL_OK;
}

/* Payload bytes of m (0 if it cannot be encoded: too large). */
static size_t payload_len(const dpfl_wire_msg *m, size_t textlen)
{
    switch (m->type) {
    case DPFL_WIRE_HELLO: return HELLO_BYTES;
    case DPFL_WIRE_HEARTBEAT: return HEARTBEAT_BYTES;
    case DPFL_WIRE_ERROR:
    case DPFL_WIRE_BYE: return TEXT_FIXED + textlen;
    case DPFL_WIRE_SECAGG: return m->data_len <= DPFL_WIRE_MAX_PAYLOAD - 4 ? 4 + m->data_len : 0;
    case DPFL_WIRE_ROUND:
    case DPFL_WIRE_UPDATE:
    case DPFL_WIRE_SYNC: {
        size_t fixed = m->type == DPFL_WIRE_ROUND ? ROUND_FIXED : m->type == DPFL_WIRE_SYNC ? SYNC_FIXED : UPDATE_FIXED;
        const uint64_t nc = m->type == DPFL_WIRE_ROUND ? m->ncontrol : 0; /* 0 or nparam (checked) */
        if (m->nparam > (DPFL_WIRE_MAX_PAYLOAD - fixed) / 4 || nc > (DPFL_WIRE_MAX_PAYLOAD - fixed) / 4 - m->nparam)
            return 0;
        return fixed + 4 * (size_t)(m->nparam + nc);
    }
    default: return 0;
    }
}

dpfl_status dpfl_wire_encode(const dpfl_wire_msg *m, uint8_t **out, size_t *len, dpfl_error *err)
{
    *out = NULL;
    *len = 0;
    const size_t textlen = (m->type == DPFL_WIRE_ERROR || m->type == DPFL_WIRE_BYE) ? strnlen(m->text, sizeof m->text) : 0;
    if ((m->type == DPFL_WIRE_ROUND || m->type == DPFL_WIRE_UPDATE || m->type == DPFL_WIRE_SYNC) && m->nparam &&
        !m->fvec && !m->vec)
        return dpfl_fail(err, DPFL_EINVAL, "%s frame without its vector", dpfl_wire_type_name(m->type));
    if (m->type == DPFL_WIRE_ROUND && m->ncontrol && !m->fcvec && !m->cvec)
        return dpfl_fail(err, DPFL_EINVAL, "round frame without its control variate");
    if (m->type == DPFL_WIRE_SECAGG && m->data_len && !m->data)
        return dpfl_fail(err, DPFL_EINVAL, "secagg frame without its message");
    dpfl_status st = check_values(m, m->vec, m->fvec, textlen, err);
    if (st) return st;
    const size_t plen = payload_len(m, textlen);
    if (plen == 0 || plen > DPFL_WIRE_MAX_PAYLOAD)
        return dpfl_fail(err, DPFL_EINVAL, "%s frame of %llu parameters exceeds the %zu-byte payload limit",
                         dpfl_wire_type_name(m->type), (unsigned long long)m->nparam, DPFL_WIRE_MAX_PAYLOAD);
    const size_t total = DPFL_WIRE_HEADER + plen + DPFL_WIRE_TRAILER;
    uint8_t *buf = malloc(total);
    if (!buf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%zu-byte %s frame)", total, dpfl_wire_type_name(m->type));
    dpfl_bytes_writer c = dpfl_bytes_writer_over(buf, total);
    dpfl_bytes_put_u32(&c, DPFL_WIRE_MAGIC);
    const uint8_t vt[4] = {(uint8_t)DPFL_WIRE_VERSION, (uint8_t)m->type, 0, 0};
    dpfl_bytes_put(&c, vt, 4);
    dpfl_bytes_put_u32(&c, m->sender);
    dpfl_bytes_put_u32(&c, (uint32_t)plen);
    switch (m->type) {
    case DPFL_WIRE_HELLO:
        dpfl_bytes_put(&c, m->config_digest, 32);
        dpfl_bytes_put(&c, m->partition_digest, 32);
        dpfl_bytes_put(&c, m->partition_key, 32);
        dpfl_bytes_put_u64(&c, m->nparam);
        dpfl_bytes_put_u32(&c, m->rounds);
        dpfl_bytes_put_u32(&c, m->released);
        break;
    case DPFL_WIRE_ROUND:
        dpfl_bytes_put_u32(&c, m->round);
        dpfl_bytes_put_u32(&c, m->released);
        dpfl_bytes_put_f64(&c, m->lr);
        dpfl_bytes_put_f64(&c, m->update_clip);
        dpfl_bytes_put_f64(&c, m->record_z);
        dpfl_bytes_put(&c, m->rates_digest, 32);
        dpfl_bytes_put(&c, m->model_digest, 32);
        dpfl_bytes_put_u32(&c, m->cohort);
        dpfl_bytes_put_u32(&c, m->index);
        dpfl_bytes_put_u32(&c, m->threshold);
        dpfl_bytes_put_f64(&c, m->client_z);
        dpfl_bytes_put(&c, m->ddp_seed, 32);
        dpfl_bytes_put_u64(&c, m->nparam);
        dpfl_bytes_put_u64(&c, m->ncontrol);
        dpfl_bytes_put(&c, m->fvec ? (const void *)m->fvec : (const void *)m->vec, 4 * (size_t)m->nparam);
        if (m->ncontrol)
            dpfl_bytes_put(&c, m->fcvec ? (const void *)m->fcvec : (const void *)m->cvec, 4 * (size_t)m->ncontrol);
        break;
    case DPFL_WIRE_SECAGG:
        dpfl_bytes_put_u32(&c, m->round);
        dpfl_bytes_put(&c, m->data, m->data_len);
        break;
    case DPFL_WIRE_UPDATE:
        dpfl_bytes_put_u32(&c, m->round);
        dpfl_bytes_put_u32(&c, m->flags);
        dpfl_bytes_put(&c, m->model_digest, 32);
        dpfl_bytes_put_i64(&c, m->steps);
        dpfl_bytes_put_i64(&c, m->examples);
        dpfl_bytes_put_f64(&c, m->loss_sum);
        dpfl_bytes_put_i64(&c, m->clipped);
        dpfl_bytes_put_u64(&c, m->nparam);
        dpfl_bytes_put(&c, m->fvec ? (const void *)m->fvec : (const void *)m->vec, 4 * (size_t)m->nparam);
        break;
    case DPFL_WIRE_SYNC:
        dpfl_bytes_put_u32(&c, m->round);
        dpfl_bytes_put(&c, m->model_digest, 32);
        dpfl_bytes_put_u64(&c, m->nparam);
        dpfl_bytes_put(&c, m->fvec ? (const void *)m->fvec : (const void *)m->vec, 4 * (size_t)m->nparam);
        break;
    case DPFL_WIRE_HEARTBEAT:
        dpfl_bytes_put_u32(&c, m->round);
        break;
    default: /* ERROR, BYE */
        dpfl_bytes_put_u32(&c, m->code);
        dpfl_bytes_put_u32(&c, m->round);
        dpfl_bytes_put(&c, m->text, textlen);
        break;
    }
    dpfl_bytes_put_u32(&c, dpfl_crc32(buf, DPFL_WIRE_HEADER + plen));
    DPFL_ASSERT((size_t)(c.p - buf) == total);
    *out = buf;
    *len = total;
    return DPFL_OK;
}

/* The frame's header and trailer: magic, version, type, reserved bits, sender, payload length against the frame's
 * and the limit, checksum.  On success *c stands at the payload and *plen is its length. */
static dpfl_status header_read(const uint8_t *buf, size_t len, dpfl_bytes_reader *c, dpfl_wire_msg *m, uint32_t *plen,
                               dpfl_error *err)
{
    if (len < DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER)
        return dpfl_fail(err, DPFL_EFORMAT, "truncated frame: %zu bytes, a frame has at least %u", len,
                         DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER);
    *c = dpfl_bytes_reader_over(buf, len);
    uint32_t magic;
    dpfl_bytes_get_u32(c, &magic);
    if (magic != DPFL_WIRE_MAGIC) return dpfl_fail(err, DPFL_EFORMAT, "not a dpfl frame (bad magic 0x%08x)", magic);
    uint8_t vt[4];
    dpfl_bytes_get(c, vt, 4);
    if (vt[0] != DPFL_WIRE_VERSION)
        return dpfl_fail(err, DPFL_EFORMAT, "frame version %u is not supported (this dpfl speaks version %u)", vt[0],
                         DPFL_WIRE_VERSION);
    if (vt[1] < DPFL_WIRE_HELLO || vt[1] > DPFL_WIRE_SYNC)
        return dpfl_fail(err, DPFL_EFORMAT, "unknown frame type %u", vt[1]);
    if (vt[2] || vt[3]) return dpfl_fail(err, DPFL_EFORMAT, "frame header has reserved bits set");
    m->type = (dpfl_wire_type)vt[1];
    dpfl_bytes_get_u32(c, &m->sender);
    dpfl_bytes_get_u32(c, plen);
    const char *t = dpfl_wire_type_name(m->type);
    if (*plen > DPFL_WIRE_MAX_PAYLOAD)
        return dpfl_fail(err, DPFL_EFORMAT, "oversized %s frame: payload of %u bytes, the limit is %zu", t, *plen,
                         DPFL_WIRE_MAX_PAYLOAD);
    if (len != (size_t)DPFL_WIRE_HEADER + *plen + DPFL_WIRE_TRAILER)
        return dpfl_fail(err, DPFL_EFORMAT, "%s frame of %zu bytes, its header says %zu (%s)", t, len,
                         (size_t)DPFL_WIRE_HEADER + *plen + DPFL_WIRE_TRAILER,
                         len < (size_t)DPFL_WIRE_HEADER + *plen + DPFL_WIRE_TRAILER ? "truncated" : "trailing bytes");
    if (dpfl_bytes_load_u32(buf + DPFL_WIRE_HEADER + *plen) != dpfl_crc32(buf, DPFL_WIRE_HEADER + *plen))
        return dpfl_fail(err, DPFL_EFORMAT, "%s frame fails its checksum (corrupted)", t);
    return DPFL_OK;
}

enum { PAYLOAD_OK, PAYLOAD_BADLEN, PAYLOAD_BADVEC, PAYLOAD_LONG_TEXT };

/* The payload of m->type (its length plen) at c, into m; *textlen: an ERROR or BYE frame's text length. */
static int payload_read(dpfl_bytes_reader *c, dpfl_wire_msg *m, uint32_t plen, size_t *textlen)
{
    switch (m->type) {
    case DPFL_WIRE_HELLO:
        if (plen != HELLO_BYTES) return PAYLOAD_BADLEN;
        dpfl_bytes_get(c, m->config_digest, 32);
        dpfl_bytes_get(c, m->partition_digest, 32);
        dpfl_bytes_get(c, m->partition_key, 32);
        dpfl_bytes_get_u64(c, &m->nparam);
        dpfl_bytes_get_u32(c, &m->rounds);
        dpfl_bytes_get_u32(c, &m->released);
        return PAYLOAD_OK;
    case DPFL_WIRE_ROUND:
        if (plen < ROUND_FIXED) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->round);
        dpfl_bytes_get_u32(c, &m->released);
        dpfl_bytes_get_f64(c, &m->lr);
        dpfl_bytes_get_f64(c, &m->update_clip);
        dpfl_bytes_get_f64(c, &m->record_z);
        dpfl_bytes_get(c, m->rates_digest, 32);
        dpfl_bytes_get(c, m->model_digest, 32);
        dpfl_bytes_get_u32(c, &m->cohort);
        dpfl_bytes_get_u32(c, &m->index);
        dpfl_bytes_get_u32(c, &m->threshold);
        dpfl_bytes_get_f64(c, &m->client_z);
        dpfl_bytes_get(c, m->ddp_seed, 32);
        dpfl_bytes_get_u64(c, &m->nparam);
        dpfl_bytes_get_u64(c, &m->ncontrol);
        /* nparam + ncontrol floats, neither larger than the payload (no overflow in the sum) */
        if (m->nparam > plen / 4 || m->ncontrol > plen / 4 || m->nparam + m->ncontrol != (plen - ROUND_FIXED) / 4 ||
            (plen - ROUND_FIXED) % 4)
            return PAYLOAD_BADVEC;
        m->vec = c->p;
        m->cvec = m->ncontrol ? c->p + 4 * (size_t)m->nparam : NULL;
        return PAYLOAD_OK;
    case DPFL_WIRE_SECAGG:
        if (plen < SECAGG_MIN) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->round);
        m->data = c->p;
        m->data_len = plen - 4;
        return PAYLOAD_OK;
    case DPFL_WIRE_UPDATE:
        if (plen < UPDATE_FIXED) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->round);
        dpfl_bytes_get_u32(c, &m->flags);
        dpfl_bytes_get(c, m->model_digest, 32);
        dpfl_bytes_get_i64(c, &m->steps);
        dpfl_bytes_get_i64(c, &m->examples);
        dpfl_bytes_get_f64(c, &m->loss_sum);
        dpfl_bytes_get_i64(c, &m->clipped);
        dpfl_bytes_get_u64(c, &m->nparam);
        if (m->nparam != (plen - UPDATE_FIXED) / 4 || (plen - UPDATE_FIXED) % 4) return PAYLOAD_BADVEC;
        m->vec = c->p;
        return PAYLOAD_OK;
    case DPFL_WIRE_SYNC:
        if (plen < SYNC_FIXED) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->round);
        dpfl_bytes_get(c, m->model_digest, 32);
        dpfl_bytes_get_u64(c, &m->nparam);
        if (m->nparam != (plen - SYNC_FIXED) / 4 || (plen - SYNC_FIXED) % 4) return PAYLOAD_BADVEC;
        m->vec = c->p;
        return PAYLOAD_OK;
    case DPFL_WIRE_HEARTBEAT:
        if (plen != HEARTBEAT_BYTES) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->round);
        return PAYLOAD_OK;
    default: /* ERROR, BYE */
        if (plen < TEXT_FIXED) return PAYLOAD_BADLEN;
        dpfl_bytes_get_u32(c, &m->code);
        dpfl_bytes_get_u32(c, &m->round);
        *textlen = plen - TEXT_FIXED;
        if (*textlen > DPFL_WIRE_MAX_TEXT) return PAYLOAD_LONG_TEXT;
        memcpy(m->text, c->p, *textlen);
        m->text[*textlen] = '\0';
        return PAYLOAD_OK;
    }
}

dpfl_status dpfl_wire_decode(const void *data, size_t len, dpfl_wire_msg *m, dpfl_error *err)
{
    memset(m, 0, sizeof *m);
    dpfl_bytes_reader c;
    uint32_t plen;
    dpfl_status st = header_read(data, len, &c, m, &plen, err);
    if (st) return st;
    const char *t = dpfl_wire_type_name(m->type);
    size_t textlen = 0;
    switch (payload_read(&c, m, plen, &textlen)) {
    case PAYLOAD_BADLEN:
        return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: payload of %u bytes does not fit its layout", t, plen);
    case PAYLOAD_BADVEC:
        return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: %llu parameters announced, the payload holds %u bytes of "
                                            "them", t, (unsigned long long)m->nparam,
                         plen - (m->type == DPFL_WIRE_ROUND ? ROUND_FIXED
                                 : m->type == DPFL_WIRE_SYNC  ? SYNC_FIXED
                                                              : UPDATE_FIXED));
    case PAYLOAD_LONG_TEXT:
        return dpfl_fail(err, DPFL_EFORMAT, "bad %s frame: text of %zu bytes (at most %u)", t, textlen,
                         DPFL_WIRE_MAX_TEXT);
    default: break;
    }
    if ((st = check_values(m, m->vec, NULL, textlen, err))) {
        m->vec = NULL;
        m->cvec = NULL;
        m->data = NULL;
        return st;
    }
    return DPFL_OK;
}

void dpfl_wire_floats(const dpfl_wire_msg *m, float *out)
{
    if (m->vec && m->nparam) memcpy(out, m->vec, 4 * (size_t)m->nparam);
}

void dpfl_wire_control(const dpfl_wire_msg *m, float *out)
{
    if (m->cvec && m->ncontrol) memcpy(out, m->cvec, 4 * (size_t)m->ncontrol);
}

void dpfl_wire_model_digest(const float *w, size_t n, uint8_t out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const unsigned char *)"dpfl-model-v1", 13);
    const size_t chunk = (size_t)1 << 24; /* floats per call: sizes stay far below any length limit */
    for (size_t i = 0; i < n; i += chunk)
        crypto_generichash_update(&st, (const unsigned char *)(w + i), 4 * (n - i < chunk ? n - i : chunk));
    crypto_generichash_final(&st, out, 32);
}

void dpfl_wire_set_text(dpfl_wire_msg *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    for (char *p = m->text; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
}
