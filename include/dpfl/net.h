/* dpfl net: deployment -- a real server and real client processes over an authenticated network, on the same
 * round as the simulation (src/fl/round.c) with a network transport in place of the in-process threads.
 *
 *   dpfl serve  runs dpfl_run's loop (client sampling, aggregation, client-level DP, ledger, checkpoints, metrics,
 *               summary, --resume) with every sampled client's local training done by the process that holds it;
 *   dpfl join   is one client: it sets up the same model, config and partition, keeps its own per-client state
 *               (optimizer state) and its own record-level ledger, and trains with the simulation's own code.
 * With a fixed [run] seed both sides derive the same streams from the root, so a deployed run writes the same
 * model bytes and the same epsilon as `dpfl train` of the same config (docs: README "Deployment").
 *
 * Transport: ZeroMQ (ROUTER on the server, DEALER on each client) with CURVE encryption and authentication; the
 * server's ZAP handler admits only client public keys listed in an allow-list directory, and a key named
 * client<K> may act as client K only.  Built only when libzmq is found (DPFL_HAVE_ZMQ); without it
 * dpfl_net_available() is 0 and dpfl_net_serve / dpfl_net_join fail saying so.  The wire format and the keys
 * (Z85, libsodium) do not need libzmq.
 *
 * Wire format, one frame per ZeroMQ message, every integer little-endian:
 *   u32 magic "DPFW", u8 version 2, u8 type, u16 reserved (0), u32 sender (client id, 0xFFFFFFFF the server),
 *   u32 payload length (<= DPFL_WIRE_MAX_PAYLOAD), payload, u32 CRC-32 of everything before it.
 * Payloads by type (f64 = IEEE-754 double, f32 = float):
 *   HELLO      u8 config_digest[32], u8 partition_digest[32], u8 partition_key[32], u64 nparam, u32 rounds,
 *              u32 released  (a client sends its config digest and zeros; the server answers with everything)
 *   ROUND      u32 round, u32 released, f64 lr, f64 update_clip, f64 record_z, u8 rates_digest[32],
 *              u8 model_digest[32], u32 cohort, u32 index, u32 threshold, f64 client_z, u8 ddp_seed[32],
 *              u64 nparam, u64 ncontrol, f32 model[nparam], f32 control[ncontrol]
 *                                                 (server -> the round's clients; cohort = 0 unless
 *              client_dp.mechanism = ddp: then the round's n sampled clients, this client's secure-aggregation id,
 *              the threshold t, the noise multiplier and the rotation seed; ncontrol = 0, or nparam with
 *              fl.scaffold: the server's control variate c, every value finite.  Version 2 added ncontrol)
 *   UPDATE     u32 round, u32 flags, u8 model_digest[32], i64 steps, i64 examples, f64 loss_sum, i64 clipped,
 *              u64 nparam, f32 update[nparam]                          (client -> server; every value finite)
 *   HEARTBEAT  u32 round                       (from a client: the last round of this run it answered, also sent
 *              at once after the server's hello -- a server resumed from an older checkpoint than that stops;
 *              from the server: the round in progress)
 *   ERROR, BYE u32 code, u32 round, text (0..DPFL_WIRE_MAX_TEXT printable ASCII bytes, no terminator)
 *               (BYE from the server: code 0 the run finished, 2 interrupted -- the clients wait for it to resume --,
 *               else stopped by an error; ERROR from a client: code 5 the round was refused, not trained (a
 *               dropout), 7 refused because this client answered it, or a later round, from another model: the
 *               server stops the run)
 *   SECAGG     u32 round, a secure-aggregation message (include/dpfl/secagg.h, at least its 12-byte header)
 *   SYNC       u32 round, u8 model_digest[32], u64 nparam, f32 model[nparam]   (server -> a client; fl.personalization
 *              = helper: the model round `round` released, to a client whose update of it was added, or round 0:
 *              the initial model w0, every helper model until its first sync, after the server's hello)
 * The decoder is strict: any frame that is truncated, oversized, of another version or type, with a wrong
 * checksum, reserved bits set, a payload that does not match its type's layout or values out of range is an
 * error (DPFL_EFORMAT) naming what is wrong, and nothing of it is used. */
#ifndef DPFL_NET_H
#define DPFL_NET_H

#include "dpfl/core.h"
#include "dpfl/run.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

#define DPFL_WIRE_MAGIC 0x57465044u /* "DPFW" */
#define DPFL_WIRE_VERSION 2u /* 2: ROUND carries SCAFFOLD's control variate */
#define DPFL_WIRE_HEADER 16u
#define DPFL_WIRE_TRAILER 4u
#define DPFL_WIRE_MAX_PAYLOAD ((size_t)1 << 30)
#define DPFL_WIRE_MAX_TEXT 1024u
#define DPFL_WIRE_SERVER 0xFFFFFFFFu
#define DPFL_WIRE_STATS 1u /* UPDATE flags: loss_sum, examples and clipped are reported (else all 0) */

typedef enum {
    DPFL_WIRE_HELLO = 1,
    DPFL_WIRE_ROUND = 2,
    DPFL_WIRE_UPDATE = 3,
    DPFL_WIRE_HEARTBEAT = 4,
    DPFL_WIRE_ERROR = 5,
    DPFL_WIRE_BYE = 6,
    DPFL_WIRE_SECAGG = 7,
    DPFL_WIRE_SYNC = 8
} dpfl_wire_type;

/* One frame, decoded (dpfl_wire_decode) or to encode (dpfl_wire_encode).  Fields a type does not carry are 0. */
typedef struct {
    dpfl_wire_type type;
    uint32_t sender;
    uint8_t config_digest[32], partition_digest[32], partition_key[32]; /* HELLO */
    uint32_t rounds;                  /* HELLO: the run's fl.rounds */
    uint32_t released;                /* HELLO, ROUND: rounds released before (the ledger's rounds) */
    uint32_t round;                   /* ROUND, UPDATE, HEARTBEAT, ERROR, BYE */
    double lr, update_clip, record_z; /* ROUND: the mechanism the client must run */
    uint8_t rates_digest[32];         /* ROUND: per-record rates of the client (rPDP-FL), zeros without */
    uint8_t model_digest[32];         /* ROUND, SYNC: of its model; UPDATE: of the model the client trained from */
    uint32_t cohort, index, threshold; /* ROUND, distributed DP: n, the client's id in the round, t (else 0) */
    double client_z;                  /* ROUND, distributed DP: the noise multiplier of the round (else 0) */
    uint8_t ddp_seed[32];             /* ROUND, distributed DP: the round's public rotation seed (else 0) */
    const uint8_t *data;              /* SECAGG: the message (points into a decoded frame) */
    size_t data_len;
    uint32_t flags;                   /* UPDATE */
    int64_t steps, examples, clipped; /* UPDATE */
    double loss_sum;                  /* UPDATE */
    uint64_t nparam;                  /* HELLO, ROUND, UPDATE, SYNC */
    /* ROUND, UPDATE, SYNC: nparam little-endian f32.  Decoding points vec into the frame (unaligned: read it with
     * dpfl_wire_floats); encoding reads fvec if set, else vec. */
    const uint8_t *vec;
    const float *fvec;
    uint64_t ncontrol;                /* ROUND: 0, or nparam: the server's control variate c (fl.scaffold) */
    const uint8_t *cvec;              /* ROUND: its ncontrol floats, as vec / fvec are the model's */
    const float *fcvec;
    uint32_t code;                         /* ERROR, BYE */
    char text[DPFL_WIRE_MAX_TEXT + 1];     /* ERROR, BYE: NUL-terminated here */
} dpfl_wire_msg;

const char *dpfl_wire_type_name(uint32_t type);
/* The frame's bytes, malloc'd (*out; the caller frees).  Refuses what the decoder would refuse. */
dpfl_status dpfl_wire_encode(const dpfl_wire_msg *m, uint8_t **out, size_t *len, dpfl_error *err);
/* Strict decoding of len bytes (see above); m->vec points into buf. */
dpfl_status dpfl_wire_decode(const void *buf, size_t len, dpfl_wire_msg *m, dpfl_error *err);
/* The nparam floats of a decoded ROUND, UPDATE or SYNC (nothing for other types). */
void dpfl_wire_floats(const dpfl_wire_msg *m, float *out);
/* The ncontrol floats of a decoded ROUND (nothing when it carries none). */
void dpfl_wire_control(const dpfl_wire_msg *m, float *out);
/* BLAKE2b-256 of n floats (their little-endian bytes): names a model in ROUND and UPDATE. */
void dpfl_wire_model_digest(const float *w, size_t n, uint8_t out[32]);
/* ERROR / BYE text: printf-style, cut to DPFL_WIRE_MAX_TEXT, bytes outside printable ASCII replaced by '?'. */
void dpfl_wire_set_text(dpfl_wire_msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------------------------ keys */
/* Z85 (ZeroMQ RFC 32): 4 bytes <-> 5 characters.  encode: n a multiple of 4, out has 5 n / 4 + 1 bytes.
 * decode: strict (length a multiple of 5, alphabet, no overflow); writes strlen(in) / 5 * 4 bytes (<= cap). */
dpfl_status dpfl_z85_encode(const uint8_t *in, size_t n, char *out, dpfl_error *err);
dpfl_status dpfl_z85_decode(const char *in, uint8_t *out, size_t cap, size_t *n, dpfl_error *err);
/* A CURVE key pair (X25519, libsodium): DIR/NAME.key (the secret key, Z85, mode 0600) and DIR/NAME.pub (the
 * public key, Z85), each one line, written atomically; DIR (and its parents) created with mode 0700; an existing
 * NAME.key is refused unless force.  NAME: letters, digits, '_', '-', '.', not starting with '.', at most 64
 * characters.  pub_z85 (41 bytes, may be NULL) gets the public key. */
dpfl_status dpfl_net_keygen(const char *dir, const char *name, int force, char *pub_z85, dpfl_error *err);
/* Read a key file written by dpfl_net_keygen (one Z85 line of 40 characters). */
dpfl_status dpfl_net_key_read(const char *path, uint8_t key[32], dpfl_error *err);
int dpfl_net_key_name_ok(const char *name);

/* ------------------------------------------------------------------------------------------ processes */
/* 1 if this build has the network transport (libzmq with CURVE). */
int dpfl_net_available(void);

typedef struct {
    const char *bind;       /* ZeroMQ endpoint, e.g. tcp://127.0.0.1:5555 */
    const char *keys_dir;   /* holds server.key (its secret key) */
    const char *allow_dir;  /* the allow-list: client public keys NAME.pub (NULL: keys_dir/clients) */
    int32_t wait_clients;   /* clients that must say hello before round 1 (< 0: every client of the config) */
    double join_timeout;    /* seconds to wait for them; fewer joined by then: the run does not start (an error) */
    double round_timeout;   /* seconds a round waits for its clients' updates: later ones are dropouts */
    int quiet;              /* no log of joins and rounds (rejections and bad frames are always logged) */
    int verbose;            /* also a line per client and message (sent, update, secure-aggregation steps) */
    int32_t max_empty_rounds; /* stop (an error, before the next round sends anything) after this many rounds in a
                                 row that sampled clients and received no update; 0: never */
} dpfl_serve_options;

/* dpfl_run (run: out_dir, resume, force, quiet) with the network transport: binds, waits for the clients, runs
 * every round's local training on the clients that hold them, and tells every client "bye" at the end. */
dpfl_status dpfl_net_serve(const dpfl_config *cfg, const dpfl_run_options *run, const dpfl_serve_options *o,
                           dpfl_error *err);

typedef struct {
    const char *server;     /* endpoint, e.g. tcp://127.0.0.1:5555 */
    const char *keys_dir;   /* holds NAME.key (this client's secret key) and server.pub */
    const char *name;       /* key name (NULL: client<K>) */
    int32_t client;         /* K: the client this process is */
    const char *state_dir;  /* its own ledger and state (client.bin, client.json); created */
    double idle_timeout;    /* give up after this many seconds without a word from the server */
    double delay;           /* wait this long before sending each update (a slow link; for deadline tests) */
    int quiet;
    const char *data;       /* NULL, or where this client's own file is: it replaces entry K of the config's
                               data.dataset = csv:FILE, ... list (which needs data.source_rows); the run and its
                               digest stay the config's */
} dpfl_join_options;

/* Runs client K until the server says bye (DPFL_OK), refuses it, or stays silent for idle_timeout. */
dpfl_status dpfl_net_join(const dpfl_config *cfg, const dpfl_join_options *o, dpfl_error *err);

#pragma GCC visibility pop

#endif
