/* ChaCha20 keystream: see chacha20.h.  The vector kernels (chacha20_avx512.c: 16 blocks at a time;
 * chacha20_avx2.c: 8) are chosen at run time (cpu.h); blocks left over (fewer than a full vector's worth), and
 * everything on CPUs without them, come from libsodium, so the bytes are libsodium's by construction at every
 * length whichever code runs. */
#include "core/chacha20.h"

#include <sodium.h>
#include <string.h>

static void chacha20_sodium(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    static const uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
    if (!nblocks) return;
    /* the keystream is what XOR-ing zeros gives; libsodium allows the output to be the input */
    memset(out, 0, 64 * nblocks);
    crypto_stream_chacha20_xor_ic(out, out, 64 * (unsigned long long)nblocks, nonce, counter, key);
}

void dpfl_chacha20_keystream(uint8_t *out, size_t nblocks, const uint8_t key[32], uint64_t counter)
{
    size_t done = 0;
#if DPFL_KERNELS_AVX512
    if (dpfl_cpu_avx512()) done = dpfl_chacha20_blocks_avx512(out, nblocks, key, counter);
#endif
#if DPFL_KERNELS_AVX2
    if (nblocks - done >= 8 && dpfl_cpu_avx2())
        done += dpfl_chacha20_blocks_avx2(out + 64 * done, nblocks - done, key, counter + done);
#endif
    chacha20_sodium(out + 64 * done, nblocks - done, key, counter + done);
}

void dpfl_chacha20_words16(uint32_t out[256], const uint8_t key[32], uint64_t counter)
{
#if DPFL_KERNELS_AVX512
    if (dpfl_cpu_avx512()) {
        dpfl_chacha20_words16_avx512(out, key, counter);
        return;
    }
#endif
    uint8_t b[64 * 16];
    dpfl_chacha20_keystream(b, 16, key, counter);
    for (int l = 0; l < 16; l++)
        for (int j = 0; j < 16; j++) out[16 * j + l] = dpfl_load32_le(b + 64 * l + 4 * j);
}

const char *dpfl_chacha20_impl(void)
{
    return dpfl_cpu_avx512() ? "avx512" : dpfl_cpu_avx2() ? "avx2" : "libsodium";
}
