/* Secure aggregation (Bonawitz et al., CCS 2017, "Practical Secure Aggregation for Privacy-Preserving Machine
 * Learning"), the client's half: its key pairs and self-mask seed (round 0), its two secrets Shamir-shared and
 * encrypted for the other clients (round 1), its masked input (round 2), and its unmasking shares (round 3) --
 * never both shares of one client.  Message layouts in message.c. */
#include "secagg_internal.h"
#include "core/bytes.h"

#include <stdio.h>
#include <string.h>

/* n bytes of the client's stream: its 64-bit words, little-endian */
static void rng_bytes(dpfl_rng *r, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint8_t w[8];
        dpfl_bytes_store_u64(w, dpfl_rng_u64(r));
        memcpy(out + i, w, n - i < 8 ? n - i : 8);
    }
}

enum { C_NEW, C_ADVERTISED, C_SHARED, C_MASKED, C_DONE };

struct dpfl_secagg_client {
    dpfl_secagg_params p;
    uint32_t id;
    int phase;
    char who[48]; /* "secagg client <id>", for errors */
    dpfl_rng rng;
    uint8_t c_pk[KEY], c_sk[KEY]; /* share encryption */
    uint8_t s_pk[KEY], s_sk[KEY]; /* mask agreement */
    uint8_t b[KEY];               /* self-mask seed */
    /* Indexed by client id, n entries each: */
    uint8_t *in_u1, *in_u2;
    uint8_t (*peer_c)[KEY], (*peer_s)[KEY];
    dpfl_secagg_share *held_b, *held_s; /* this client's shares of every U2 member's b and s (its own included) */
};

static void client_wipe(dpfl_secagg_client *c)
{
    size_t n = c->p.n;
    if (c->held_b) sodium_memzero(c->held_b, n * sizeof *c->held_b);
    if (c->held_s) sodium_memzero(c->held_s, n * sizeof *c->held_s);
    sodium_memzero(c->c_sk, KEY);
    sodium_memzero(c->s_sk, KEY);
    sodium_memzero(c->b, KEY);
    sodium_memzero(&c->rng, sizeof c->rng);
}

void dpfl_secagg_client_free(dpfl_secagg_client *c)
{
    if (!c) return;
    client_wipe(c);
    dpfl_free(c->in_u1);
    dpfl_free(c->in_u2);
    dpfl_free(c->peer_c);
    dpfl_free(c->peer_s);
    dpfl_free(c->held_b);
    dpfl_free(c->held_s);
    dpfl_free(c);
}

dpfl_status dpfl_secagg_client_create(const dpfl_secagg_params *p, uint32_t id, const uint8_t *seed,
                                      dpfl_secagg_client **out, dpfl_error *err)
{
    *out = NULL;
    dpfl_status st = dpfl_secagg_params_check(p, err);
    if (st != DPFL_OK) return st;
    if (id >= p->n) return dpfl_fail(err, DPFL_EINVAL, "secagg: client id %u out of range (n = %u)", id, p->n);
    if ((st = dpfl_secagg_sodium_ready(err)) != DPFL_OK) return st;
    dpfl_secagg_client *c = dpfl_calloc(1, sizeof *c, err);
    if (!c) return DPFL_ENOMEM;
    c->p = *p;
    c->id = id;
    snprintf(c->who, sizeof c->who, "secagg client %u", id);
    size_t n = p->n;
    if (!(c->in_u1 = dpfl_calloc(n, 1, err)) || !(c->in_u2 = dpfl_calloc(n, 1, err)) ||
        !(c->peer_c = dpfl_calloc(n, KEY, err)) || !(c->peer_s = dpfl_calloc(n, KEY, err)) ||
        !(c->held_b = dpfl_calloc(n, sizeof *c->held_b, err)) ||
        !(c->held_s = dpfl_calloc(n, sizeof *c->held_s, err))) {
        dpfl_secagg_client_free(c);
        return DPFL_ENOMEM;
    }
    if (seed)
        dpfl_rng_init_key(&c->rng, seed, 1);
    else if ((st = dpfl_rng_init_os(&c->rng, err)) != DPFL_OK) {
        dpfl_secagg_client_free(c);
        return st;
    }
    uint8_t ks[crypto_box_SEEDBYTES];
    rng_bytes(&c->rng, ks, sizeof ks);
    crypto_box_seed_keypair(c->c_pk, c->c_sk, ks);
    rng_bytes(&c->rng, ks, sizeof ks);
    crypto_box_seed_keypair(c->s_pk, c->s_sk, ks);
    sodium_memzero(ks, sizeof ks);
    rng_bytes(&c->rng, c->b, KEY);
    *out = c;
    return DPFL_OK;
}

static dpfl_status client_phase(const dpfl_secagg_client *c, int want, const char *what, dpfl_error *err)
{
    if (c->phase != want)
        return dpfl_fail(err, DPFL_EINVAL, "%s: %s called out of order (protocol step %d, expected %d)", c->who,
                         what, c->phase, want);
    return DPFL_OK;
}

dpfl_status dpfl_secagg_client_advertise(dpfl_secagg_client *c, dpfl_secagg_msg *out, dpfl_error *err)
{
    dpfl_status st = client_phase(c, C_NEW, "advertise", err);
    if (st == DPFL_OK) st = dpfl_secagg_msg_new(out, HDR + 2 * KEY, T_ADVERT, c->id, err);
    if (st != DPFL_OK) return st;
    memcpy(out->data + HDR, c->c_pk, KEY);
    memcpy(out->data + HDR + KEY, c->s_pk, KEY);
    c->phase = C_ADVERTISED;
    return DPFL_OK;
}

/* Reads the KEYS broadcast into in_u1 / peer_c / peer_s; *nu1 = |U1|. */
static dpfl_status client_read_keys(dpfl_secagg_client *c, const uint8_t *m, size_t len, uint32_t *nu1,
                                    dpfl_error *err)
{
    uint32_t sender = 0, count = 0;
    dpfl_status st = dpfl_secagg_hdr_check(m, len, T_KEYS, HDR + 4, &sender, c->who, err);
    if (st == DPFL_OK) st = dpfl_secagg_count_check(m, len, HDR, ENTRY_KEYS, &count, c->who, err);
    if (st != DPFL_OK) return st;
    if (count < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients advertised keys, fewer than the threshold t = %u",
                         c->who, count, c->p.t);
    int64_t prev = -1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = m + HDR + 4 + (size_t)i * ENTRY_KEYS;
        uint32_t v = dpfl_bytes_load_u32(e);
        if (v >= c->p.n || (int64_t)v <= prev)
            return dpfl_fail(err, DPFL_EFORMAT, "%s: KEYS message lists client %u out of order or range", c->who,
                             v);
        prev = v;
        c->in_u1[v] = 1;
        memcpy(c->peer_c[v], e + 4, KEY);
        memcpy(c->peer_s[v], e + 4 + KEY, KEY);
    }
    if (!c->in_u1[c->id] || sodium_memcmp(c->peer_c[c->id], c->c_pk, KEY) != 0 ||
        sodium_memcmp(c->peer_s[c->id], c->s_pk, KEY) != 0)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: the KEYS broadcast does not carry this client's own keys", c->who);
    *nu1 = count;
    return DPFL_OK;
}

/* The ciphertext for recipient v: nonce | crypto_box(from | to | share of b | share of s). */
static dpfl_status encrypt_share(dpfl_secagg_client *c, uint32_t v, const dpfl_secagg_share *sb,
                                 const dpfl_secagg_share *ss, uint8_t *ct, dpfl_error *err)
{
    uint8_t pt[PT_LEN], k[crypto_box_BEFORENMBYTES];
    if (crypto_box_beforenm(k, c->peer_c[v], c->c_sk) != 0)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: client %u's share-encryption key is invalid", c->who, v);
    dpfl_bytes_store_u32(pt, c->id);
    dpfl_bytes_store_u32(pt + 4, v);
    dpfl_secagg_share_put(pt + 8, sb);
    dpfl_secagg_share_put(pt + 8 + SHARE_BYTES, ss);
    rng_bytes(&c->rng, ct, crypto_box_NONCEBYTES);
    crypto_box_easy_afternm(ct + crypto_box_NONCEBYTES, pt, PT_LEN, ct, k);
    sodium_memzero(pt, sizeof pt);
    sodium_memzero(k, sizeof k);
    return DPFL_OK;
}

dpfl_status dpfl_secagg_client_share_keys(dpfl_secagg_client *c, const uint8_t *keys, size_t keys_len,
                                          dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    uint32_t nu1 = 0;
    dpfl_status st = client_phase(c, C_ADVERTISED, "share_keys", err);
    if (st == DPFL_OK) st = client_read_keys(c, keys, keys_len, &nu1, err);
    if (st != DPFL_OK) return st;
    uint32_t *ids = dpfl_alloc(nu1 * sizeof *ids, err);
    dpfl_secagg_share *sb = ids ? dpfl_alloc(nu1 * sizeof *sb, err) : NULL;
    dpfl_secagg_share *ss = sb ? dpfl_alloc(nu1 * sizeof *ss, err) : NULL;
    if (!ss) st = DPFL_ENOMEM;
    uint32_t m = 0;
    for (uint32_t v = 0; st == DPFL_OK && v < c->p.n; v++)
        if (c->in_u1[v]) ids[m++] = v;
    /* Both secrets are shared among all of U1, this client included: its own shares count toward the t the
     * server needs, and it keeps them rather than sending them to itself. */
    if (st == DPFL_OK) st = dpfl_secagg_shamir_split(c->b, c->p.t, ids, nu1, &c->rng, sb, err);
    if (st == DPFL_OK) st = dpfl_secagg_shamir_split(c->s_sk, c->p.t, ids, nu1, &c->rng, ss, err);
    if (st == DPFL_OK) st = dpfl_secagg_msg_new(out, HDR + 4 + (size_t)(nu1 - 1) * ENTRY_SHARE, T_SHARES, c->id, err);
    if (st == DPFL_OK) dpfl_bytes_store_u32(out->data + HDR, nu1 - 1);
    uint8_t *e = st == DPFL_OK ? out->data + HDR + 4 : NULL;
    for (uint32_t i = 0; st == DPFL_OK && i < nu1; i++) {
        if (ids[i] == c->id) {
            c->held_b[c->id] = sb[i];
            c->held_s[c->id] = ss[i];
            continue;
        }
        dpfl_bytes_store_u32(e, ids[i]);
        st = encrypt_share(c, ids[i], &sb[i], &ss[i], e + 4, err);
        e += ENTRY_SHARE;
    }
    if (sb) sodium_memzero(sb, nu1 * sizeof *sb);
    if (ss) sodium_memzero(ss, nu1 * sizeof *ss);
    dpfl_free(ids);
    dpfl_free(sb);
    dpfl_free(ss);
    if (st != DPFL_OK) {
        dpfl_secagg_msg_free(out);
        return st;
    }
    c->phase = C_SHARED;
    return DPFL_OK;
}

/* Decrypts and checks the share pair sender u addressed to this client; fills held_b[u], held_s[u]. */
static dpfl_status decrypt_share(dpfl_secagg_client *c, uint32_t u, const uint8_t *ct, dpfl_error *err)
{
    uint8_t pt[PT_LEN], k[crypto_box_BEFORENMBYTES];
    dpfl_status st = DPFL_OK;
    if (crypto_box_beforenm(k, c->peer_c[u], c->c_sk) != 0)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: client %u's share-encryption key is invalid", c->who, u);
    if (crypto_box_open_easy_afternm(pt, ct + crypto_box_NONCEBYTES, CT_LEN - crypto_box_NONCEBYTES, ct, k) != 0)
        st = dpfl_fail(err, DPFL_EFORMAT,
                       "%s: the share from client %u failed authentication (tampered with, or not encrypted "
                       "for client %u)", c->who, u, c->id);
    else if (dpfl_bytes_load_u32(pt) != u || dpfl_bytes_load_u32(pt + 4) != c->id)
        st = dpfl_fail(err, DPFL_EFORMAT, "%s: the share relayed as client %u's says it is from client %u to "
                       "client %u", c->who, u, dpfl_bytes_load_u32(pt), dpfl_bytes_load_u32(pt + 4));
    else if (dpfl_secagg_share_get(pt + 8, c->id, &c->held_b[u]) != 0 ||
             dpfl_secagg_share_get(pt + 8 + SHARE_BYTES, c->id, &c->held_s[u]) != 0)
        st = dpfl_fail(err, DPFL_EFORMAT, "%s: the share from client %u is not a field element", c->who, u);
    sodium_memzero(pt, sizeof pt);
    sodium_memzero(k, sizeof k);
    return st;
}

/* Reads SHARES_FOR: decrypts every share, marks U2 (the senders and this client). */
static dpfl_status client_read_shares(dpfl_secagg_client *c, const uint8_t *m, size_t len, dpfl_error *err)
{
    uint32_t sender = 0, count = 0;
    dpfl_status st = dpfl_secagg_hdr_check(m, len, T_SHARES_FOR, HDR + 8, &sender, c->who, err);
    if (st == DPFL_OK) st = dpfl_secagg_count_check(m, len, HDR + 4, ENTRY_SHARE, &count, c->who, err);
    if (st != DPFL_OK) return st;
    uint32_t to = dpfl_bytes_load_u32(m + HDR);
    if (to != c->id)
        return dpfl_fail(err, DPFL_EINVAL, "%s: given the shares addressed to client %u", c->who, to);
    if (count + 1 < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients shared their keys, fewer than the threshold t = %u",
                         c->who, count + 1, c->p.t);
    int64_t prev = -1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = m + HDR + 8 + (size_t)i * ENTRY_SHARE;
        uint32_t u = dpfl_bytes_load_u32(e);
        if (u >= c->p.n || (int64_t)u <= prev || !c->in_u1[u] || u == c->id)
            return dpfl_fail(err, DPFL_EFORMAT, "%s: SHARES_FOR lists client %u out of order or not in U1", c->who,
                             u);
        prev = u;
        if ((st = decrypt_share(c, u, e + 4, err)) != DPFL_OK) return st;
        c->in_u2[u] = 1;
    }
    c->in_u2[c->id] = 1;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_client_masked_input(dpfl_secagg_client *c, const uint8_t *shares_for, size_t sf_len,
                                            const uint32_t *x, dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    dpfl_status st = client_phase(c, C_SHARED, "masked_input", err);
    if (st != DPFL_OK) return st;
    const size_t len = c->p.len;
    const uint32_t mask = dpfl_secagg_bits_mask(c->p.bits);
    for (size_t i = 0; i < len; i++)
        if (x[i] > mask)
            return dpfl_fail(err, DPFL_EINVAL, "%s: input value %u at index %zu is not reduced mod 2^%u", c->who,
                             x[i], i, c->p.bits);
    if ((st = client_read_shares(c, shares_for, sf_len, err)) != DPFL_OK) return st;
    uint32_t *y = dpfl_alloc(len * sizeof *y, err);
    if (!y) return DPFL_ENOMEM;
    memcpy(y, x, len * sizeof *y);
    dpfl_secagg_prg_apply(y, len, c->b, 0);
    /* Pairwise masks over U2: client u adds PRG(s_uv) for v > u and subtracts it for v < u, so each pair's masks
     * cancel in the sum; the server removes those of clients that drop out from s_v's shares. */
    for (uint32_t v = 0; st == DPFL_OK && v < c->p.n; v++) {
        if (!c->in_u2[v] || v == c->id) continue;
        uint8_t k[KEY];
        if (dpfl_secagg_pair_key(k, c->s_sk, c->peer_s[v], c->id, v) != 0)
            st = dpfl_fail(err, DPFL_EFORMAT, "%s: client %u's mask-agreement key is invalid", c->who, v);
        else
            dpfl_secagg_prg_apply(y, len, k, v < c->id);
        sodium_memzero(k, sizeof k);
    }
    if (st == DPFL_OK) st = dpfl_secagg_msg_new(out, HDR + 12 + len * 4, T_MASKED, c->id, err);
    if (st == DPFL_OK) {
        dpfl_bytes_store_u32(out->data + HDR, c->p.bits);
        dpfl_bytes_store_u64(out->data + HDR + 4, len);
        for (size_t i = 0; i < len; i++) dpfl_bytes_store_u32(out->data + HDR + 12 + 4 * i, y[i] & mask);
        c->phase = C_MASKED;
    }
    dpfl_free(y);
    return st;
}

dpfl_status dpfl_secagg_client_unmask(dpfl_secagg_client *c, const uint8_t *req, size_t req_len,
                                      dpfl_secagg_msg *out, dpfl_error *err)
{
    out->data = NULL;
    out->len = 0;
    uint32_t sender = 0, count = 0;
    dpfl_status st = client_phase(c, C_MASKED, "unmask", err);
    if (st == DPFL_OK) st = dpfl_secagg_hdr_check(req, req_len, T_UNMASK_REQ, HDR + 4, &sender, c->who, err);
    if (st == DPFL_OK) st = dpfl_secagg_count_check(req, req_len, HDR, 4, &count, c->who, err);
    if (st != DPFL_OK) return st;
    if (count < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients survived to send masked inputs, fewer than the "
                         "threshold t = %u: refusing to unmask", c->who, count, c->p.t);
    uint8_t *in_u3 = dpfl_calloc(c->p.n, 1, err);
    if (!in_u3) return DPFL_ENOMEM;
    int64_t prev = -1;
    for (uint32_t i = 0; st == DPFL_OK && i < count; i++) {
        uint32_t v = dpfl_bytes_load_u32(req + HDR + 4 + 4 * (size_t)i);
        if (v >= c->p.n || (int64_t)v <= prev || !c->in_u2[v])
            st = dpfl_fail(err, DPFL_EFORMAT, "%s: UNMASK_REQ lists client %u out of order or not in U2", c->who, v);
        else
            in_u3[v] = 1;
        prev = v;
    }
    if (st == DPFL_OK && !in_u3[c->id])
        st = dpfl_fail(err, DPFL_EFORMAT, "%s: UNMASK_REQ leaves this client out of the survivors", c->who);
    uint32_t nu2 = 0;
    for (uint32_t v = 0; v < c->p.n; v++) nu2 += c->in_u2[v];
    if (st == DPFL_OK) st = dpfl_secagg_msg_new(out, HDR + 4 + (size_t)nu2 * ENTRY_UNMASK, T_UNMASK, c->id, err);
    if (st == DPFL_OK) {
        dpfl_bytes_store_u32(out->data + HDR, nu2);
        uint8_t *e = out->data + HDR + 4;
        /* The one rule that keeps every input private: for a survivor its self-mask share only, for a client that
         * dropped its mask-key share only -- never both, so no x_u is ever unmasked alone. */
        for (uint32_t v = 0; v < c->p.n; v++) {
            if (!c->in_u2[v]) continue;
            dpfl_bytes_store_u32(e, v);
            e[4] = in_u3[v] ? 0 : 1;
            dpfl_secagg_share_put(e + 5, in_u3[v] ? &c->held_b[v] : &c->held_s[v]);
            e += ENTRY_UNMASK;
        }
        c->phase = C_DONE;
        client_wipe(c); /* this client's part of the round is over */
    }
    dpfl_free(in_u3);
    return st;
}
