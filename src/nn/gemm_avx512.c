/* The Linear layers' GEMMs with AVX-512 register tiles, without packing.
 *
 * A Linear layer's GEMMs are small and thin (one side is the batch, 10-64 rows), where a BLAS spends a large part
 * of its time packing panels it then uses a few times, and where its kernel choice is out of our hands:
 * OPENBLAS_CORETYPE=Haswell holds it to AVX2 (half the FMA width of an AVX-512 core), and OpenBLAS 0.3.21
 * (Debian 12) does not know Sapphire/Emerald Rapids and falls back to its SSE3 "Prescott" kernels there (about
 * 30 GFLOP/s on two cores where these kernels reach 70-130 on one).  The three shapes, row-major:
 *
 *   NT  C (M, N) = alpha A (M, K) B^T + beta C, B (N, K)   forward: inp (B, C) @ w^T, w (OC, C)
 *       both operands run along K: 4 x 6 (or 5 x 5) accumulators of 16 products each, reduced at the end
 *   NN  C (M, N) = alpha A (M, K) B (K, N) + beta C         input gradient: dout (B, OC) @ w (OC, C)
 *   TN  C (M, N) = alpha A^T B + beta C, A (K, M)          weight gradient: dout^T @ inp, K = the batch
 *       one element of A broadcast against 16 columns of B's row k: 6 rows x 64 columns of C in registers
 *
 * Every element of C is one fixed sequence of operations that depends only on K and on its own row and column
 * of the operands, not on which tile or thread computed it, so results do not depend on the number of threads or
 * on how a GEMM is cut into blocks.  Rows past the end of a tile are computed from a repeated valid row and not
 * stored; columns past the end are masked.  With beta = 0, C is not read.
 *
 * The Makefile compiles this file with AVX-512 flags (AVX512_FLAGS); linear.c calls it only when
 * dpfl_cpu_avx512() (core/cpu.h), and OpenBLAS's SGEMM otherwise. */
#include "layers.h"

#if DPFL_KERNELS_AVX512 && !DPFL_AVX512_TARGET
#error "gemm_avx512.c must be compiled with the Makefile's AVX512_FLAGS"
#endif

#if DPFL_AVX512_TARGET
#include <immintrin.h>

/* lanes 4i..4i+3 of the result = the sums of v[4i..4i+3] (a fixed tree for every lane) */
static inline __attribute__((always_inline)) __m512 reduce16(const __m512 v[16])
{
    __m512 w[8], x[4], y[2];
    for (int i = 0; i < 8; i++)
        w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
        x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    for (int i = 0; i < 2; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xdd));
}

/* C[i][j] (i < mr <= MR, j < nc <= NR) of NT from rows A + i lda and B + j ldb; MR x NR <= 25 accumulators,
 * with NR rows of B and one of A in the other registers */
static inline __attribute__((always_inline)) void nt_tile(float *C, int ldc, const float *A, int lda, const float *B,
                                                          int ldb, int K, float alpha, float beta, const float *bias,
                                                          int relu, int mr, int nc, const int MR, const int NR)
{
    const float *a[5], *b[6];
    for (int i = 0; i < MR; i++) a[i] = A + (size_t)(i < mr ? i : mr - 1) * lda;
    for (int j = 0; j < NR; j++) b[j] = B + (size_t)(j < nc ? j : nc - 1) * ldb;
    __m512 acc[5][6];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 bv[6];
        for (int j = 0; j < NR; j++) bv[j] = _mm512_loadu_ps(b[j] + k);
        for (int i = 0; i < MR; i++) {
            const __m512 av = _mm512_loadu_ps(a[i] + k);
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    if (k < K) {
        const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 bv[6];
        for (int j = 0; j < NR; j++) bv[j] = _mm512_maskz_loadu_ps(m, b[j] + k);
        for (int i = 0; i < MR; i++) {
            const __m512 av = _mm512_maskz_loadu_ps(m, a[i] + k);
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    /* the sums: element (i, j) is lane i NR + j of (r0, r1); every lane's sum is the same tree over its vector,
     * so an element's value does not depend on the tile shape */
    __m512 v[32];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) v[i * NR + j] = acc[i][j];
    for (int l = MR * NR; l < 32; l++) v[l] = _mm512_setzero_ps();
    const __m512 r0 = reduce16(v), r1 = reduce16(v + 16);
    /* row i: alpha t + beta c + bias, then ReLU, on the first nc lanes.  max(0, x) keeps x where x is NaN or -0,
     * as x < 0 ? 0 : x does. */
    const __mmask16 cm = (__mmask16)((1u << nc) - 1);
    const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(cm, bias) : zero;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int i = 0; i < MR && i < mr; i++) {
        float *c = C + (size_t)i * ldc;
        const __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32(i * NR));
        __m512 x = _mm512_mul_ps(al, _mm512_permutex2var_ps(r0, idx, r1));
        if (beta != 0.0f) x = _mm512_add_ps(x, _mm512_mul_ps(be, _mm512_maskz_loadu_ps(cm, c)));
        if (bias) x = _mm512_add_ps(x, bv);
        if (relu) x = _mm512_max_ps(zero, x);
        _mm512_mask_storeu_ps(c, cm, x);
    }
}

/* NT with MR x NR tiles, NR columns (rows of B) at a time across all rows of A: those rows of B stay in L1 */
static inline __attribute__((always_inline)) void nt_gemm(int M, int N, int K, float alpha, const float *A, int lda,
                                                          const float *B, int ldb, float beta, float *C, int ldc,
                                                          const float *bias, int relu, const int MR, const int NR)
{
    for (int j = 0; j < N; j += NR)
        for (int i = 0; i < M; i += MR)
            nt_tile(C + (size_t)i * ldc + j, ldc, A + (size_t)i * lda, lda, B + (size_t)j * ldb, ldb, K, alpha,
                    beta, bias ? bias + j : NULL, relu, M - i < MR ? M - i : MR, N - j < NR ? N - j : NR, MR, NR);
}

void dpfl_nn_sgemm_nt_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc, const float *bias, int relu)
{
    if (M <= 0 || N <= 0) return;
    /* 4 x 6 tiles, or 5 x 5 where that wastes fewer rows of the last tile (a batch of 10: 5 + 5 rows, not 4 + 4 +
     * a half-used 4) */
    if ((5 - M % 5) % 5 < (4 - M % 4) % 4) nt_gemm(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, 5, 5);
    else nt_gemm(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, 4, 6);
}

/* C (MR rows, NR vectors, the last one masked by `last`) = alpha sum_k a(i, k) B[k][.] + beta C with
 * a(i, k) = A[i ai + k ak]; rows >= mr repeat row mr - 1 and are not stored */
static inline __attribute__((always_inline)) void bk_tile(float *C, int ldc, const float *A, size_t ai, size_t ak,
                                                          const float *B, int ldb, int K, float alpha, float beta,
                                                          int mr, __mmask16 last, const int MR, const int NR)
{
    __m512 acc[6][4];
    const float *a[6];
    for (int i = 0; i < MR; i++) {
        a[i] = A + (size_t)(i < mr ? i : mr - 1) * ai;
        for (int r = 0; r < NR; r++) acc[i][r] = _mm512_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        const float *b = B + (size_t)k * ldb;
        __m512 bv[4];
        for (int r = 0; r < NR; r++)
            bv[r] = r == NR - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * r) : _mm512_loadu_ps(b + 16 * r);
        for (int i = 0; i < MR; i++) {
            const __m512 av = _mm512_set1_ps(a[i][(size_t)k * ak]);
            for (int r = 0; r < NR; r++) acc[i][r] = _mm512_fmadd_ps(av, bv[r], acc[i][r]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
    for (int i = 0; i < MR && i < mr; i++) {
        float *c = C + (size_t)i * ldc;
        for (int r = 0; r < NR; r++) {
            const __mmask16 m = r == NR - 1 ? last : (__mmask16)0xffff;
            __m512 v = _mm512_mul_ps(al, acc[i][r]);
            if (beta != 0.0f) v = _mm512_fmadd_ps(be, _mm512_maskz_loadu_ps(m, c + 16 * r), v);
            _mm512_mask_storeu_ps(c + 16 * r, m, v);
        }
    }
}

#define BK_ROWS(NR)                                                                                              \
    switch (mr) {                                                                                                \
    case 6: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 6, NR); break;                       \
    case 5: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 5, NR); break;                       \
    case 4: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 4, NR); break;                       \
    case 3: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 3, NR); break;                       \
    case 2: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 2, NR); break;                       \
    default: bk_tile(Ci, ldc, Ai, ai, ak, Bj, ldb, K, alpha, beta, mr, last, 1, NR); break;                      \
    }

static void bk_gemm(int M, int N, int K, float alpha, const float *A, size_t ai, size_t ak, const float *B, int ldb,
                    float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    /* a 64-column panel of B (K x 64) is read by every 6-row tile in turn, from L1 or L2 */
    for (int j = 0; j < N; j += 64) {
        const int nv = (N - j + 15) / 16 < 4 ? (N - j + 15) / 16 : 4;
        const int rem = N - j - 16 * (nv - 1); /* columns in the last vector, 1..16 */
        const __mmask16 last = (__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1);
        const float *Bj = B + j;
        for (int i = 0; i < M; i += 6) {
            const int mr = M - i < 6 ? M - i : 6;
            float *Ci = C + (size_t)i * ldc + j;
            const float *Ai = A + (size_t)i * ai;
            switch (nv) {
            case 4: BK_ROWS(4); break;
            case 3: BK_ROWS(3); break;
            case 2: BK_ROWS(2); break;
            default: BK_ROWS(1); break;
            }
        }
    }
}

void dpfl_nn_sgemm_nn_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc)
{
    bk_gemm(M, N, K, alpha, A, (size_t)lda, 1, B, ldb, beta, C, ldc);
}

void dpfl_nn_sgemm_tn_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc)
{
    bk_gemm(M, N, K, alpha, A, 1, (size_t)lda, B, ldb, beta, C, ldc);
}

#endif
