/* Shared by the files of a deployed client (dpfl join): client.c (the connection, the hello, the rounds),
 * client_state.c (its own ledger and client.bin / client.json), client_secagg.c (distributed DP's secure
 * aggregation conversation).  Built with ZeroMQ only. */
#ifndef DPFL_NET_CLIENT_INTERNAL_H
#define DPFL_NET_CLIENT_INTERNAL_H
#include "net_internal.h"
#include "dpfl/secagg.h"
#include "run/node.h"

/* The link to the server: the socket and its monitor, the keys, the names this process goes by. */
typedef struct {
    void *zctx, *sock, *mon;
    uint8_t server_pk[32], pk[32], sk[32];
    char name[65], who[16]; /* its key's name; "join K" in log lines */
    const char *server;     /* its address */
    int32_t k;              /* the sender of every frame */
    int quiet;
    int handshake_failures;
} client_link;

/* This client's own ledger, per-client state and last answer: what client.bin holds (client_state.c). */
typedef struct {
    fl_node *node; /* set up at the server's first hello */
    int32_t k;
    size_t P;
    uint8_t config_digest[32];
    const char *state_dir;
    int32_t replayed;     /* rPDP-FL: rounds of the server's ledger charged on this client's copy of the levels
                             (every released round charges every record: the rounds it trained as it sends them,
                             the others when a later round or the bye says they were released) */
    int64_t rounds_trained;
    int32_t sync_round;   /* personalization = helper: the round whose released model this client's helper model
                             waits for (SYNC; 0: none) -- the round it last trained, until the server syncs it */
    /* the last answer, and the run it belongs to (the server's partition key: what tells a run from a new one
     * whose config and partition came out the same) */
    uint8_t run_key[32];
    int32_t last_round;
    uint8_t *last_frame;
    size_t last_len;
    uint8_t last_digest[32];
} client_own;

/* Distributed DP: the round in progress (secure aggregation's client and this client's encoded update). */
typedef struct {
    dpfl_secagg_client *sa;
    int32_t sa_round, enc_round;
    uint32_t *enc;
    uint8_t enc_digest[32];
} client_ddp;

typedef struct {
    dpfl_join_options o;
    const dpfl_config *cfg;
    dpfl_config own_cfg; /* with --data: the config with this client's file in its place */
    client_link link;
    client_own own;
    int ddp;             /* client_dp.mechanism = ddp */
    client_ddp dd;
    float *update;
} client;

#define LOG(l, ...) net_log((l)->who, __VA_ARGS__)
#define INFO(l, ...) ((l)->quiet ? (void)0 : net_log((l)->who, __VA_ARGS__))

/* client.c: the server's SYNC (helper models): round 0 the initial model, else the model of the round this client
 * trained last (its update was added); anything else is ignored. */
dpfl_status net_client_on_sync(client *cl, const dpfl_wire_msg *m, dpfl_error *err);
/* client.c: a frame to the server (never blocks; -1 if it could not go now); an ERROR frame refusing a round;
 * the charge of a round before anything of it leaves; --delay's pause (a slow link). */
int net_client_send(client_link *l, const dpfl_wire_msg *m);
void net_client_send_simple(client_link *l, dpfl_wire_type type, uint32_t code, uint32_t round, const char *text);
void net_client_refuse(client_link *l, uint32_t round, const char *why);
void net_client_charge_own(client_own *own, int32_t round);
void net_client_pause(double delay);

/* client_state.c: rPDP-FL's levels charged up to the server's `released` rounds; this client's record-level
 * epsilon (NAN without record-level DP); client.bin and client.json written (before an answer goes) and read back
 * (a restarted client carries on). */
dpfl_status net_client_rpdp_catch_up(client_own *own, int32_t released, dpfl_error *err);
dpfl_status net_client_own_epsilon(client_own *own, double *eps, dpfl_error *err);
dpfl_status net_client_state_save(client_own *own, dpfl_error *err);
/* *carried_on = 1 when client.bin was there and read back, 2 when its last answer was another run's (forgotten:
 * its ledger and state carry on), 0: a fresh client.  own->run_key is set (this run's) before. */
dpfl_status net_client_state_load(client_own *own, int *carried_on, dpfl_error *err);

/* client_secagg.c: a distributed-DP round (train, encode, advertise keys), then the server's secure-aggregation
 * messages of it. */
dpfl_status net_client_ddp_round(client *cl, const dpfl_wire_msg *m, dpfl_error *err);
dpfl_status net_client_on_secagg(client *cl, const dpfl_wire_msg *m, dpfl_error *err);

#endif
