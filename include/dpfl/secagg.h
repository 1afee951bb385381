/* Secure aggregation (Bonawitz et al., CCS 2017, "Practical Secure Aggregation for Privacy-Preserving Machine
 * Learning"): one server learns the sum, modulo 2^bits, of the vectors of the clients that survive a round and
 * nothing else about any one vector, while up to n - t clients may drop out after sharing their keys.  Semi-honest
 * server, honest-but-curious clients; no consistency round against an active adversary (docs/secagg.md).
 *
 * Transport-free: every message is a byte buffer with a length (dpfl_secagg_msg), produced by one side and handed,
 * by whatever transport the caller has, to the other.  A round, with U1 >= U2 >= U3 >= U5 the clients still
 * taking part at each step:
 *
 *   client                                         server
 *   advertise()            -- ADVERTISE -->         add_advert()            (U1: clients that advertised)
 *                          <-- KEYS --------        keys()                  (one message, broadcast to U1)
 *   share_keys(KEYS)       -- SHARES ----->         add_shares()            (U2: clients that shared)
 *                          <-- SHARES_FOR --        shares_for(v)           (one message per v in U2)
 *   masked_input(SF, x)    -- MASKED ----->         add_masked()            (U3: clients that sent y_u)
 *                          <-- UNMASK_REQ --        unmask_request()        (one message, broadcast to U3)
 *   unmask(REQ)            -- UNMASK ----->         add_unmask()            (U5: clients that answered)
 *                                                   finish(sum)             (sum over U3 of x_u mod 2^bits)
 *
 * Every message starts with a 12-byte header: magic "DPSA", version 1, a type byte, two zero bytes and the
 * sender's id (0xFFFFFFFF for the server), little-endian; the layouts are in src/secagg/message.c.  The server takes
 * the sender id on trust: the transport must authenticate clients.  Calls out of order, malformed or inconsistent
 * messages, and too few survivors are errors (DPFL_EINVAL / DPFL_EFORMAT) whose message names the client. */
#ifndef DPFL_SECAGG_H
#define DPFL_SECAGG_H

#include "dpfl/core.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* the type byte of a message's header (byte 5), for transports that route messages by step */
enum {
    DPFL_SECAGG_ADVERT = 1, DPFL_SECAGG_KEYS = 2, DPFL_SECAGG_SHARES = 3, DPFL_SECAGG_SHARES_FOR = 4,
    DPFL_SECAGG_MASKED = 5, DPFL_SECAGG_UNMASK_REQ = 6, DPFL_SECAGG_UNMASK = 7
};

#define DPFL_SECAGG_MAX_CLIENTS 10000u
#define DPFL_SECAGG_MAX_LEN ((size_t)10000000)
#define DPFL_SECAGG_SERVER_ID 0xFFFFFFFFu

typedef struct {
    uint32_t n;    /* clients, ids 0..n-1, 2 <= n <= DPFL_SECAGG_MAX_CLIENTS */
    uint32_t t;    /* threshold: shares needed to reconstruct a secret, 2 <= t <= n (t > n/2 recommended) */
    uint32_t bits; /* sums are taken modulo 2^bits, 1 <= bits <= 32; every input value must be < 2^bits */
    size_t len;    /* vector length, 1 <= len <= DPFL_SECAGG_MAX_LEN */
} dpfl_secagg_params;

/* One message: data[0..len) malloc'd by the library; the receiver of a dpfl_secagg_msg frees it. */
typedef struct {
    uint8_t *data;
    size_t len;
} dpfl_secagg_msg;
void dpfl_secagg_msg_free(dpfl_secagg_msg *m); /* frees data, zeroes the struct; NULL-safe */

dpfl_status dpfl_secagg_params_check(const dpfl_secagg_params *p, dpfl_error *err);

/* ---------------------------------------------------------------- client */
typedef struct dpfl_secagg_client dpfl_secagg_client;

/* seed: 32 bytes from which every random choice of this client is drawn (key pairs, self-mask seed, Shamir
 * coefficients, nonces) for reproducible tests -- NOT for deployment; NULL draws them from OS entropy. */
dpfl_status dpfl_secagg_client_create(const dpfl_secagg_params *p, uint32_t id, const uint8_t *seed,
                                      dpfl_secagg_client **out, dpfl_error *err);
/* Frees the client and wipes its secrets; NULL-safe. */
void dpfl_secagg_client_free(dpfl_secagg_client *c);
/* Round 0: the two public keys (share encryption, mask agreement). */
dpfl_status dpfl_secagg_client_advertise(dpfl_secagg_client *c, dpfl_secagg_msg *out, dpfl_error *err);
/* Round 1: from the server's KEYS broadcast, Shamir-shares the self-mask seed b_u and the mask-agreement secret key
 * s_u (threshold t) among the other clients of U1, each pair of shares encrypted and authenticated for its
 * recipient. */
dpfl_status dpfl_secagg_client_share_keys(dpfl_secagg_client *c, const uint8_t *keys, size_t keys_len,
                                          dpfl_secagg_msg *out, dpfl_error *err);
/* Round 2: from the SHARES_FOR message addressed to this client (decrypted and checked here: a tampered share,
 * or one not encrypted for this client, is an error naming its sender), the masked input
 * y = x + PRG(b_u) + sum_{v>u} PRG(s_uv) - sum_{v<u} PRG(s_uv) mod 2^bits over v in U2.  x: len values < 2^bits. */
dpfl_status dpfl_secagg_client_masked_input(dpfl_secagg_client *c, const uint8_t *shares_for, size_t sf_len,
                                            const uint32_t *x, dpfl_secagg_msg *out, dpfl_error *err);
/* Round 3: from the UNMASK_REQ broadcast (U3), the shares of b_v for v in U3 and of s_v for v in U2 \ U3 --
 * never both for one client. */
dpfl_status dpfl_secagg_client_unmask(dpfl_secagg_client *c, const uint8_t *req, size_t req_len,
                                      dpfl_secagg_msg *out, dpfl_error *err);

/* ---------------------------------------------------------------- server */
typedef struct dpfl_secagg_server dpfl_secagg_server;

dpfl_status dpfl_secagg_server_create(const dpfl_secagg_params *p, dpfl_secagg_server **out, dpfl_error *err);
void dpfl_secagg_server_free(dpfl_secagg_server *s); /* NULL-safe */
dpfl_status dpfl_secagg_server_add_advert(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err);
/* Closes round 0 (needs >= t adverts) and writes the KEYS broadcast. */
dpfl_status dpfl_secagg_server_keys(dpfl_secagg_server *s, dpfl_secagg_msg *out, dpfl_error *err);
dpfl_status dpfl_secagg_server_add_shares(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err);
/* The first call closes round 1 (needs >= t clients that shared); then one SHARES_FOR message per client of U2:
 * the ciphertexts the other clients of U2 addressed to it. */
dpfl_status dpfl_secagg_server_shares_for(dpfl_secagg_server *s, uint32_t id, dpfl_secagg_msg *out,
                                          dpfl_error *err);
/* Masked inputs are summed as they arrive (O(len) memory whatever n). */
dpfl_status dpfl_secagg_server_add_masked(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err);
/* Closes round 2 (needs >= t masked inputs) and writes the UNMASK_REQ broadcast: the list U3. */
dpfl_status dpfl_secagg_server_unmask_request(dpfl_secagg_server *s, dpfl_secagg_msg *out, dpfl_error *err);
dpfl_status dpfl_secagg_server_add_unmask(dpfl_secagg_server *s, const uint8_t *msg, size_t len, dpfl_error *err);
/* Closes round 3 (needs >= t answers), reconstructs the self-mask seeds of U3 and the mask keys of U2 \ U3 from t
 * shares each, and writes sum[0..len) = sum over U3 of x_u mod 2^bits; *nsummed (may be NULL) = |U3|. */
dpfl_status dpfl_secagg_server_finish(dpfl_secagg_server *s, uint32_t *sum, uint32_t *nsummed, dpfl_error *err);

/* ---------------------------------------------------------------- Shamir secret sharing (used above; exposed
 * for tests).  A 32-byte secret is cut into five chunks of at most 7 bytes (56 bits), each shared with its own
 * random polynomial of degree t-1 over GF(p), p = 2^61 - 1; holder i gets the values at x = i + 1.  A prime field
 * rather than GF(256) because n may reach 10,000, beyond GF(256)'s 255 non-zero evaluation points. */
#define DPFL_SECAGG_SECRET_BYTES 32
#define DPFL_SECAGG_SHARE_WORDS 5
typedef struct {
    uint32_t x;                        /* evaluation point, holder id + 1 */
    uint64_t y[DPFL_SECAGG_SHARE_WORDS]; /* < p */
} dpfl_secagg_share;

/* shares[i] for holder ids[i], i < m (distinct ids < DPFL_SECAGG_MAX_CLIENTS); coefficients from rng. */
dpfl_status dpfl_secagg_shamir_split(const uint8_t secret[DPFL_SECAGG_SECRET_BYTES], uint32_t t,
                                     const uint32_t *ids, uint32_t m, dpfl_rng *rng, dpfl_secagg_share *shares,
                                     dpfl_error *err);
/* Lagrange interpolation at 0 through the k shares (distinct x).  With fewer than t shares the result is unrelated
 * to the secret; a chunk outside its 56-bit range (what a corrupted or insufficient set of shares gives with
 * probability about 1 - 2^-49) is a DPFL_EFORMAT error. */
dpfl_status dpfl_secagg_shamir_combine(const dpfl_secagg_share *shares, uint32_t k,
                                       uint8_t secret[DPFL_SECAGG_SECRET_BYTES], dpfl_error *err);

#pragma GCC visibility pop

#endif
