/* The simulation's internals, shared by its files: sim.c (set-up and settings), client.c (local training),
 * server.c (client-level aggregation), round.c (one round: sampling, dropouts, the clients through the transport,
 * the server), transport_local.c (in-process worker threads), eval.c (evaluation).  Mechanisms come from mech/. */
#ifndef DPFL_FL_SIM_INTERNAL_H
#define DPFL_FL_SIM_INTERNAL_H
#include "dpfl/fl.h"
#include "dpfl/mech.h"
#include "dpfl/ddp.h"
#include "dpfl/secagg.h"
#include "dpfl/transport.h"

#include <stdatomic.h>

/* purposes of the derived ChaCha20 streams (dpfl_rng_derive(root, round, client-or-all, purpose)) */
enum {
    PURPOSE_SAMPLE_CLIENTS = 1, PURPOSE_LOCAL = 2, PURPOSE_DROPOUT = 5, PURPOSE_SERVER_NOISE = 6,
    PURPOSE_DDP_ROTATION = 40, PURPOSE_DDP_CLIENT = 41, PURPOSE_SECAGG = 42
};

/* one worker thread's buffers */
typedef struct {
    dpfl_nn_ws *ws;
    float *local, *grad, *xbuf;
    int32_t *ybuf, *order;
    float *part, *norms; /* DP-SGD: one micro-batch's clipped sum; per-example norms */
    float *radius;       /* budget_policy = filter: one micro-batch's per-example clip bounds */
    double *ddp_work;    /* distributed DP: d doubles and d integers for the encoding */
    int64_t *ddp_iwork;
    dpfl_optim opt;
    int ws_threads;      /* threads of ws's own pool (more than 1 when fewer clients than threads train) */
} worker;

typedef struct {
    float *state; /* the client's own floats, NULL until it first trains: its helper model (P floats, with
                     personalization = helper), then state_vecs * P optimizer floats (momentum, or Adam m then v) */
    int64_t t;    /* local steps taken over all the client's rounds (the optimizer's t with client_state = keep) */
    double local_acc; /* helper models: accuracy of its latest freshly trained model on its test split (NAN: none
                         since this process started; not checkpointed, a diagnostic) */
} client_opt;

/* what one client's local training reports to the server (besides its update): include/dpfl/transport.h */
typedef dpfl_client_report client_result;

typedef struct eval_job eval_job;

typedef dpfl_transport fl_transport;
extern const fl_transport fl_transport_local;
void fl_sim_set_transport(dpfl_sim *s, const fl_transport *t);

/* Client-level DP's server-side state (aggregate_cdp.c; S is also distributed DP's clip). */
typedef struct {
    dpfl_clip_strategy strategy;
    size_t *layer_off, *layer_len; /* per-layer update clipping: the layers' slices; NULL when flat */
    int32_t nlayers_clip;
    double S;       /* current update clip */
    double z_sum;   /* multiplier of the noise on the sum of updates (adaptive: z_Delta) */
    double sigma_b; /* adaptive: noise std on the unclipped count */
    float *raw_sum; /* V_c / U_s */
    double *norms;  /* per sampled client */
    /* the round's sums (reset by begin) */
    double S_used;  /* the clip the round applies (median clipping: the median of its norms) */
    double sumsq;   /* sum of squared raw update norms (V_c) */
    int32_t nclipped;
} fl_cdp_state;

/* Distributed DP's state (client_dp.mechanism = ddp; aggregate_ddp.c). */
typedef struct {
    int secagg;
    int remote;                      /* the clients are other processes (transport->secagg_finish) */
    dpfl_ddp_plan plan;              /* for the noise multiplier in force (plan.z == 0: none yet) */
    dpfl_poisson_table *noise;       /* the clients' Poisson table (lambda = client variance / 2) */
    uint8_t seed[32];                /* the round's public rotation seed */
    int32_t t;                       /* the round's threshold; 0: the round can release nothing */
    int32_t arrived, clipped;
    int32_t nslots;                  /* slots the next three have */
    uint32_t **enc;                  /* per slot: the client's wrapped vector (d values) */
    dpfl_secagg_msg *masked;         /* per slot: its masked input */
    dpfl_error *err;                 /* per slot */
    uint32_t *sum;                   /* the modular sum (d values) */
    dpfl_secagg_server *sa_server;
    dpfl_secagg_client **sa_clients; /* per sampled index, the round's secure aggregation clients */
    dpfl_secagg_msg *sa_sf;          /* per sampled index, the SHARES_FOR message addressed to it */
} fl_ddp_state;

/* The server's aggregation mode: how the updates of a round become the next global model, and the client-level
 * event that release is.  One implementation per mode, chosen once (fl_aggregator_for); the round (round.c) calls
 * begin, then add for each arrived update in client order, then release, and charges event. */
typedef struct fl_aggregator {
    const char *name;
    int client_level;  /* a client-level DP release: dropouts are drawn, the round is charged event() */
    int whole_round;   /* add needs every update of the round in its slot first (median clipping) */
    dpfl_status (*create)(dpfl_sim *s, dpfl_error *err); /* buffers, at dpfl_sim_create (NULL: none) */
    void (*free)(dpfl_sim *s);
    /* the noise multiplier from `round` on (client_dp.noise, or a calibrated one) */
    dpfl_status (*set_noise)(dpfl_sim *s, int32_t round, double z, dpfl_error *err);
    dpfl_status (*begin)(dpfl_sim *s, int32_t round, dpfl_error *err);
    /* a worker thread, after client i (slot j) trained: what the client itself does to u before sending */
    void (*client_send)(dpfl_sim *s, worker *w, int32_t i, int32_t j, float *u);
    /* the server: client i's update arrived in slot j (called in client order) */
    dpfl_status (*add)(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err);
    dpfl_status (*release)(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err);
    dpfl_event (*event)(const dpfl_sim *s, int32_t round); /* what release is, at the noise in force */
} fl_aggregator;
extern const fl_aggregator fl_agg_mean, fl_agg_cdp, fl_agg_cdp_median, fl_agg_ddp;
const fl_aggregator *fl_aggregator_for(const dpfl_config *cfg);

struct dpfl_sim {
    const dpfl_config *cfg;
    const dpfl_model *model;
    const dpfl_dataset *train, *test;
    const dpfl_partition *part;
    const fl_transport *transport;
    struct dpfl_par *pool; /* nthreads workers (core/parallel.c), NULL with one thread */
    dpfl_rng root;
    float *global;
    int32_t nthreads, nslots, max_client, eval_batch;
    worker *workers;
    float **slots;
    client_result *results;
    int32_t *sampled;
    int64_t *steps;     /* the sampled clients' local steps (what the ledger charges) */
    dpfl_ledger ledger; /* every round this simulation trained, charged as it ran */
    float *acc;
    dpfl_optim_config optcfg;
    double t0;
    dpfl_client_sampling sampling;
    int uniform_weights;
    /* per-client state: fl.client_state = keep and/or fl.personalization = helper */
    int keep;           /* some per-client state exists (either of the two) */
    int keep_opt;       /* fl.client_state = keep: the optimizer state is the client's own */
    int state_vecs;     /* optimizer vectors of P floats per client: 0 (plain SGD or reset), 1 (momentum), 2 (Adam) */
    int helper;         /* fl.personalization = helper: the first P floats of a client's state are its helper model */
    size_t tr;          /* model.transform: the first tr parameters are each client's own input transform, kept in the
                           last tr floats of its state; never sent (zero in its update), never aggregated */
    float alpha;        /* helper_alpha */
    float *w0;          /* helper: the initial model, every client's helper until its first sync */
    client_opt *cstate; /* one per client */
    /* record-level DP (DP-SGD) */
    int rdp, rdp_poisson, rdp_e2e, rdp_secure;
    double rdp_z;
    double *rec_p;                   /* rPDP-FL: per-record rates (NULL: uniform) */
    const double *rec_denom;         /* and per-client divisors */
    /* budget_policy = filter (Feldman-Zrnic): each record's Renyi loss at order filter_alpha, spent against its
     * filter_cap; a record is clipped to what it has left and leaves the sampler (p = 0) once it has spent all */
    double *rec_spent;
    const double *rec_cap;
    double filter_alpha;
    dpfl_clip_spec clip;
    int32_t nsampled;
    /* the server's aggregation mode, chosen once at dpfl_sim_create (aggregate.h), and its state */
    const fl_aggregator *agg;
    double mean_weight; /* fl_agg_mean: the round's total weight of the clients that replied */
    fl_cdp_state cdp; /* the update clip S with client-level DP (central or distributed); the central server's sums */
    fl_ddp_state ddp; /* distributed DP only */
    /* per-round job shared with the threads */
    int32_t round, chunk_start, chunk_len;
    double lr;
    atomic_int next;
    eval_job *jobs;
    dpfl_round_job job;  /* the transport's current call */
    dpfl_ddp_round_info ddp_round;
    dpfl_sim_update_fn observer; /* auditing: sees each arrived update */
    void *observer_ctx;
};

/* client.c */
int64_t fl_client_steps(const dpfl_config *cfg, int32_t n);
void fl_client_train(dpfl_sim *s, worker *w, int32_t k, float *out, client_result *res);
/* round.c: client k's state block (optimizer state, helper model, transform) before its first training */
dpfl_status fl_client_state_alloc(dpfl_sim *s, int32_t k, dpfl_error *err);
/* personalization = helper, after the server step: h_k <- (1 - alpha) w~_k + alpha w_global for every client of
 * the round whose update arrived (h_k holds w~_k since its training). */
void fl_client_sync_helpers(dpfl_sim *s);
/* The model client k uses: its helper model, or w0 before its first sync. */
const float *fl_client_model(const dpfl_sim *s, int32_t k);
/* model.transform: client k's own input transform (s->tr floats in its state), NULL before it first trains */
float *fl_client_transform(const dpfl_sim *s, int32_t k);
void fl_gather(const dpfl_dataset *d, const int32_t *idx, int32_t n, float *x, int32_t *y);
/* The round's client-level mechanism (sampling design, clip, noise multiplier of the update sum). */
dpfl_mech_round fl_round_mech(const dpfl_sim *s, int32_t round);
/* 32 bytes from the stream (a, b, c) of root: the round's rotation seed, a secure-aggregation client's seed */
void fl_ddp_seed_bytes(const dpfl_rng *root, uint64_t a, uint64_t b, uint64_t c, uint8_t out[32]);
/* transport_local.c: fn over `count` jobs on the worker threads (job state lives in s) */
typedef struct {
    dpfl_sim *s;
    int32_t id;
} thread_arg;
void fl_run_parallel(dpfl_sim *s, void *(*fn)(void *), int32_t count);
#endif
