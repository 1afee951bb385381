/* Winograd F(2x2, 3x3) for the 3x3 stride-1 convolutions of conv_direct.c (Lavin & Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016): each 2x2 block of outputs ("tile") comes from a 4x4 block of input with
 * 16 multiplications per input/output channel pair instead of 36, so the three passes of a layer (output, input
 * gradient, weight gradient) do 2.25x fewer multiply-adds than the direct kernels.
 *
 *   input      V  = B^T d B    (4x4 per tile and channel)     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   weights    U  = G g G^T    (4x4 per channel pair)          G   = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
 *   output     Y  = A^T M A,   M[xi] = sum_c U[xi][o][c] V[xi][c][t]  (16 GEMMs, xi = one of the 4x4 entries)
 *                                                              A^T = [1 1 1 0; 0 1 -1 -1]
 *   weight gradient (the chain rule through the above, exact in exact arithmetic):
 *              dU[xi][o][c] = sum_t (A dY_t A^T)[xi] V[xi][c][t],   dg = G^T dU G
 *
 * Inputs are read in place through a view (dpfl_wino_in) that puts the planes at an offset inside a zero border,
 * so neither the padding of the forward pass nor the k - 1 border of the input gradient's full correlation is
 * ever copied out, and outputs are written in place (with bias and ReLU in the forward pass).  Tiles are
 * numbered t = ty * ntx + tx over a ceil(OH/2) x ceil(OW/2) grid; the transforms run over 16 tiles of one tile
 * row at a time (even/odd columns split with permutes, masked loads for the border).  Outputs past OH x OW are
 * never stored and a missing output's gradient is zero, so odd sizes need nothing else.
 *
 * Everything here is per example on one thread with a fixed order of operations, like conv_direct.c, and like it
 * this file is compiled with AVX-512 flags and runs only in the workspaces that chose the direct kernels. */
#include "layers.h"

#include <stdint.h>

#if DPFL_KERNELS_AVX512 && !DPFL_AVX512_TARGET
#error "conv_winograd.c must be compiled with the Makefile's AVX512_FLAGS"
#endif

#if DPFL_AVX512_TARGET
#include <immintrin.h>

int dpfl_nn_wino_usable(const dpfl_conv_direct *d) { return d->k == 3 && d->C >= 8 && d->OC >= 8; }

static int up16(int n) { return (n + 15) & ~15; }

typedef struct {
    int nty, ntx, nt, ntp; /* tile rows, tile columns, tiles, tiles rounded up to 16 */
} wino_grid;

static void wino_grid_of(int OH, int OW, wino_grid *g)
{
    g->nty = (OH + 1) / 2, g->ntx = (OW + 1) / 2;
    g->nt = g->nty * g->ntx, g->ntp = up16(g->nt);
}

/* U[xi][o][c] (o < Op, rows o >= O zero) = (G g_oc G^T)[xi], g_oc = w + (o * C + c) * 9 */
void dpfl_nn_wino_weights(float *U, const float *w, int O, int Op, int C)
{
    const size_t xs = (size_t)Op * C;
    for (int o = 0; o < Op; o++)
        for (int c = 0; c < C; c++) {
            float u[16] = {0};
            if (o < O) {
                const float *g = w + ((size_t)o * C + c) * 9;
                float t[4][3]; /* G g */
                for (int j = 0; j < 3; j++) {
                    t[0][j] = g[j];
                    t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                    t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
                    t[3][j] = g[6 + j];
                }
                for (int i = 0; i < 4; i++) { /* (G g) G^T */
                    u[4 * i + 0] = t[i][0];
                    u[4 * i + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                    u[4 * i + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                    u[4 * i + 3] = t[i][2];
                }
            }
            for (int xi = 0; xi < 16; xi++) U[xi * xs + (size_t)o * C + c] = u[xi];
        }
}

static inline __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

static const int32_t EVEN[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
static const int32_t ODD[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
static const int32_t ILO[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const int32_t IHI[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* lanes l of 16 with lo <= l < hi */
static inline __mmask16 span(int lo, int hi)
{
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    return hi <= lo ? 0 : (__mmask16)(((1u << (hi - lo)) - 1) << lo);
}

/* Where 16 consecutive values of a view's row start, relative to the row, and which lanes lie inside it */
typedef struct {
    intptr_t off; /* bytes; may be negative: masked-off lanes are never touched */
    __mmask16 m;
} view_cols;

static inline view_cols view_span(const dpfl_wino_in *in, int col)
{
    const int real = col - in->ox;
    view_cols v = {(intptr_t)real * (intptr_t)sizeof(float), span(-real, in->W - real)};
    return v;
}

/* the address is formed as an integer: it may lie before the row (the lanes there are masked off) */
static inline __m512 view_load(const float *row, view_cols v)
{
    return _mm512_maskz_loadu_ps(v.m, (const float *)((uintptr_t)row + (uintptr_t)v.off));
}

/* V[xi * vx + c * vc + t] for the C planes of the view, tiles of the grid g */
static void input_transform(float *V, size_t vx, size_t vc, const dpfl_wino_in *in, int C, const wino_grid *g)
{
    const __m512i ev = _mm512_loadu_si512(EVEN), od = _mm512_loadu_si512(ODD);
    for (int c = 0; c < C; c++)
        for (int ty = 0; ty < g->nty; ty++)
            for (int tx0 = 0; tx0 < g->ntx; tx0 += 16) {
                const int col = 2 * tx0;
                const view_cols c0 = view_span(in, col), c1 = view_span(in, col + 16), c2 = view_span(in, col + 2),
                                c3 = view_span(in, col + 18);
                __m512 h[4][4];
                for (int r = 0; r < 4; r++) {
                    const int row = 2 * ty + r - in->oy;
                    if (row < 0 || row >= in->H) {
                        for (int j = 0; j < 4; j++) h[r][j] = _mm512_setzero_ps();
                        continue;
                    }
                    const float *pl = in->p + (size_t)c * in->cs + (size_t)row * in->rs;
                    const __m512 lo = view_load(pl, c0), hi = view_load(pl, c1);
                    const __m512 lo2 = view_load(pl, c2), hi2 = view_load(pl, c3);
                    const __m512 d0 = _mm512_permutex2var_ps(lo, ev, hi), d1 = _mm512_permutex2var_ps(lo, od, hi);
                    const __m512 d2 = _mm512_permutex2var_ps(lo2, ev, hi2), d3 = _mm512_permutex2var_ps(lo2, od, hi2);
                    h[r][0] = _mm512_sub_ps(d0, d2);
                    h[r][1] = _mm512_add_ps(d1, d2);
                    h[r][2] = _mm512_sub_ps(d2, d1);
                    h[r][3] = _mm512_sub_ps(d1, d3);
                }
                const __mmask16 m = lanes(g->ntx - tx0);
                float *dst = V + (size_t)c * vc + (size_t)ty * g->ntx + tx0;
                for (int j = 0; j < 4; j++) {
                    _mm512_mask_storeu_ps(dst + (size_t)(0 + j) * vx, m, _mm512_sub_ps(h[0][j], h[2][j]));
                    _mm512_mask_storeu_ps(dst + (size_t)(4 + j) * vx, m, _mm512_add_ps(h[1][j], h[2][j]));
                    _mm512_mask_storeu_ps(dst + (size_t)(8 + j) * vx, m, _mm512_sub_ps(h[2][j], h[1][j]));
                    _mm512_mask_storeu_ps(dst + (size_t)(12 + j) * vx, m, _mm512_sub_ps(h[1][j], h[3][j]));
                }
            }
}

/* out (o < O, y < OH, x < OW) = (A^T M A) of M[xi * mx + o * mo + tile], plus bias[o], then ReLU */
static void output_transform(const dpfl_wino_out *out, int OH, int OW, const float *M, size_t mx, size_t mo, int O,
                             const wino_grid *g)
{
    const __m512i il = _mm512_loadu_si512(ILO), ih = _mm512_loadu_si512(IHI);
    const __m512 zero = _mm512_setzero_ps();
    for (int o = 0; o < O; o++) {
        const __m512 bias = _mm512_set1_ps(out->bias ? out->bias[o] : 0.0f);
        for (int ty = 0; ty < g->nty; ty++)
            for (int tx0 = 0; tx0 < g->ntx; tx0 += 16) {
                const __mmask16 m = lanes(g->ntx - tx0);
                const float *src = M + (size_t)o * mo + (size_t)ty * g->ntx + tx0;
                __m512 s[2][4];
                for (int j = 0; j < 4; j++) {
                    const __m512 m0 = _mm512_maskz_loadu_ps(m, src + (size_t)(0 + j) * mx),
                                 m1 = _mm512_maskz_loadu_ps(m, src + (size_t)(4 + j) * mx),
                                 m2 = _mm512_maskz_loadu_ps(m, src + (size_t)(8 + j) * mx),
                                 m3 = _mm512_maskz_loadu_ps(m, src + (size_t)(12 + j) * mx);
                    s[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
                    s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
                }
                for (int a = 0; a < 2; a++) {
                    const int row = 2 * ty + a;
                    if (row >= OH) break;
                    __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]), bias);
                    __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3]), bias);
                    if (out->relu) y0 = _mm512_max_ps(y0, zero), y1 = _mm512_max_ps(y1, zero);
                    float *dst = out->p + (size_t)o * out->cs + (size_t)row * out->rs + 2 * tx0;
                    const int n = OW - 2 * tx0;
                    _mm512_mask_storeu_ps(dst, lanes(n), _mm512_permutex2var_ps(y0, il, y1));
                    _mm512_mask_storeu_ps(dst + 16, lanes(n - 16), _mm512_permutex2var_ps(y0, ih, y1));
                }
            }
    }
}

size_t dpfl_nn_wino_conv_floats(int C, int Op, int OH, int OW)
{
    wino_grid g;
    wino_grid_of(OH, OW, &g);
    return 16 * ((size_t)C + Op) * g.ntp;
}

void dpfl_nn_wino_conv(const dpfl_wino_out *out, int OH, int OW, const dpfl_wino_in *in, int C, const float *U, int Op,
                       int O, float *scratch)
{
    wino_grid g;
    wino_grid_of(OH, OW, &g);
    const size_t vx = (size_t)C * g.ntp, mx = (size_t)Op * g.ntp;
    float *V = scratch, *M = scratch + 16 * vx;
    input_transform(V, vx, g.ntp, in, C, &g);
    for (int xi = 0; xi < 16; xi++)
        dpfl_nn_direct_rows(M + xi * mx, g.ntp, V + xi * vx, g.ntp, C, 1, 0, U + (size_t)xi * Op * C, C, Op / 4);
    output_transform(out, OH, OW, M, mx, g.ntp, O, &g);
}

size_t dpfl_nn_wino_dw_floats(int C, int OCp, int OH, int OW)
{
    wino_grid g;
    wino_grid_of(OH, OW, &g);
    const size_t C16 = (size_t)up16(C);
    return 16 * ((size_t)C * g.ntp + (size_t)g.ntp * C16 + (size_t)OCp * g.ntp + (size_t)OCp * C16);
}

/* 16 x 16 block transpose: dst[j * dld + i] = src[i * sld + j], rows i >= ni of src read as zero */
static void transpose16(float *dst, size_t dld, const float *src, size_t sld, int ni)
{
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = i < ni ? _mm512_loadu_ps(src + (size_t)i * sld) : _mm512_setzero_ps();
    /* exchanges of 32-bit elements, 64-bit pairs, then 128-bit lanes twice; the rows come out in the order col */
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int k = 0; k < 2; k++) {
            r[i + k] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + k]), _mm512_castps_pd(t[i + 2 + k])));
            r[i + 2 + k] =
                _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + k]), _mm512_castps_pd(t[i + 2 + k])));
        }
    for (int i = 0; i < 16; i += 8)
        for (int k = 0; k < 4; k++) {
            t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + 4 + k], 0x88);
            t[i + 4 + k] = _mm512_shuffle_f32x4(r[i + k], r[i + 4 + k], 0xdd);
        }
    for (int k = 0; k < 8; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    }
    /* r[k] is now column col[k] of src */
    static const int col[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
    for (int k = 0; k < 16; k++) _mm512_storeu_ps(dst + (size_t)col[k] * dld, r[k]);
}

void dpfl_nn_wino_dw(float *dst, int add, const float *dy, size_t dcs, int drs, int OH, int OW, const dpfl_wino_in *in,
                     int C, int OC, int OCp, float *scratch)
{
    wino_grid g;
    wino_grid_of(OH, OW, &g);
    const int C16 = up16(C);
    const size_t vx = (size_t)C * g.ntp, tx = (size_t)g.ntp * C16, yx = (size_t)OCp * g.ntp, ux = (size_t)OCp * C16;
    float *V = scratch, *Vt = V + 16 * vx, *Yh = Vt + 16 * tx, *dU = Yh + 16 * yx;
    input_transform(V, vx, g.ntp, in, C, &g);
    for (int xi = 0; xi < 16; xi++) /* Vt[xi][t][c] */
        for (int c0 = 0; c0 < C16; c0 += 16)
            for (int t0 = 0; t0 < g.ntp; t0 += 16)
                transpose16(Vt + xi * tx + (size_t)t0 * C16 + c0, C16, V + xi * vx + (size_t)c0 * g.ntp + t0, g.ntp,
                            C - c0);
    /* Yh[xi][o][t] = (A dY_t A^T)[xi], dY_t the tile's 2 x 2 of dy (o * dcs + y * drs + x); zero for o >= OC,
     * y >= OH, x >= OW */
    const __m512i ev = _mm512_loadu_si512(EVEN), od = _mm512_loadu_si512(ODD);
    for (int o = 0; o < OCp; o++)
        for (int ty = 0; ty < g.nty; ty++)
            for (int tx0 = 0; tx0 < g.ntx; tx0 += 16) {
                __m512 q[2][4]; /* q[r][j]: row r of dY_t A^T */
                for (int r = 0; r < 2; r++) {
                    const int row = 2 * ty + r;
                    __m512 y0 = _mm512_setzero_ps(), y1 = _mm512_setzero_ps();
                    if (o < OC && row < OH) {
                        const float *s = dy + (size_t)o * dcs + (size_t)row * drs + 2 * tx0;
                        const int n = OW - 2 * tx0;
                        const __m512 lo = _mm512_maskz_loadu_ps(lanes(n), s),
                                     hi = _mm512_maskz_loadu_ps(lanes(n - 16), s + 16);
                        y0 = _mm512_permutex2var_ps(lo, ev, hi), y1 = _mm512_permutex2var_ps(lo, od, hi);
                    }
                    q[r][0] = y0;
                    q[r][1] = _mm512_add_ps(y0, y1);
                    q[r][2] = _mm512_sub_ps(y0, y1);
                    q[r][3] = _mm512_sub_ps(_mm512_setzero_ps(), y1);
                }
                const __mmask16 m = lanes(g.ntx - tx0);
                float *d = Yh + (size_t)o * g.ntp + (size_t)ty * g.ntx + tx0;
                for (int j = 0; j < 4; j++) {
                    _mm512_mask_storeu_ps(d + (size_t)(0 + j) * yx, m, q[0][j]);
                    _mm512_mask_storeu_ps(d + (size_t)(4 + j) * yx, m, _mm512_add_ps(q[0][j], q[1][j]));
                    _mm512_mask_storeu_ps(d + (size_t)(8 + j) * yx, m, _mm512_sub_ps(q[0][j], q[1][j]));
                    _mm512_mask_storeu_ps(d + (size_t)(12 + j) * yx, m, _mm512_sub_ps(_mm512_setzero_ps(), q[1][j]));
                }
            }
    /* dU[xi][o][c] = sum_t Yh[xi][o][t] Vt[xi][t][c]: the direct kernel with the tiles as its input channels */
    for (int xi = 0; xi < 16; xi++)
        dpfl_nn_direct_rows(dU + xi * ux, C16, Vt + xi * tx, C16, g.nt, 1, 0, Yh + xi * yx, g.ntp, OCp / 4);
    /* dg = G^T dU G, 16 input channels at a time, then into dst's (o, c, 3, 3) order */
    for (int o = 0; o < OC; o++)
        for (int c0 = 0; c0 < C; c0 += 16) {
            __m512 u[16], z[3][4];
            for (int xi = 0; xi < 16; xi++) u[xi] = _mm512_loadu_ps(dU + xi * ux + (size_t)o * C16 + c0);
            const __m512 half = _mm512_set1_ps(0.5f);
            for (int j = 0; j < 4; j++) {
                const __m512 a = _mm512_add_ps(u[4 + j], u[8 + j]), b = _mm512_sub_ps(u[4 + j], u[8 + j]);
                z[0][j] = _mm512_fmadd_ps(half, a, u[j]);
                z[1][j] = _mm512_mul_ps(half, b);
                z[2][j] = _mm512_fmadd_ps(half, a, u[12 + j]);
            }
            float res[9][16];
            for (int a = 0; a < 3; a++) {
                const __m512 s = _mm512_add_ps(z[a][1], z[a][2]), df = _mm512_sub_ps(z[a][1], z[a][2]);
                _mm512_storeu_ps(res[3 * a + 0], _mm512_fmadd_ps(half, s, z[a][0]));
                _mm512_storeu_ps(res[3 * a + 1], _mm512_mul_ps(half, df));
                _mm512_storeu_ps(res[3 * a + 2], _mm512_fmadd_ps(half, s, z[a][3]));
            }
            const int nc = C - c0 < 16 ? C - c0 : 16;
            float *w = dst + ((size_t)o * C + c0) * 9;
            for (int c = 0; c < nc; c++)
                for (int e = 0; e < 9; e++) w[c * 9 + e] = add ? w[c * 9 + e] + res[e][c] : res[e][c];
        }
}

#else /* never called: no layer is usable */

int dpfl_nn_wino_usable(const dpfl_conv_direct *d)
{
    (void)d;
    return 0;
}

size_t dpfl_nn_wino_conv_floats(int C, int Op, int OH, int OW)
{
    (void)C, (void)Op, (void)OH, (void)OW;
    return 0;
}

size_t dpfl_nn_wino_dw_floats(int C, int OCp, int OH, int OW)
{
    (void)C, (void)OCp, (void)OH, (void)OW;
    return 0;
}

void dpfl_nn_wino_weights(float *U, const float *w, int O, int Op, int C)
{
    (void)U, (void)w, (void)O, (void)Op, (void)C;
    DPFL_ASSERT(!"Winograd without AVX-512");
}

void dpfl_nn_wino_conv(const dpfl_wino_out *out, int OH, int OW, const dpfl_wino_in *in, int C, const float *U, int Op,
                       int O, float *scratch)
{
    (void)out, (void)OH, (void)OW, (void)in, (void)C, (void)U, (void)Op, (void)O, (void)scratch;
    DPFL_ASSERT(!"Winograd without AVX-512");
}

void dpfl_nn_wino_dw(float *dst, int add, const float *dy, size_t dcs, int drs, int OH, int OW, const dpfl_wino_in *in,
                     int C, int OC, int OCp, float *scratch)
{
    (void)dst, (void)add, (void)dy, (void)dcs, (void)drs, (void)OH, (void)OW, (void)in, (void)C, (void)OC, (void)OCp;
    (void)scratch;
    DPFL_ASSERT(!"Winograd without AVX-512");
}

#endif
