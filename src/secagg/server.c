/* Secure aggregation (Bonawitz et al., CCS 2017, "Practical Secure Aggregation for Privacy-Preserving Machine
 * Learning"), the server's half: it collects the clients' keys and broadcasts them, relays the encrypted shares,
 * sums the masked inputs mod 2^32, and removes the masks from the shares of the first t survivors to answer:
 * every survivor's self mask, and the pairwise masks of the clients that dropped out.  Message layouts in
 * message.c. */
#include "secagg_internal.h"
#include "core/bytes.h"

#include <string.h>

enum { S_ADVERTS, S_SHARES, S_MASKED, S_UNMASK, S_DONE };

struct dpfl_secagg_server {
    dpfl_secagg_params p;
    int phase;
    /* Indexed by client id, n entries each: */
    uint8_t *in_u1, *in_u2, *in_u3, *in_u5;
    uint8_t (*pk_c)[KEY], (*pk_s)[KEY];
    uint32_t *rank1;   /* position of a U1 member in U1 (ascending) */
    uint8_t **shares;  /* sender -> its SHARES entries (|U1| - 1 of them, recipients ascending) */
    uint32_t nu1, nu2, nu3, nu5;
    uint32_t *u2;      /* U2 ascending, nu2 ids */
    uint32_t *sum;     /* running sum of the masked inputs, mod 2^32 */
    /* The first t UNMASK answers: answerer ids and, row by row, their shares of the nu2 owners' secrets. */
    uint32_t *resp_id;
    dpfl_secagg_share *resp;
};

void dpfl_secagg_server_free(dpfl_secagg_server *s)
{
    if (!s) return;
    if (s->shares)
        for (uint32_t i = 0; i < s->p.n; i++) dpfl_free(s->shares[i]);
    if (s->resp) sodium_memzero(s->resp, (size_t)s->p.t * s->nu2 * sizeof *s->resp);
    dpfl_free(s->shares);
    dpfl_free(s->in_u1);
    dpfl_free(s->in_u2);
    dpfl_free(s->in_u3);
    dpfl_free(s->in_u5);
    dpfl_free(s->pk_c);
    dpfl_free(s->pk_s);
    dpfl_free(s->rank1);
    dpfl_free(s->u2);
    dpfl_free(s->sum);
    dpfl_free(s->resp_id);
    dpfl_free(s->resp);
    dpfl_free(s);
}

dpfl_status dpfl_secagg_server_create(const dpfl_secagg_params *p, dpfl_secagg_server **out, dpfl_error *err)
{
    *out = NULL;
    dpfl_status st = dpfl_secagg_params_check(p, err);
    if (st == DPFL_OK) st = dpfl_secagg_sodium_ready(err);
    if (st != DPFL_OK) return st;
    dpfl_secagg_server *s = dpfl_calloc(1, sizeof *s, err);
    if (!s) return DPFL_ENOMEM;
    s->p = *p;
    size_t n = p->n;
    if (!(s->in_u1 = dpfl_calloc(n, 1, err)) || !(s->in_u2 = dpfl_calloc(n, 1, err)) ||
        !(s->in_u3 = dpfl_calloc(n, 1, err)) || !(s->in_u5 = dpfl_calloc(n, 1, err)) ||
        !(s->pk_c = dpfl_calloc(n, KEY, err)) || !(s->pk_s = dpfl_calloc(n, KEY, err)) ||
        !(s->rank1 = dpfl_calloc(n, sizeof *s->rank1, err)) || !(s->shares = dpfl_calloc(n, sizeof *s->shares, err)) ||
        !(s->u2 = dpfl_calloc(n, sizeof *s->u2, err)) || !(s->sum = dpfl_calloc(p->len, sizeof *s->sum, err)) ||
        !(s->resp_id = dpfl_calloc(p->t, sizeof *s->resp_id, err))) {
        dpfl_secagg_server_free(s);
        return DPFL_ENOMEM;
    }
    *out = s;
    return DPFL_OK;
}

static dpfl_status server_phase(const dpfl_secagg_server *s, int want, const char *what, dpfl_error *err)
{
    if (s->phase != want)
        return dpfl_fail(err, DPFL_EINVAL, "secagg server: %s called out of order (protocol step %d, expected %d)",
                         what, s->phase, want);
    return DPFL_OK;
}

/* The threshold check every round closes with; `what` says who the K are. */
static dpfl_status server_enough(const dpfl_secagg_server *s, uint32_t k, const char *what, dpfl_error *err)
{
    if (k >= s->p.t) return DPFL_OK;
    return dpfl_fail(err, DPFL_EINVAL,
                     "secagg server: only %u of the t = %u shares needed to unmask can be had: %u %s (n = %u; at "
                     "most n - t = %u dropouts are tolerated)", k, s->p.t, k, what, s->p.n, s->p.n - s->p.t);
}

dpfl_status dpfl_secagg_server_add_advert(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0;
    dpfl_status st = server_phase(s, S_ADVERTS, "add_advert", err);
    if (st == DPFL_OK) st = dpfl_secagg_hdr_check(msg, len, T_ADVERT, HDR + 2 * KEY, &u, "secagg server", err);
    if (st != DPFL_OK) return st;
    if (len != HDR + 2 * KEY) return dpfl_fail(err, DPFL_EFORMAT, "secagg server: ADVERT of %zu bytes", len);
    if (u >= s->p.n) return dpfl_fail(err, DPFL_EFORMAT, "secagg server: ADVERT from unknown client %u", u);
    if (s->in_u1[u]) return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u advertised twice", u);
    memcpy(s->pk_c[u], msg + HDR, KEY);
    memcpy(s->pk_s[u], msg + HDR + KEY, KEY);
    s->in_u1[u] = 1;
    s->nu1++;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_keys(dpfl_secagg_server *s, dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    dpfl_status st = server_phase(s, S_ADVERTS, "keys", err);
    if (st == DPFL_OK) st = server_enough(s, s->nu1, "clients advertised keys", err);
    if (st == DPFL_OK)
        st = dpfl_secagg_msg_new(out, HDR + 4 + (size_t)s->nu1 * ENTRY_KEYS, T_KEYS, DPFL_SECAGG_SERVER_ID, err);
    if (st != DPFL_OK) return st;
    dpfl_bytes_store_u32(out->data + HDR, s->nu1);
    uint8_t *e = out->data + HDR + 4;
    uint32_t r = 0;
    for (uint32_t v = 0; v < s->p.n; v++) {
        if (!s->in_u1[v]) continue;
        s->rank1[v] = r++;
        dpfl_bytes_store_u32(e, v);
        memcpy(e + 4, s->pk_c[v], KEY);
        memcpy(e + 4 + KEY, s->pk_s[v], KEY);
        e += ENTRY_KEYS;
    }
    s->phase = S_SHARES;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_add_shares(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0, count = 0;
    dpfl_status st = server_phase(s, S_SHARES, "add_shares", err);
    if (st == DPFL_OK) st = dpfl_secagg_hdr_check(msg, len, T_SHARES, HDR + 4, &u, "secagg server", err);
    if (st == DPFL_OK) st = dpfl_secagg_count_check(msg, len, HDR, ENTRY_SHARE, &count, "secagg server", err);
    if (st != DPFL_OK) return st;
    if (u >= s->p.n || !s->in_u1[u])
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: SHARES from client %u, which is not in U1", u);
    if (s->in_u2[u]) return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u sent its shares twice", u);
    if (count != s->nu1 - 1)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u sent %u shares for %u other clients", u,
                         count, s->nu1 - 1);
    /* The recipients must be exactly U1 \ {u} in ascending order: then the share for v sits at a known position
     * and the relay needs no search. */
    uint32_t v = 0;
    for (uint32_t i = 0; i < count; i++, v++) {
        while (v < s->p.n && (!s->in_u1[v] || v == u)) v++;
        if (dpfl_bytes_load_u32(msg + HDR + 4 + (size_t)i * ENTRY_SHARE) != v)
            return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's shares are not addressed to U1 in order",
                             u);
    }
    size_t bytes = (size_t)count * ENTRY_SHARE;
    if (!(s->shares[u] = dpfl_alloc(bytes, err))) return DPFL_ENOMEM;
    memcpy(s->shares[u], msg + HDR + 4, bytes);
    s->in_u2[u] = 1;
    s->nu2++;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_shares_for(dpfl_secagg_server *s, uint32_t v, dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    dpfl_status st;
    if (s->phase == S_SHARES) { /* the first call closes round 1 */
        if ((st = server_enough(s, s->nu2, "clients shared their keys", err)) != DPFL_OK) return st;
        uint32_t i = 0;
        for (uint32_t u = 0; u < s->p.n; u++)
            if (s->in_u2[u]) s->u2[i++] = u;
        s->phase = S_MASKED;
    }
    if ((st = server_phase(s, S_MASKED, "shares_for", err)) != DPFL_OK) return st;
    if (v >= s->p.n || !s->in_u2[v])
        return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u did not share its keys (not in U2)", v);
    if ((st = dpfl_secagg_msg_new(out, HDR + 8 + (size_t)(s->nu2 - 1) * ENTRY_SHARE, T_SHARES_FOR,
                                  DPFL_SECAGG_SERVER_ID, err)))
        return st;
    dpfl_bytes_store_u32(out->data + HDR, v);
    dpfl_bytes_store_u32(out->data + HDR + 4, s->nu2 - 1);
    uint8_t *e = out->data + HDR + 8;
    for (uint32_t i = 0; i < s->nu2; i++) {
        uint32_t u = s->u2[i];
        if (u == v) continue;
        size_t pos = s->rank1[v] - (s->rank1[v] > s->rank1[u] ? 1 : 0);
        dpfl_bytes_store_u32(e, u);
        memcpy(e + 4, s->shares[u] + pos * ENTRY_SHARE + 4, CT_LEN);
        e += ENTRY_SHARE;
    }
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_add_masked(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0;
    dpfl_status st = server_phase(s, S_MASKED, "add_masked (after shares_for)", err);
    if (st == DPFL_OK) st = dpfl_secagg_hdr_check(msg, len, T_MASKED, HDR + 12, &u, "secagg server", err);
    if (st != DPFL_OK) return st;
    if (u >= s->p.n || !s->in_u2[u])
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: masked input from client %u, which is not in U2", u);
    if (s->in_u3[u]) return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u sent its masked input twice", u);
    const size_t n = s->p.len;
    if (dpfl_bytes_load_u32(msg + HDR) != s->p.bits || dpfl_bytes_load_u64(msg + HDR + 4) != n ||
        len != HDR + 12 + 4 * n)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's masked input is not %zu values mod 2^%u", u,
                         n, s->p.bits);
    const uint32_t mask = dpfl_secagg_bits_mask(s->p.bits);
    const uint8_t *y = msg + HDR + 12;
    for (size_t i = 0; i < n; i++)
        if (dpfl_bytes_load_u32(y + 4 * i) > mask)
            return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's masked value %zu is not reduced mod 2^%u",
                             u, i, s->p.bits);
    for (size_t i = 0; i < n; i++) s->sum[i] += dpfl_bytes_load_u32(y + 4 * i);
    s->in_u3[u] = 1;
    s->nu3++;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_unmask_request(dpfl_secagg_server *s, dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    dpfl_status st = server_phase(s, S_MASKED, "unmask_request", err);
    if (st == DPFL_OK) st = server_enough(s, s->nu3, "clients survived to send masked inputs", err);
    if (st != DPFL_OK) return st;
    if (!(s->resp = dpfl_calloc((size_t)s->p.t * s->nu2, sizeof *s->resp, err))) return DPFL_ENOMEM;
    if ((st = dpfl_secagg_msg_new(out, HDR + 4 + 4 * (size_t)s->nu3, T_UNMASK_REQ, DPFL_SECAGG_SERVER_ID, err)))
        return st;
    dpfl_bytes_store_u32(out->data + HDR, s->nu3);
    uint8_t *e = out->data + HDR + 4;
    for (uint32_t u = 0; u < s->p.n; u++)
        if (s->in_u3[u]) dpfl_bytes_store_u32(e, u), e += 4;
    s->phase = S_UNMASK;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_add_unmask(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0, count = 0;
    dpfl_status st = server_phase(s, S_UNMASK, "add_unmask", err);
    if (st == DPFL_OK) st = dpfl_secagg_hdr_check(msg, len, T_UNMASK, HDR + 4, &u, "secagg server", err);
    if (st == DPFL_OK) st = dpfl_secagg_count_check(msg, len, HDR, ENTRY_UNMASK, &count, "secagg server", err);
    if (st != DPFL_OK) return st;
    if (u >= s->p.n || !s->in_u3[u])
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: UNMASK from client %u, which is not in U3", u);
    if (s->in_u5[u]) return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u answered the unmasking twice", u);
    if (count != s->nu2)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u sent %u unmasking shares, not |U2| = %u", u,
                         count, s->nu2);
    /* Only the first t answers are kept: any t shares determine each secret. */
    dpfl_secagg_share *row = s->nu5 < s->p.t ? s->resp + (size_t)s->nu5 * s->nu2 : NULL;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = msg + HDR + 4 + (size_t)i * ENTRY_UNMASK;
        uint32_t v = s->u2[i];
        dpfl_secagg_share sh;
        if (dpfl_bytes_load_u32(e) != v || e[4] != (s->in_u3[v] ? 0 : 1) || dpfl_secagg_share_get(e + 5, u, &sh) != 0)
            return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's unmasking share %u is not the %s share "
                             "of client %u", u, i, s->in_u3[v] ? "self-mask" : "mask-key", v);
        if (row) row[i] = sh;
    }
    if (row) s->resp_id[s->nu5] = u;
    s->in_u5[u] = 1;
    s->nu5++;
    return DPFL_OK;
}

/* Removes the masks of owner v (index i in U2) from s->sum: its self mask when it survived, otherwise the
 * pairwise masks it shared with every survivor (who added +PRG(s_uv) for v > u and -PRG(s_uv) for v < u). */
static dpfl_status server_unmask_one(dpfl_secagg_server *s, const uint64_t *lambda, uint32_t i, dpfl_error *err)
{
    uint32_t v = s->u2[i];
    uint8_t secret[DPFL_SECAGG_SECRET_BYTES], pk[KEY], k[KEY];
    dpfl_status st = dpfl_secagg_combine_with(lambda, s->resp + i, s->nu2, s->p.t, secret, err);
    if (st != DPFL_OK)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: the shares of client %u's %s do not reconstruct it (a "
                         "corrupted share?)", v, s->in_u3[v] ? "self-mask seed" : "mask-agreement key");
    if (s->in_u3[v]) {
        dpfl_secagg_prg_apply(s->sum, s->p.len, secret, 1);
    } else if (crypto_scalarmult_base(pk, secret) != 0 || sodium_memcmp(pk, s->pk_s[v], KEY) != 0) {
        /* A reconstructed key is checked against the public key the client advertised. */
        st = dpfl_fail(err, DPFL_EFORMAT, "secagg server: the mask-agreement key reconstructed for dropped client %u "
                       "does not match its public key (a corrupted share?)", v);
    } else {
        for (uint32_t j = 0; st == DPFL_OK && j < s->nu2; j++) {
            uint32_t u = s->u2[j];
            if (!s->in_u3[u]) continue;
            if (dpfl_secagg_pair_key(k, secret, s->pk_s[u], u, v) != 0)
                st = dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's mask-agreement key is invalid", u);
            else
                dpfl_secagg_prg_apply(s->sum, s->p.len, k, v > u);
        }
    }
    sodium_memzero(secret, sizeof secret);
    sodium_memzero(k, sizeof k);
    return st;
}

dpfl_status dpfl_secagg_server_finish(dpfl_secagg_server *s, uint32_t *sum, uint32_t *nsummed, dpfl_error *err)
{
    dpfl_status st = server_phase(s, S_UNMASK, "finish", err);
    if (st == DPFL_OK) st = server_enough(s, s->nu5, "survivors answered the unmasking request", err);
    if (st != DPFL_OK) return st;
    uint32_t t = s->p.t, *x = dpfl_alloc(t * sizeof *x, err);
    uint64_t *lambda = x ? dpfl_alloc(t * sizeof *lambda, err) : NULL;
    if (!lambda) st = DPFL_ENOMEM;
    for (uint32_t r = 0; st == DPFL_OK && r < t; r++) x[r] = s->resp_id[r] + 1;
    if (st == DPFL_OK) st = dpfl_secagg_lagrange0(x, t, lambda, err);
    for (uint32_t i = 0; st == DPFL_OK && i < s->nu2; i++) st = server_unmask_one(s, lambda, i, err);
    dpfl_free(x);
    dpfl_free(lambda);
    if (st != DPFL_OK) {
        s->phase = S_DONE; /* the running sum is half unmasked: the round cannot be finished again */
        return st;
    }
    const uint32_t mask = dpfl_secagg_bits_mask(s->p.bits);
    for (size_t i = 0; i < s->p.len; i++) sum[i] = s->sum[i] & mask;
    if (nsummed) *nsummed = s->nu3;
    s->phase = S_DONE;
    return DPFL_OK;
}
