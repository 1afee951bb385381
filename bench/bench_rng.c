/* Noise speed: ns per parameter of dpfl_rng_add_gaussian_chunked (the DP-SGD and server noise) on 1 and 2
 * threads, at the size of mlp:784-512-256-10 (535,818 parameters) and at 2^20, and the ChaCha20 keystream rate of dpfl's generator against libsodium's, into a 16 KB buffer.  Times are
 * thread CPU time (the machine may be shared), except for 2 threads: wall time; best and median of repetitions. */
#include "core/chacha20.h"
#include "dpfl/core.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 31

static void best_median(double *t, int n, double *best, double *med)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *best = t[0];
    *med = t[n / 2];
}

static void bench_noise(size_t n, int threads)
{
    float *x = calloc(n, sizeof *x);
    if (!x) return;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    double t[REPS];
    for (int k = -1; k < REPS; k++) { /* k = -1: warm-up (tables, pages) */
        double t0 = threads > 1 ? dpfl_now() : cpu_now();
        dpfl_rng_add_gaussian_chunked(&r, x, n, 1.0, 1.0f, threads);
        if (k >= 0) t[k] = (threads > 1 ? dpfl_now() : cpu_now()) - t0;
    }
    double best, med;
    best_median(t, REPS, &best, &med);
    char name[64];
    snprintf(name, sizeof name, "add_gaussian_chunked, %d thread%s", threads, threads > 1 ? "s" : "");
    printf("%-40s %10zu %12.3f %12.3f %12.3f\n", name, n, best * 1e9 / n, med * 1e9 / n, med * 1e3);
    free(x);
}

typedef void (*stream_fn)(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter);

static void sodium_stream(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    static const uint8_t zeros[16384];
    static const uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
    crypto_stream_chacha20_xor_ic(out, zeros, 64 * nblocks, nonce, counter, key);
}

static void bench_stream(const char *name, stream_fn f)
{
    static uint8_t buf[16384];
    uint8_t key[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1);
    const size_t nb = sizeof buf / 64, iters = 2048; /* 32 MB per repetition */
    double t[9];
    uint64_t ctr = 0;
    for (int k = 0; k < 9; k++) {
        double t0 = cpu_now();
        for (size_t i = 0; i < iters; i++, ctr += nb) f(buf, nb, key, ctr);
        t[k] = cpu_now() - t0;
    }
    double best, med;
    best_median(t, 9, &best, &med);
    double bytes = (double)sizeof buf * (double)iters;
    printf("%-40s %10s %12.2f %12.2f %12.3f\n", name, "16384 B", bytes / best * 1e-9, bytes / med * 1e-9,
           med * 1e3);
}

int main(void)
{
    if (sodium_init() < 0) return 1;
    printf("rng noise and keystream (thread CPU time; ChaCha20 implementation: %s)\n", dpfl_chacha20_impl());
    printf("%-40s %10s %12s %12s %12s\n", "noise (ns/parameter)", "n", "best", "median", "median ms");
    for (int th = 1; th <= 2; th++) {
        bench_noise(535818, th);
        bench_noise(1u << 20, th);
    }
    printf("%-40s %10s %12s %12s %12s\n", "ChaCha20 keystream (GB/s)", "buffer", "best", "median", "median ms");
    char name[64];
    snprintf(name, sizeof name, "dpfl_chacha20_keystream (%s)", dpfl_chacha20_impl());
    bench_stream(name, dpfl_chacha20_keystream);
    bench_stream("libsodium crypto_stream_chacha20_xor_ic", sodium_stream);
    return 0;
}
