/* The AVX2 ChaCha20 kernel (see chacha20.c): 8 blocks at a time, one block per lane.  Compiled with -mavx2 (the
 * Makefile's AVX2_FLAGS); called only when dpfl_cpu_avx2() (and not dpfl_cpu_avx512()). */
#include "core/chacha20.h"

#if DPFL_KERNELS_AVX2 && !defined(__AVX2__)
#error "chacha20_avx2.c must be compiled with the Makefile's AVX2_FLAGS"
#endif

#if defined(__AVX2__)
#include <immintrin.h>

#define ROT8(v, n) _mm256_or_si256(_mm256_slli_epi32(v, n), _mm256_srli_epi32(v, 32 - (n)))
#define QR8(a, b, c, d)                                                                                         \
    do {                                                                                                        \
        a = _mm256_add_epi32(a, b);                                                                             \
        d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot16);                                                 \
        c = _mm256_add_epi32(c, d);                                                                             \
        b = ROT8(_mm256_xor_si256(b, c), 12);                                                                   \
        a = _mm256_add_epi32(a, b);                                                                             \
        d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot8);                                                  \
        c = _mm256_add_epi32(c, d);                                                                             \
        b = ROT8(_mm256_xor_si256(b, c), 7);                                                                    \
    } while (0)

/* b0..b3: lane l of b_k is word 4g + k of block l.  After the unpacks, 128-bit half h of t_r holds words
 * 4g..4g+3 of block 4h + r. */
#define UNPACK4x8(b0, b1, b2, b3, t0, t1, t2, t3)                                                               \
    do {                                                                                                        \
        __m256i l01 = _mm256_unpacklo_epi32(b0, b1), h01 = _mm256_unpackhi_epi32(b0, b1);                       \
        __m256i l23 = _mm256_unpacklo_epi32(b2, b3), h23 = _mm256_unpackhi_epi32(b2, b3);                       \
        t0 = _mm256_unpacklo_epi64(l01, l23);                                                                   \
        t1 = _mm256_unpackhi_epi64(l01, l23);                                                                   \
        t2 = _mm256_unpacklo_epi64(h01, h23);                                                                   \
        t3 = _mm256_unpackhi_epi64(h01, h23);                                                                   \
    } while (0)

/* a, b, c, d: words 0-3, 4-7, 8-11, 12-15 of blocks r (low half) and 4 + r (high half). */
static inline void store2(uint8_t *out, int r, __m256i a, __m256i b, __m256i c, __m256i d)
{
    _mm256_storeu_si256((__m256i *)(out + 64 * r), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 64 * r + 32), _mm256_permute2x128_si256(c, d, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 64 * (4 + r)), _mm256_permute2x128_si256(a, b, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 64 * (4 + r) + 32), _mm256_permute2x128_si256(c, d, 0x31));
}

size_t dpfl_chacha20_blocks_avx2(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6,
                                           7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4,
                                          5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    __m256i k[8];
    for (int i = 0; i < 8; i++) k[i] = _mm256_set1_epi32((int)dpfl_load32_le(key + 4 * i));
    size_t done = 0;
    for (; nblocks - done >= 8; done += 8, counter += 8) {
        __m256i clo = _mm256_set1_epi32((int)(uint32_t)counter);
        __m256i lo = _mm256_add_epi32(clo, iota);
        /* unsigned lo < clo (the carry) as a signed compare of the sign-flipped values: all ones = -1 */
        __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(clo, sign), _mm256_xor_si256(lo, sign));
        __m256i hi = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(counter >> 32)), carry);
        __m256i x0 = _mm256_set1_epi32(0x61707865), x1 = _mm256_set1_epi32(0x3320646e);
        __m256i x2 = _mm256_set1_epi32(0x79622d32), x3 = _mm256_set1_epi32(0x6b206574);
        __m256i x4 = k[0], x5 = k[1], x6 = k[2], x7 = k[3], x8 = k[4], x9 = k[5], x10 = k[6], x11 = k[7];
        __m256i x12 = lo, x13 = hi, x14 = _mm256_setzero_si256(), x15 = _mm256_setzero_si256();
        for (int round = 0; round < 10; round++) {
            QR8(x0, x4, x8, x12);
            QR8(x1, x5, x9, x13);
            QR8(x2, x6, x10, x14);
            QR8(x3, x7, x11, x15);
            QR8(x0, x5, x10, x15);
            QR8(x1, x6, x11, x12);
            QR8(x2, x7, x8, x13);
            QR8(x3, x4, x9, x14);
        }
        x0 = _mm256_add_epi32(x0, _mm256_set1_epi32(0x61707865));
        x1 = _mm256_add_epi32(x1, _mm256_set1_epi32(0x3320646e));
        x2 = _mm256_add_epi32(x2, _mm256_set1_epi32(0x79622d32));
        x3 = _mm256_add_epi32(x3, _mm256_set1_epi32(0x6b206574));
        x4 = _mm256_add_epi32(x4, k[0]);
        x5 = _mm256_add_epi32(x5, k[1]);
        x6 = _mm256_add_epi32(x6, k[2]);
        x7 = _mm256_add_epi32(x7, k[3]);
        x8 = _mm256_add_epi32(x8, k[4]);
        x9 = _mm256_add_epi32(x9, k[5]);
        x10 = _mm256_add_epi32(x10, k[6]);
        x11 = _mm256_add_epi32(x11, k[7]);
        x12 = _mm256_add_epi32(x12, lo);
        x13 = _mm256_add_epi32(x13, hi);
        __m256i a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3;
        UNPACK4x8(x0, x1, x2, x3, a0, a1, a2, a3);
        UNPACK4x8(x4, x5, x6, x7, b0, b1, b2, b3);
        UNPACK4x8(x8, x9, x10, x11, c0, c1, c2, c3);
        UNPACK4x8(x12, x13, x14, x15, d0, d1, d2, d3);
        uint8_t *o = out + 64 * done;
        store2(o, 0, a0, b0, c0, d0);
        store2(o, 1, a1, b1, c1, d1);
        store2(o, 2, a2, b2, c2, d2);
        store2(o, 3, a3, b3, c3, d3);
    }
    return done;
}

#else
typedef int dpfl_chacha20_avx2_unused; /* an empty file is not C */
#endif
