/* What the deployment server's files share: its state, split by concern, and the helpers of each.
 *   server_link.c    the connection layer: ZeroMQ, the CURVE keys, the ZAP thread, every client's connection,
 *                    frames out and in (srv_link)
 *   server_round.c   the round in progress: who is in it, who still owes it a message, its dropouts, the update
 *                    as it arrives, the empty rounds in a row (srv_round)
 *   server.c         the transport: the run's hello and sync (srv_run), the rounds, start and finish (server)
 *   server_secagg.c  distributed DP's secure-aggregation steps on the wire
 * Included only where DPFL_HAVE_ZMQ. */
#ifndef DPFL_NET_SERVER_INTERNAL_H
#define DPFL_NET_SERVER_INTERNAL_H
#include "net_internal.h"
#include "dpfl/secagg.h"
#include "dpfl/transport.h"
#include "zap.h"
#include "core/cpu.h" /* DPFL_HIDDEN */

#include <zmq.h>

#define RID_MAX 256

/* One client's connection. */
typedef struct {
    uint8_t rid[RID_MAX]; /* ZeroMQ routing id of the client's current connection */
    size_t rid_len;       /* 0: not connected (never said hello, said bye, or unreachable) */
    int hello;            /* its config was checked */
    int reported;         /* it said (heartbeat) which round of this run it answered last */
} peer;

/* The connection layer: ZeroMQ's context and ROUTER socket, the server's CURVE keys, the allow-list's
 * authentication thread, and the K clients' connections (peers[k] is client k's). */
typedef struct {
    void *zctx, *sock;
    uint8_t sk[32], pk[32];
    net_zap zap;      /* the allow-list's authentication thread (zap.c) */
    size_t max_frame; /* the largest frame a client may send: an update */
    int32_t K;
    peer *peers;
} srv_link;

/* One frame as it came in: the connection it came on, who sent it (key and address, for log lines), and the
 * message, which points into body (valid until net_srv_frame_close). */
typedef struct {
    zmq_msg_t id, body;
    uint8_t rid[RID_MAX];
    size_t rid_len; /* 0: a routing id too long to answer */
    char who[160];
    dpfl_wire_msg m;
} srv_frame;

/* The run as every client must see it: what the hello carries, and with helper models the initial model. */
typedef struct {
    const dpfl_config *cfg;
    size_t P;
    int32_t released; /* rounds released (for a client's hello) */
    uint8_t config_digest[32], partition_key[32], partition_digest[32];
    float *w0; /* personalization = helper: the initial model, to every client after the hello */
} srv_run;

/* Client k's part in the round in progress. */
typedef struct {
    int32_t in_round; /* index i of job->reports while it takes part in the round in progress, else -1 */
    int owes;         /* distributed DP: it owes the step in progress a message */
} srv_seat;

/* The round in progress (round 0: none), and the rounds in a row that received no update. */
typedef struct {
    dpfl_round_job *job; /* the round in progress (its last between rounds) */
    int32_t round, pending;
    int32_t K;
    srv_seat *seats;      /* seats[k]: client k's */
    size_t P;
    uint8_t model_digest[32];
    int ddp_step;         /* distributed DP: the secure-aggregation message type the step waits for (0: none) */
    int32_t answered;     /* its unmasking answers */
    int32_t updates;      /* updates (or masked inputs) that arrived in the round in progress */
    char gone[160];       /* the round's dropouts, for its one log line: " 2, 5" */
    int32_t ngone;
    /* rounds that sampled clients and received no update, in a row (--max-empty-rounds) */
    int32_t empty_streak, empty_first;
    float *ubuf;           /* one update as it arrives (P floats), handed to the server's exact sum at once */
    dpfl_status arrive_st; /* the round's first failure to add an update (it ends the run) */
    dpfl_error arrive_err;
} srv_round;

/* The transport dpfl_run drives (t.ctx is the server): the options, and the three parts above. */
typedef struct {
    dpfl_transport t;
    dpfl_serve_options o;
    srv_link link;
    srv_run run;
    srv_round rd;
    /* what a client said that stops the run (it answered rounds this server has not released: an older
     * checkpoint); DPFL_OK: nothing */
    dpfl_status halt_st;
    dpfl_error halt_err;
} server;

#define LOG(...) net_log("serve", __VA_ARGS__)
#define INFO(sv, ...) ((sv)->o.quiet ? (void)0 : net_log("serve", __VA_ARGS__))
/* per client and message: only with --verbose (the round's one line says who dropped) */
#define DETAIL(sv, ...) ((sv)->o.quiet || !(sv)->o.verbose ? (void)0 : net_log("serve", __VA_ARGS__))

/* server_link.c */
/* K connections, the ZeroMQ context, the ZAP thread (*nallowed: the allow-list's keys) and the socket bound to
 * bind, taking frames of up to max_frame bytes (the keys and zap.dir are set before). */
DPFL_HIDDEN dpfl_status net_srv_link_open(srv_link *l, const char *bind, int32_t K, size_t max_frame, int *nallowed,
                                          dpfl_error *err);
DPFL_HIDDEN void net_srv_link_close(srv_link *l);
/* clients connected whose hello was accepted */
DPFL_HIDDEN int32_t net_srv_joined(const srv_link *l);
/* m to peer p (never blocks); -1 if it could not go now (an unreachable connection is forgotten) */
DPFL_HIDDEN int net_srv_send_frame(srv_link *l, peer *p, const dpfl_wire_msg *m);
/* ERROR (of round `round`) to a connection that may belong to no known client (a frame that did not decode) */
DPFL_HIDDEN void net_srv_send_error_to(srv_link *l, int32_t round, const uint8_t *rid, size_t rid_len, uint32_t code,
                                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The next message on the socket (blocking: the caller polled) into f: the client k (>= 0) it authenticates as,
 * its connection now peers[k]; -1: no frame, or one refused (logged and answered with an ERROR of round `round`).
 * net_srv_frame_close(f) after either. */
DPFL_HIDDEN int32_t net_srv_receive(srv_link *l, int32_t round, srv_frame *f);
DPFL_HIDDEN void net_srv_frame_close(srv_frame *f);

/* server_round.c */
/* K seats and the update buffer (P floats); freed by net_srv_round_free. */
DPFL_HIDDEN dpfl_status net_srv_round_init(srv_round *r, int32_t K, size_t P, dpfl_error *err);
DPFL_HIDDEN void net_srv_round_free(srv_round *r);
/* job's round starts (its number, digest and counts; arrive_st cleared): its clients that the simulation did not
 * drop take their seats, and each owes it an update; returns how many (pending) */
DPFL_HIDDEN int32_t net_srv_round_begin(srv_round *r, dpfl_round_job *job);
/* every client leaves its seat (owing nothing) */
DPFL_HIDDEN void net_srv_unseat_all(srv_round *r);
/* ROUND for client k: the model, the mechanism it must run, its index (distributed DP) */
DPFL_HIDDEN void net_srv_round_msg(const srv_round *r, int32_t k, dpfl_wire_msg *m);
/* Client k's update of the round in progress: 1 if it was taken (added to the sum), 0 if refused (logged, and an
 * ERROR to client k's connection in l). */
DPFL_HIDDEN int net_srv_take_update(srv_round *r, srv_link *l, int32_t k, const dpfl_wire_msg *m, const char *who);
DPFL_HIDDEN void net_srv_client_gone(srv_round *r, int32_t k);
DPFL_HIDDEN void net_srv_round_over(srv_round *r, int32_t expected, int32_t arrived);
DPFL_HIDDEN const char *net_srv_dropped_text(const srv_round *r, char *buf, size_t n);
/* distributed DP: the clients still in the round; every one of them owes the next step a message */
DPFL_HIDDEN int32_t net_srv_in_round_count(const srv_round *r);
DPFL_HIDDEN void net_srv_owe_all(srv_round *r);

/* server.c */
/* ROUND to client k, logged with --verbose */
DPFL_HIDDEN void net_srv_send_round(server *sv, int32_t k);
/* Handle messages until the deadline (dpfl_now() seconds) or until done(sv) holds (done NULL: the deadline). */
DPFL_HIDDEN dpfl_status net_srv_serve_until(server *sv, double deadline, int (*done)(const server *),
                                            dpfl_error *err);
DPFL_HIDDEN int net_srv_round_done(const server *sv);

/* server_secagg.c */
/* A secure-aggregation message from client k: the step in progress's, from the id the client has in the round. */
DPFL_HIDDEN void net_srv_take_secagg(srv_round *r, srv_link *l, int32_t k, const dpfl_wire_msg *m, const char *who);
/* Distributed DP's round: ROUND, then secure aggregation's keys, shares and masked inputs (n clients sampled). */
DPFL_HIDDEN dpfl_status net_srv_run_ddp(server *sv, const dpfl_round_job *job, int32_t n, dpfl_error *err);
/* The transport's secagg_finish: the unmasking round and the sum. */
DPFL_HIDDEN dpfl_status net_srv_secagg_finish(const dpfl_transport *t, const dpfl_round_job *job, const uint8_t *req,
                                              size_t len, int32_t arrived, uint32_t *sum, int *released,
                                              dpfl_error *err);
#endif
