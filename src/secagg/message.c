/* Secure aggregation (Bonawitz et al., CCS 2017): the byte layouts of the messages the client and server halves
 * exchange, and the checks every receiver makes of them.  docs/secagg.md has the protocol, the threat model and
 * the costs.
 *
 * Message layouts (little-endian, core/bytes.h; every message begins with the 12-byte header of
 * include/dpfl/secagg.h):
 *   ADVERT      hdr | c_pk[32] | s_pk[32]
 *   KEYS        hdr | u32 count | count x (u32 id | c_pk[32] | s_pk[32])           ids ascending (U1)
 *   SHARES      hdr | u32 count | count x (u32 recipient | ct[128])                recipients = U1 \ {sender}, ascending
 *   SHARES_FOR  hdr | u32 recipient | u32 count | count x (u32 sender | ct[128])  senders = U2 \ {recipient}, asc.
 *   MASKED      hdr | u32 bits | u64 len | len x u32
 *   UNMASK_REQ  hdr | u32 count | count x u32 id                                   U3, ascending
 *   UNMASK      hdr | u32 count | count x (u32 owner | u8 kind | 5 x u64)          owners = U2, ascending;
 *                                                                                  kind 0: share of b, 1: of s
 * ct = nonce[24] | crypto_box (XSalsa20-Poly1305) of pt = u32 from | u32 to | share of b_u (5 x u64) |
 * share of s_u (5 x u64), under the X25519 key of the sender's and the recipient's share-encryption key pairs. */
#include "secagg_internal.h"
#include "core/bytes.h"

#include <stdlib.h>

void dpfl_secagg_msg_free(dpfl_secagg_msg *m)
{
    if (!m) return;
    free(m->data);
    m->data = NULL;
    m->len = 0;
}

dpfl_status dpfl_secagg_msg_new(dpfl_secagg_msg *m, size_t len, uint8_t type, uint32_t sender, dpfl_error *err)
{
    m->data = malloc(len);
    m->len = m->data ? len : 0;
    if (!m->data) return dpfl_fail(err, DPFL_ENOMEM, "secagg: out of memory (a %zu-byte message)", len);
    dpfl_bytes_store_u32(m->data, SECAGG_MAGIC);
    m->data[4] = SECAGG_VERSION;
    m->data[5] = type;
    m->data[6] = m->data[7] = 0;
    dpfl_bytes_store_u32(m->data + 8, sender);
    return DPFL_OK;
}

static const char *type_name(uint8_t t)
{
    static const char *names[] = {"?", "ADVERT", "KEYS", "SHARES", "SHARES_FOR", "MASKED", "UNMASK_REQ", "UNMASK"};
    return t <= T_UNMASK ? names[t] : "?";
}

dpfl_status dpfl_secagg_hdr_check(const uint8_t *m, size_t len, uint8_t type, size_t min_len, uint32_t *sender,
                                  const char *who, dpfl_error *err)
{
    if (!m || len < HDR || dpfl_bytes_load_u32(m) != SECAGG_MAGIC || m[4] != SECAGG_VERSION)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: not a secure-aggregation message (bad header)", who);
    if (m[5] != type)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: expected a %s message, got %s", who, type_name(type),
                         type_name(m[5]));
    if (len < min_len)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s message truncated (%zu bytes)", who, type_name(type), len);
    *sender = dpfl_bytes_load_u32(m + 8);
    return DPFL_OK;
}

dpfl_status dpfl_secagg_count_check(const uint8_t *m, size_t len, size_t off, size_t entry, uint32_t *count,
                                    const char *who, dpfl_error *err)
{
    *count = dpfl_bytes_load_u32(m + off);
    if (*count > DPFL_SECAGG_MAX_CLIENTS || len != off + 4 + (size_t)*count * entry)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s message has %zu bytes, not what its count %u implies", who,
                         type_name(m[5]), len, *count);
    return DPFL_OK;
}

void dpfl_secagg_share_put(uint8_t *p, const dpfl_secagg_share *s)
{
    for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++) dpfl_bytes_store_u64(p + 8 * c, s->y[c]);
}

int dpfl_secagg_share_get(const uint8_t *p, uint32_t holder, dpfl_secagg_share *s)
{
    s->x = holder + 1;
    for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++) {
        s->y[c] = dpfl_bytes_load_u64(p + 8 * c);
        if (s->y[c] >= P61) return -1;
    }
    return 0;
}

dpfl_status dpfl_secagg_params_check(const dpfl_secagg_params *p, dpfl_error *err)
{
    if (!p) return dpfl_fail(err, DPFL_EINVAL, "secagg: no parameters");
    if (p->n < 2 || p->n > DPFL_SECAGG_MAX_CLIENTS)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: n = %u clients, must be in [2, %u]", p->n,
                         DPFL_SECAGG_MAX_CLIENTS);
    if (p->t < 2 || p->t > p->n)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: threshold t = %u, must be in [2, n = %u]", p->t, p->n);
    if (p->bits < 1 || p->bits > 32)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: bits = %u, must be in [1, 32]", p->bits);
    if (p->len < 1 || p->len > DPFL_SECAGG_MAX_LEN)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: vector length %zu, must be in [1, %zu]", p->len,
                         DPFL_SECAGG_MAX_LEN);
    return DPFL_OK;
}

uint32_t dpfl_secagg_bits_mask(uint32_t bits) { return bits == 32 ? 0xFFFFFFFFu : (1u << bits) - 1; }

dpfl_status dpfl_secagg_sodium_ready(dpfl_error *err)
{
    if (sodium_init() < 0) return dpfl_fail(err, DPFL_EIO, "secagg: libsodium could not be initialised");
    return DPFL_OK;
}
