/* The direct Conv2d of conv_direct.c with AVX2 + FMA (the Makefile's AVX2_FLAGS): the register tiles below, then
 * conv_direct.c itself, whose functions end in _avx2 here.  AVX2 has 16 vector registers of 8 floats (AVX-512: 32
 * of 16), so the forward / input-gradient tile is 2 output rows x 48 positions (12 accumulators, 2 broadcast
 * weights and one input vector), and the weight-gradient tile 2 rows x up to 6 (channel, ki, kj) columns, run twice for
 * the 4 rows conv_direct.c asks for.  The sums run in another order than the AVX-512 kernels' (8 lanes, not 16):
 * results agree within rounding, and each is the same on any number of threads (one thread per example, a fixed
 * order within it). */
#include "core/cpu.h"

#if DPFL_AVX2_TARGET
#include <immintrin.h>
#include <stddef.h>

/* t[i][0..8R) (row stride tld, i < 2) = sum over C channels (plane stride xpl) and k x k offsets of
 * w[i][c][ki][kj] (row stride wo) * x[c][ki Wi + kj + 0..8R), R <= 6.  Each input vector is loaded once and used
 * by both rows at once (2 broadcast weights, 1 input vector and 12 accumulators: 15 of the 16 registers), so a
 * (c, ki, kj) step is 2 + R loads for 2R FMAs.  A wider tile of 4 rows x 3 vectors needs all 16 registers and the
 * compiler then folds the input loads into the FMAs, loading each vector 4 times: load-bound on two load ports.
 * Every output sums its terms in the (c, ki, kj) order, one FMA each, whatever the tile shape. */
static inline __attribute__((always_inline)) void conv_tile8(float *t, size_t tld, const float *x, size_t xpl, int C,
                                                             int k, int Wi, const float *w, size_t wo, const int R)
{
    __m256 acc[2][6];
    for (int r = 0; r < R; r++) acc[0][r] = _mm256_setzero_ps(), acc[1][r] = _mm256_setzero_ps();
    const int kk = k * k;
    for (int c = 0; c < C; c++) {
        const float *xc = x + (size_t)c * xpl, *wc = w + (size_t)c * kk;
        for (int ki = 0; ki < k; ki++) {
            const float *xr = xc + (size_t)ki * Wi, *wr = wc + ki * k;
            for (int kj = 0; kj < k; kj++) {
                const __m256 a0 = _mm256_broadcast_ss(wr + kj), a1 = _mm256_broadcast_ss(wr + wo + kj);
                for (int r = 0; r < R; r++) {
                    __m256 v = _mm256_loadu_ps(xr + kj + 8 * r);
                    __asm__("" : "+x"(v)); /* one load in a register, not folded into each FMA as a second load */
                    acc[0][r] = _mm256_fmadd_ps(a0, v, acc[0][r]);
                    acc[1][r] = _mm256_fmadd_ps(a1, v, acc[1][r]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(t + 8 * r, acc[0][r]), _mm256_storeu_ps(t + tld + 8 * r, acc[1][r]);
}

/* t (nrow4*4 rows, row stride np) over np positions (a multiple of 16), 48 at a time, each position block over all
 * row pairs (the input window stays in L1); k = 1 and k = 3 compiled apart so their kernel loops unroll */
static inline __attribute__((always_inline)) void conv_rows_k(float *t, int np, const float *x, size_t xpl, int C,
                                                              const int k, int Wi, const float *w, size_t wo,
                                                              int nrow4)
{
    for (int p0 = 0; p0 < np; p0 += 48) {
        const int R = (np - p0) / 8 < 6 ? (np - p0) / 8 : 6; /* np - p0 is a multiple of 16: R is 2, 4 or 6 */
        for (int g = 0; g < 2 * nrow4; g++) {
            float *tt = t + (size_t)g * 2 * np + p0;
            const float *ww = w + (size_t)g * 2 * wo;
            if (R == 6) conv_tile8(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 6);
            else if (R == 4) conv_tile8(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 4);
            else conv_tile8(tt, np, x + p0, xpl, C, k, Wi, ww, wo, 2);
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

/* the 8 lanes of v summed in a fixed order */
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* res[i][j] = sum over nv 16-float vectors of <d[i] (row stride dld), x[j]>, i < 2 (rows i0, i0 + 1), j < NJ */
static inline __attribute__((always_inline)) void dw_tile2(float res[4][6], int i0, const float *d, size_t dld,
                                                           const float *const *x, int nv, const int NJ)
{
    __m256 acc[2][6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < NJ; j++) acc[i][j] = _mm256_setzero_ps();
    const float *d0 = d + (size_t)i0 * dld, *d1 = d0 + dld;
    for (int v = 0; v < 2 * nv; v++) {
        const __m256 a0 = _mm256_loadu_ps(d0 + 8 * v), a1 = _mm256_loadu_ps(d1 + 8 * v);
        for (int j = 0; j < NJ; j++) {
            __m256 xv = _mm256_loadu_ps(x[j] + 8 * v);
            __asm__("" : "+x"(xv)); /* loaded once for both rows (see conv_tile8) */
            acc[0][j] = _mm256_fmadd_ps(a0, xv, acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(a1, xv, acc[1][j]);
        }
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < NJ; j++) res[i0 + i][j] = hsum8(acc[i][j]);
}

static void dw_tile_any(float res[4][6], const float *d, size_t dld, const float *const *x, int nv, int NJ)
{
    for (int i0 = 0; i0 < 4; i0 += 2) switch (NJ) {
        case 6: dw_tile2(res, i0, d, dld, x, nv, 6); break;
        case 5: dw_tile2(res, i0, d, dld, x, nv, 5); break;
        case 4: dw_tile2(res, i0, d, dld, x, nv, 4); break;
        case 3: dw_tile2(res, i0, d, dld, x, nv, 3); break;
        case 2: dw_tile2(res, i0, d, dld, x, nv, 2); break;
        default: dw_tile2(res, i0, d, dld, x, nv, 1); break;
        }
}
#endif

#define DPFL_DIRECT_AVX2 1
#include "conv_direct.c"
