/* ChaCha20 keystream (private to the library): the original ChaCha20 of Bernstein, 20 rounds, 64-bit nonce and
 * 64-bit block counter, with the nonce fixed at zero.  dpfl_chacha20_keystream(out, nblocks, key, counter)
 * writes exactly the bytes libsodium's crypto_stream_chacha20_xor_ic(out, zeros, 64 * nblocks, nonce = 0,
 * ic = counter, key) writes: 16 blocks at a time in AVX-512 registers (one block per lane) when the CPU has
 * AVX-512, 8 at a time with AVX2, and libsodium itself otherwise (chosen at run time: core/cpu.h). */
#ifndef DPFL_CHACHA20_H
#define DPFL_CHACHA20_H

#include "core/cpu.h"

#include <stddef.h>
#include <stdint.h>

void dpfl_chacha20_keystream(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter);
/* The same keystream as 32-bit words, word-major: out[16 j + l] = word j (little-endian bytes 4j..4j+3) of block
 * counter + l, l, j < 16.  What the AVX-512 path has in its registers before it transposes them into bytes. */
void dpfl_chacha20_words16(uint32_t out[256], const uint8_t key[32], uint64_t counter);
/* "avx512", "avx2" or "libsodium": the implementation dpfl_chacha20_keystream uses now. */
const char *dpfl_chacha20_impl(void);

/* The kernels, only behind dpfl_cpu_avx512() / dpfl_cpu_avx2(): the keystream of the first 16 k (AVX-512) or 8 k
 * (AVX2) of the nblocks blocks, k as large as fits; they return how many blocks they wrote.  words16 is
 * dpfl_chacha20_words16. */
DPFL_HIDDEN size_t dpfl_chacha20_blocks_avx512(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter);
DPFL_HIDDEN void dpfl_chacha20_words16_avx512(uint32_t out[256], const uint8_t key[32], uint64_t counter);
DPFL_HIDDEN size_t dpfl_chacha20_blocks_avx2(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter);

static inline uint32_t dpfl_load32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
