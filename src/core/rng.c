/* ChaCha20 keystream as the one source of randomness for noise, sampling and initialisation.
 * Floating-point samplers here are standard (Box-Muller, Marsaglia-Tsang); their low bits are not a secret
 * channel we defend against in the default mode (see docs/privacy.md). */
#include "dpfl/core.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

static void rng_start(dpfl_rng *r)
{
    r->counter = 0;
    r->pos = sizeof r->buf;
    r->has_spare = 0;
    r->spare = 0.0;
}

static int sodium_ready(void) { return sodium_init() >= 0; }

dpfl_status dpfl_rng_init_os(dpfl_rng *r, dpfl_error *err)
{
    if (!sodium_ready()) return dpfl_fail(err, DPFL_EIO, "libsodium could not be initialised (no OS entropy?)");
    randombytes_buf(r->key, sizeof r->key);
    r->seeded = 0;
    rng_start(r);
    return DPFL_OK;
}

void dpfl_rng_init_seed(dpfl_rng *r, uint64_t seed)
{
    DPFL_ASSERT(sodium_ready());
    uint8_t msg[17] = "dpfl-seed";
    for (int i = 0; i < 8; i++) msg[9 + i] = (uint8_t)(seed >> (8 * i));
    crypto_generichash(r->key, sizeof r->key, msg, sizeof msg, NULL, 0);
    r->seeded = 1;
    rng_start(r);
}

void dpfl_rng_derive(const dpfl_rng *parent, dpfl_rng *child, uint64_t a, uint64_t b, uint64_t c)
{
    uint8_t msg[24];
    uint64_t v[3] = {a, b, c};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 8; i++) msg[8 * k + i] = (uint8_t)(v[k] >> (8 * i));
    uint8_t key[32];
    crypto_generichash(key, sizeof key, msg, sizeof msg, parent->key, sizeof parent->key);
    memcpy(child->key, key, sizeof key);
    child->seeded = parent->seeded;
    rng_start(child);
}

static void refill(dpfl_rng *r)
{
    static const uint8_t zeros[sizeof r->buf];
    static const uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
    crypto_stream_chacha20_xor_ic(r->buf, zeros, sizeof r->buf, nonce, r->counter, r->key);
    r->counter += sizeof r->buf / 64;
    r->pos = 0;
}

uint64_t dpfl_rng_u64(dpfl_rng *r)
{
    if (r->pos + 8 > sizeof r->buf) refill(r);
    uint64_t v;
    memcpy(&v, r->buf + r->pos, 8);
    r->pos += 8;
    return v;
}

double dpfl_rng_uniform(dpfl_rng *r) { return (double)(dpfl_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t dpfl_rng_below(dpfl_rng *r, uint64_t n)
{
    DPFL_ASSERT(n > 0);
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* accept v < limit: an exact multiple of n values */
    uint64_t v;
    do v = dpfl_rng_u64(r);
    while (v >= limit);
    return v % n;
}

double dpfl_rng_gaussian(dpfl_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1, u2;
    do u1 = dpfl_rng_uniform(r);
    while (u1 <= 0.0);
    u2 = dpfl_rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    r->spare = rad * sin(2.0 * M_PI * u2);
    r->has_spare = 1;
    return rad * cos(2.0 * M_PI * u2);
}

void dpfl_rng_add_gaussian(dpfl_rng *r, float *x, size_t n, double sigma)
{
    if (sigma == 0.0) return;
    for (size_t i = 0; i < n; i++) x[i] += (float)(sigma * dpfl_rng_gaussian(r));
}

int dpfl_rng_bernoulli(dpfl_rng *r, double p)
{
    if (p >= 1.0) return 1;
    if (p <= 0.0) return 0;
    return dpfl_rng_uniform(r) < p;
}

void dpfl_rng_shuffle(dpfl_rng *r, int32_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dpfl_rng_below(r, i);
        int32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

double dpfl_rng_gamma(dpfl_rng *r, double shape)
{
    DPFL_ASSERT(shape > 0);
    if (shape < 1.0) { /* boost: Gamma(a) = Gamma(a+1) * U^(1/a) */
        double u;
        do u = dpfl_rng_uniform(r);
        while (u <= 0.0);
        return dpfl_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = dpfl_rng_gaussian(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = dpfl_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}
