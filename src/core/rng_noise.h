/* The bulk-noise code (dpfl_rng_add_gaussian_chunked and its forms), written once and compiled twice:
 *   rng.c includes it with NOISE_VEC 0: the portable code, compiled for the build's target;
 *   rng_avx512.c includes it with NOISE_VEC 1: the AVX-512 code, compiled with AVX-512 flags, which rng.c calls
 *   only when dpfl_cpu_avx512() (dpfl_noise_chunk_avx512).
 * Both run the same steps and give the same bits (tests/test_core.c, tests/test_dispatch.c).  Everything here is
 * static: each includer gets its own copy, and the AVX-512 copy is never reached on a CPU without AVX-512.
 * Internal to rng.c and rng_avx512.c. */
#ifndef NOISE_VEC
#error "define NOISE_VEC (0 or 1) before including core/rng_noise.h"
#endif
#if NOISE_VEC && !DPFL_AVX512_TARGET
#error "the AVX-512 noise code must be compiled with the Makefile's AVX512_FLAGS"
#endif

#include "core/chacha20.h"
#include "core/cpu.h"
#include "dpfl/core.h"

#include <math.h>
#include <string.h>

#if NOISE_VEC
#include <immintrin.h>
#define NOISE_WORDS16 dpfl_chacha20_words16_avx512
#else
#define NOISE_WORDS16 dpfl_chacha20_words16
#endif

/* Ziggurat tables for the standard normal (rng.c: zig_init, built before any noise): layer i's density f_i and
 * outer edge x_i (x_0 = 0), and for the bulk float noise the 23-bit magnitude bound and width of each layer */
#define ZIG_R 3.6541528853610088
extern DPFL_HIDDEN double dpfl_zig_f[256], dpfl_zig_x[256];
extern DPFL_HIDDEN _Alignas(64) uint32_t dpfl_zig_k32[256];
extern DPFL_HIDDEN _Alignas(64) float dpfl_zig_w32[256];

/* rng.c: the next blocks of the keystream into r->buf */
DPFL_HIDDEN void dpfl_rng_refill(dpfl_rng *r);

/* What the noise values z (already times sigma) do to the output at position p:
 *   NOISE_ADD: x += z;   NOISE_SCALE: x = (x + z) * scale;   NOISE_AXPY: y += a * (x + z), x read only. */
typedef struct {
    float *x, *y;
    float scale, a;
} noise_out;

/* rng_avx512.c: noise_chunk of the AVX-512 copy */
DPFL_HIDDEN void dpfl_noise_chunk_avx512(dpfl_rng *r, const noise_out *o, size_t n, double sigma);

/* The ziggurat's slow path (dpfl_rng_gaussian's and the bulk noise's) for a draw outside its layer's rectangle.
 * A wedge draw (layer i >= 1, x at or beyond the layer's inner edge x_{i-1}) is accepted iff
 * y = (f_{i-1} - f_i) U + f_i < exp(-x^2 / 2).  Most draws are decided without exp: with d = (x^2 - x_{i-1}^2) / 2
 * >= 0, exp(-x^2 / 2) = f_{i-1} e^{-d} lies in [f_{i-1} (1 - d), f_{i-1} (1 - d + d^2 / 2)], so y below the lower
 * bound accepts and y above the upper bound rejects.  The bounds are used with a margin of 2^-40, far above the
 * rounding error of the bounds, of f_{i-1} and of libm's exp (all below 1e-15 on values <= 1): whenever they
 * decide, the comparison with exp would have decided the same, so the draws (and the sequence) are exactly those
 * of the plain test.  Only draws within about d^2 / 2 of the curve (under 1% of wedge draws) evaluate exp. */
#define ZIG_SQUEEZE_MARGIN 0x1.0p-40

/* The tail beyond R (Marsaglia 1964): R + an exponential-proposal draw, positive. */
static inline double zig_tail(dpfl_rng *r)
{
    for (;;) {
        double xx = -log1p(-dpfl_rng_uniform(r)) / ZIG_R;
        double yy = -log1p(-dpfl_rng_uniform(r));
        if (yy + yy > xx * xx) return ZIG_R + xx;
    }
}

/* Whether the wedge draw (x, y) of layer i >= 1 is accepted: y < exp(-x^2 / 2), by the squeeze when it decides. */
static inline int zig_wedge(unsigned i, double x, double y)
{
    const double xe = dpfl_zig_x[i - 1], f = dpfl_zig_f[i - 1], d = 0.5 * (x - xe) * (x + xe);
    const double lo = f * (1.0 - d), hi = lo + f * (0.5 * d * d);
    int acc = (d >= 0.0) & (y < lo - ZIG_SQUEEZE_MARGIN), rej = (d >= 0.0) & (y >= hi + ZIG_SQUEEZE_MARGIN);
    if (!(acc | rej)) acc = y < exp(-0.5 * x * x); /* within the margin of the curve, or d < 0: rare */
    return acc;
}

/* Bulk noise (the chunked code below): one 32-bit keystream word per draw (8 bits layer, 1 sign, 23 bits
 * magnitude: float resolution), the same exact ziggurat acceptance as dpfl_rng_gaussian. */
#if NOISE_VEC
/* t[i] for the 16 lanes of i (low byte 0..255), t 64-byte aligned: eight two-register permutes (32 entries
 * each, by the low five bits) and a blend tree on bits 5, 6, 7.  Gathers would be fewer instructions, but they
 * are several times slower on CPUs with the Gather Data Sampling mitigation. */
static inline __m512i lut256_epi32(const uint32_t *t, __m512i i, __mmask16 b5, __mmask16 b6, __mmask16 b7)
{
    __m512i q[8];
    for (int g = 0; g < 8; g++)
        q[g] = _mm512_permutex2var_epi32(_mm512_load_si512((const void *)(t + 32 * g)), i,
                                         _mm512_load_si512((const void *)(t + 32 * g + 16)));
    for (int g = 0; g < 4; g++) q[g] = _mm512_mask_blend_epi32(b5, q[2 * g], q[2 * g + 1]);
    for (int g = 0; g < 2; g++) q[g] = _mm512_mask_blend_epi32(b6, q[2 * g], q[2 * g + 1]);
    return _mm512_mask_blend_epi32(b7, q[0], q[1]);
}

static inline __m512 lut256_ps(const float *t, __m512i i, __mmask16 b5, __mmask16 b6, __mmask16 b7)
{
    __m512 q[8];
    for (int g = 0; g < 8; g++)
        q[g] = _mm512_permutex2var_ps(_mm512_load_ps(t + 32 * g), i, _mm512_load_ps(t + 32 * g + 16));
    for (int g = 0; g < 4; g++) q[g] = _mm512_mask_blend_ps(b5, q[2 * g], q[2 * g + 1]);
    for (int g = 0; g < 2; g++) q[g] = _mm512_mask_blend_ps(b6, q[2 * g], q[2 * g + 1]);
    return _mm512_mask_blend_ps(b7, q[0], q[1]);
}

/* The rectangle test and value of 16 words whose layers' bound and width are kt and wt: *acc = lanes inside
 * their rectangle; the value is s * (mag * w), its sign flipped where bit 8 is set: the scalar path's float
 * arithmetic, lane by lane. */
static inline __m512 zig16_kw(__m512i u, __m512 vs, __m512i kt, __m512 wt, __mmask16 *acc)
{
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    __m512i mag = _mm512_srli_epi32(u, 9);
    *acc = _mm512_cmplt_epi32_mask(mag, kt);
    __m512 v = _mm512_mul_ps(vs, _mm512_mul_ps(_mm512_cvtepi32_ps(mag), wt));
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(v), _mm512_and_si512(_mm512_slli_epi32(u, 23), signbit)));
}

/* zig16_kw with the layer's tables looked up (the layer is u's low byte) */
static inline __m512 zig16(__m512i u, __m512 vs, __mmask16 *acc)
{
    __mmask16 b5 = _mm512_test_epi32_mask(u, _mm512_set1_epi32(32));
    __mmask16 b6 = _mm512_test_epi32_mask(u, _mm512_set1_epi32(64));
    __mmask16 b7 = _mm512_test_epi32_mask(u, _mm512_set1_epi32(128));
    return zig16_kw(u, vs, lut256_epi32(dpfl_zig_k32, u, b5, b6, b7), lut256_ps(dpfl_zig_w32, u, b5, b6, b7), acc);
}

/* The same lookups for 64 words at once on CPUs with AVX512_VBMI (dpfl_cpu_avx512_vbmi), from the byte planes
 * dpfl_zig_planes (rng.c): the 64 layer bytes go into one register, each plane is two 128-entry byte permutes and
 * a blend on bit 7, and the planes are interleaved back into 32-bit entries.  The unpacks interleave within
 * 128-bit lanes, so output register r's lane 4q + e comes from byte 16q + 4r + e of the planes; the layer bytes
 * are gathered in that order (VBMI_ORDER: byte 16q + 4e of u[r], r = 0, 1 from the first pair, 2, 3 from the
 * second).  About half the instructions of two lut256 calls per 16 words, on the same tables. */
#define VBMI_TARGET __attribute__((target("avx512vbmi")))
#define VBMI_INLINE static inline __attribute__((target("avx512vbmi"), always_inline))
extern DPFL_HIDDEN _Alignas(64) uint8_t dpfl_zig_planes[7][256];
/* VBMI_ORDER[P] = 64 ((P >> 2) & 1) + 16 (P >> 4) + 4 (P & 3) */
static _Alignas(64) const uint8_t VBMI_ORDER[64] = {
      0,   4,   8,  12,  64,  68,  72,  76,   0,   4,   8,  12,  64,  68,  72,  76,
     16,  20,  24,  28,  80,  84,  88,  92,  16,  20,  24,  28,  80,  84,  88,  92,
     32,  36,  40,  44,  96, 100, 104, 108,  32,  36,  40,  44,  96, 100, 104, 108,
     48,  52,  56,  60, 112, 116, 120, 124,  48,  52,  56,  60, 112, 116, 120, 124};

VBMI_INLINE __m512i plane_vbmi(const uint8_t *t, __m512i I, __mmask64 b7)
{
    const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)t), I,
                                                _mm512_load_si512((const void *)(t + 64)));
    const __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)(t + 128)), I,
                                                _mm512_load_si512((const void *)(t + 192)));
    return _mm512_mask_blend_epi8(b7, lo, hi);
}

/* bytes b0..b3 (plane order) into the four registers of 32-bit entries */
VBMI_INLINE void planes_join(__m512i b0, __m512i b1, __m512i b2, __m512i b3, __m512i out[4])
{
    const __m512i l = _mm512_unpacklo_epi8(b0, b1), h = _mm512_unpackhi_epi8(b0, b1);
    const __m512i l2 = _mm512_unpacklo_epi8(b2, b3), h2 = _mm512_unpackhi_epi8(b2, b3);
    out[0] = _mm512_unpacklo_epi16(l, l2);
    out[1] = _mm512_unpackhi_epi16(l, l2);
    out[2] = _mm512_unpacklo_epi16(h, h2);
    out[3] = _mm512_unpackhi_epi16(h, h2);
}

VBMI_INLINE void lut64_vbmi(const __m512i u[4], __m512i kt[4], __m512i wt[4])
{
    const __m512i order = _mm512_load_si512((const void *)VBMI_ORDER);
    const __m512i I = _mm512_mask_blend_epi8((__mmask64)0xff00ff00ff00ff00ull, /* bytes of u[2], u[3] */
                                             _mm512_permutex2var_epi8(u[0], order, u[1]),
                                             _mm512_permutex2var_epi8(u[2], order, u[3]));
    const __mmask64 b7 = _mm512_movepi8_mask(I);
    const uint8_t(*p)[256] = dpfl_zig_planes;
    planes_join(plane_vbmi(p[0], I, b7), plane_vbmi(p[1], I, b7), plane_vbmi(p[2], I, b7), _mm512_setzero_si512(),
                kt);
    planes_join(plane_vbmi(p[3], I, b7), plane_vbmi(p[4], I, b7), plane_vbmi(p[5], I, b7),
                plane_vbmi(p[6], I, b7), wt);
}
#endif

/* Chunked noise: chunk c (parameters [c * DPFL_NOISE_CHUNK, ...)) draws from the stream
 * dpfl_rng_derive(r, NOISE_TAG, nonce, c), where nonce is one block counter value claimed from r (the block
 * itself is never generated): each call has its own nonce, so two calls on one stream never share noise, and the
 * chunks' streams are keyed apart from every other use of r's key by the tag.  Which thread runs a chunk cannot
 * change its values.
 *
 * Within a chunk's stream the words are laid out for the vector path: parameter p = 256 G + 16 j + l first takes
 * word j of block 16 G + l (dpfl_chacha20_words16's word-major order).  The blocks of these first words are
 * claimed up front, so everything else (the slow path's uniforms, fresh words for redraws) comes from the blocks
 * after them through the rng's buffer, in an order fixed per block of NOISE_BLOCK parameters (noise_pending).
 * The vector and the scalar code run the same steps, so they give the same values. */
#define NOISE_TAG 0x6470666c6e6f6973ULL /* "dpflnois" */

enum { NOISE_ADD, NOISE_SCALE, NOISE_AXPY };
#define NOISE_INLINE static inline __attribute__((always_inline))

static inline uint32_t rng_u32(dpfl_rng *r)
{
    if (r->pos + 4 > sizeof r->buf) dpfl_rng_refill(r);
    uint32_t v;
    memcpy(&v, r->buf + r->pos, 4);
    r->pos += 4;
    return v;
}

NOISE_INLINE void noise_apply1(const noise_out *o, int op, size_t p, float z)
{
    if (op == NOISE_AXPY) o->y[p] += o->a * (o->x[p] + z);
    else if (op == NOISE_SCALE) o->x[p] = (o->x[p] + z) * o->scale;
    else o->x[p] += z;
}

/* The draws of a block of NOISE_BLOCK parameters that fell outside their rectangles (about 1.5%) are finished
 * together, in rounds: (a) every wedge draw (layer >= 1), in order of position, takes one uniform; (b) the wedge
 * draws are tested (zig_wedge), then the tail draws (layer 0), in order, run the tail sampler, which takes its
 * uniforms as it goes; (c) every wedge draw rejected in (b), in order, takes a fresh 32-bit word: done if inside
 * its rectangle, in the next round otherwise.  A block's worth lets the vector code fill its lanes. */
enum { NOISE_BLOCK = 1024 };

typedef struct {
    _Alignas(64) uint32_t w[NOISE_BLOCK];                /* the block's first words (dpfl_chacha20_words16) */
    uint32_t pos[NOISE_BLOCK + 16], u[NOISE_BLOCK + 16]; /* pending draws: positions in the chunk, words */
    uint32_t ap[NOISE_BLOCK + 16];                       /* accepted: positions and values */
    float av[NOISE_BLOCK + 16];
    uint32_t tp[NOISE_BLOCK + 16], tu[NOISE_BLOCK + 16]; /* tail draws of the round */
    double U[NOISE_BLOCK + 16];                          /* the portable code's uniforms */
} noise_scratch;

#if NOISE_VEC
/* Steps (a) and (b) for the wedge draws among m <= 16 words, one per lane: the same uniforms in the same order as
 * the portable code, the same double arithmetic (nothing fused), the same decisions.  *wedge = the wedge lanes;
 * returns those accepted, with their values in v[lane]. */
static inline __mmask16 wedge16(dpfl_rng *r, const uint32_t *u, unsigned m, double sigma, float *v,
                                __mmask16 *wedge)
{
    const __mmask16 K = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1);
    const __m512i w = _mm512_maskz_loadu_epi32(K, u);
    const __mmask16 W = _mm512_mask_test_epi32_mask(K, w, _mm512_set1_epi32(0xff));
    const unsigned c = (unsigned)__builtin_popcount(W), c0 = (unsigned)__builtin_popcount(W & 0xff);
    *wedge = W;
    __m512d U[2];
    if (r->pos + 8 * c <= sizeof r->buf) { /* (a): the next c words of the buffer, as c dpfl_rng_uniform calls */
        const uint8_t *b = r->buf + r->pos;
        const __m512i q0 = _mm512_maskz_expandloadu_epi64((__mmask8)W, b);
        const __m512i q1 = _mm512_maskz_expandloadu_epi64((__mmask8)(W >> 8), b + 8 * c0);
        r->pos += 8 * c;
        U[0] = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(q0, 11)), _mm512_set1_pd(0x1.0p-53));
        U[1] = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(q1, 11)), _mm512_set1_pd(0x1.0p-53));
    } else { /* the buffer refills part-way */
        double Us[16] = {0};
        for (unsigned t = 0; t < m; t++)
            if (W >> t & 1) Us[t] = dpfl_rng_uniform(r);
        U[0] = _mm512_loadu_pd(Us);
        U[1] = _mm512_loadu_pd(Us + 8);
    }
    const __mmask16 b5 = _mm512_test_epi32_mask(w, _mm512_set1_epi32(32));
    const __mmask16 b6 = _mm512_test_epi32_mask(w, _mm512_set1_epi32(64));
    const __mmask16 b7 = _mm512_test_epi32_mask(w, _mm512_set1_epi32(128));
    const __m512 wt = lut256_ps(dpfl_zig_w32, w, b5, b6, b7);
    const __m512i layer = _mm512_and_si512(w, _mm512_set1_epi32(0xff));
    const __m512i below = _mm512_sub_epi32(layer, _mm512_set1_epi32(1));
    const __m512i mag = _mm512_srli_epi32(w, 9);
    const __m512d zero = _mm512_setzero_pd();
    __mmask16 acc = 0, amb = 0;
    _Alignas(64) double xs[16], ys[16];
    for (int h = 0; h < 2; h++) {
        const __mmask8 mh = (__mmask8)(W >> (8 * h));
        if (!mh) continue;
        const __m256i li = h ? _mm512_extracti32x8_epi32(layer, 1) : _mm512_castsi512_si256(layer);
        const __m256i bi = h ? _mm512_extracti32x8_epi32(below, 1) : _mm512_castsi512_si256(below);
        const __m256i mi = h ? _mm512_extracti32x8_epi32(mag, 1) : _mm512_castsi512_si256(mag);
        const __m256i wi = h ? _mm512_extracti32x8_epi32(w, 1) : _mm512_castsi512_si256(w);
        const __m256 fi = h ? _mm512_extractf32x8_ps(wt, 1) : _mm512_castps512_ps256(wt);
        const __m512d f1 = _mm512_mask_i32gather_pd(zero, mh, bi, dpfl_zig_f, 8);
        const __m512d f0 = _mm512_mask_i32gather_pd(zero, mh, li, dpfl_zig_f, 8);
        const __m512d xe = _mm512_mask_i32gather_pd(zero, mh, bi, dpfl_zig_x, 8);
        const __m512d x = _mm512_mul_pd(_mm512_cvtepu32_pd(mi), _mm512_cvtps_pd(fi));
        const __m512d y = _mm512_add_pd(_mm512_mul_pd(_mm512_sub_pd(f1, f0), U[h]), f0);
        const __m512d d =
            _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), _mm512_sub_pd(x, xe)), _mm512_add_pd(x, xe));
        const __m512d lo = _mm512_mul_pd(f1, _mm512_sub_pd(_mm512_set1_pd(1.0), d));
        const __m512d hi =
            _mm512_add_pd(lo, _mm512_mul_pd(f1, _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), d), d)));
        const __mmask8 up = _mm512_mask_cmp_pd_mask(mh, d, zero, _CMP_GE_OQ);
        const __mmask8 a =
            _mm512_mask_cmp_pd_mask(up, y, _mm512_sub_pd(lo, _mm512_set1_pd(ZIG_SQUEEZE_MARGIN)), _CMP_LT_OQ);
        const __mmask8 rj =
            _mm512_mask_cmp_pd_mask(up, y, _mm512_add_pd(hi, _mm512_set1_pd(ZIG_SQUEEZE_MARGIN)), _CMP_GE_OQ);
        acc = (__mmask16)(acc | (unsigned)a << (8 * h));
        amb = (__mmask16)(amb | (unsigned)(mh & ~a & ~rj) << (8 * h));
        _mm512_store_pd(xs + 8 * h, x);
        _mm512_store_pd(ys + 8 * h, y);
        /* sigma * (neg ? -x : x), then float; the sign by xor, so that -0 stays -0 as in the scalar code */
        const __mmask8 neg = _mm256_test_epi32_mask(wi, _mm256_set1_epi32(0x100));
        const __m512d sx = _mm512_mask_xor_pd(x, neg, x, _mm512_set1_pd(-0.0));
        _mm256_storeu_ps(v + 8 * h, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_set1_pd(sigma), sx)));
    }
    for (unsigned t = amb; t; t &= t - 1) { /* near the curve: exp decides (rare) */
        const unsigned l = (unsigned)__builtin_ctz(t);
        if (ys[l] < exp(-0.5 * xs[l] * xs[l])) acc = (__mmask16)(acc | (1u << l));
    }
    return acc;
}
#endif

/* The rounds for the k pending draws in sc->pos / sc->u. */
NOISE_INLINE void noise_pending(dpfl_rng *r, const noise_out *o, int op, int vec, noise_scratch *sc, unsigned k,
                                float s, double sigma)
{
    (void)vec; /* only the AVX-512 copy (NOISE_VEC 1) has a vector path */
    uint32_t *pos = sc->pos, *u = sc->u, *ap = sc->ap, *tp = sc->tp, *tu = sc->tu;
    float *av = sc->av;
    while (k) {
        unsigned na = 0, nr = 0, nt = 0;
        /* (a) and (b) for the wedges: accepted to ap/av, rejected to the front of pos; tails to tp/tu */
#if NOISE_VEC
        if (vec) {
            for (unsigned b = 0; b < k; b += 16) {
                const unsigned m = k - b < 16 ? k - b : 16;
                const __mmask16 K = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1);
                _Alignas(64) float v[16];
                __mmask16 W;
                const __mmask16 acc = wedge16(r, u + b, m, sigma, v, &W);
                const __m512i p = _mm512_maskz_loadu_epi32(K, pos + b), w = _mm512_maskz_loadu_epi32(K, u + b);
                const __mmask16 rej = (__mmask16)(W & ~acc), tail = (__mmask16)(K & ~W);
                /* full stores of compressed vectors: each array has 16 entries of slack, and nr <= b, so the
                 * rejected positions never overwrite an entry not yet read */
                _mm512_storeu_si512((void *)(ap + na), _mm512_maskz_compress_epi32(acc, p));
                _mm512_storeu_ps(av + na, _mm512_maskz_compress_ps(acc, _mm512_load_ps(v)));
                na += (unsigned)__builtin_popcount(acc);
                _mm512_storeu_si512((void *)(pos + nr), _mm512_maskz_compress_epi32(rej, p));
                nr += (unsigned)__builtin_popcount(rej);
                if (tail) { /* rare */
                    _mm512_storeu_si512((void *)(tp + nt), _mm512_maskz_compress_epi32(tail, p));
                    _mm512_storeu_si512((void *)(tu + nt), _mm512_maskz_compress_epi32(tail, w));
                    nt += (unsigned)__builtin_popcount(tail);
                }
            }
        } else
#endif
        {
            for (unsigned t = 0; t < k; t++) sc->U[t] = (u[t] & 0xff) ? dpfl_rng_uniform(r) : 0.0;
            for (unsigned t = 0; t < k; t++) {
                const uint32_t w = u[t];
                const unsigned i = w & 0xff;
                if (i == 0) { /* a tail draw: after the wedges */
                    tp[nt] = pos[t];
                    tu[nt++] = w;
                    continue;
                }
                const double x = (double)(w >> 9) * (double)dpfl_zig_w32[i];
                const int acc = zig_wedge(i, x, (dpfl_zig_f[i - 1] - dpfl_zig_f[i]) * sc->U[t] + dpfl_zig_f[i]);
                ap[na] = pos[t];
                av[na] = (float)(sigma * ((w >> 8) & 1 ? -x : x));
                na += (unsigned)acc;
                pos[nr] = pos[t];
                nr += (unsigned)!acc;
            }
        }
        for (unsigned t = 0; t < nt; t++) { /* (b) the tails, in order */
            const double g = zig_tail(r);
            ap[na] = tp[t];
            av[na++] = (float)(sigma * ((tu[t] >> 8) & 1 ? -g : g));
        }
        for (unsigned t = 0; t < na; t++) noise_apply1(o, op, ap[t], av[t]);
        /* (c) a fresh word for every rejected wedge, in order */
        unsigned kk = 0;
        na = 0;
#if NOISE_VEC
        if (vec) {
            const __m512 vs = _mm512_set1_ps(s);
            for (unsigned b = 0; b < nr; b += 16) {
                const unsigned m = nr - b < 16 ? nr - b : 16;
                const __mmask16 K = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1);
                __m512i w;
                if (r->pos + 4 * m <= sizeof r->buf) { /* m rng_u32 calls */
                    w = _mm512_maskz_loadu_epi32(K, r->buf + r->pos);
                    r->pos += 4 * m;
                } else {
                    uint32_t ws[16] = {0};
                    for (unsigned t = 0; t < m; t++) ws[t] = rng_u32(r);
                    w = _mm512_loadu_si512((const void *)ws);
                }
                __mmask16 acc;
                const __m512 v = zig16(w, vs, &acc);
                acc &= K;
                const __m512i p = _mm512_maskz_loadu_epi32(K, pos + b);
                _mm512_storeu_si512((void *)(ap + na), _mm512_maskz_compress_epi32(acc, p));
                _mm512_storeu_ps(av + na, _mm512_maskz_compress_ps(acc, v));
                na += (unsigned)__builtin_popcount(acc);
                const __mmask16 again = (__mmask16)(K & ~acc);
                _mm512_storeu_si512((void *)(pos + kk), _mm512_maskz_compress_epi32(again, p));
                _mm512_storeu_si512((void *)(u + kk), _mm512_maskz_compress_epi32(again, w));
                kk += (unsigned)__builtin_popcount(again);
            }
        } else
#endif
        {
            for (unsigned t = 0; t < nr; t++) {
                const uint32_t w = rng_u32(r);
                const unsigned i = w & 0xff;
                if ((w >> 9) < dpfl_zig_k32[i]) {
                    const float v = (float)(w >> 9) * dpfl_zig_w32[i];
                    ap[na] = pos[t];
                    av[na++] = (w >> 8) & 1 ? -s * v : s * v;
                } else {
                    pos[kk] = pos[t];
                    u[kk++] = w;
                }
            }
        }
        for (unsigned t = 0; t < na; t++) noise_apply1(o, op, ap[t], av[t]);
        k = kk;
    }
}

#if NOISE_VEC
/* noise_apply1 on the lanes m of positions p .. p + 15 */
NOISE_INLINE void noise_apply16(const noise_out *o, int op, size_t p, __m512 z, __mmask16 m)
{
    __m512 x = _mm512_maskz_loadu_ps(m, o->x + p);
    if (op == NOISE_AXPY) {
        __m512 y = _mm512_maskz_loadu_ps(m, o->y + p);
        y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_set1_ps(o->a), _mm512_add_ps(x, z)));
        _mm512_mask_storeu_ps(o->y + p, m, y);
    } else if (op == NOISE_SCALE) {
        _mm512_mask_storeu_ps(o->x + p, m, _mm512_mul_ps(_mm512_add_ps(x, z), _mm512_set1_ps(o->scale)));
    } else {
        _mm512_mask_storeu_ps(o->x + p, m, _mm512_add_ps(x, z));
    }
}
#endif

#if NOISE_VEC
/* The vector loop of noise_chunk_op over a full group of 256 words w (positions base ..), with the VBMI lookup:
 * the same steps in the same order, so the same values and the same pending draws.  Not inlined into its caller
 * (which is compiled without VBMI): one call per 256 parameters. */
VBMI_TARGET __attribute__((noinline)) static unsigned group_vbmi(const noise_out *o, int op, const uint32_t *w,
                                                                 size_t base, __m512 vs, uint32_t *pos, unsigned k)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t j4 = 0; j4 < 16; j4 += 4) {
        __m512i u[4], kt[4], wt[4];
        for (int t = 0; t < 4; t++) u[t] = _mm512_load_si512((const void *)(w + 16 * (j4 + t)));
        lut64_vbmi(u, kt, wt);
        for (int t = 0; t < 4; t++) {
            const size_t p = base + 16 * (j4 + t);
            __mmask16 acc;
            const __m512 v = zig16_kw(u[t], vs, kt[t], _mm512_castsi512_ps(wt[t]), &acc);
            const __mmask16 rej = (__mmask16)~acc;
            const __m512i q = _mm512_add_epi32(iota, _mm512_set1_epi32((int)p));
            _mm512_storeu_si512((void *)(pos + k), _mm512_maskz_compress_epi32(rej, q));
            k += (unsigned)__builtin_popcount(rej);
            if (op == NOISE_AXPY) noise_apply16(o, NOISE_AXPY, p, v, acc);
            else if (op == NOISE_SCALE) noise_apply16(o, NOISE_SCALE, p, v, acc);
            else noise_apply16(o, NOISE_ADD, p, v, acc);
        }
    }
    return k;
}
#endif

/* One chunk: n <= DPFL_NOISE_CHUNK values from the fresh stream r, applied to positions [0, n) of o. */
NOISE_INLINE void noise_chunk_op(dpfl_rng *r, const noise_out *o, int op, int vec, size_t n, double sigma)
{
    (void)vec;
    const size_t groups = (n + 255) / 256;
    DPFL_ASSERT(r->counter == 0 && r->pos == sizeof r->buf);
    r->counter = 16 * (uint64_t)groups; /* the chunk's first words; the slow path's buffer starts after them */
    noise_scratch sc;
    const float s = (float)sigma;
#if NOISE_VEC
    const int vbmi = vec && dpfl_cpu_avx512_vbmi();
#endif
    for (size_t blk = 0; blk < n; blk += NOISE_BLOCK) {
        unsigned k = 0; /* the block's draws outside their rectangles, in sc.pos / sc.u */
        for (size_t base = blk; base < n && base < blk + NOISE_BLOCK; base += 256) {
            const size_t m = n - base < 256 ? n - base : 256;
            uint32_t *w = sc.w + (base - blk);
            NOISE_WORDS16(w, r->key, (uint64_t)base / 16);
#if NOISE_VEC
            if (vec && m == 256 && vbmi) {
                k = group_vbmi(o, op, w, base, _mm512_set1_ps(s), sc.pos, k);
                continue;
            }
            if (vec) {
                const __m512 vs = _mm512_set1_ps(s);
                const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                for (size_t j = 0; 16 * j < m; j++) {
                    const __mmask16 valid =
                        m - 16 * j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (m - 16 * j)) - 1);
                    const __m512i u = _mm512_load_si512((const void *)(w + 16 * j));
                    __mmask16 acc;
                    const __m512 v = zig16(u, vs, &acc);
                    acc &= valid;
                    const __mmask16 rej = (__mmask16)(valid & ~acc);
                    /* the rejected lanes' positions and words, appended (full stores: 16 entries of slack) */
                    const __m512i q = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(base + 16 * j)));
                    _mm512_storeu_si512((void *)(sc.pos + k), _mm512_maskz_compress_epi32(rej, q));
                    k += (unsigned)__builtin_popcount(rej);
                    noise_apply16(o, op, base + 16 * j, v, acc);
                }
                continue;
            }
#endif
            /* the sign by xor, not by a branch on a random bit: -(s v) is (-s) v exactly, -0 included */
            for (size_t q = 0; q < m; q++) {
                const uint32_t u = w[q];
                const unsigned i = u & 0xff;
                if ((u >> 9) < dpfl_zig_k32[i]) {
                    const float v = s * ((float)(u >> 9) * dpfl_zig_w32[i]);
                    uint32_t b;
                    memcpy(&b, &v, sizeof b);
                    b ^= (u & 0x100) << 23;
                    float z;
                    memcpy(&z, &b, sizeof z);
                    noise_apply1(o, op, base + q, z);
                } else {
                    sc.pos[k++] = (uint32_t)(base + q);
                }
            }
        }
        if (k) {
            for (unsigned t = 0; t < k; t++) sc.u[t] = sc.w[sc.pos[t] - blk];
            noise_pending(r, o, op, vec, &sc, k, s, sigma);
        }
    }
}

/* One chunk: n <= DPFL_NOISE_CHUNK values from the fresh stream r, applied to positions [0, n) of o. */
static void noise_chunk(dpfl_rng *r, const noise_out *o, size_t n, double sigma)
{
    if (o->y) noise_chunk_op(r, o, NOISE_AXPY, NOISE_VEC, n, sigma);
    else if (o->scale != 1.0f) noise_chunk_op(r, o, NOISE_SCALE, NOISE_VEC, n, sigma);
    else noise_chunk_op(r, o, NOISE_ADD, NOISE_VEC, n, sigma);
}
