/* The layers' SGEMM: C (M, N) = alpha op(A) op(B) + beta C, row-major, for the Linear layers and the im2col
 * convolutions.
 *
 * A GEMM is cut into GEMM_BLOCKS column (or row) blocks, each computed by one thread of the workspace's pool: with
 * dpfl's own AVX-512 kernels (gemm_avx512.c) where dpfl_cpu_avx512() allows, otherwise with single-threaded
 * OpenBLAS SGEMM (OpenBLAS runs single-threaded inside dpfl: its idle threads spin and would steal the cores from
 * the pool's convolution and element-wise work).  The blocks depend only on the shape, so every output element
 * comes from the same call whatever the number of threads (and the kernels' results do not depend on the blocks
 * at all). */
#include "layers.h"

#include <cblas.h>

#define GEMM_BLOCKS 4

typedef struct {
    int ta, tb;
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
        const float *As = g->ta ? g->A + r0 : g->A + (size_t)r0 * g->lda;
        const float *Bs = g->tb ? g->B + (size_t)c0 * g->ldb : g->B + c0;
        float *Cs = g->C + (size_t)r0 * g->ldc + c0;
#if DPFL_KERNELS_AVX512
        if (g->avx512) {
            if (g->tb)
                dpfl_nn_sgemm_nt_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc,
                                        g->bias ? g->bias + c0 : NULL, g->relu);
            else if (!g->ta)
                dpfl_nn_sgemm_nn_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
            else
                dpfl_nn_sgemm_tn_avx512(m, n, g->K, g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
            continue;
        }
#endif
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, m, n, g->K,
                    g->alpha, As, g->lda, Bs, g->ldb, g->beta, Cs, g->ldc);
        if (g->bias || g->relu)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    float v = Cs[(size_t)i * g->ldc + j] + (g->bias ? g->bias[c0 + j] : 0.0f);
                    Cs[(size_t)i * g->ldc + j] = g->relu && v < 0.0f ? 0.0f : v;
                }
    }
}

void dpfl_nn_gemm(dpfl_par *par, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias, int relu)
{
    /* the AVX-512 kernels cover three shapes (A^T B^T is not one of them); bias and ReLU only with B^T */
    DPFL_ASSERT(!(trans_a && trans_b) && (trans_b || (!bias && !relu)));
    if (M <= 0 || N <= 0) return;
    gemm_job g = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .A = A,
                  .B = B, .C = C, .alpha = alpha, .beta = beta, .bias = bias, .relu = relu,
                  .avx512 = dpfl_cpu_avx512()};
    /* A Linear layer's weight matrix w (OC, C) is cut the same way by the forward GEMM (A B^T: C's columns = w's
     * rows) and the weight-gradient GEMM (A^T B: C's rows = w's rows), so with the fused SGD step each thread
     * updates the rows of w it reads in the next forward pass and they stay in its core's cache (cut along C's
     * columns instead, half of w crossed between the cores twice a step).  A B: along the longer side. */
    g.split_n = trans_b ? 1 : trans_a ? 0 : N >= M;
    int d = g.split_n ? N : M;
    g.blk = ((d + GEMM_BLOCKS - 1) / GEMM_BLOCKS + 15) & ~15;
    int nblk = (d + g.blk - 1) / g.blk;
    /* small GEMMs are not worth waking the pool for */
    dpfl_par_for((double)M * N * K >= 1e6 ? par : NULL, nblk, gemm_block_job, &g);
}
