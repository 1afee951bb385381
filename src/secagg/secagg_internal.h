/* Secure aggregation's internals (Bonawitz et al., CCS 2017; include/dpfl/secagg.h), shared by its files:
 *   message.c   the byte layouts of the messages: header, counts, a share's 40 bytes; parameters
 *   shamir.c    Shamir secret sharing over GF(2^61 - 1)
 *   masks.c     the pairwise mask keys and the ChaCha20 mask vectors
 *   client.c    a client's four steps
 *   server.c    the server's collection, relay and unmasking
 * Not part of the public interface. */
#ifndef DPFL_SECAGG_INTERNAL_H
#define DPFL_SECAGG_INTERNAL_H

#include "dpfl/secagg.h"
#include "core/cpu.h"

#include <sodium.h>

#define SECAGG_MAGIC 0x41535044u /* "DPSA" */
#define SECAGG_VERSION 1
#define HDR 12
#define KEY 32
enum { T_ADVERT = DPFL_SECAGG_ADVERT, T_KEYS = DPFL_SECAGG_KEYS, T_SHARES = DPFL_SECAGG_SHARES,
       T_SHARES_FOR = DPFL_SECAGG_SHARES_FOR, T_MASKED = DPFL_SECAGG_MASKED, T_UNMASK_REQ = DPFL_SECAGG_UNMASK_REQ,
       T_UNMASK = DPFL_SECAGG_UNMASK };
#define SHARE_BYTES (8 * DPFL_SECAGG_SHARE_WORDS)
#define PT_LEN (8 + 2 * SHARE_BYTES)
#define CT_LEN (crypto_box_NONCEBYTES + crypto_box_MACBYTES + PT_LEN)
#define ENTRY_SHARE (4 + CT_LEN)
#define ENTRY_KEYS (4 + 2 * KEY)
#define ENTRY_UNMASK (5 + SHARE_BYTES)

/* the field of the shares: GF(p), p = 2^61 - 1 */
#define P61 ((UINT64_C(1) << 61) - 1)

/* ---------------------------------------------------------------- message.c */
/* A new message of len bytes with its header filled in. */
DPFL_HIDDEN dpfl_status dpfl_secagg_msg_new(dpfl_secagg_msg *m, size_t len, uint8_t type, uint32_t sender,
                                            dpfl_error *err);
/* Checks the header of a message expected to be of type `type` and at least min_len bytes; *sender from it.
 * `who` names the receiver in the error. */
DPFL_HIDDEN dpfl_status dpfl_secagg_hdr_check(const uint8_t *m, size_t len, uint8_t type, size_t min_len,
                                              uint32_t *sender, const char *who, dpfl_error *err);
/* The count field at m + off and a check that the message holds exactly count entries of `entry` bytes. */
DPFL_HIDDEN dpfl_status dpfl_secagg_count_check(const uint8_t *m, size_t len, size_t off, size_t entry,
                                                uint32_t *count, const char *who, dpfl_error *err);
/* A share's values, SHARE_BYTES little-endian bytes. */
DPFL_HIDDEN void dpfl_secagg_share_put(uint8_t *p, const dpfl_secagg_share *s);
/* The share held by `holder` read from p; -1 when a value is not a field element. */
DPFL_HIDDEN int dpfl_secagg_share_get(const uint8_t *p, uint32_t holder, dpfl_secagg_share *s);
DPFL_HIDDEN dpfl_status dpfl_secagg_sodium_ready(dpfl_error *err);
/* 2^bits - 1 */
DPFL_HIDDEN uint32_t dpfl_secagg_bits_mask(uint32_t bits);

/* ---------------------------------------------------------------- shamir.c */
/* Lagrange coefficients at 0 for the points x[0..k). */
DPFL_HIDDEN dpfl_status dpfl_secagg_lagrange0(const uint32_t *x, uint32_t k, uint64_t *lambda, dpfl_error *err);
/* The secret from the shares sh[i * stride], i < k, and their lambda; DPFL_EFORMAT when they do not lie on one
 * polynomial with a valid secret. */
DPFL_HIDDEN dpfl_status dpfl_secagg_combine_with(const uint64_t *lambda, const dpfl_secagg_share *sh, size_t stride,
                                                 uint32_t k, uint8_t secret[DPFL_SECAGG_SECRET_BYTES],
                                                 dpfl_error *err);

/* ---------------------------------------------------------------- masks.c */
/* The pairwise mask key of clients a and b; -1 when the peer's key is a low-order point. */
DPFL_HIDDEN int dpfl_secagg_pair_key(uint8_t key[KEY], const uint8_t sk[KEY], const uint8_t pk[KEY], uint32_t a,
                                     uint32_t b);
/* acc[i] += PRG(key)_i (or -= when negate), i < len, mod 2^32. */
DPFL_HIDDEN void dpfl_secagg_prg_apply(uint32_t *acc, size_t len, const uint8_t key[KEY], int negate);

#endif
