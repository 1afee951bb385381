/* Conv2d by im2col + SGEMM (gemm.c), batched over examples.
 *
 * For a chunk of nb examples the im2col matrix col (K, nb*T) has one row per (c, ki, kj) (K = C*k*k) and one
 * column per (example, output position) (T = OH*OW).  The output is written CNHW, (OC, B*T), so the whole
 * chunk is one GEMM  out (OC, nb*T) = w (OC, K) @ col  with large N, and the weight gradient is one GEMM with a
 * long reduction  dw (OC, K) += dout (OC, nb*T) @ col^T.  Chunking bounds the col buffer so it stays in L2/L3
 * instead of streaming K*B*T floats through memory (42 MB for cnn-mnist's second conv at batch 64). */
#include "layers.h"
#include "core/parallel.h"

#include <string.h>

size_t dpfl_nn_conv2d_scratch(const dpfl_conv_geom *g, int nb)
{
    return (size_t)g->C * g->k * g->k * (size_t)nb * g->OH * g->OW;
}

/* Output columns [lo, hi) of a row for kernel offset kj have input column ox*stride + kj - pad in [0, W). */
static void valid_range(const dpfl_conv_geom *g, int kj, int *lo, int *hi)
{
    int a = 0, b = g->OW;
    while (a < b && a * g->stride + kj - g->pad < 0) a++;
    while (b > a && (b - 1) * g->stride + kj - g->pad >= g->W) b--;
    *lo = a;
    *hi = b;
}

/* col (K, nb*T): columns [j*T, (j+1)*T) hold example b0 + j, for j in [jlo, jhi) */
static void im2col_range(float *col, const float *inp, const dpfl_conv_geom *g, int b0, int nb, int jlo, int jhi)
{
    const int k = g->k, s = g->stride, OH = g->OH, OW = g->OW, T = OH * OW;
    const size_t ldc = (size_t)nb * T;
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((size_t)(c * k + ki) * k + kj) * ldc;
                int lo, hi;
                valid_range(g, kj, &lo, &hi);
                for (int b = jlo; b < jhi; b++) {
                    const float *src = inp + (size_t)c * g->cs + (size_t)(b0 + b) * g->bs;
                    float *dst = row + (size_t)b * T;
                    for (int oy = 0; oy < OH; oy++) {
                        int iy = oy * s + ki - g->pad;
                        float *restrict d = dst + oy * OW;
                        if (iy < 0 || iy >= g->H) {
                            memset(d, 0, OW * sizeof *d);
                            continue;
                        }
                        const float *restrict sr = src + (size_t)iy * g->W + kj - g->pad;
                        for (int ox = 0; ox < lo; ox++) d[ox] = 0.0f;
                        if (s == 1) /* rows are short (OW floats): an inline loop beats memcpy's call */
                            for (int ox = lo; ox < hi; ox++) d[ox] = sr[ox];
                        else
                            for (int ox = lo; ox < hi; ox++) d[ox] = sr[ox * s];
                        for (int ox = hi; ox < OW; ox++) d[ox] = 0.0f;
                    }
                }
            }
}

typedef struct {
    float *col, *dinp, *out;
    const float *inp, *cdata, *bias;
    const dpfl_conv_geom *g;
    int b0, nb, relu;
    size_t n, ld;
} conv_job;

static void im2col_job(void *ctx, int64_t lo, int64_t hi)
{
    conv_job *j = ctx;
    im2col_range(j->col, j->inp, j->g, j->b0, j->nb, (int)lo, (int)hi);
}

/* col (K, nb*T) from examples [b0, b0+nb) of inp */
static void im2col(float *col, const float *inp, const dpfl_conv_geom *g, int b0, int nb, dpfl_par *par)
{
    conv_job j = {.col = col, .inp = inp, .g = g, .b0 = b0, .nb = nb};
    dpfl_par_for(par, nb, im2col_job, &j);
}

/* dinp[examples b0..b0+nb) += col2im(col), for input channels [clo, chi) */
static void col2im_range(float *dinp, const float *col, const dpfl_conv_geom *g, int b0, int nb, int clo, int chi)
{
    const int k = g->k, s = g->stride, OH = g->OH, OW = g->OW, T = OH * OW;
    const size_t ldc = (size_t)nb * T;
    for (int c = clo; c < chi; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + ((size_t)(c * k + ki) * k + kj) * ldc;
                int lo, hi;
                valid_range(g, kj, &lo, &hi);
                for (int b = 0; b < nb; b++) {
                    float *dst = dinp + (size_t)c * g->cs + (size_t)(b0 + b) * g->bs;
                    const float *src = row + (size_t)b * T;
                    for (int oy = 0; oy < OH; oy++) {
                        int iy = oy * s + ki - g->pad;
                        if (iy < 0 || iy >= g->H) continue;
                        float *restrict dr = dst + (size_t)iy * g->W + kj - g->pad;
                        const float *restrict sr = src + oy * OW;
                        if (s == 1)
                            for (int ox = lo; ox < hi; ox++) dr[ox] += sr[ox];
                        else
                            for (int ox = lo; ox < hi; ox++) dr[ox * s] += sr[ox];
                    }
                }
            }
}

static void col2im_job(void *ctx, int64_t lo, int64_t hi)
{
    conv_job *j = ctx;
    col2im_range(j->dinp, j->cdata, j->g, j->b0, j->nb, (int)lo, (int)hi);
}

/* Zero example range of dinp for channels [lo, hi), then add col2im: each channel is one thread's. */
static void col2im(float *dinp, const float *col, const dpfl_conv_geom *g, int b0, int nb, dpfl_par *par)
{
    conv_job j = {.dinp = dinp, .cdata = col, .g = g, .b0 = b0, .nb = nb};
    dpfl_par_for(par, g->C, col2im_job, &j);
}

/* Sum of n floats: 16 float lanes (vectorizable without reassociation flags), combined in double. */
static double row_sum(const float *r, size_t n)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += r[i + j];
    double s = 0.0;
    for (int j = 0; j < 16; j++) s += acc[j];
    for (; i < n; i++) s += r[i];
    return s;
}

/* out CNHW (OC, B, T) = w (OC, K) @ im2col(inp) + bias, optionally followed by ReLU */
static void bias_relu_job(void *ctx, int64_t lo, int64_t hi)
{
    conv_job *j = ctx;
    for (int64_t oc = lo; oc < hi; oc++) {
        float *r = j->out + oc * j->ld, bv = j->bias ? j->bias[oc] : 0.0f;
        if (j->relu)
            for (size_t i = 0; i < j->n; i++) {
                float v = r[i] + bv;
                r[i] = v > 0.0f ? v : 0.0f;
            }
        else
            for (size_t i = 0; i < j->n; i++) r[i] += bv;
    }
}

void dpfl_nn_conv2d_forward(float *out, const float *inp, const float *w, const float *bias,
                            const dpfl_conv_geom *g, int B, int chunk, float *col, int relu, dpfl_par *par)
{
    const int K = g->C * g->k * g->k, T = g->OH * g->OW;
    const size_t ldo = (size_t)B * T;
    for (int b0 = 0; b0 < B; b0 += chunk) {
        int nb = B - b0 < chunk ? B - b0 : chunk;
        im2col(col, inp, g, b0, nb, par);
        float *o = out + (size_t)b0 * T;
        dpfl_nn_gemm(par, 0, 0, g->OC, nb * T, K, 1.0f, w, K, col, nb * T, 0.0f, o, (int)ldo, NULL, 0);
        if (bias || relu) {
            conv_job j = {.out = o, .bias = bias, .relu = relu, .n = (size_t)nb * T, .ld = ldo};
            dpfl_par_for(par, g->OC, bias_relu_job, &j);
        }
    }
}

static void zero_job(void *ctx, int64_t lo, int64_t hi)
{
    conv_job *j = ctx;
    memset(j->dinp + lo * j->ld, 0, (size_t)(hi - lo) * j->ld * sizeof(float));
}

void dpfl_nn_conv2d_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, const dpfl_conv_geom *g, int B, int chunk, float *col, dpfl_par *par)
{
    const int K = g->C * g->k * g->k, T = g->OH * g->OW;
    const size_t ldo = (size_t)B * T;
    if (dbias && dw)
        for (int oc = 0; oc < g->OC; oc++) dbias[oc] = (float)row_sum(dout + oc * ldo, ldo);
    if (dinp) {
        conv_job j = {.dinp = dinp, .ld = (size_t)g->H * g->W};
        dpfl_par_for(par, (int64_t)B * g->C, zero_job, &j);
    }
    for (int b0 = 0; b0 < B; b0 += chunk) {
        int nb = B - b0 < chunk ? B - b0 : chunk;
        const float *d = dout + (size_t)b0 * T;
        if (dw) {
            im2col(col, inp, g, b0, nb, par);
            dpfl_nn_gemm(par, 0, 1, g->OC, K, nb * T, 1.0f, d, (int)ldo, col, nb * T, b0 ? 1.0f : 0.0f, dw, K,
                         NULL, 0);
        }
        if (dinp) {
            dpfl_nn_gemm(par, 1, 0, K, nb * T, g->OC, 1.0f, w, K, d, (int)ldo, 0.0f, col, nb * T, NULL, 0);
            col2im(dinp, col, g, b0, nb, par);
        }
    }
}


/* ps (B, OC*K [+OC]): example b's gradient  dout_b (OC, T) @ col_b^T (T, K)  [, row sums of dout_b] */
void dpfl_nn_conv2d_persample(float *ps, double *sq, const float *dout, const float *inp, const dpfl_conv_geom *g,
                              int B, int bias, int chunk, float *col, dpfl_par *par)
{
    const int K = g->C * g->k * g->k, T = g->OH * g->OW;
    const size_t ldo = (size_t)B * T, np = (size_t)g->OC * K + (bias ? g->OC : 0);
    for (int b0 = 0; b0 < B; b0 += chunk) {
        int nb = B - b0 < chunk ? B - b0 : chunk;
        im2col(col, inp, g, b0, nb, par);
        for (int j = 0; j < nb; j++) {
            int b = b0 + j;
            const float *d = dout + (size_t)b * T;
            float *p = ps + (size_t)b * np;
            dpfl_nn_gemm(NULL, 0, 1, g->OC, K, T, 1.0f, d, (int)ldo, col + (size_t)j * T, nb * T, 0.0f, p, K, NULL,
                         0);
            if (bias)
                for (int oc = 0; oc < g->OC; oc++) {
                    const float *r = d + oc * ldo;
                    float s = 0.0f;
                    for (int t = 0; t < T; t++) s += r[t];
                    p[(size_t)g->OC * K + oc] = s;
                }
            sq[b] += dpfl_nn_sumsq(p, np);
        }
    }
}

/* ||dout_b col_b^T||_F^2 = sum_{t,t'} (col_b^T col_b)[t,t'] (dout_b^T dout_b)[t,t'] */
void dpfl_nn_conv2d_ghost_sqnorms(double *sq, const float *dout, const float *inp, const dpfl_conv_geom *g, int B,
                                  int bias, int chunk, float *col, float *gram, dpfl_par *par)
{
    const int K = g->C * g->k * g->k, T = g->OH * g->OW;
    const size_t ldo = (size_t)B * T;
    float *ga = gram, *gd = gram + (size_t)T * T;
    for (int b0 = 0; b0 < B; b0 += chunk) {
        int nb = B - b0 < chunk ? B - b0 : chunk;
        im2col(col, inp, g, b0, nb, par);
        for (int j = 0; j < nb; j++) {
            int b = b0 + j;
            const float *d = dout + (size_t)b * T, *a = col + (size_t)j * T;
            dpfl_nn_gemm(NULL, 1, 0, T, T, K, 1.0f, a, nb * T, a, nb * T, 0.0f, ga, T, NULL, 0);
            dpfl_nn_gemm(NULL, 1, 0, T, T, g->OC, 1.0f, d, (int)ldo, d, (int)ldo, 0.0f, gd, T, NULL, 0);
            double s = 0.0;
            for (size_t i = 0; i < (size_t)T * T; i++) s += (double)ga[i] * gd[i];
            if (bias)
                for (int oc = 0; oc < g->OC; oc++) {
                    const float *r = d + oc * ldo;
                    double rs = 0.0;
                    for (int t = 0; t < T; t++) rs += r[t];
                    s += rs * rs;
                }
            sq[b] += s;
        }
    }
}

/* The direct kernels' variant that layer l's plan chose (conv_direct.c, compiled for AVX-512 and for AVX2) */
void dpfl_nn_conv2d_direct_forward(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g, dpfl_par *par,
                                   float *out, const float *inp, const float *w, const float *bias, int relu)
{
    if (dc->geom[l].isa == 1) dpfl_nn_conv2d_direct_forward_avx512(dc, l, g, par, out, inp, w, bias, relu);
    else dpfl_nn_conv2d_direct_forward_avx2(dc, l, g, par, out, inp, w, bias, relu);
}

void dpfl_nn_conv2d_direct_backward(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g, dpfl_par *par,
                                    float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                                    float *ps, double *sq)
{
    if (dc->geom[l].isa == 1) dpfl_nn_conv2d_direct_backward_avx512(dc, l, g, par, dinp, dw, dout, inp, w, ps, sq);
    else dpfl_nn_conv2d_direct_backward_avx2(dc, l, g, par, dinp, dw, dout, inp, w, ps, sq);
}
