/* Linear (fully connected) layer: y = x W^T + b with W stored (OC, C) as in PyTorch, so saved models and
 * initialisation match the usual conventions.  All heavy work is SGEMM over the batch.
 *
 * A GEMM is cut into GEMM_BLOCKS column (or row) blocks, each computed by one thread of the workspace's pool:
 * with dpfl's own AVX-512 kernels (gemm_avx512.c) where dpfl_cpu_avx512() allows, otherwise with single-threaded
 * OpenBLAS SGEMM (OpenBLAS runs single-threaded inside dpfl: its idle threads spin and would steal the cores from
 * the pool's convolution and element-wise work).  The blocks depend only on the shape, so every output element
 * comes from the same call whatever the number of threads. */
#include "layers.h"

#include <cblas.h>
#include <string.h>

#define GEMM_BLOCKS 4

typedef struct {
    enum CBLAS_TRANSPOSE ta, tb;
    int M, N, K, lda, ldb, ldc, split_n, blk;
    float alpha, beta;
    const float *A, *B, *bias;
    float *C;
    int relu, avx512;
} gemm_job;

static void gemm_block_job(void *ctx, int64_t lo, int64_t hi)
{
    const gemm_job *g = ctx;
    for (int64_t t = lo; t < hi; t++) {
        int d = g->split_n ? g->N : g->M, a = (int)t * g->blk, e = a + g->blk < d ? a + g->blk : d;
        if (a >= e) continue;
        /* the block: rows [r0, r0 + m) and columns [c0, c0 + n) of C */
        int r0 = g->split_n ? 0 : a, m = g->split_n ? g->M : e - a, c0 = g->split_n ? a : 0, n = g->split_n ? e - a : g->N;
        const float *As = g->ta == CblasNoTrans ? g->A + (size_t)r0 * g->lda : g->A + r0;
        const float *Bs = g->tb == CblasNoTrans ? g->B + c0 : g->B + (size_t)c0 * g->ldb;
        float *Cs = g->C + (size_t)r0 * g->ldc + c0;
#if DPFL_KERNELS_AVX512
        if (g->avx512) {
            if (g->tb == CblasTrans)
                dpfl_nn_sgemm_nt_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc,
                                        g->bias ? g->bias + c0 : NULL, g->relu);
            else if (g->ta == CblasNoTrans)
                dpfl_nn_sgemm_nn_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
            else
                dpfl_nn_sgemm_tn_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
            continue;
        }
#endif
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
        if (g->bias || g->relu)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    float v = Cs[(size_t)i * g->ldc + j] + (g->bias ? g->bias[c0 + j] : 0.0f);
                    Cs[(size_t)i * g->ldc + j] = g->relu && v < 0.0f ? 0.0f : v;
                }
    }
}

/* C (M, N) = alpha op(A) op(B) + beta C [+ bias per column, ReLU], split along the longer of M and N */
static void par_gemm(dpfl_par *par, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                     float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                     const float *bias, int relu)
{
    gemm_job g = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .A = A, .B = B,
                  .C = C, .alpha = alpha, .beta = beta, .bias = bias, .relu = relu, .avx512 = dpfl_cpu_avx512()};
    /* The weight matrix w (OC, C) is cut the same way by the forward GEMM (NT: C's columns = w's rows) and the
     * weight-gradient GEMM (TN: C's rows = w's rows), so with the fused SGD step each thread updates the rows of w
     * it reads in the next forward pass and they stay in its core's cache (cut along C's columns instead, half of
     * w crossed between the cores twice a step). */
    g.split_n = tb == CblasTrans ? 1 : ta == CblasTrans ? 0 : N >= M;
    /* the AVX-512 kernels cover the three shapes of this file (A^T B^T is not one of them) */
    DPFL_ASSERT(!(ta == CblasTrans && tb == CblasTrans) && (tb == CblasTrans || (!bias && !relu)));
    int d = g.split_n ? N : M;
    g.blk = ((d + GEMM_BLOCKS - 1) / GEMM_BLOCKS + 15) & ~15;
    int nblk = (d + g.blk - 1) / g.blk;
    /* small GEMMs are not worth waking the pool for */
    dpfl_par_for((double)M * N * K >= 1e6 ? par : NULL, nblk, gemm_block_job, &g);
}

/* out (B, OC) = inp (B, C) @ w^T (C, OC) + bias (OC), then max(0, .) if relu */
void dpfl_nn_linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int C, int OC,
                            int relu, dpfl_par *par)
{
    par_gemm(par, CblasNoTrans, CblasTrans, B, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC, bias, relu);
}

/* dinp (B, C) = dout (B, OC) @ w (OC, C), first, from w as it is on entry;  then dw (OC, C) = dout^T @ inp and
 * dbias (OC) = sum_b dout_b, or with beta = 1: dw += alpha dout^T @ inp, dbias += alpha sum_b dout_b (dw may then
 * be w itself: an SGD step fused into the backward pass). */
void dpfl_nn_linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, int B, int C, int OC, float alpha, float beta, dpfl_par *par)
{
    DPFL_ASSERT(beta == 0.0f ? alpha == 1.0f : beta == 1.0f);
    if (dinp) par_gemm(par, CblasNoTrans, CblasNoTrans, B, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C, NULL, 0);
    if (dw) {
        par_gemm(par, CblasTrans, CblasNoTrans, OC, C, B, alpha, dout, OC, inp, C, beta, dw, C, NULL, 0);
        if (dbias && beta == 0.0f) {
            memset(dbias, 0, (size_t)OC * sizeof *dbias);
            for (int b = 0; b < B; b++) {
                const float *d = dout + (size_t)b * OC;
                for (int o = 0; o < OC; o++) dbias[o] += d[o];
            }
        } else if (dbias) { /* the same sums as above (b ascending from 0), row by row, 256 columns at a time */
            for (int o0 = 0; o0 < OC; o0 += 256) {
                const int no = OC - o0 < 256 ? OC - o0 : 256;
                float sum[256] = {0};
                for (int b = 0; b < B; b++) {
                    const float *d = dout + (size_t)b * OC + o0;
                    for (int o = 0; o < no; o++) sum[o] += d[o];
                }
                for (int o = 0; o < no; o++) dbias[o0 + o] += alpha * sum[o];
            }
        }
    }
}


/* Example b's weight gradient is the outer product dout_b inp_b^T, whose squared Frobenius norm factorizes:
 * ||dout_b||^2 ||inp_b||^2.  The bias gradient dout_b adds ||dout_b||^2. */
void dpfl_nn_linear_sqnorms(double *sq, const float *dout, const float *inp, int B, int C, int OC, int bias)
{
    for (int b = 0; b < B; b++) {
        double d2 = dpfl_nn_sumsq(dout + (size_t)b * OC, OC);
        double a2 = dpfl_nn_sumsq(inp + (size_t)b * C, C);
        sq[b] += d2 * (a2 + (bias ? 1.0 : 0.0));
    }
}
