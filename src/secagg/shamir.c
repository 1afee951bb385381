/* Shamir secret sharing (Shamir, "How to share a secret", CACM 1979) of secure aggregation's 32-byte secrets over
 * GF(p), p = 2^61 - 1: a secret is cut into five chunks of at most 7 bytes (each < 2^56 < p), each chunk the
 * constant term of its own random polynomial of degree t - 1; client u's share is the five values at x = u + 1.
 * Any t shares give the secret back (Lagrange interpolation at 0); any t - 1 are uniform and say nothing of it. */
#include "secagg_internal.h"

__extension__ typedef unsigned __int128 u128;

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

/* lambda_i = prod_{j != i} x_j / (x_j - x_i).  Computed once per set of share holders; the server uses the same
 * set for every secret it reconstructs. */
dpfl_status dpfl_secagg_lagrange0(const uint32_t *x, uint32_t k, uint64_t *lambda, dpfl_error *err)
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

/* A chunk outside its byte range means the shares do not lie on one polynomial with a valid secret. */
dpfl_status dpfl_secagg_combine_with(const uint64_t *lambda, const dpfl_secagg_share *sh, size_t stride, uint32_t k,
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
    if (st == DPFL_OK) st = dpfl_secagg_lagrange0(x, k, lambda, err);
    if (st == DPFL_OK) st = dpfl_secagg_combine_with(lambda, shares, 1, k, secret, err);
    dpfl_free(x);
    dpfl_free(lambda);
    return st;
}
