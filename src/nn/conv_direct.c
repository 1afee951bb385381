/* Direct Conv2d for stride 1 (any kernel size, padding and channel counts) with AVX-512 register tiles.
 *
 * im2col + SGEMM spends about half of cnn-mnist's time outside the GEMMs (building and reading a K x T matrix
 * per example, K = C k^2).  Here the im2col matrix is never formed.  Each example's input is copied once into
 * zero-padded planes of width Wp = W + 2 pad; an output position (y, x) is then the flat index p = y Wp + x, and
 * the input it reads at kernel offset (ki, kj) is simply p + ki Wp + kj.  So 16 consecutive positions are one
 * unaligned vector load, and the whole convolution is a GEMM whose A operand is a shifted view of the planes.
 * Positions with x >= OW ("wrap" columns) are computed and thrown away (Wp / OW extra work: 8% for cnn-mnist).
 *
 *   forward   out[o][p]  = sum_{c,ki,kj} w[o][c][ki][kj] xpad[c][p + ki Wp + kj]            (4 o x 96 p tiles)
 *   input grad dxpad[c][q] = sum_{o,ki,kj} w[o][c][k-1-ki][k-1-kj] dz[o][q + ki Wz + kj]     (same kernel)
 *              with dz = dout zero-padded by k-1 on every side (width Wz = Wp + k - 1): a full correlation
 *   weight grad dw[o][c][ki][kj] = sum_p d[o][p] xpad[c][p + ki Wp + kj]                     (4 o x 6 (c,ki,kj))
 *              with d = dout in the Wp-wide layout, zero in the wrap columns, so they add nothing.
 *
 * Work is split over examples; each example is computed entirely by one thread with a fixed order of
 * operations, and batch weight gradients are summed in fixed groups of DW_GROUP examples and then over groups in
 * order, so results do not depend on the number of threads.  The per-example weight gradients DP-SGD needs
 * (materialized norms) come out of the same pass at no extra cost: the batch gradient is their sum anyway.
 *
 * The Makefile compiles this file twice: with AVX-512 flags (AVX512_FLAGS; its functions end in _avx512) and, as
 * conv_direct_avx2.c, with AVX2 + FMA flags (_avx2: 8-float vectors, 2 o x 48 p tiles, 16 registers).  Nothing
 * here runs unless dpfl_nn_conv_direct_usable() said yes when the workspace was made, which it does only when
 * dpfl_cpu_avx512() or dpfl_cpu_avx2() (core/cpu.h); dpfl_nn_conv_direct_geom chooses the variant (layers.h).
 * Otherwise, and in builds without the kernels, the im2col path is used.  The Winograd kernels are AVX-512 only. */
#include "layers.h"

#include <string.h>

#ifdef DPFL_DIRECT_AVX2 /* conv_direct_avx2.c */
#define DIRECT_FN(name) name##_avx2
#define DIRECT_AVX512 0
#define DIRECT_AVX2 DPFL_AVX2_TARGET
#define DIRECT_ISA 2
#if DPFL_KERNELS_AVX2 && !DPFL_AVX2_TARGET
#error "conv_direct_avx2.c must be compiled with the Makefile's AVX2_FLAGS"
#endif
#else
#define DIRECT_FN(name) name##_avx512
#define DIRECT_AVX512 DPFL_AVX512_TARGET
#define DIRECT_AVX2 0
#define DIRECT_ISA 1
#if DPFL_KERNELS_AVX512 && !DPFL_AVX512_TARGET
#error "conv_direct.c must be compiled with the Makefile's AVX512_FLAGS"
#endif
#endif

#if DIRECT_AVX512 || DIRECT_AVX2
#include <immintrin.h>
#endif

#define DW_GROUP DPFL_NN_DW_GROUP /* examples per partial weight-gradient sum (layers.h) */

static int up16(int n) { return (n + 15) & ~15; }

void DIRECT_FN(dpfl_nn_conv_direct_geom)(const dpfl_layer *L, dpfl_conv_direct *d)
{
    d->isa = DIRECT_ISA;
    d->C = L->in_c, d->OC = L->out_c, d->k = L->k, d->pad = L->pad;
    d->bias = L->bias, d->np = L->nparam;
    d->H = L->in_h, d->W = L->in_w, d->OH = L->out_h, d->OW = L->out_w;
    d->OCp = (d->OC + 3) & ~3, d->Cp = (d->C + 3) & ~3;
    d->Hp = d->H + 2 * d->pad, d->Wp = d->W + 2 * d->pad;
    d->Wz = d->Wp + d->k - 1, d->Hz = d->Hp + d->k - 1;
    d->pf = up16(d->OH * d->Wp);
    d->pz = up16(d->Hp * d->Wz);
    /* a vector that starts at the last position block reads at most 15 + k - 1 floats past the planes */
    d->xpl = (size_t)up16(d->Hp * d->Wp + 16 + d->k);
    d->zpl = (size_t)up16(d->Hz * d->Wz + 16 + d->k);
    size_t fwd = (size_t)d->OCp * d->pf;
    size_t bwd = (size_t)d->OC * d->zpl + (size_t)d->Cp * d->pz + (size_t)d->OCp * d->pf;
    d->thread_floats = fwd > bwd ? fwd : bwd;
    size_t kk = (size_t)d->k * d->k;
    size_t wf = (size_t)d->OCp * d->C * kk, wt = (size_t)d->Cp * d->OC * kk;
    d->weight_floats = wf > wt ? wf : wt;
    d->wino = DIRECT_ISA == 1 && dpfl_nn_wino_usable(d); /* AVX-512 kernels only */
    if (d->wino) { /* its scratch (the larger of the two paths'); U, or the flipped weights and their U */
        size_t a = dpfl_nn_wino_conv_floats(d->C, d->OCp, d->OH, d->OW);
        size_t b = dpfl_nn_wino_conv_floats(d->OC, d->Cp, d->H, d->W);
        size_t c = dpfl_nn_wino_dw_floats(d->C, d->OCp, d->OH, d->OW);
        size_t m = a > b ? a : b;
        if (c > m) m = c;
        if (m > d->thread_floats) d->thread_floats = m;
        size_t uf = 16 * (size_t)d->OCp * d->C, ub = wt + 16 * (size_t)d->Cp * d->OC;
        if (uf > d->weight_floats) d->weight_floats = uf;
        if (ub > d->weight_floats) d->weight_floats = ub;
    }
}

#if DIRECT_AVX512

/* t[i][0..16R) (row stride tld, i < 4) = sum over C channels (plane stride xpl) and k x k offsets of
 * w[i][c][ki][kj] (row stride wo) * x[c][ki Wi + kj + 0..16R). */
static inline __attribute__((always_inline)) void conv_tile(float *t, size_t tld, const float *x, size_t xpl, int C,
                                                            int k, int Wi, const float *w, size_t wo, const int R)
{
    __m512 acc[4][6];
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < R; r++) acc[i][r] = _mm512_setzero_ps();
    const int kk = k * k;
    for (int c = 0; c < C; c++) {
        const float *xc = x + (size_t)c * xpl, *wc = w + (size_t)c * kk;
        for (int ki = 0; ki < k; ki++) {
            const float *xr = xc + (size_t)ki * Wi, *wr = wc + ki * k;
            for (int kj = 0; kj < k; kj++) {
                const __m512 a0 = _mm512_set1_ps(wr[kj]), a1 = _mm512_set1_ps(wr[wo + kj]),
                             a2 = _mm512_set1_ps(wr[2 * wo + kj]), a3 = _mm512_set1_ps(wr[3 * wo + kj]);
                for (int r = 0; r < R; r++) {
                    const __m512 v = _mm512_loadu_ps(xr + kj + 16 * r);
                    acc[0][r] = _mm512_fmadd_ps(a0, v, acc[0][r]);
                    acc[1][r] = _mm512_fmadd_ps(a1, v, acc[1][r]);
                    acc[2][r] = _mm512_fmadd_ps(a2, v, acc[2][r]);
                    acc[3][r] = _mm512_fmadd_ps(a3, v, acc[3][r]);
                }
            }
        }
    }
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < R; r++) _mm512_storeu_ps(t + i * tld + 16 * r, acc[i][r]);
}

/* t (nrow4*4 rows, row stride np) over np positions (a multiple of 16), 96 positions at a time; each position
 * block runs over all row groups so the input window stays in L1.  Compiled separately for k = 1 (the Winograd
 * GEMMs) and k = 3, whose constant kernel loops unroll: with a run-time k the loop control around each 24 FMAs
 * spills registers (measured: k = 1 GEMMs at a third of the FMA rate). */
static inline __attribute__((always_inline)) void conv_rows_k(float *t, int np, const float *x, size_t xpl, int C,
                                                              const int k, int Wi, const float *w, size_t wo,
                                                              int nrow4)
{
    for (int p0 = 0; p0 < np; p0 += 96) {
        int R = (np - p0) / 16;
        if (R > 6) R = 6;
        for (int g = 0; g < nrow4; g++) {
            float *tt = t + (size_t)g * 4 * np + p0;
            const float *ww = w + (size_t)g * 4 * wo;
            switch (R) {
            case 6: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 6); break;
            case 5: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 5); break;
            case 4: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 4); break;
            case 3: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 3); break;
            case 2: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 2); break;
            default: conv_tile(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 1); break;
            }
        }
    }
}

static void conv_rows(float *t, int np, const float *x, size_t xpl, int C, int k, int Wi, const float *w, size_t wo,
                      int nrow4)
{
    if (k == 1) conv_rows_k(t, np, x, xpl, C, 1, Wi, w, wo, nrow4);
    else if (k == 3) conv_rows_k(t, np, x, xpl, C, 3, Wi, w, wo, nrow4);
    else conv_rows_k(t, np, x, xpl, C, k, Wi, w, wo, nrow4);
}

/* res[i][j] = sum_{v < nv} <d[i] (row stride dld), x[j]> over 16-float vectors, i < 4, j < NJ */
static inline __attribute__((always_inline)) void dw_tile(float res[4][6], const float *d, size_t dld,
                                                          const float *const *x, int nv, const int NJ)
{
    __m512 acc[4][6];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm512_setzero_ps();
    for (int v = 0; v < nv; v++) {
        const __m512 d0 = _mm512_loadu_ps(d + 16 * v), d1 = _mm512_loadu_ps(d + dld + 16 * v),
                     d2 = _mm512_loadu_ps(d + 2 * dld + 16 * v), d3 = _mm512_loadu_ps(d + 3 * dld + 16 * v);
        for (int j = 0; j < NJ; j++) {
            const __m512 xv = _mm512_loadu_ps(x[j] + 16 * v);
            acc[0][j] = _mm512_fmadd_ps(d0, xv, acc[0][j]);
            acc[1][j] = _mm512_fmadd_ps(d1, xv, acc[1][j]);
            acc[2][j] = _mm512_fmadd_ps(d2, xv, acc[2][j]);
            acc[3][j] = _mm512_fmadd_ps(d3, xv, acc[3][j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < NJ; j++) res[i][j] = _mm512_reduce_add_ps(acc[i][j]);
}


/* dst[0, total) = src[0, n) followed by zeros (n <= total) */
static inline void copy_pad(float *dst, const float *src, int n, int total)
{
    for (int x = 0; x < total; x += 16) {
        int v = n - x, t = total - x;
        __mmask16 mv = v >= 16 ? 0xFFFF : v > 0 ? (__mmask16)((1u << v) - 1) : 0;
        __mmask16 mt = t >= 16 ? 0xFFFF : (__mmask16)((1u << t) - 1);
        _mm512_mask_storeu_ps(dst + x, mt, _mm512_maskz_loadu_ps(mv, src + x));
    }
}

/* dst[0, n) = src[0, n) + b, then max(0, .) when relu */
static inline void copy_bias(float *dst, const float *src, int n, float b, int relu)
{
    const __m512 bv = _mm512_set1_ps(b), z = _mm512_setzero_ps();
    for (int x = 0; x < n; x += 16) {
        int v = n - x;
        __mmask16 m = v >= 16 ? 0xFFFF : (__mmask16)((1u << v) - 1);
        __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + x), bv);
        if (relu) r = _mm512_max_ps(r, z);
        _mm512_mask_storeu_ps(dst + x, m, r);
    }
}

/* sum of r[0, n), 16 lanes at a time in a fixed order */
static inline float sum_n(const float *r, int n)
{
    __m512 acc = _mm512_setzero_ps();
    for (int p = 0; p < n; p += 16) {
        const int v = n - p;
        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(v >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << v) - 1), r + p));
    }
    return _mm512_reduce_add_ps(acc);
}

#else /* AVX2, or never called (no layer is usable) */

/* rows are short (8-32 floats and a border of 2-4): inline loops the compiler vectorizes beat memcpy's and memset's
 * calls */
static void copy_pad(float *restrict dst, const float *restrict src, int n, int total)
{
    for (int x = 0; x < n; x++) dst[x] = src[x];
    for (int x = n; x < total; x++) dst[x] = 0.0f;
}

static void copy_bias(float *dst, const float *src, int n, float b, int relu)
{
    for (int x = 0; x < n; x++) dst[x] = relu && src[x] + b < 0.0f ? 0.0f : src[x] + b;
}

static float sum_n(const float *r, int n)
{
    float s = 0.0f;
    for (int p = 0; p < n; p++) s += r[p];
    return s;
}

#if DIRECT_AVX2
/* conv_rows and dw_tile_any: conv_direct_avx2.c defines them before it includes this file */
#else
static void conv_rows(float *t, int np, const float *x, size_t xpl, int C, int k, int Wi, const float *w, size_t wo,
                      int nrow4)
{
    (void)t, (void)np, (void)x, (void)xpl, (void)C, (void)k, (void)Wi, (void)w, (void)wo, (void)nrow4;
    DPFL_ASSERT(!"direct conv without its kernels");
}

static void dw_tile_any(float res[4][6], const float *d, size_t dld, const float *const *x, int nv, int NJ)
{
    (void)res, (void)d, (void)dld, (void)x, (void)nv, (void)NJ;
    DPFL_ASSERT(!"direct conv without its kernels");
}
#endif
#endif

#ifndef DPFL_DIRECT_AVX2
void dpfl_nn_direct_rows(float *t, int np, const float *x, size_t xpl, int C, int k, int Wi, const float *w,
                         size_t wo, int nrow4)
{
    conv_rows(t, np, x, xpl, C, k, Wi, w, wo, nrow4);
}
#endif

/* ---------------------------------------------------------------- forward */

typedef struct {
    const dpfl_conv_direct *d;
    const dpfl_conv_geom *g;
    float *out, *xpad, *scratch, *dinp, *dw_part, *ps;
    const float *inp, *w, *bias, *dout;
    const float *U; /* Winograd: transformed weights (forward: of w; backward: of the flipped w) */
    double *sq;
    size_t scratch_per, np; /* floats per thread; layer parameters (weights + bias) */
    int B, relu, nthreads, bias_on, persample;
} direct_job;

/* example b's input (either layout, strides in g) -> xpad planes (C, xpl), zero borders and tails */
static void pad_example(float *xp, const float *inp, const dpfl_conv_geom *g, const dpfl_conv_direct *d, int b)
{
    for (int c = 0; c < d->C; c++) {
        float *pl = xp + (size_t)c * d->xpl;
        const float *src = inp + (size_t)c * g->cs + (size_t)b * g->bs;
        if (d->pad == 0) {
            memcpy(pl, src, (size_t)d->H * d->W * sizeof *pl);
            memset(pl + (size_t)d->H * d->W, 0, (d->xpl - (size_t)d->H * d->W) * sizeof *pl);
            continue;
        }
        /* each row's copy also writes the right border of its row and the left border of the next */
        size_t top = (size_t)d->pad * d->Wp + d->pad;
        memset(pl, 0, top * sizeof *pl);
        for (int y = 0; y < d->H; y++)
            copy_pad(pl + top + (size_t)y * d->Wp, src + (size_t)y * d->W, d->W, d->Wp);
        size_t end = top + (size_t)d->H * d->Wp;
        memset(pl + end, 0, (d->xpl - end) * sizeof *pl);
    }
}

static void forward_job(void *ctx, int64_t tid, int64_t tid_end)
{
    (void)tid_end;
    direct_job *j = ctx;
    const dpfl_conv_direct *d = j->d;
    const int T = d->OH * d->OW;
    float *tile = j->scratch + (size_t)tid * j->scratch_per;
    const size_t wo = (size_t)d->C * d->k * d->k;
    int blo = (int)(j->B * tid / j->nthreads), bhi = (int)(j->B * (tid + 1) / j->nthreads);
    for (int b = blo; b < bhi; b++) {
        float *xp = j->xpad + (size_t)b * d->C * d->xpl;
        pad_example(xp, j->inp, j->g, d, b);
        conv_rows(tile, d->pf, xp, d->xpl, d->C, d->k, d->Wp, j->w, wo, d->OCp / 4);
        for (int o = 0; o < d->OC; o++) {
            const float *tr = tile + (size_t)o * d->pf;
            float *orow = j->out + ((size_t)o * j->B + b) * T, bv = j->bias ? j->bias[o] : 0.0f;
            for (int y = 0; y < d->OH; y++)
                copy_bias(orow + (size_t)y * d->OW, tr + (size_t)y * d->Wp, d->OW, bv, j->relu);
        }
    }
}

/* Winograd: example b's output straight from the layer input, with bias and ReLU */
static void wino_forward_job(void *ctx, int64_t tid, int64_t tid_end)
{
    (void)tid_end;
    direct_job *j = ctx;
    const dpfl_conv_direct *d = j->d;
    const size_t T = (size_t)d->OH * d->OW;
    float *scratch = j->scratch + (size_t)tid * j->scratch_per;
    int blo = (int)(j->B * tid / j->nthreads), bhi = (int)(j->B * (tid + 1) / j->nthreads);
    for (int b = blo; b < bhi; b++) {
        dpfl_wino_in in = {j->inp + (size_t)b * j->g->bs, j->g->cs, d->W, d->H, d->W, d->pad, d->pad};
        dpfl_wino_out out = {j->out + (size_t)b * T, (size_t)j->B * T, d->OW, j->bias, j->relu};
        dpfl_nn_wino_conv(&out, d->OH, d->OW, &in, d->C, j->U, d->OCp, d->OC, scratch);
    }
}

void DIRECT_FN(dpfl_nn_conv2d_direct_forward)(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                              dpfl_par *par, float *out, const float *inp, const float *w,
                                              const float *bias, int relu)
{
    const dpfl_conv_direct *d = &dc->geom[l];
    const float *wf = w;
    const size_t wo = (size_t)d->C * d->k * d->k;
    int nt = dpfl_par_size(par);
    if (dc->mode[l] == 2) { /* Winograd: no padded copy of the input is kept */
        dpfl_nn_wino_weights(dc->w, w, d->OC, d->OCp, d->C);
        direct_job j = {.d = d, .g = g, .out = out, .scratch = dc->scratch, .scratch_per = dc->per,
                        .inp = inp, .U = dc->w, .bias = bias, .B = g->B, .relu = relu, .nthreads = nt};
        dpfl_par_for(par, nt, wino_forward_job, &j);
        return;
    }
    if (d->OCp != d->OC) { /* pad to whole groups of 4 output channels with zero rows */
        memcpy(dc->w, w, (size_t)d->OC * wo * sizeof *w);
        memset(dc->w + (size_t)d->OC * wo, 0, (size_t)(d->OCp - d->OC) * wo * sizeof *w);
        wf = dc->w;
    }
    direct_job j = {.d = d, .g = g, .out = out, .xpad = dc->xpad[l], .scratch = dc->scratch,
                    .scratch_per = dc->per, .inp = inp, .w = wf, .bias = bias, .B = g->B, .relu = relu,
                    .nthreads = nt};
    dpfl_par_for(par, nt, forward_job, &j);
}

/* ---------------------------------------------------------------- backward */

/* res (4 x nj) for rows d[0..4) and the nj input rows of flat weight columns j0.. */
static void dw_block(float res[4][6], const float *dd, size_t dld, const float *xp, const dpfl_conv_direct *d,
                     int j0, int nj, int nv)
{
    const int kk = d->k * d->k;
    const float *xr[6];
    for (int j = 0; j < nj; j++) {
        int c = (j0 + j) / kk, r = (j0 + j) % kk;
        xr[j] = xp + (size_t)c * d->xpl + (size_t)(r / d->k) * d->Wp + r % d->k;
    }
#if DIRECT_AVX512
    switch (nj) {
    case 6: dw_tile(res, dd, dld, xr, nv, 6); break;
    case 5: dw_tile(res, dd, dld, xr, nv, 5); break;
    case 4: dw_tile(res, dd, dld, xr, nv, 4); break;
    case 3: dw_tile(res, dd, dld, xr, nv, 3); break;
    case 2: dw_tile(res, dd, dld, xr, nv, 2); break;
    default: dw_tile(res, dd, dld, xr, nv, 1); break;
    }
#else
    dw_tile_any(res, dd, dld, xr, nv, nj);
#endif
}

/* dst (OC*Kw weights [+ OC bias]) = (add == 0) or += example's weight gradient from dd (OCp x pf) */
static void example_dw(float *dst, int add, const float *dd, const float *xp, const dpfl_conv_direct *d, int bias)
{
    const int Kw = d->C * d->k * d->k, nv = d->pf / 16;
    float res[4][6];
    for (int o0 = 0; o0 < d->OCp; o0 += 4)
        for (int j0 = 0; j0 < Kw; j0 += 6) {
            int nj = Kw - j0 < 6 ? Kw - j0 : 6;
            dw_block(res, dd + (size_t)o0 * d->pf, d->pf, xp, d, j0, nj, nv);
            for (int i = 0; i < 4 && o0 + i < d->OC; i++) {
                float *r = dst + (size_t)(o0 + i) * Kw + j0;
                if (add)
                    for (int jj = 0; jj < nj; jj++) r[jj] += res[i][jj];
                else
                    for (int jj = 0; jj < nj; jj++) r[jj] = res[i][jj];
            }
        }
    if (bias) {
        float *bd = dst + (size_t)d->OC * Kw;
        for (int o = 0; o < d->OC; o++) {
            float s = sum_n(dd + (size_t)o * d->pf, d->pf);
            bd[o] = add ? bd[o] + s : s;
        }
    }
}

static void backward_job(void *ctx, int64_t tid, int64_t tid_end)
{
    (void)tid_end;
    direct_job *j = ctx;
    const dpfl_conv_direct *d = j->d;
    const dpfl_conv_geom *g = j->g;
    const int T = d->OH * d->OW, k = d->k, B = j->B;
    float *dz = j->scratch + (size_t)tid * j->scratch_per;
    float *tile = dz + (size_t)d->OC * d->zpl;
    float *dd = tile + (size_t)d->Cp * d->pz;
    const int ngroups = (B + DW_GROUP - 1) / DW_GROUP;
    int glo = (int)(ngroups * tid / j->nthreads), ghi = (int)(ngroups * (tid + 1) / j->nthreads);
    for (int gi = glo; gi < ghi; gi++)
        for (int b = gi * DW_GROUP; b < B && b < (gi + 1) * DW_GROUP; b++) {
            const float *xp = j->xpad + (size_t)b * d->C * d->xpl;
            if (j->dinp) {
                for (int o = 0; o < d->OC; o++) {
                    float *pl = dz + (size_t)o * d->zpl;
                    const float *src = j->dout + ((size_t)o * B + b) * T;
                    size_t top = (size_t)(k - 1) * d->Wz + k - 1, end = top + (size_t)d->OH * d->Wz;
                    memset(pl, 0, top * sizeof *pl);
                    for (int y = 0; y < d->OH; y++)
                        copy_pad(pl + top + (size_t)y * d->Wz, src + (size_t)y * d->OW, d->OW, d->Wz);
                    memset(pl + end, 0, (d->zpl - end) * sizeof *pl);
                }
                /* only the H rows of dxpad that dinp keeps (its pad rows would be thrown away): np positions
                 * from row pad on; the last vector reads at most (H + pad + k - 1) Wz + k + 14 < zpl floats in */
                const int np = up16(d->H * d->Wz);
                conv_rows(tile, np, dz + (size_t)d->pad * d->Wz, d->zpl, d->OC, k, d->Wz, j->w, (size_t)d->OC * k * k,
                          d->Cp / 4);
                for (int c = 0; c < d->C; c++) {
                    const float *tr = tile + (size_t)c * np + d->pad;
                    float *dst = j->dinp + (size_t)c * g->cs + (size_t)b * g->bs;
                    for (int y = 0; y < d->H; y++) copy_pad(dst + (size_t)y * d->W, tr + (size_t)y * d->Wz, d->W, d->W);
                }
            }
            if (!j->dw_part && !j->persample) continue;
            for (int o = 0; o < d->OCp; o++) {
                float *row = dd + (size_t)o * d->pf;
                if (o >= d->OC) {
                    memset(row, 0, (size_t)d->pf * sizeof *row);
                    continue;
                }
                const float *src = j->dout + ((size_t)o * B + b) * T;
                for (int y = 0; y < d->OH; y++) copy_pad(row + (size_t)y * d->Wp, src + (size_t)y * d->OW, d->OW, d->Wp);
                size_t end = (size_t)d->OH * d->Wp;
                memset(row + end, 0, ((size_t)d->pf - end) * sizeof *row);
            }
            if (j->persample) {
                float *p = j->ps + (size_t)b * j->np;
                example_dw(p, 0, dd, xp, d, j->bias_on);
                j->sq[b] += dpfl_nn_sumsq(p, j->np);
            } else {
                example_dw(j->dw_part + (size_t)gi * j->np, b > gi * DW_GROUP, dd, xp, d, j->bias_on);
            }
        }
}

/* Winograd: per example, the input gradient from dout through the flipped weights (a full correlation: dout sits
 * at offset k - 1 - pad in a zero plane) and the weight gradient from dout and the layer input, both read in
 * place; examples grouped as in backward_job */
static void wino_backward_job(void *ctx, int64_t tid, int64_t tid_end)
{
    (void)tid_end;
    direct_job *j = ctx;
    const dpfl_conv_direct *d = j->d;
    const dpfl_conv_geom *g = j->g;
    const int B = j->B, off = d->k - 1 - d->pad;
    const size_t T = (size_t)d->OH * d->OW, Kw = (size_t)d->C * d->k * d->k;
    float *scratch = j->scratch + (size_t)tid * j->scratch_per;
    const int ngroups = (B + DW_GROUP - 1) / DW_GROUP;
    int glo = (int)(ngroups * tid / j->nthreads), ghi = (int)(ngroups * (tid + 1) / j->nthreads);
    for (int gi = glo; gi < ghi; gi++)
        for (int b = gi * DW_GROUP; b < B && b < (gi + 1) * DW_GROUP; b++) {
            const float *dy = j->dout + (size_t)b * T;
            if (j->dinp) {
                dpfl_wino_in in = {dy, (size_t)B * T, d->OW, d->OH, d->OW, off, off};
                dpfl_wino_out out = {j->dinp + (size_t)b * g->bs, g->cs, d->W, NULL, 0};
                dpfl_nn_wino_conv(&out, d->H, d->W, &in, d->OC, j->U, d->Cp, d->C, scratch);
            }
            if (!j->dw_part && !j->persample) continue;
            float *dst = j->persample ? j->ps + (size_t)b * j->np : j->dw_part + (size_t)gi * j->np;
            const int add = !j->persample && b > gi * DW_GROUP;
            dpfl_wino_in x = {j->inp + (size_t)b * g->bs, g->cs, d->W, d->H, d->W, d->pad, d->pad};
            dpfl_nn_wino_dw(dst, add, dy, (size_t)B * T, d->OW, d->OH, d->OW, &x, d->C, d->OC, d->OCp, scratch);
            if (j->bias_on)
                for (int o = 0; o < d->OC; o++) {
                    const float s = sum_n(dy + (size_t)o * B * T, (int)T);
                    dst[(size_t)d->OC * Kw + o] = add ? dst[(size_t)d->OC * Kw + o] + s : s;
                }
            if (j->persample) j->sq[b] += dpfl_nn_sumsq(dst, j->np);
        }
}

typedef struct {
    float *dw;
    const float *part;
    size_t np;
    int ngroups;
} sum_job;

static void sum_groups_job(void *ctx, int64_t lo, int64_t hi)
{
    sum_job *s = ctx;
    for (int64_t i = lo; i < hi; i++) {
        float acc = s->part[i];
        for (int gi = 1; gi < s->ngroups; gi++) acc += s->part[(size_t)gi * s->np + i];
        s->dw[i] = acc;
    }
}

void DIRECT_FN(dpfl_nn_conv2d_direct_backward)(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                               dpfl_par *par, float *dinp, float *dw, const float *dout,
                                               const float *inp, const float *w, float *ps, double *sq)
{
    const dpfl_conv_direct *d = &dc->geom[l];
    const int k = d->k, kk = k * k, persample = ps != NULL;
    if (dinp) { /* flipped, transposed weights: wt[c][o][ki][kj] = w[o][c][k-1-ki][k-1-kj], rows padded to Cp */
        float *wt = dc->w;
        for (int c = 0; c < d->Cp; c++)
            for (int o = 0; o < d->OC; o++) {
                float *dst = wt + ((size_t)c * d->OC + o) * kk;
                if (c >= d->C) {
                    memset(dst, 0, (size_t)kk * sizeof *dst);
                    continue;
                }
                const float *src = w + ((size_t)o * d->C + c) * kk;
                for (int t = 0; t < kk; t++) dst[t] = src[kk - 1 - t];
            }
    }
    const int wino = dc->mode[l] == 2;
    float *Ut = dc->w + (size_t)d->Cp * d->OC * kk;
    if (wino && dinp) dpfl_nn_wino_weights(Ut, dc->w, d->C, d->Cp, d->OC);
    int nt = dpfl_par_size(par);
    direct_job j = {.d = d, .g = g, .xpad = dc->xpad[l], .scratch = dc->scratch, .scratch_per = dc->per,
                    .dinp = dinp, .dout = dout, .w = dc->w, .B = g->B, .nthreads = nt, .bias_on = d->bias,
                    .np = d->np, .persample = persample, .sq = sq, .ps = ps,
                    .dw_part = dw ? dc->dw_part : NULL, .U = Ut, .inp = inp};
    dpfl_par_for(par, nt, wino ? wino_backward_job : backward_job, &j);
    if (dw && !persample) {
        sum_job s = {.dw = dw, .part = j.dw_part, .np = d->np, .ngroups = (g->B + DW_GROUP - 1) / DW_GROUP};
        dpfl_par_for(par, (int64_t)d->np, sum_groups_job, &s);
    }
}
