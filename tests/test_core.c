#include "testutil.h"
#include "dpfl/core.h"
#include "core/bytes.h"
#include "core/chacha20.h"
#include "core/file.h"
#include "core/numtext.h"
#include "core/rng_internal.h"

#include <math.h>
#include <pthread.h>
#include <sodium.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void rng_seeded_is_reproducible(void **state)
{
    (void)state;
    dpfl_rng a, b, c;
    dpfl_rng_init_seed(&a, 42);
    dpfl_rng_init_seed(&b, 42);
    dpfl_rng_init_seed(&c, 43);
    int same_c = 1;
    for (int i = 0; i < 100; i++) {
        uint64_t x = dpfl_rng_u64(&a), y = dpfl_rng_u64(&b), z = dpfl_rng_u64(&c);
        assert_int_equal(x, y);
        if (x != z) same_c = 0;
    }
    assert_false(same_c);
}

static void rng_derive_is_independent_of_parent_position(void **state)
{
    (void)state;
    dpfl_rng p, c1, c2, c3;
    dpfl_rng_init_seed(&p, 7);
    dpfl_rng_derive(&p, &c1, 1, 2, 3);
    (void)dpfl_rng_u64(&p);
    dpfl_rng_derive(&p, &c2, 1, 2, 3);
    dpfl_rng_derive(&p, &c3, 1, 2, 4);
    uint64_t a = dpfl_rng_u64(&c1), b = dpfl_rng_u64(&c2), c = dpfl_rng_u64(&c3);
    assert_int_equal(a, b);
    assert_int_not_equal(a, c);
}

static void rng_os_streams_differ(void **state)
{
    (void)state;
    dpfl_rng a, b;
    assert_int_equal(dpfl_rng_init_os(&a, NULL), DPFL_OK);
    assert_int_equal(dpfl_rng_init_os(&b, NULL), DPFL_OK);
    assert_int_equal(a.seeded, 0);
    assert_int_not_equal(dpfl_rng_u64(&a), dpfl_rng_u64(&b));
}

/* Moments of 10^6 Gaussian draws and a Kolmogorov-Smirnov test against Phi (critical value 1.63/sqrt(n) at
 * the 1% level). */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v (sorted in place) has mean 0 and variance 1 within 5 standard errors, and passes a Kolmogorov-Smirnov test
 * against N(0, 1) at the 1% level. */
static void assert_n01(double *v, size_t n)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) s += v[i], s2 += v[i] * v[i];
    double mean = s / n, var = s2 / n - mean * mean;
    assert_true(fabs(mean) < 5.0 / sqrt((double)n));
    assert_true(fabs(var - 1.0) < 5.0 * sqrt(2.0 / n));
    qsort(v, n, sizeof *v, cmp_double);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double F = 0.5 * erfc(-v[i] / sqrt(2.0));
        d = fmax(d, fmax(F - (double)i / n, (double)(i + 1) / n - F));
    }
    assert_true(d < 1.63 / sqrt((double)n));
}

/* assert_n01 on x / sigma (copied into v) */
static void assert_standard_normal(double *v, const float *x, size_t n, double sigma)
{
    for (size_t i = 0; i < n; i++) v[i] = x[i] / sigma;
    assert_n01(v, n);
}

static void gaussian_moments_and_ks(void **state)
{
    (void)state;
    const size_t n = 1000000;
    double *v = malloc(n * sizeof *v);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2024);
    for (size_t i = 0; i < n; i++) v[i] = dpfl_rng_gaussian(&r);
    assert_n01(v, n);
    free(v);
}

/* dpfl_rng_add_gaussian (the chunked noise on the caller's thread): mean, variance at sigma = 2.5, and a KS test
 * of x / sigma against Phi on 10^6 draws. */
static void bulk_noise_moments_and_ks(void **state)
{
    (void)state;
    const size_t n = 1000000;
    float *x = calloc(n, sizeof *x);
    double *v = malloc(n * sizeof *v);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 31);
    dpfl_rng_add_gaussian(&r, x, n, 2.5);
    assert_standard_normal(v, x, n, 2.5);
    /* adding to existing values: x + noise, and sigma = 0 adds nothing */
    float y[4] = {1, 2, 3, 4};
    dpfl_rng_add_gaussian(&r, y, 4, 0.0);
    assert_true(y[0] == 1 && y[3] == 4);
    free(x);
    free(v);
}

/* The vectorised ChaCha20 keystream is libsodium's byte for byte: several keys, counters (the low word wrapping
 * inside a 16-block group, the 64-bit counter's carry) and lengths around the vector widths, with guard bytes
 * after the output left alone; and the known answer for the all-zero key and nonce, blocks 0 and 1 (RFC 7539
 * A.1 test vectors 1 and 2: with a zero nonce the original and the IETF layouts coincide). */
static void chacha20_matches_libsodium(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    static const uint64_t counters[] = {0, 1, 7, 0xfffffff0ULL, 0xfffffffbULL, 0xffffffffULL, 0x1fffffff9ULL,
                                        0x123456789abcdefULL};
    static const size_t blocks[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 256};
    enum { MAXB = 256, GUARD = 64 };
    uint8_t *got = malloc(64 * MAXB + GUARD), *want = malloc(64 * MAXB + GUARD);
    static const uint8_t zeros[64 * MAXB], nonce[crypto_stream_chacha20_NONCEBYTES];
    uint8_t key[32];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 32; i++) key[i] = (uint8_t)(k == 0 ? 0xff : 37 * i + 11 * k);
        for (size_t c = 0; c < sizeof counters / sizeof *counters; c++)
            for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
                size_t len = 64 * blocks[b];
                memset(got, 0xa5, 64 * MAXB + GUARD);
                memset(want, 0xa5, 64 * MAXB + GUARD);
                dpfl_chacha20_keystream(got, blocks[b], key, counters[c]);
                crypto_stream_chacha20_xor_ic(want, zeros, len, nonce, counters[c], key);
                assert_memory_equal(got, want, 64 * MAXB + GUARD);
            }
    }
    static const char *kat = "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                             "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
                             "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
                             "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f";
    uint8_t expect[128];
    for (int i = 0; i < 128; i++) {
        unsigned v;
        assert_int_equal(sscanf(kat + 2 * i, "%2x", &v), 1);
        expect[i] = (uint8_t)v;
    }
    memset(key, 0, sizeof key);
    dpfl_chacha20_keystream(got, 32, key, 0); /* 32 blocks: through the vector path where there is one */
    assert_memory_equal(got, expect, 128);
    dpfl_chacha20_keystream(got, 1, key, 1);
    assert_memory_equal(got, expect + 64, 64);
    free(got);
    free(want);
}

/* dpfl_chacha20_words16 is the keystream of the same 16 blocks, word-major: checked against libsodium's bytes,
 * with counters where the 32-bit low word wraps inside the 16 blocks. */
static void chacha20_words16_is_the_keystream(void **state)
{
    (void)state;
    static const uint64_t counters[] = {0, 16, 0xfffffff8ULL, 0x1fffffff9ULL, 0x123456789abcdefULL};
    static const uint8_t zeros[64 * 16], nonce[crypto_stream_chacha20_NONCEBYTES];
    uint8_t key[32], bytes[64 * 16];
    uint32_t w[256];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 32; i++) key[i] = (uint8_t)(29 * i + 5 * k + 1);
        for (size_t c = 0; c < sizeof counters / sizeof *counters; c++) {
            dpfl_chacha20_words16(w, key, counters[c]);
            crypto_stream_chacha20_xor_ic(bytes, zeros, sizeof bytes, nonce, counters[c], key);
            for (int l = 0; l < 16; l++)
                for (int j = 0; j < 16; j++) {
                    const uint8_t *b = bytes + 64 * l + 4 * j;
                    uint32_t want = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                    assert_int_equal(w[16 * j + l], want);
                }
        }
    }
}

/* Chunked noise (DP-SGD and server noise): mean, variance and a KS test on 10^6 draws at sigma = 2.5, and the
 * tail probabilities of 10^7 draws as for the bulk path (t = 3.65 and 4.5 exercise the tail sampler and the
 * redraws of the chunked slow path). */
static void chunked_noise_moments_ks_and_tails(void **state)
{
    (void)state;
    const size_t n = 1000000;
    float *x = calloc(n, sizeof *x);
    double *v = malloc(n * sizeof *v);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 32);
    dpfl_rng_add_gaussian_chunked(&r, x, n, 2.5, 1.0f, 2);
    assert_standard_normal(v, x, n, 2.5);
    const double t[5] = {1.0, 2.0, 3.0, 3.65, 4.5};
    long count[5] = {0};
    for (int c = 0; c < 10; c++) {
        memset(x, 0, n * sizeof *x);
        dpfl_rng_add_gaussian_chunked(&r, x, n, 1.0, 1.0f, 2);
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 5; k++) count[k] += fabs((double)x[i]) > t[k];
    }
    double total = 10.0 * (double)n;
    for (int k = 0; k < 5; k++) {
        double p = erfc(t[k] / sqrt(2.0)), se = sqrt(p * (1 - p) / total), got = (double)count[k] / total;
        if (fabs(got - p) > 4 * se) {
            print_error("P(|x| > %g) = %.6g, expected %.6g (se %.2g)\n", t[k], got, p, se);
            fail();
        }
    }
    free(x);
    free(v);
}

/* The chunked noise depends on the rng's state alone: 1, 2, 3 and 8 threads and the portable code give the same
 * bits at lengths around the chunk and group sizes; the caller's stream moves on by the same amount; a second
 * call gives fresh noise; the axpy form equals noise followed by dpfl_vec_axpy; sigma = 0 only scales. */
static void chunked_noise_is_thread_invariant(void **state)
{
    (void)state;
    static const size_t ns[] = {1, 255, 256, 257, 65535, 65536, 65537, 3 * 65536 + 5};
    const size_t nmax = 3 * 65536 + 5;
    float *ref = malloc(nmax * sizeof *ref), *x = malloc(nmax * sizeof *x), *y = malloc(nmax * sizeof *y);
    float *yref = malloc(nmax * sizeof *yref);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const size_t n = ns[k];
        dpfl_rng r0;
        dpfl_rng_init_seed(&r0, 1000 + k);
        (void)dpfl_rng_u64(&r0); /* a stream part-way through its buffer */
        dpfl_rng r = r0;
        for (size_t i = 0; i < n; i++) ref[i] = 0.01f * (float)(i % 977) - 3.0f;
        dpfl_rng_add_gaussian_chunked(&r, ref, n, 1.7, 0.25f, 1);
        const uint64_t after = dpfl_rng_u64(&r);
        const int threads[] = {2, 3, 8, 0};
        for (int t = 0; t < 5; t++) {
            dpfl_rng q = r0;
            for (size_t i = 0; i < n; i++) x[i] = 0.01f * (float)(i % 977) - 3.0f;
            if (t < 4) dpfl_rng_add_gaussian_chunked(&q, x, n, 1.7, 0.25f, threads[t]);
            else dpfl_rng_add_gaussian_chunked_portable(&q, x, n, 1.7, 0.25f, 2);
            assert_memory_equal(x, ref, n * sizeof *x);
            assert_int_equal(dpfl_rng_u64(&q), after);
        }
        /* the noisy SGD step: y += a (x + noise) */
        dpfl_rng q = r0, q2 = r0;
        for (size_t i = 0; i < n; i++) x[i] = ref[i], yref[i] = y[i] = 1.0f + 0.001f * (float)i;
        dpfl_rng_axpy_gaussian_chunked(&q, y, -0.03f, x, n, 0.9, 2);
        dpfl_rng_add_gaussian_chunked(&q2, x, n, 0.9, 1.0f, 1);
        dpfl_vec_axpy(yref, -0.03f, x, n);
        assert_memory_equal(y, yref, n * sizeof *y);
    }
    /* two calls on one stream: different noise */
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    memset(x, 0, nmax * sizeof *x);
    memset(y, 0, nmax * sizeof *y);
    dpfl_rng_add_gaussian_chunked(&r, x, 1000, 1.0, 1.0f, 2);
    dpfl_rng_add_gaussian_chunked(&r, y, 1000, 1.0, 1.0f, 2);
    int same = 0;
    for (int i = 0; i < 1000; i++) same += x[i] == y[i];
    assert_true(same < 5);
    /* an empty vector, then the helpers still serve the next call */
    dpfl_rng_add_gaussian_chunked(&r, x, 0, 1.0, 1.0f, 2);
    /* sigma = 0: the scale alone; the axpy alone */
    float a[3] = {1, 2, 3}, b[3] = {1, 1, 1};
    dpfl_rng_add_gaussian_chunked(&r, a, 3, 0.0, 0.5f, 2);
    assert_true(a[0] == 0.5f && a[1] == 1.0f && a[2] == 1.5f);
    dpfl_rng_axpy_gaussian_chunked(&r, b, 2.0f, a, 3, 0.0, 2);
    assert_true(b[0] == 2.0f && b[1] == 3.0f && b[2] == 4.0f);
    free(ref);
    free(x);
    free(y);
    free(yref);
}

/* Several threads noising at once (the helper threads are taken by one, the others start their own): each gets
 * the noise of its stream. */
typedef struct {
    float *x;
    size_t n;
} noise_arg;

static void *noise_in_thread(void *p)
{
    noise_arg *a = p;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 4321);
    for (int rep = 0; rep < 5; rep++) {
        memset(a->x, 0, a->n * sizeof *a->x);
        dpfl_rng_add_gaussian_chunked(&r, a->x, a->n, 1.0, 1.0f, 2);
    }
    return NULL;
}

static void chunked_noise_concurrent_callers(void **state)
{
    (void)state;
    enum { T = 3 };
    const size_t n = 4 * 65536 + 17;
    float *ref = calloc(n, sizeof *ref);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 4321);
    for (int rep = 0; rep < 5; rep++) {
        memset(ref, 0, n * sizeof *ref);
        dpfl_rng_add_gaussian_chunked(&r, ref, n, 1.0, 1.0f, 1);
    }
    pthread_t th[T];
    noise_arg args[T];
    for (int t = 0; t < T; t++) {
        args[t] = (noise_arg){calloc(n, sizeof(float)), n};
        assert_int_equal(pthread_create(&th[t], NULL, noise_in_thread, &args[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        assert_memory_equal(args[t].x, ref, n * sizeof *ref);
        free(args[t].x);
    }
    free(ref);
}

/* The chunked noise sequence is pinned (CRC-32 of several calls of every form, each followed by a u64), as the
 * portable code (also built without AVX) gives it. */
static void chunked_noise_sequence_is_pinned(void **state)
{
    (void)state;
    static const size_t ns[] = {1, 4097, 70001, 200003};
    float *x = malloc(200003 * sizeof *x), *y = malloc(200003 * sizeof *y);
    uint32_t crc = 0;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 77);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        for (size_t i = 0; i < ns[k]; i++) x[i] = 0.25f * (float)(i % 1000), y[i] = 1.0f;
        dpfl_rng_add_gaussian_chunked(&r, x, ns[k], 1.5, k % 2 ? 0.5f : 1.0f, 2);
        dpfl_rng_axpy_gaussian_chunked(&r, y, -0.1f, x, ns[k], 2.0, 2);
        uint64_t u = dpfl_rng_u64(&r);
        crc = crc * 31u + dpfl_crc32(x, ns[k] * sizeof *x);
        crc = crc * 31u + dpfl_crc32(y, ns[k] * sizeof *y);
        crc = crc * 31u + dpfl_crc32(&u, sizeof u);
    }
    assert_int_equal(crc, 0xdb49b599u);
    free(x);
    free(y);
}

/* Discrete Gaussian: the frequencies at sigma^2 = 2 match the exact pmf (chi-square, 0.1% level), and at a large
 * sigma^2 the mean and variance match. */
static void discrete_gaussian_exact(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 12);
    const int n = 200000, W = 8;
    long counts[17] = {0};
    for (int i = 0; i < n; i++) {
        int64_t x = dpfl_rng_discrete_gaussian(&r, 2);
        if (x < -W) x = -W;
        if (x > W) x = W;
        counts[x + W]++;
    }
    double Z = 0, p[17];
    for (int x = -60; x <= 60; x++) Z += exp(-(double)x * x / 4.0);
    for (int x = -W; x <= W; x++) p[x + W] = exp(-(double)x * x / 4.0) / Z;
    double chi2 = 0;
    int cells = 0;
    for (int x = -W; x <= W; x++) {
        double e = n * p[x + W];
        if (e < 5) continue; /* far tails merged away: they are too rare to test */
        chi2 += (counts[x + W] - e) * (counts[x + W] - e) / e;
        cells++;
    }
    assert_true(cells >= 9);
    assert_true(chi2 < 30.0); /* chi-square with <= 12 dof: 0.3% upper quantile is about 30 */
    double s = 0, s2 = 0;
    const uint64_t big = 1000000000000ULL; /* sigma = 1e6 */
    for (int i = 0; i < 20000; i++) {
        double x = (double)dpfl_rng_discrete_gaussian(&r, big);
        s += x;
        s2 += x * x;
    }
    double mean = s / 20000, var = s2 / 20000 - mean * mean;
    assert_true(fabs(mean) < 5e6 / sqrt(20000.0));
    assert_close(var, 1e12, 5 * sqrt(2.0 / 20000));
}

/* The exact sampler over the whole range callers accept (sigma^2 <= 2^62): at sigma^2 = 4e18 most draws have
 * |y| t > 2^64, where the 128-bit arithmetic used to wrap (kurtosis 3.65: tails 5.5x too heavy).  On 1e5 draws each
 * the variance, the kurtosis and the share beyond 3 sigma must match the Gaussian's within 5 standard errors. */
static void discrete_gaussian_exact_at_every_scale(void **state)
{
    (void)state;
    const uint64_t s2s[3] = {1000000000000ULL, 4000000000000000000ULL, (uint64_t)1 << 62};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 13);
    for (int k = 0; k < 3; k++) {
        const int n = 100000;
        const double sd = sqrt((double)s2s[k]);
        double m2 = 0, m4 = 0, sum = 0;
        int tail = 0;
        for (int i = 0; i < n; i++) {
            double x = (double)dpfl_rng_discrete_gaussian(&r, s2s[k]) / sd;
            sum += x;
            m2 += x * x;
            m4 += x * x * x * x;
            tail += fabs(x) > 3.0;
        }
        m2 /= n;
        m4 /= n;
        const double kurt = m4 / (m2 * m2), p3 = 0.0026998;
        if (!(fabs(sum / n) < 5 / sqrt((double)n)) || !(fabs(m2 - 1) < 5 * sqrt(2.0 / n)) ||
            !(fabs(kurt - 3) < 5 * sqrt(24.0 / n)) || !(fabs((double)tail / n - p3) < 5 * sqrt(p3 / n))) {
            print_error("sigma^2 = %g: mean %.4f, variance %.5f sigma^2, kurtosis %.4f, beyond 3 sigma %.5f (want 0, "
                        "1, 3, %.5f)\n", (double)s2s[k], sum / n, m2, kurt, (double)tail / n, p3);
            fail();
        }
    }
}

static void uniform_below_and_bernoulli(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) counts[dpfl_rng_below(&r, 7)]++;
    for (int k = 0; k < 7; k++) assert_true(abs(counts[k] - 10000) < 500);
    int ones = 0;
    for (int i = 0; i < 100000; i++) ones += dpfl_rng_bernoulli(&r, 0.3);
    assert_true(abs(ones - 30000) < 700);
    assert_int_equal(dpfl_rng_bernoulli(&r, 0.0), 0);
    assert_int_equal(dpfl_rng_bernoulli(&r, 1.0), 1);
}

static void gamma_mean(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 9);
    double shapes[3] = {0.3, 1.0, 4.5};
    for (int k = 0; k < 3; k++) {
        double s = 0;
        for (int i = 0; i < 200000; i++) s += dpfl_rng_gamma(&r, shapes[k]);
        assert_close(s / 200000, shapes[k], 0.02);
    }
}

static void shuffle_is_permutation(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    int32_t idx[1000];
    for (int i = 0; i < 1000; i++) idx[i] = i;
    dpfl_rng_shuffle(&r, idx, 1000);
    int seen[1000] = {0}, moved = 0;
    for (int i = 0; i < 1000; i++) {
        seen[idx[i]]++;
        moved += idx[i] != i;
    }
    for (int i = 0; i < 1000; i++) assert_int_equal(seen[i], 1);
    assert_true(moved > 900);
}

static void vec_ops_and_clip(void **state)
{
    (void)state;
    float a[5] = {3, 4, 0, 0, 0}, b[5] = {1, 1, 1, 1, 1};
    assert_close(dpfl_vec_norm2(a, 5), 5.0, 1e-12);
    assert_close(dpfl_vec_dot(a, b, 5), 7.0, 1e-12);
    dpfl_vec_axpy(b, 2.0f, a, 5);
    assert_close(b[1], 9.0, 1e-12);
    double before = dpfl_vec_clip(a, 5, 1.0);
    assert_close(before, 5.0, 1e-12);
    assert_true(dpfl_vec_norm2(a, 5) <= 1.0);
    assert_close(dpfl_vec_norm2(a, 5), 1.0, 1e-6);
    float c[2] = {0.1f, 0.1f};
    dpfl_vec_clip(c, 2, INFINITY);
    assert_close(c[0], 0.1f, 1e-12);
}

static void file_roundtrip_and_corruption(void **state)
{
    (void)state;
    char path[] = "/tmp/dpfl_test_fileXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char payload[] = "hello, ledger";
    dpfl_error err;
    assert_int_equal(dpfl_file_write(path, 0x4c465044u, 1, payload, sizeof payload, &err), DPFL_OK);
    void *got;
    size_t len;
    assert_int_equal(dpfl_file_read(path, 0x4c465044u, 1, &got, &len, &err), DPFL_OK);
    assert_int_equal(len, sizeof payload);
    assert_memory_equal(got, payload, len);
    free(got);
    /* written in pieces: the same file, byte for byte */
    char whole[256], *single;
    size_t wl, sl;
    assert_int_equal(dpfl_file_read_all(path, &single, &sl, &err), DPFL_OK);
    memcpy(whole, single, sl);
    wl = sl;
    free(single);
    const void *parts[3] = {payload, payload + 5, payload + 5};
    size_t lens[3] = {5, 0, sizeof payload - 5};
    assert_int_equal(dpfl_file_write_parts(path, 0x4c465044u, 1, parts, lens, 3, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all(path, &single, &sl, &err), DPFL_OK);
    assert_int_equal(sl, wl);
    assert_memory_equal(single, whole, wl);
    free(single);
    assert_int_equal(dpfl_file_read(path, 0x4c465044u, 2, &got, &len, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "version"));
    assert_int_equal(dpfl_file_read(path, 0x12345678u, 1, &got, &len, &err), DPFL_EFORMAT);
    /* flip one payload byte */
    FILE *f = fopen(path, "r+b");
    fseek(f, 18, SEEK_SET);
    fputc('X', f);
    fclose(f);
    assert_int_equal(dpfl_file_read(path, 0x4c465044u, 1, &got, &len, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "checksum"));
    /* truncate */
    assert_int_equal(truncate(path, 10), 0);
    assert_int_equal(dpfl_file_read(path, 0x4c465044u, 1, &got, &len, &err), DPFL_EFORMAT);
    unlink(path);
    assert_int_equal(dpfl_file_read(path, 0x4c465044u, 1, &got, &len, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, path));
}

/* The one byte codec of dpfl's binary layouts (core/bytes.h): little-endian by construction, floats as their bit
 * patterns, and a reader that stops at the end of its input. */
static void bytes_little_endian_layout_and_short_reads(void **state)
{
    (void)state;
    uint8_t buf[4 + 8 + 4 + 8 + 4 + 8 + 1 + 8];
    dpfl_bytes_writer w = dpfl_bytes_writer_over(buf, sizeof buf);
    dpfl_bytes_put_u32(&w, 0x01020304u);
    dpfl_bytes_put_u64(&w, UINT64_C(0x0102030405060708));
    dpfl_bytes_put_i32(&w, -2);
    dpfl_bytes_put_i64(&w, -3);
    dpfl_bytes_put_f32(&w, 1.0f);
    dpfl_bytes_put_f64(&w, -2.0);
    dpfl_bytes_put_u8(&w, 0xAB);
    const float fs[2] = {0.5f, -0.25f};
    dpfl_bytes_put_f32s(&w, fs, 2);
    assert_ptr_equal(w.p, w.end);
    static const uint8_t want[] = {
        0x04, 0x03, 0x02, 0x01,                         /* u32 */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* u64 */
        0xFE, 0xFF, 0xFF, 0xFF,                         /* i32 -2 */
        0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, /* i64 -3 */
        0x00, 0x00, 0x80, 0x3F,                         /* f32 1.0 = 0x3F800000 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC0, /* f64 -2.0 = 0xC000000000000000 */
        0xAB,                                           /* u8 */
        0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x80, 0xBE  /* f32 0.5, -0.25 */
    };
    assert_int_equal(sizeof want, sizeof buf);
    assert_memory_equal(buf, want, sizeof want);
    assert_int_equal(dpfl_bytes_load_u32(want), 0x01020304u);
    assert_true(dpfl_bytes_load_u64(want + 4) == UINT64_C(0x0102030405060708));
    assert_int_equal(dpfl_bytes_load_u16(want), 0x0304);

    dpfl_bytes_reader r = dpfl_bytes_reader_over(want, sizeof want);
    uint32_t u32;
    uint64_t u64;
    int32_t i32;
    int64_t i64;
    float f32, f2[2];
    double f64;
    uint8_t u8;
    assert_int_equal(dpfl_bytes_get_u32(&r, &u32), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_u64(&r, &u64), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_i32(&r, &i32), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_i64(&r, &i64), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_f32(&r, &f32), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_f64(&r, &f64), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_u8(&r, &u8), DPFL_OK);
    assert_int_equal(dpfl_bytes_get_f32s(&r, f2, 2), DPFL_OK);
    assert_int_equal(u32, 0x01020304u);
    assert_true(u64 == UINT64_C(0x0102030405060708));
    assert_int_equal(i32, -2);
    assert_true(i64 == -3);
    assert_true(f32 == 1.0f && f64 == -2.0 && u8 == 0xAB && f2[0] == 0.5f && f2[1] == -0.25f);
    assert_int_equal(dpfl_bytes_left(&r), 0);
    assert_false(r.short_read);
    /* past the end: zeros, DPFL_EFORMAT, the flag stays set, the cursor does not move */
    r = dpfl_bytes_reader_over(want, 6);
    assert_int_equal(dpfl_bytes_get_u32(&r, &u32), DPFL_OK);
    u32 = 7;
    assert_int_equal(dpfl_bytes_get_u32(&r, &u32), DPFL_EFORMAT);
    assert_int_equal(u32, 0);
    assert_true(r.short_read);
    assert_int_equal(dpfl_bytes_left(&r), 2);
    f2[0] = f2[1] = 1;
    assert_int_equal(dpfl_bytes_get_f32s(&r, f2, 1), DPFL_EFORMAT);
    assert_true(f2[0] == 0 && f2[1] == 1);
    assert_int_equal(dpfl_bytes_get_u8(&r, &u8), DPFL_OK); /* what is there can still be read */
    assert_int_equal(u8, want[4]);
    assert_true(r.short_read);
}

/* mkdir -p with one-line errors (core/file.h). */
static void make_dirs_creates_parents_and_names_the_failure(void **state)
{
    (void)state;
    char root[] = "/tmp/dpfl_test_dirsXXXXXX";
    assert_non_null(mkdtemp(root));
    char path[256], file[256];
    snprintf(path, sizeof path, "%s/a/b/c", root);
    dpfl_error err;
    assert_int_equal(dpfl_file_make_dirs(path, 0700, &err), DPFL_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(dpfl_file_make_dirs(path, 0700, &err), DPFL_OK); /* there already */
    /* a parent that is a file */
    snprintf(file, sizeof file, "%s/a/f", root);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/a/f/x", root);
    assert_int_equal(dpfl_file_make_dirs(path, 0755, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, file));
    assert_null(strchr(err.msg, '\n'));
    char longp[1100];
    memset(longp, 'x', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(dpfl_file_make_dirs(longp, 0755, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
    unlink(file);
    static const char *const made[] = {"a/b/c", "a/b", "a", ""};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", root, made[i]);
        assert_int_equal(rmdir(path), 0);
    }
}

/* Printed privacy numbers round to the safe side (docs/privacy.md): up never prints below x, down never above, both
 * within one unit of the last printed digit, with at most `digits` significant digits. */
static void printed_numbers_round_to_the_safe_side(void **state)
{
    (void)state;
    const double xs[] = {1.0000039, 0.9999981, 1.08019234, 3.20702, 0.0171071499, 9.99999951, 99995.5, 1e-5,
                         1.2345678901234e-300, 5870.7572904, 123456789.0, 1.0, 0.0, 2.5, -0.3333333};
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
        for (int digits = 1; digits <= 8; digits++) {
            const double x = xs[i];
            const double up = strtod(dpfl_num_up(x, digits).s, NULL), down = strtod(dpfl_num_down(x, digits).s, NULL);
            assert_true(up >= x);
            assert_true(down <= x);
            const double unit = x != 0 ? pow(10.0, floor(log10(fabs(x))) - (digits - 1)) : 0;
            assert_true(up - x <= unit * (1 + 1e-9) && x - down <= unit * (1 + 1e-9));
            char exact[40];
            snprintf(exact, sizeof exact, "%.*g", digits, up); /* nothing beyond the digits asked for */
            assert_true(strtod(exact, NULL) == up);
        }
    assert_string_equal(dpfl_num_up(1.0000039, 6).s, "1.00001");
    assert_string_equal(dpfl_num_down(0.0171071499, 6).s, "0.0171071");
    assert_string_equal(dpfl_num_up(0.0171071499, 6).s, "0.0171072");
    assert_string_equal(dpfl_num_up(9.99999951, 6).s, "10");
    assert_string_equal(dpfl_num_up(INFINITY, 4).s, "inf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(printed_numbers_round_to_the_safe_side),
        cmocka_unit_test(rng_seeded_is_reproducible),
        cmocka_unit_test(rng_derive_is_independent_of_parent_position),
        cmocka_unit_test(rng_os_streams_differ),
        cmocka_unit_test(gaussian_moments_and_ks),
        cmocka_unit_test(bulk_noise_moments_and_ks),
        cmocka_unit_test(chacha20_matches_libsodium),
        cmocka_unit_test(chacha20_words16_is_the_keystream),
        cmocka_unit_test(chunked_noise_moments_ks_and_tails),
        cmocka_unit_test(chunked_noise_is_thread_invariant),
        cmocka_unit_test(chunked_noise_concurrent_callers),
        cmocka_unit_test(chunked_noise_sequence_is_pinned),
        cmocka_unit_test(discrete_gaussian_exact),
        cmocka_unit_test(discrete_gaussian_exact_at_every_scale),
        cmocka_unit_test(uniform_below_and_bernoulli),
        cmocka_unit_test(gamma_mean),
        cmocka_unit_test(shuffle_is_permutation),
        cmocka_unit_test(vec_ops_and_clip),
        cmocka_unit_test(file_roundtrip_and_corruption),
        cmocka_unit_test(bytes_little_endian_layout_and_short_reads),
        cmocka_unit_test(make_dirs_creates_parents_and_names_the_failure),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
