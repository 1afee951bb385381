/* The Linear layers' GEMMs on one thread: dpfl's AVX-512 kernels (src/nn/gemm_avx512.c) against OpenBLAS's SGEMM
 * held to one thread (as dpfl runs it), GFLOP/s, on the shapes of the layers the benchmarks and papers train:
 * forward NT (batch x out x in), input gradient NN (batch x in x out) and weight gradient TN (out x in x batch)
 * of mlp:784-512-256-10 at batch 16 and 64 and of Geyer's mlp:784-100-10 at batch 10.  Thread CPU time, best and
 * median of REPS repetitions of at least 20 ms each.  Without AVX-512 (or with DPFL_PORTABLE=1) only OpenBLAS. */
#include "core/cpu.h"
#include "dpfl/core.h"
#include "nn/layers.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
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

#define REPS 9

enum { NT, NN, TN };

static void gemm(int kind, int own, int M, int N, int K, const float *A, const float *B, float *C, const float *bias)
{
    /* the operands as the layer stores them: A (M, K) or (K, M) for TN; B (N, K) for NT, (K, N) otherwise */
    const int lda = kind == TN ? M : K, ldb = kind == NT ? K : N;
#if DPFL_KERNELS_AVX512
    if (own) {
        if (kind == NT) dpfl_nn_sgemm_nt_avx512(M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, bias, 1);
        else if (kind == NN) dpfl_nn_sgemm_nn_avx512(M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
        else dpfl_nn_sgemm_tn_avx512(M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, N); /* the fused step: beta = 1 */
        return;
    }
#else
    (void)own, (void)bias;
#endif
    cblas_sgemm(CblasRowMajor, kind == TN ? CblasTrans : CblasNoTrans, kind == NT ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, lda, B, ldb, kind == TN ? 1.0f : 0.0f, C, N);
}

static void rate(int kind, int own, int M, int N, int K, const float *A, const float *B, float *C, const float *bias,
                 double *best, double *med)
{
    double g[REPS];
    for (int r = 0; r < REPS; r++) {
        long it = 0;
        const double t0 = cpu_now();
        double t;
        do {
            for (int q = 0; q < 10; q++) gemm(kind, own, M, N, K, A, B, C, bias);
            it += 10;
        } while ((t = cpu_now() - t0) < 0.02);
        g[r] = 2.0 * M * N * K * (double)it / t * 1e-9;
    }
    qsort(g, REPS, sizeof *g, cmp_double);
    *best = g[REPS - 1], *med = g[REPS / 2];
}

int main(void)
{
    static const struct {
        const char *layer;
        int batch, in, out;
    } layers[] = {
        {"mlp 784->512", 64, 784, 512}, {"mlp 512->256", 64, 512, 256}, {"mlp 256->10", 64, 256, 10},
        {"mlp 784->512", 16, 784, 512}, {"mlp 512->256", 16, 512, 256}, {"geyer 784->100", 10, 784, 100},
        {"geyer 100->10", 10, 100, 10},
    };
    openblas_set_num_threads(1);
    const int own = dpfl_cpu_avx512();
    const size_t cap = 64 * 784 + 512 * 784;
    float *A = malloc(cap * sizeof *A), *B = malloc(cap * sizeof *B), *C = malloc(cap * sizeof *C),
          *bias = malloc(512 * sizeof *bias);
    if (!A || !B || !C || !bias) return 1;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    for (size_t i = 0; i < cap; i++)
        A[i] = (float)dpfl_rng_uniform(&r) - 0.5f, B[i] = (float)dpfl_rng_uniform(&r) - 0.5f, C[i] = 0.0f;
    for (int i = 0; i < 512; i++) bias[i] = 0.01f;
    printf("Linear-layer GEMMs, one thread, GFLOP/s best (median) of %d: dpfl's AVX-512 kernels %s\n", REPS,
           own ? "against OpenBLAS" : "not in use here (no AVX-512 or DPFL_PORTABLE=1): OpenBLAS only");
    printf("%-16s %5s %-4s %16s %18s\n", "layer", "batch", "gemm", own ? "dpfl" : "", "OpenBLAS");
    static const char *names[] = {"NT", "NN", "TN"};
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++)
        for (int kind = NT; kind <= TN; kind++) {
            const int b = layers[l].batch, in = layers[l].in, out = layers[l].out;
            /* NT: out (b, out) = inp (b, in) w^T;  NN: din (b, in) = dout (b, out) w (out, in);
             * TN: w (out, in) += dout^T (out, b) inp (b, in) */
            const int M = kind == NT ? b : kind == NN ? b : out, N = kind == NT ? out : in,
                      K = kind == NT ? in : kind == NN ? out : b;
            double ob = 0, om = 0, bb, bm;
            if (own) rate(kind, 1, M, N, K, A, B, C, bias, &ob, &om);
            rate(kind, 0, M, N, K, A, B, C, bias, &bb, &bm);
            char col[40] = "";
            if (own) snprintf(col, sizeof col, "%6.1f (%6.1f)", ob, om);
            printf("%-16s %5d %-4s %16s %8.1f (%6.1f)\n", layers[l].layer, b, names[kind], col, bb, bm);
        }
    free(A), free(B), free(C), free(bias);
    return 0;
}
