/* Vectorised ChaCha20 keystream: see chacha20.h.  Each vector register holds one of the 16 state words of 16
 * (AVX-512) or 8 (AVX2) consecutive blocks, one block per lane; after the 20 rounds and the feed-forward the
 * word-major registers are transposed into block-major bytes.  Blocks left over (fewer than a full vector's
 * worth) come from libsodium, so the bytes are libsodium's by construction at every length. */
#include "core/chacha20.h"

#include <sodium.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static void chacha20_sodium(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    static const uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
    if (!nblocks) return;
    /* the keystream is what XOR-ing zeros gives; libsodium allows the output to be the input */
    memset(out, 0, 64 * nblocks);
    crypto_stream_chacha20_xor_ic(out, out, 64 * (unsigned long long)nblocks, nonce, counter, key);
}

static uint32_t load32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#if defined(__AVX512F__)

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

static size_t chacha20_avx512(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    __m512i k[8];
    for (int i = 0; i < 8; i++) k[i] = _mm512_set1_epi32((int)load32_le(key + 4 * i));
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

#elif defined(__AVX2__)

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

static size_t chacha20_avx2(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6,
                                           7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4,
                                          5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    __m256i k[8];
    for (int i = 0; i < 8; i++) k[i] = _mm256_set1_epi32((int)load32_le(key + 4 * i));
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

#endif

void dpfl_chacha20_keystream(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    size_t done = 0;
#if defined(__AVX512F__)
    done = chacha20_avx512(out, nblocks, key, counter);
#elif defined(__AVX2__)
    done = chacha20_avx2(out, nblocks, key, counter);
#else
    (void)load32_le;
#endif
    chacha20_sodium(out + 64 * done, nblocks - done, key, counter + done);
}

void dpfl_chacha20_words16(uint32_t out[256], const uint8_t key[32], uint64_t counter)
{
#if defined(__AVX512F__)
    __m512i k[8], x[16];
    for (int i = 0; i < 8; i++) k[i] = _mm512_set1_epi32((int)load32_le(key + 4 * i));
    chacha16_avx512(x, k, counter);
    for (int j = 0; j < 16; j++) _mm512_storeu_si512((void *)(out + 16 * j), x[j]);
#else
    uint8_t b[64 * 16];
    dpfl_chacha20_keystream(b, 16, key, counter);
    for (int l = 0; l < 16; l++)
        for (int j = 0; j < 16; j++) out[16 * j + l] = load32_le(b + 64 * l + 4 * j);
#endif
}

const char *dpfl_chacha20_impl(void)
{
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "libsodium";
#endif
}
