/* ChaCha20 keystream as the one source of randomness for noise, sampling and initialisation.
 * Floating-point samplers here are standard (ziggurat normals, Marsaglia-Tsang gammas); their low bits are not a
 * secret channel we defend against in the default mode (see docs/privacy.md). */
#include "dpfl/core.h"

#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>

static void rng_start(dpfl_rng *r)
{
    r->counter = 0;
    r->pos = sizeof r->buf;
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

/* Ziggurat tables for the standard normal, 256 layers, built once (Marsaglia & Tsang's construction with the
 * layer edges R = 3.6541528853610088 and area V = 0.00492867323399; 52-bit magnitudes). */
#define ZIG_R 3.6541528853610088
#define ZIG_V 0.00492867323399
static uint64_t zig_k[256];
static double zig_w[256], zig_f[256];
static uint32_t zig_k32[256]; /* the same tables for 23-bit magnitudes (bulk float noise) */
static float zig_w32[256];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
    const double m = 4503599627370496.0; /* 2^52 */
    double dn = ZIG_R, tn = dn, q = ZIG_V / exp(-0.5 * dn * dn);
    zig_k[0] = (uint64_t)((dn / q) * m);
    zig_k[1] = 0;
    zig_w[0] = q / m;
    zig_w[255] = dn / m;
    zig_f[0] = 1.0;
    zig_f[255] = exp(-0.5 * dn * dn);
    for (int i = 254; i >= 1; i--) {
        dn = sqrt(-2.0 * log(ZIG_V / dn + exp(-0.5 * dn * dn)));
        zig_k[i + 1] = (uint64_t)((dn / tn) * m);
        tn = dn;
        zig_f[i] = exp(-0.5 * dn * dn);
        zig_w[i] = dn / m;
    }
    for (int i = 0; i < 256; i++) {
        zig_k32[i] = (uint32_t)(zig_k[i] >> 29);
        zig_w32[i] = (float)(zig_w[i] * 536870912.0); /* 2^29 */
    }
}

/* The ziggurat's slow path for a draw in layer i at abscissa x that fell outside the layer's rectangle:
 * returns 1 and sets *out when the draw is accepted (tail or wedge), 0 when it must be redrawn. */
static int zig_slow(dpfl_rng *r, unsigned i, double x, int neg, double *out)
{
    if (i == 0) { /* the tail beyond R (Marsaglia 1964) */
        for (;;) {
            double xx = -log1p(-dpfl_rng_uniform(r)) / ZIG_R;
            double yy = -log1p(-dpfl_rng_uniform(r));
            if (yy + yy > xx * xx) {
                *out = neg ? -(ZIG_R + xx) : ZIG_R + xx;
                return 1;
            }
        }
    }
    if ((zig_f[i - 1] - zig_f[i]) * dpfl_rng_uniform(r) + zig_f[i] < exp(-0.5 * x * x)) {
        *out = neg ? -x : x;
        return 1;
    }
    return 0;
}

double dpfl_rng_gaussian(dpfl_rng *r)
{
    pthread_once(&zig_once, zig_init);
    for (;;) {
        uint64_t u = dpfl_rng_u64(r);
        unsigned i = (unsigned)(u & 0xff);
        int neg = (int)((u >> 8) & 1);
        uint64_t mag = (u >> 9) & 0x000fffffffffffffULL; /* 52 bits */
        double x = (double)mag * zig_w[i];
        if (mag < zig_k[i]) return neg ? -x : x; /* inside the layer's rectangle */
        double g;
        if (zig_slow(r, i, x, neg, &g)) return g;
    }
}

/* Bulk noise: keystream in 16 KB blocks, one 32-bit word per draw (8 bits layer, 1 sign, 23 bits magnitude:
 * float resolution), the same exact ziggurat acceptance as above. */
static void fill_words(dpfl_rng *r, uint32_t *w, size_t nwords)
{
    static const uint8_t zeros[16384];
    static const uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
    size_t bytes = nwords * sizeof *w;
    DPFL_ASSERT(bytes <= sizeof zeros && bytes % 64 == 0);
    crypto_stream_chacha20_xor_ic((uint8_t *)w, zeros, bytes, nonce, r->counter, r->key);
    r->counter += bytes / 64;
}

void dpfl_rng_add_gaussian(dpfl_rng *r, float *x, size_t n, double sigma)
{
    if (sigma == 0.0) return;
    pthread_once(&zig_once, zig_init);
    enum { NW = 4096 };
    uint32_t w[NW];
    size_t pos = NW;
    const float s = (float)sigma;
    for (size_t j = 0; j < n; j++) {
        for (;;) {
            if (pos == NW) {
                fill_words(r, w, NW);
                pos = 0;
            }
            uint32_t u = w[pos++];
            unsigned i = u & 0xff;
            int neg = (int)((u >> 8) & 1);
            uint32_t mag = u >> 9;
            if (mag < zig_k32[i]) {
                float v = (float)mag * zig_w32[i];
                x[j] += neg ? -s * v : s * v;
                break;
            }
            double g;
            if (zig_slow(r, i, (double)mag * (double)zig_w32[i], neg, &g)) {
                x[j] += (float)(sigma * g);
                break;
            }
        }
    }
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
