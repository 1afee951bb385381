/* What the deployment server's files share (server.c: the transport, connections and rounds; server_secagg.c:
 * distributed DP's secure-aggregation steps on the wire): the server's state and its frame and round helpers.
 * Included only where DPFL_HAVE_ZMQ. */
#ifndef DPFL_NET_SERVER_INTERNAL_H
#define DPFL_NET_SERVER_INTERNAL_H
#include "net_internal.h"
#include "dpfl/secagg.h"
#include "dpfl/transport.h"
#include "zap.h"
#include "core/cpu.h" /* DPFL_HIDDEN */

#define RID_MAX 256

typedef struct {
    uint8_t rid[RID_MAX]; /* ZeroMQ routing id of the client's current connection */
    size_t rid_len;       /* 0: not connected (never said hello, said bye, or unreachable) */
    int hello;            /* its config was checked */
    int32_t in_round;     /* index i of results[] while it takes part in the round in progress, else -1 */
    int owes;             /* distributed DP: it owes the step in progress a message */
} peer;

typedef struct {
    dpfl_transport t;
    dpfl_serve_options o;
    net_zap zap;   /* the allow-list's authentication thread (zap.c) */
    void *zctx, *sock;
    uint8_t sk[32], pk[32];
    /* the run */
    const dpfl_config *cfg;
    dpfl_round_job *job; /* the round in progress (its last between rounds) */
    int32_t released;    /* rounds released (for a client's hello) */
    int32_t K;
    size_t P;
    peer *peers;
    uint8_t config_digest[32], partition_key[32], partition_digest[32];
    /* the round in progress */
    int32_t round, pending;
    uint8_t model_digest[32];
    int ddp_step;         /* distributed DP: the secure-aggregation message type the step waits for (0: none) */
    int32_t answered;     /* its unmasking answers */
    int32_t updates;      /* updates (or masked inputs) that arrived in the round in progress */
    char gone[160];       /* the round's dropouts, for its one log line: " 2, 5" */
    int32_t ngone;
    /* rounds that sampled clients and received no update, in a row (--max-empty-rounds) */
    int32_t empty_streak, empty_first;
    size_t max_frame;
    float *w0;            /* personalization = helper: the initial model, to every client after the hello */
    float *ubuf;          /* one update as it arrives (P floats), handed to the server's exact sum at once */
    dpfl_status arrive_st; /* the round's first failure to add an update (it ends the run) */
    dpfl_error arrive_err;
} server;

#define LOG(...) net_log("serve", __VA_ARGS__)
#define INFO(sv, ...) ((sv)->o.quiet ? (void)0 : net_log("serve", __VA_ARGS__))
/* per client and message: only with --verbose (the round's one line says who dropped) */
#define DETAIL(sv, ...) ((sv)->o.quiet || !(sv)->o.verbose ? (void)0 : net_log("serve", __VA_ARGS__))

/* server.c */
DPFL_HIDDEN int net_srv_send_frame(server *sv, peer *p, const dpfl_wire_msg *m);
DPFL_HIDDEN void net_srv_send_error_to(server *sv, const uint8_t *rid, size_t rid_len, uint32_t code, const char *fmt,
                                       ...) __attribute__((format(printf, 5, 6)));
DPFL_HIDDEN void net_srv_send_round(server *sv, int32_t k);
DPFL_HIDDEN void net_srv_client_gone(server *sv, int32_t k);
DPFL_HIDDEN void net_srv_round_over(server *sv, int32_t expected, int32_t arrived);
DPFL_HIDDEN const char *net_srv_dropped_text(const server *sv, char *buf, size_t n);
DPFL_HIDDEN dpfl_status net_srv_serve_until(server *sv, double deadline, int (*done)(const server *),
                                            dpfl_error *err);
DPFL_HIDDEN int net_srv_round_done(const server *sv);

/* server_secagg.c */
/* A secure-aggregation message from client k: the step in progress's, from the id the client has in the round. */
DPFL_HIDDEN void net_srv_take_secagg(server *sv, int32_t k, const dpfl_wire_msg *m, const char *who);
/* Distributed DP's round: ROUND, then secure aggregation's keys, shares and masked inputs (n clients sampled). */
DPFL_HIDDEN dpfl_status net_srv_run_ddp(server *sv, const dpfl_round_job *job, int32_t n, dpfl_error *err);
/* The transport's secagg_finish: the unmasking round and the sum. */
DPFL_HIDDEN dpfl_status net_srv_secagg_finish(const dpfl_transport *t, const dpfl_round_job *job, const uint8_t *req,
                                              size_t len, int32_t arrived, uint32_t *sum, int *released,
                                              dpfl_error *err);
#endif
