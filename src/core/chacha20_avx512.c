/* The AVX-512 ChaCha20 kernel (see chacha20.c): 16 blocks at a time, one block per lane of each of 16 registers
 * (one per state word); after the 20 rounds and the feed-forward the word-major registers are transposed into
 * block-major bytes.  Compiled with AVX-512 flags (the Makefile's AVX512_FLAGS); called only when
 * dpfl_cpu_avx512(). */
#include "core/chacha20.h"

#if DPFL_KERNELS_AVX512 && !DPFL_AVX512_TARGET
#error "chacha20_avx512.c must be compiled with the Makefile's AVX512_FLAGS"
#endif

#if DPFL_AVX512_TARGET
#include <immintrin.h>

#define QR16(a, b, c, d)                                                                                        \
    do {                                                                                                        \
        a = _mm512_add_epi32(a, b);                                                                             \
        d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 16);                                                       \
        c = _mm512_add_epi32(c, d);                                                                             \
        b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 12);                                                       \
        a = _mm512_add_epi32(a, b);                                                                             \
        d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 8);                                                        \
        c = _mm512_add_epi32(c, d);                                                                             \
        b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 7);                                                        \
    } while (0)

/* Transpose words 4g..4g+3 of 16 blocks (b0..b3: lane l of b_k is word 4g+k of block l) into place: after the
 * 32-bit and 64-bit unpacks, 128-bit lane q of t_r holds words 4g..4g+3 of block 4q + r. */
#define UNPACK4(b0, b1, b2, b3, t0, t1, t2, t3)                                                                 \
    do {                                                                                                        \
        __m512i l01 = _mm512_unpacklo_epi32(b0, b1), h01 = _mm512_unpackhi_epi32(b0, b1);                       \
        __m512i l23 = _mm512_unpacklo_epi32(b2, b3), h23 = _mm512_unpackhi_epi32(b2, b3);                       \
        t0 = _mm512_unpacklo_epi64(l01, l23);                                                                   \
        t1 = _mm512_unpackhi_epi64(l01, l23);                                                                   \
        t2 = _mm512_unpacklo_epi64(h01, h23);                                                                   \
        t3 = _mm512_unpackhi_epi64(h01, h23);                                                                   \
    } while (0)

/* c0..c3: 128-bit lane q of c_g holds words 4g..4g+3 of block 4q + r; writes blocks r, 4 + r, 8 + r, 12 + r. */
static inline void store4(uint8_t *out, int r, __m512i c0, __m512i c1, __m512i c2, __m512i c3)
{
    __m512i t0 = _mm512_shuffle_i32x4(c0, c1, 0x44), t1 = _mm512_shuffle_i32x4(c2, c3, 0x44);
    __m512i t2 = _mm512_shuffle_i32x4(c0, c1, 0xee), t3 = _mm512_shuffle_i32x4(c2, c3, 0xee);
    _mm512_storeu_si512((void *)(out + 64 * (0 + r)), _mm512_shuffle_i32x4(t0, t1, 0x88));
    _mm512_storeu_si512((void *)(out + 64 * (4 + r)), _mm512_shuffle_i32x4(t0, t1, 0xdd));
    _mm512_storeu_si512((void *)(out + 64 * (8 + r)), _mm512_shuffle_i32x4(t2, t3, 0x88));
    _mm512_storeu_si512((void *)(out + 64 * (12 + r)), _mm512_shuffle_i32x4(t2, t3, 0xdd));
}

/* The 20 rounds and the feed-forward for the 16 blocks counter .. counter + 15: x[j] holds word j of block
 * counter + l in lane l. */
static inline void chacha16_avx512(__m512i x[16], const __m512i k[8], uint64_t counter)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* lane l counts block counter + l: 64-bit addition, the carry goes into word 13 */
    __m512i clo = _mm512_set1_epi32((int)(uint32_t)counter);
    __m512i lo = _mm512_add_epi32(clo, iota);
    __mmask16 carry = _mm512_cmplt_epu32_mask(lo, clo);
    __m512i hi = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(counter >> 32)), carry,
                                       _mm512_set1_epi32((int)(uint32_t)(counter >> 32)), _mm512_set1_epi32(1));
    __m512i x0 = _mm512_set1_epi32(0x61707865), x1 = _mm512_set1_epi32(0x3320646e);
    __m512i x2 = _mm512_set1_epi32(0x79622d32), x3 = _mm512_set1_epi32(0x6b206574);
    __m512i x4 = k[0], x5 = k[1], x6 = k[2], x7 = k[3], x8 = k[4], x9 = k[5], x10 = k[6], x11 = k[7];
    __m512i x12 = lo, x13 = hi, x14 = _mm512_setzero_si512(), x15 = _mm512_setzero_si512();
    for (int round = 0; round < 10; round++) {
        QR16(x0, x4, x8, x12);
        QR16(x1, x5, x9, x13);
        QR16(x2, x6, x10, x14);
        QR16(x3, x7, x11, x15);
        QR16(x0, x5, x10, x15);
        QR16(x1, x6, x11, x12);
        QR16(x2, x7, x8, x13);
        QR16(x3, x4, x9, x14);
    }
    x[0] = _mm512_add_epi32(x0, _mm512_set1_epi32(0x61707865));
    x[1] = _mm512_add_epi32(x1, _mm512_set1_epi32(0x3320646e));
    x[2] = _mm512_add_epi32(x2, _mm512_set1_epi32(0x79622d32));
    x[3] = _mm512_add_epi32(x3, _mm512_set1_epi32(0x6b206574));
    x[4] = _mm512_add_epi32(x4, k[0]);
    x[5] = _mm512_add_epi32(x5, k[1]);
    x[6] = _mm512_add_epi32(x6, k[2]);
    x[7] = _mm512_add_epi32(x7, k[3]);
    x[8] = _mm512_add_epi32(x8, k[4]);
    x[9] = _mm512_add_epi32(x9, k[5]);
    x[10] = _mm512_add_epi32(x10, k[6]);
    x[11] = _mm512_add_epi32(x11, k[7]);
    x[12] = _mm512_add_epi32(x12, lo);
    x[13] = _mm512_add_epi32(x13, hi); /* words 14, 15: nonce 0, nothing to add */
    x[14] = x14;
    x[15] = x15;
}

size_t dpfl_chacha20_blocks_avx512(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    __m512i k[8];
    for (int i = 0; i < 8; i++) k[i] = _mm512_set1_epi32((int)dpfl_load32_le(key + 4 * i));
    size_t done = 0;
    for (; nblocks - done >= 16; done += 16, counter += 16) {
        __m512i x[16];
        chacha16_avx512(x, k, counter);
        __m512i a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3;
        UNPACK4(x[0], x[1], x[2], x[3], a0, a1, a2, a3);
        UNPACK4(x[4], x[5], x[6], x[7], b0, b1, b2, b3);
        UNPACK4(x[8], x[9], x[10], x[11], c0, c1, c2, c3);
        UNPACK4(x[12], x[13], x[14], x[15], d0, d1, d2, d3);
        uint8_t *o = out + 64 * done;
        store4(o, 0, a0, b0, c0, d0);
        store4(o, 1, a1, b1, c1, d1);
        store4(o, 2, a2, b2, c2, d2);
        store4(o, 3, a3, b3, c3, d3);
    }
    return done;
}

void dpfl_chacha20_words16_avx512(uint32_t out[256], const uint8_t key[32], uint64_t counter)
{
    __m512i k[8], x[16];
    for (int i = 0; i < 8; i++) k[i] = _mm512_set1_epi32((int)dpfl_load32_le(key + 4 * i));
    chacha16_avx512(x, k, counter);
    for (int j = 0; j < 16; j++) _mm512_storeu_si512((void *)(out + 16 * j), x[j]);
}

#else
typedef int dpfl_chacha20_avx512_unused; /* an empty file is not C */
#endif
