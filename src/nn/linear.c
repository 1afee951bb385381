/* Linear (fully connected) layer: y = x W^T + b with W stored (OC, C) as in PyTorch, so saved models and
 * initialisation match the usual conventions.  All heavy work is SGEMM over the batch (gemm.c: dpfl's AVX-512
 * kernels or OpenBLAS, cut into fixed blocks on the workspace's threads). */
#include "layers.h"

#include <string.h>

/* out (B, OC) = inp (B, C) @ w^T (C, OC) + bias (OC), then max(0, .) if relu */
void dpfl_nn_linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int C, int OC,
                            int relu, dpfl_par *par)
{
    dpfl_nn_gemm(par, 0, 1, B, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC, bias, relu);
}

/* dinp (B, C) = dout (B, OC) @ w (OC, C), first, from w as it is on entry;  then dw (OC, C) = dout^T @ inp and
 * dbias (OC) = sum_b dout_b, or with beta = 1: dw += alpha dout^T @ inp, dbias += alpha sum_b dout_b (dw may then
 * be w itself: an SGD step fused into the backward pass). */
void dpfl_nn_linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, int B, int C, int OC, float alpha, float beta, dpfl_par *par)
{
    DPFL_ASSERT(beta == 0.0f ? alpha == 1.0f : beta == 1.0f);
    if (dinp) dpfl_nn_gemm(par, 0, 0, B, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C, NULL, 0);
    if (dw) {
        dpfl_nn_gemm(par, 1, 0, OC, C, B, alpha, dout, OC, inp, C, beta, dw, C, NULL, 0);
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
