/* Secure aggregation (Bonawitz et al., CCS 2017), transport-free: the client and server halves of one round and the
 * byte layouts of their messages.  docs/secagg.md has the protocol, the threat model and the costs.
 *
 * Message layouts (little-endian; every message begins with the 12-byte header of include/dpfl/secagg.h):
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
#include "dpfl/secagg.h"

#include "core/chacha20.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define MAGIC 0x41535044u /* "DPSA" */
#define VERSION 1
#define HDR 12
#define KEY 32
enum { T_ADVERT = DPFL_SECAGG_ADVERT, T_KEYS = DPFL_SECAGG_KEYS, T_SHARES = DPFL_SECAGG_SHARES,
       T_SHARES_FOR = DPFL_SECAGG_SHARES_FOR, T_MASKED = DPFL_SECAGG_MASKED, T_UNMASK_REQ = DPFL_SECAGG_UNMASK_REQ,
       T_UNMASK = DPFL_SECAGG_UNMASK };
#define SHARE_BYTES (8 * DPFL_SECAGG_SHARE_WORDS)
#define PT_LEN (8 + 2 * SHARE_BYTES)
#define CT_LEN (crypto_box_NONCEBYTES + crypto_box_MACBYTES + PT_LEN)
#define ENTRY_SHARE (4 + CT_LEN)
#define ENTRY_KEYS (4 + 2 * KEY)
#define ENTRY_UNMASK (5 + SHARE_BYTES)

/* ---------------------------------------------------------------- bytes */
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return dpfl_load32_le(p); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

void dpfl_secagg_msg_free(dpfl_secagg_msg *m)
{
    if (!m) return;
    free(m->data);
    m->data = NULL;
    m->len = 0;
}

/* A new message of len bytes with its header filled in. */
static dpfl_status msg_new(dpfl_secagg_msg *m, size_t len, uint8_t type, uint32_t sender, dpfl_error *err)
{
    m->data = malloc(len);
    m->len = m->data ? len : 0;
    if (!m->data) return dpfl_fail(err, DPFL_ENOMEM, "secagg: out of memory (a %zu-byte message)", len);
    put32(m->data, MAGIC);
    m->data[4] = VERSION;
    m->data[5] = type;
    m->data[6] = m->data[7] = 0;
    put32(m->data + 8, sender);
    return DPFL_OK;
}

static const char *type_name(uint8_t t)
{
    static const char *names[] = {"?", "ADVERT", "KEYS", "SHARES", "SHARES_FOR", "MASKED", "UNMASK_REQ", "UNMASK"};
    return t <= T_UNMASK ? names[t] : "?";
}

/* Checks the header of a message expected to be of type `type` and at least min_len bytes; *sender from it.
 * `who` names the receiver in the error. */
static dpfl_status hdr_check(const uint8_t *m, size_t len, uint8_t type, size_t min_len, uint32_t *sender,
                             const char *who, dpfl_error *err)
{
    if (!m || len < HDR || get32(m) != MAGIC || m[4] != VERSION)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: not a secure-aggregation message (bad header)", who);
    if (m[5] != type)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: expected a %s message, got %s", who, type_name(type),
                         type_name(m[5]));
    if (len < min_len)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s message truncated (%zu bytes)", who, type_name(type), len);
    *sender = get32(m + 8);
    return DPFL_OK;
}

/* The count field at m + off and a check that the message holds exactly count entries of `entry` bytes. */
static dpfl_status count_check(const uint8_t *m, size_t len, size_t off, size_t entry, uint32_t *count,
                               const char *who, dpfl_error *err)
{
    *count = get32(m + off);
    if (*count > DPFL_SECAGG_MAX_CLIENTS || len != off + 4 + (size_t)*count * entry)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s message has %zu bytes, not what its count %u implies", who,
                         type_name(m[5]), len, *count);
    return DPFL_OK;
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

static uint32_t bits_mask(uint32_t bits) { return bits == 32 ? 0xFFFFFFFFu : (1u << bits) - 1; }

static dpfl_status sodium_ready(dpfl_error *err)
{
    if (sodium_init() < 0) return dpfl_fail(err, DPFL_EIO, "secagg: libsodium could not be initialised");
    return DPFL_OK;
}

static void rng_bytes(dpfl_rng *r, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = dpfl_rng_u64(r);
        for (size_t j = 0; j < 8 && i + j < n; j++) out[i + j] = (uint8_t)(w >> (8 * j));
    }
}

/* ---------------------------------------------------------------- GF(2^61 - 1) and Shamir */
#define P61 ((UINT64_C(1) << 61) - 1)

/* 2^61 = 1 mod p, so a 122-bit product folds into 61 bits with one shift and one add. */
static uint64_t fmul(uint64_t a, uint64_t b)
{
    u128 z = (u128)a * b;
    uint64_t s = ((uint64_t)z & P61) + (uint64_t)(z >> 61);
    s = (s & P61) + (s >> 61);
    return s >= P61 ? s - P61 : s;
}
static uint64_t fadd(uint64_t a, uint64_t b)
{
    uint64_t s = a + b;
    return s >= P61 ? s - P61 : s;
}
static uint64_t fsub(uint64_t a, uint64_t b) { return a >= b ? a - b : a + P61 - b; }
static uint64_t finv(uint64_t a) /* a^(p-2), a != 0 */
{
    uint64_t r = 1, e = P61 - 2;
    while (e) {
        if (e & 1) r = fmul(r, a);
        a = fmul(a, a);
        e >>= 1;
    }
    return r;
}

/* Chunk k of a secret: bytes [7k, 7k + 7) clipped to 32, little-endian, so every chunk is < 2^56 < p. */
static int chunk_bytes(int k) { return k < DPFL_SECAGG_SHARE_WORDS - 1 ? 7 : DPFL_SECAGG_SECRET_BYTES - 7 * k; }

dpfl_status dpfl_secagg_shamir_split(const uint8_t secret[DPFL_SECAGG_SECRET_BYTES], uint32_t t,
                                     const uint32_t *ids, uint32_t m, dpfl_rng *rng, dpfl_secagg_share *shares,
                                     dpfl_error *err)
{
    if (t < 1 || t > m || m > DPFL_SECAGG_MAX_CLIENTS)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: cannot share a secret %u-out-of-%u", t, m);
    for (uint32_t i = 0; i < m; i++)
        if (ids[i] >= DPFL_SECAGG_MAX_CLIENTS)
            return dpfl_fail(err, DPFL_EINVAL, "secagg: share holder id %u out of range", ids[i]);
    uint64_t *coef = dpfl_alloc((size_t)t * DPFL_SECAGG_SHARE_WORDS * sizeof *coef, err);
    if (!coef) return DPFL_ENOMEM;
    for (int k = 0; k < DPFL_SECAGG_SHARE_WORDS; k++) {
        uint64_t *c = coef + (size_t)k * t;
        c[0] = 0;
        for (int j = chunk_bytes(k) - 1; j >= 0; j--) c[0] = c[0] << 8 | secret[7 * k + j];
        /* Uniform coefficients from the CSPRNG: any t-1 shares are then uniform and independent of the secret. */
        for (uint32_t j = 1; j < t; j++) c[j] = dpfl_rng_below(rng, P61);
    }
    for (uint32_t i = 0; i < m; i++) {
        uint64_t x = (uint64_t)ids[i] + 1;
        shares[i].x = (uint32_t)x;
        for (int k = 0; k < DPFL_SECAGG_SHARE_WORDS; k++) {
            const uint64_t *c = coef + (size_t)k * t;
            uint64_t y = 0;
            for (uint32_t j = t; j-- > 0;) y = fadd(fmul(y, x), c[j]); /* Horner */
            shares[i].y[k] = y;
        }
    }
    sodium_memzero(coef, (size_t)t * DPFL_SECAGG_SHARE_WORDS * sizeof *coef);
    dpfl_free(coef);
    return DPFL_OK;
}

/* Lagrange coefficients at 0 for the points x[0..k): lambda_i = prod_{j != i} x_j / (x_j - x_i).  Computed once
 * per set of share holders; the server uses the same set for every secret it reconstructs. */
static dpfl_status lagrange0(const uint32_t *x, uint32_t k, uint64_t *lambda, dpfl_error *err)
{
    for (uint32_t i = 0; i < k; i++) {
        if (x[i] == 0 || x[i] > DPFL_SECAGG_MAX_CLIENTS)
            return dpfl_fail(err, DPFL_EFORMAT, "secagg: share evaluation point %u out of range", x[i]);
        uint64_t num = 1, den = 1;
        for (uint32_t j = 0; j < k; j++) {
            if (j == i) continue;
            if (x[j] == x[i])
                return dpfl_fail(err, DPFL_EFORMAT, "secagg: two shares from the same holder (client %u)",
                                 x[i] - 1);
            num = fmul(num, x[j]);
            den = fmul(den, fsub(x[j], x[i]));
        }
        lambda[i] = fmul(num, finv(den));
    }
    return DPFL_OK;
}

/* secret from y[i][0..5) (i < k, row stride `stride` shares) and lambda; DPFL_EFORMAT when a chunk falls outside
 * its byte range, i.e. the shares do not lie on one polynomial with a valid secret. */
static dpfl_status combine_with(const uint64_t *lambda, const dpfl_secagg_share *sh, size_t stride, uint32_t k,
                                uint8_t secret[DPFL_SECAGG_SECRET_BYTES], dpfl_error *err)
{
    for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++) {
        uint64_t v = 0;
        for (uint32_t i = 0; i < k; i++) v = fadd(v, fmul(lambda[i], sh[i * stride].y[c]));
        int nb = chunk_bytes(c);
        if (v >> (8 * nb)) {
            sodium_memzero(secret, DPFL_SECAGG_SECRET_BYTES);
            return dpfl_fail(err, DPFL_EFORMAT, "secagg: the shares do not reconstruct a valid secret "
                             "(too few, or one corrupted)");
        }
        for (int j = 0; j < nb; j++) secret[7 * c + j] = (uint8_t)(v >> (8 * j));
    }
    return DPFL_OK;
}

dpfl_status dpfl_secagg_shamir_combine(const dpfl_secagg_share *shares, uint32_t k,
                                       uint8_t secret[DPFL_SECAGG_SECRET_BYTES], dpfl_error *err)
{
    if (k < 1 || k > DPFL_SECAGG_MAX_CLIENTS)
        return dpfl_fail(err, DPFL_EINVAL, "secagg: cannot combine %u shares", k);
    uint32_t *x = dpfl_alloc(k * sizeof *x, err);
    uint64_t *lambda = x ? dpfl_alloc(k * sizeof *lambda, err) : NULL;
    dpfl_status st = lambda ? DPFL_OK : DPFL_ENOMEM;
    for (uint32_t i = 0; st == DPFL_OK && i < k; i++) {
        x[i] = shares[i].x;
        for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++)
            if (shares[i].y[c] >= P61) st = dpfl_fail(err, DPFL_EFORMAT, "secagg: share value out of the field");
    }
    if (st == DPFL_OK) st = lagrange0(x, k, lambda, err);
    if (st == DPFL_OK) st = combine_with(lambda, shares, 1, k, secret, err);
    dpfl_free(x);
    dpfl_free(lambda);
    return st;
}

static void share_put(uint8_t *p, const dpfl_secagg_share *s)
{
    for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++) put64(p + 8 * c, s->y[c]);
}
/* -1 when a value is not a field element. */
static int share_get(const uint8_t *p, uint32_t holder, dpfl_secagg_share *s)
{
    s->x = holder + 1;
    for (int c = 0; c < DPFL_SECAGG_SHARE_WORDS; c++) {
        s->y[c] = get64(p + 8 * c);
        if (s->y[c] >= P61) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- masks */
/* The pairwise mask key of clients a and b: BLAKE2b of their X25519 shared secret and both ids (smaller first), so
 * both ends derive the same key and no two pairs share one.  -1 when the peer's key is a low-order point. */
static int pair_key(uint8_t key[KEY], const uint8_t sk[KEY], const uint8_t pk[KEY], uint32_t a, uint32_t b)
{
    uint8_t q[crypto_scalarmult_BYTES], ids[8];
    if (crypto_scalarmult(q, sk, pk) != 0) return -1;
    put32(ids, a < b ? a : b);
    put32(ids + 4, a < b ? b : a);
    static const char label[] = "dpfl-secagg-mask-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, KEY);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof label - 1);
    crypto_generichash_update(&st, q, sizeof q);
    crypto_generichash_update(&st, ids, sizeof ids);
    crypto_generichash_final(&st, key, KEY);
    sodium_memzero(q, sizeof q);
    sodium_memzero(&st, sizeof st);
    return 0;
}

/* acc[i] += w_i (or -= w_i when negate), i < len, mod 2^32, w the ChaCha20 keystream of `key` read as
 * little-endian 32-bit words (the same bytes as libsodium's crypto_stream_chacha20, nonce 0, through the library's
 * vectorised keystream).  Reducing mod 2^bits afterwards gives the PRG vector mod 2^bits: 2^bits divides 2^32, so
 * each word mod 2^bits is uniform. */
static void prg_apply(uint32_t *acc, size_t len, const uint8_t key[KEY], int negate)
{
    enum { BLOCKS = 256, WORDS = 16 * BLOCKS };
    uint8_t buf[64 * BLOCKS];
    uint64_t counter = 0;
    for (size_t i = 0; i < len;) {
        size_t words = len - i < WORDS ? len - i : WORDS, nblocks = (words + 15) / 16;
        dpfl_chacha20_keystream(buf, nblocks, key, counter);
        counter += nblocks;
        if (negate)
            for (size_t j = 0; j < words; j++) acc[i + j] -= dpfl_load32_le(buf + 4 * j);
        else
            for (size_t j = 0; j < words; j++) acc[i + j] += dpfl_load32_le(buf + 4 * j);
        i += words;
    }
    sodium_memzero(buf, sizeof buf);
}

/* ---------------------------------------------------------------- client */
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
    if ((st = sodium_ready(err)) != DPFL_OK) return st;
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
    if (st == DPFL_OK) st = msg_new(out, HDR + 2 * KEY, T_ADVERT, c->id, err);
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
    dpfl_status st = hdr_check(m, len, T_KEYS, HDR + 4, &sender, c->who, err);
    if (st == DPFL_OK) st = count_check(m, len, HDR, ENTRY_KEYS, &count, c->who, err);
    if (st != DPFL_OK) return st;
    if (count < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients advertised keys, fewer than the threshold t = %u",
                         c->who, count, c->p.t);
    int64_t prev = -1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = m + HDR + 4 + (size_t)i * ENTRY_KEYS;
        uint32_t v = get32(e);
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
    put32(pt, c->id);
    put32(pt + 4, v);
    share_put(pt + 8, sb);
    share_put(pt + 8 + SHARE_BYTES, ss);
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
    if (st == DPFL_OK) st = msg_new(out, HDR + 4 + (size_t)(nu1 - 1) * ENTRY_SHARE, T_SHARES, c->id, err);
    if (st == DPFL_OK) put32(out->data + HDR, nu1 - 1);
    uint8_t *e = st == DPFL_OK ? out->data + HDR + 4 : NULL;
    for (uint32_t i = 0; st == DPFL_OK && i < nu1; i++) {
        if (ids[i] == c->id) {
            c->held_b[c->id] = sb[i];
            c->held_s[c->id] = ss[i];
            continue;
        }
        put32(e, ids[i]);
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
    else if (get32(pt) != u || get32(pt + 4) != c->id)
        st = dpfl_fail(err, DPFL_EFORMAT, "%s: the share relayed as client %u's says it is from client %u to "
                       "client %u", c->who, u, get32(pt), get32(pt + 4));
    else if (share_get(pt + 8, c->id, &c->held_b[u]) != 0 || share_get(pt + 8 + SHARE_BYTES, c->id, &c->held_s[u]))
        st = dpfl_fail(err, DPFL_EFORMAT, "%s: the share from client %u is not a field element", c->who, u);
    sodium_memzero(pt, sizeof pt);
    sodium_memzero(k, sizeof k);
    return st;
}

/* Reads SHARES_FOR: decrypts every share, marks U2 (the senders and this client). */
static dpfl_status client_read_shares(dpfl_secagg_client *c, const uint8_t *m, size_t len, dpfl_error *err)
{
    uint32_t sender = 0, count = 0;
    dpfl_status st = hdr_check(m, len, T_SHARES_FOR, HDR + 8, &sender, c->who, err);
    if (st == DPFL_OK) st = count_check(m, len, HDR + 4, ENTRY_SHARE, &count, c->who, err);
    if (st != DPFL_OK) return st;
    uint32_t to = get32(m + HDR);
    if (to != c->id)
        return dpfl_fail(err, DPFL_EINVAL, "%s: given the shares addressed to client %u", c->who, to);
    if (count + 1 < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients shared their keys, fewer than the threshold t = %u",
                         c->who, count + 1, c->p.t);
    int64_t prev = -1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = m + HDR + 8 + (size_t)i * ENTRY_SHARE;
        uint32_t u = get32(e);
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
    const uint32_t mask = bits_mask(c->p.bits);
    for (size_t i = 0; i < len; i++)
        if (x[i] > mask)
            return dpfl_fail(err, DPFL_EINVAL, "%s: input value %u at index %zu is not reduced mod 2^%u", c->who,
                             x[i], i, c->p.bits);
    if ((st = client_read_shares(c, shares_for, sf_len, err)) != DPFL_OK) return st;
    uint32_t *y = dpfl_alloc(len * sizeof *y, err);
    if (!y) return DPFL_ENOMEM;
    memcpy(y, x, len * sizeof *y);
    prg_apply(y, len, c->b, 0);
    /* Pairwise masks over U2: client u adds PRG(s_uv) for v > u and subtracts it for v < u, so each pair's masks
     * cancel in the sum; the server removes those of clients that drop out from s_v's shares. */
    for (uint32_t v = 0; st == DPFL_OK && v < c->p.n; v++) {
        if (!c->in_u2[v] || v == c->id) continue;
        uint8_t k[KEY];
        if (pair_key(k, c->s_sk, c->peer_s[v], c->id, v) != 0)
            st = dpfl_fail(err, DPFL_EFORMAT, "%s: client %u's mask-agreement key is invalid", c->who, v);
        else
            prg_apply(y, len, k, v < c->id);
        sodium_memzero(k, sizeof k);
    }
    if (st == DPFL_OK) st = msg_new(out, HDR + 12 + len * 4, T_MASKED, c->id, err);
    if (st == DPFL_OK) {
        put32(out->data + HDR, c->p.bits);
        put64(out->data + HDR + 4, len);
        for (size_t i = 0; i < len; i++) put32(out->data + HDR + 12 + 4 * i, y[i] & mask);
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
    if (st == DPFL_OK) st = hdr_check(req, req_len, T_UNMASK_REQ, HDR + 4, &sender, c->who, err);
    if (st == DPFL_OK) st = count_check(req, req_len, HDR, 4, &count, c->who, err);
    if (st != DPFL_OK) return st;
    if (count < c->p.t)
        return dpfl_fail(err, DPFL_EINVAL, "%s: only %u clients survived to send masked inputs, fewer than the "
                         "threshold t = %u: refusing to unmask", c->who, count, c->p.t);
    uint8_t *in_u3 = dpfl_calloc(c->p.n, 1, err);
    if (!in_u3) return DPFL_ENOMEM;
    int64_t prev = -1;
    for (uint32_t i = 0; st == DPFL_OK && i < count; i++) {
        uint32_t v = get32(req + HDR + 4 + 4 * (size_t)i);
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
    if (st == DPFL_OK) st = msg_new(out, HDR + 4 + (size_t)nu2 * ENTRY_UNMASK, T_UNMASK, c->id, err);
    if (st == DPFL_OK) {
        put32(out->data + HDR, nu2);
        uint8_t *e = out->data + HDR + 4;
        /* The one rule that keeps every input private: for a survivor its self-mask share only, for a client that
         * dropped its mask-key share only -- never both, so no x_u is ever unmasked alone. */
        for (uint32_t v = 0; v < c->p.n; v++) {
            if (!c->in_u2[v]) continue;
            put32(e, v);
            e[4] = in_u3[v] ? 0 : 1;
            share_put(e + 5, in_u3[v] ? &c->held_b[v] : &c->held_s[v]);
            e += ENTRY_UNMASK;
        }
        c->phase = C_DONE;
        client_wipe(c); /* this client's part of the round is over */
    }
    dpfl_free(in_u3);
    return st;
}

/* ---------------------------------------------------------------- server */
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
    if (st == DPFL_OK) st = sodium_ready(err);
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
    if (st == DPFL_OK) st = hdr_check(msg, len, T_ADVERT, HDR + 2 * KEY, &u, "secagg server", err);
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
    if (st == DPFL_OK) st = msg_new(out, HDR + 4 + (size_t)s->nu1 * ENTRY_KEYS, T_KEYS, DPFL_SECAGG_SERVER_ID, err);
    if (st != DPFL_OK) return st;
    put32(out->data + HDR, s->nu1);
    uint8_t *e = out->data + HDR + 4;
    uint32_t r = 0;
    for (uint32_t v = 0; v < s->p.n; v++) {
        if (!s->in_u1[v]) continue;
        s->rank1[v] = r++;
        put32(e, v);
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
    if (st == DPFL_OK) st = hdr_check(msg, len, T_SHARES, HDR + 4, &u, "secagg server", err);
    if (st == DPFL_OK) st = count_check(msg, len, HDR, ENTRY_SHARE, &count, "secagg server", err);
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
        if (get32(msg + HDR + 4 + (size_t)i * ENTRY_SHARE) != v)
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
    if ((st = msg_new(out, HDR + 8 + (size_t)(s->nu2 - 1) * ENTRY_SHARE, T_SHARES_FOR, DPFL_SECAGG_SERVER_ID, err)))
        return st;
    put32(out->data + HDR, v);
    put32(out->data + HDR + 4, s->nu2 - 1);
    uint8_t *e = out->data + HDR + 8;
    for (uint32_t i = 0; i < s->nu2; i++) {
        uint32_t u = s->u2[i];
        if (u == v) continue;
        size_t pos = s->rank1[v] - (s->rank1[v] > s->rank1[u] ? 1 : 0);
        put32(e, u);
        memcpy(e + 4, s->shares[u] + pos * ENTRY_SHARE + 4, CT_LEN);
        e += ENTRY_SHARE;
    }
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_add_masked(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0;
    dpfl_status st = server_phase(s, S_MASKED, "add_masked (after shares_for)", err);
    if (st == DPFL_OK) st = hdr_check(msg, len, T_MASKED, HDR + 12, &u, "secagg server", err);
    if (st != DPFL_OK) return st;
    if (u >= s->p.n || !s->in_u2[u])
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: masked input from client %u, which is not in U2", u);
    if (s->in_u3[u]) return dpfl_fail(err, DPFL_EINVAL, "secagg server: client %u sent its masked input twice", u);
    const size_t n = s->p.len;
    if (get32(msg + HDR) != s->p.bits || get64(msg + HDR + 4) != n || len != HDR + 12 + 4 * n)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's masked input is not %zu values mod 2^%u", u,
                         n, s->p.bits);
    const uint32_t mask = bits_mask(s->p.bits);
    const uint8_t *y = msg + HDR + 12;
    for (size_t i = 0; i < n; i++)
        if (dpfl_load32_le(y + 4 * i) > mask)
            return dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's masked value %zu is not reduced mod 2^%u",
                             u, i, s->p.bits);
    for (size_t i = 0; i < n; i++) s->sum[i] += dpfl_load32_le(y + 4 * i);
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
    if ((st = msg_new(out, HDR + 4 + 4 * (size_t)s->nu3, T_UNMASK_REQ, DPFL_SECAGG_SERVER_ID, err))) return st;
    put32(out->data + HDR, s->nu3);
    uint8_t *e = out->data + HDR + 4;
    for (uint32_t u = 0; u < s->p.n; u++)
        if (s->in_u3[u]) put32(e, u), e += 4;
    s->phase = S_UNMASK;
    return DPFL_OK;
}

dpfl_status dpfl_secagg_server_add_unmask(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err)
{
    uint32_t u = 0, count = 0;
    dpfl_status st = server_phase(s, S_UNMASK, "add_unmask", err);
    if (st == DPFL_OK) st = hdr_check(msg, len, T_UNMASK, HDR + 4, &u, "secagg server", err);
    if (st == DPFL_OK) st = count_check(msg, len, HDR, ENTRY_UNMASK, &count, "secagg server", err);
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
        if (get32(e) != v || e[4] != (s->in_u3[v] ? 0 : 1) || share_get(e + 5, u, &sh) != 0)
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
    dpfl_status st = combine_with(lambda, s->resp + i, s->nu2, s->p.t, secret, err);
    if (st != DPFL_OK)
        return dpfl_fail(err, DPFL_EFORMAT, "secagg server: the shares of client %u's %s do not reconstruct it (a "
                         "corrupted share?)", v, s->in_u3[v] ? "self-mask seed" : "mask-agreement key");
    if (s->in_u3[v]) {
        prg_apply(s->sum, s->p.len, secret, 1);
    } else if (crypto_scalarmult_base(pk, secret) != 0 || sodium_memcmp(pk, s->pk_s[v], KEY) != 0) {
        /* A reconstructed key is checked against the public key the client advertised. */
        st = dpfl_fail(err, DPFL_EFORMAT, "secagg server: the mask-agreement key reconstructed for dropped client %u "
                       "does not match its public key (a corrupted share?)", v);
    } else {
        for (uint32_t j = 0; st == DPFL_OK && j < s->nu2; j++) {
            uint32_t u = s->u2[j];
            if (!s->in_u3[u]) continue;
            if (pair_key(k, secret, s->pk_s[u], u, v) != 0)
                st = dpfl_fail(err, DPFL_EFORMAT, "secagg server: client %u's mask-agreement key is invalid", u);
            else
                prg_apply(s->sum, s->p.len, k, v > u);
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
    if (st == DPFL_OK) st = lagrange0(x, t, lambda, err);
    for (uint32_t i = 0; st == DPFL_OK && i < s->nu2; i++) st = server_unmask_one(s, lambda, i, err);
    dpfl_free(x);
    dpfl_free(lambda);
    if (st != DPFL_OK) {
        s->phase = S_DONE; /* the running sum is half unmasked: the round cannot be finished again */
        return st;
    }
    const uint32_t mask = bits_mask(s->p.bits);
    for (size_t i = 0; i < s->p.len; i++) sum[i] = s->sum[i] & mask;
    if (nsummed) *nsummed = s->nu3;
    s->phase = S_DONE;
    return DPFL_OK;
}
