/* Group normalization (Wu & He, "Group Normalization", ECCV 2018, eq. 1-3): each example's channels are split into
 * G groups of C/G channels, and every group is standardized with its own mean and variance, then scaled and
 * shifted per channel:  y = (x - mu_bg) / sqrt(var_bg + eps) * gamma_c + beta_c  (eps = 1e-5, as PyTorch).
 * LayerNorm is the case G = 1.  The statistics are those of ONE example, never of the batch: an example's output
 * and gradient depend on no other example, which is what DP-SGD's per-example clipping needs (BatchNorm mixes
 * examples and is refused; see model.c).
 *
 * Backward, with xhat = (x - mu) rstd and dxhat = dy gamma_c over the N = (C/G) S values of a group:
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dgamma_c = sum_s dy xhat,  dbeta_c = sum_s dy.
 * The parameter gradients are formed per example (2C numbers), so the batch gradient is their sum in example
 * order (the same bits for any number of threads) and DP-SGD reads them directly. */
#include "layers.h"

#include <math.h>

#define GN_EPS 1e-5

static inline size_t plane(int cnhw, int b, int c, int B, int C, int S)
{
    return (cnhw ? (size_t)c * B + b : (size_t)b * C + c) * (size_t)S;
}

/* Mean and 1/sqrt(var + eps) of channels [c0, c0 + cg) over the examples [b0, b1) (one example: b1 = b0 + 1),
 * in double, two passes. */
static void moments(double *mu, double *rstd, const float *x, int b0, int b1, int c0, int cg, int B, int C, int S,
                    int cnhw)
{
    double s = 0.0, n = (double)(b1 - b0) * cg * S;
    for (int b = b0; b < b1; b++)
        for (int c = c0; c < c0 + cg; c++) {
            const float *p = x + plane(cnhw, b, c, B, C, S);
            for (int i = 0; i < S; i++) s += p[i];
        }
    double m = s / n, v = 0.0;
    for (int b = b0; b < b1; b++)
        for (int c = c0; c < c0 + cg; c++) {
            const float *p = x + plane(cnhw, b, c, B, C, S);
            for (int i = 0; i < S; i++) v += ((double)p[i] - m) * ((double)p[i] - m);
        }
    *mu = m;
    *rstd = 1.0 / sqrt(v / n + GN_EPS);
}

void dpfl_nn_groupnorm_forward(float *out, float *stats, const float *inp, const float *w, int B, int C, int S, int G,
                               int cnhw, int64_t lo, int64_t hi)
{
    const int cg = C / G;
    const float *gamma = w, *beta = w + C;
    for (int64_t t = lo; t < hi; t++) {
        const int b = (int)(t / G), g = (int)(t % G);
        double mu, rstd;
        moments(&mu, &rstd, inp, b, b + 1, g * cg, cg, B, C, S, cnhw);
        stats[2 * t] = (float)mu, stats[2 * t + 1] = (float)rstd;
        const float fm = (float)mu, fr = (float)rstd;
        for (int c = g * cg; c < (g + 1) * cg; c++) {
            const size_t o = plane(cnhw, b, c, B, C, S);
            const float a = fr * gamma[c], sh = beta[c] - fm * a;
            for (int i = 0; i < S; i++) out[o + i] = inp[o + i] * a + sh;
        }
    }
}

void dpfl_nn_groupnorm_backward(float *dinp, float *ps, const float *dout, const float *inp, const float *w,
                                const float *stats, int B, int C, int S, int G, int cnhw, int64_t lo, int64_t hi)
{
    const int cg = C / G;
    const float *gamma = w;
    for (int64_t t = lo; t < hi; t++) {
        const int b = (int)(t / G), g = (int)(t % G);
        const float mu = stats[2 * t], rstd = stats[2 * t + 1];
        float *pg = ps + (size_t)b * 2 * C;
        double sd = 0.0, sdx = 0.0; /* sums of dxhat and dxhat * xhat over the group */
        for (int c = g * cg; c < (g + 1) * cg; c++) {
            const size_t o = plane(cnhw, b, c, B, C, S);
            double dg = 0.0, db = 0.0;
            for (int i = 0; i < S; i++) {
                const double xh = ((double)inp[o + i] - mu) * rstd, dy = dout[o + i];
                dg += dy * xh, db += dy;
            }
            pg[c] = (float)dg, pg[C + c] = (float)db;
            sd += db * gamma[c], sdx += dg * gamma[c];
        }
        if (!dinp) continue;
        const double n = (double)cg * S, md = sd / n, mdx = sdx / n;
        for (int c = g * cg; c < (g + 1) * cg; c++) {
            const size_t o = plane(cnhw, b, c, B, C, S);
            for (int i = 0; i < S; i++) {
                const double xh = ((double)inp[o + i] - mu) * rstd;
                dinp[o + i] = (float)(rstd * ((double)dout[o + i] * gamma[c] - md - xh * mdx));
            }
        }
    }
}
