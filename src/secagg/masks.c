/* Secure aggregation's masks (Bonawitz et al., CCS 2017, section 4): the key two clients agree on without talking
 * (X25519, then BLAKE2b with both ids), and the pseudorandom vector a 32-byte key expands to (ChaCha20), added to
 * or subtracted from a vector mod 2^32. */
#include "secagg_internal.h"
#include "core/bytes.h"
#include "core/chacha20.h"

/* BLAKE2b of the X25519 shared secret and both ids (smaller first), so both ends derive the same key and no two
 * pairs share one. */
int dpfl_secagg_pair_key(uint8_t key[KEY], const uint8_t sk[KEY], const uint8_t pk[KEY], uint32_t a, uint32_t b)
{
    uint8_t q[crypto_scalarmult_BYTES], ids[8];
    if (crypto_scalarmult(q, sk, pk) != 0) return -1;
    dpfl_bytes_store_u32(ids, a < b ? a : b);
    dpfl_bytes_store_u32(ids + 4, a < b ? b : a);
    static const char label[] = "dpfl-secagg-mask-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, KEY);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof label - 1);
    crypto_generichash_update(&st, q, sizeof q);
    crypto_generichash_update(&st, ids, sizeof ids);
    crypto_generichash_final(&st, key, KEY);
    sodium_memzero(q, sizeof q);
    sodium_memzero(&st, sizeof st);
    return 0;
}

/* w: the ChaCha20 keystream of `key` read as little-endian 32-bit words (the same bytes as libsodium's
 * crypto_stream_chacha20, nonce 0, through the library's vectorised keystream).  Reducing mod 2^bits afterwards
 * gives the PRG vector mod 2^bits: 2^bits divides 2^32, so each word mod 2^bits is uniform. */
void dpfl_secagg_prg_apply(uint32_t *acc, size_t len, const uint8_t key[KEY], int negate)
{
    enum { BLOCKS = 256, WORDS = 16 * BLOCKS };
    uint8_t buf[64 * BLOCKS];
    uint64_t counter = 0;
    for (size_t i = 0; i < len;) {
        size_t words = len - i < WORDS ? len - i : WORDS, nblocks = (words + 15) / 16;
        dpfl_chacha20_keystream(buf, nblocks, key, counter);
        counter += nblocks;
        if (negate)
            for (size_t j = 0; j < words; j++) acc[i + j] -= dpfl_bytes_load_u32(buf + 4 * j);
        else
            for (size_t j = 0; j < words; j++) acc[i + j] += dpfl_bytes_load_u32(buf + 4 * j);
        i += words;
    }
    sodium_memzero(buf, sizeof buf);
}
