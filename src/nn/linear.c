/* Linear (fully connected) layer: y = x W^T + b with W stored (OC, C) as in PyTorch, so saved models and
 * initialisation match the usual conventions.  All heavy work is one SGEMM over the batch. */
#include "layers.h"

#include <cblas.h>
#include <string.h>

/* out (B, OC) = inp (B, C) @ w^T (C, OC) + bias (OC), then max(0, .) if relu */
void dpfl_nn_linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int C, int OC,
                            int relu)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
    if (!bias && !relu) return;
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * OC;
        if (bias)
            for (int j = 0; j < OC; j++) o[j] += bias[j];
        if (relu)
            for (int j = 0; j < OC; j++) o[j] = o[j] > 0.0f ? o[j] : 0.0f;
    }
}

/* dinp (B, C) = dout (B, OC) @ w (OC, C);  dw (OC, C) = dout^T @ inp;  dbias (OC) = sum_b dout_b */
void dpfl_nn_linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, int B, int C, int OC)
{
    if (dw) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B, 1.0f, dout, OC, inp, C, 0.0f, dw, C);
        if (dbias) {
            memset(dbias, 0, (size_t)OC * sizeof *dbias);
            for (int b = 0; b < B; b++) {
                const float *d = dout + (size_t)b * OC;
                for (int o = 0; o < OC; o++) dbias[o] += d[o];
            }
        }
    }
    if (dinp) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
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
