/* The simulation's internals, shared by its files: sim.c (set-up, what local training reads), sim_clients.c,
 * sim_record_dp.c and sim_server.c (the public functions of its sides), the clients' own state (client_state.h:
 * personal.c, state_layout.c, clients.c, client_store.c; SCAFFOLD's server state scaffold.c), client.c (local
 * training), aggregate_*.c (the aggregation modes), round.c (one round: sampling, dropouts, the clients through the
 * transport, the server), transport_local.c (in-process worker threads), eval.c (evaluation), sim_ledger.c (what the
 * server charges).  Mechanisms come from mech/.
 *
 * The handle (struct dpfl_sim) holds parts with functions of their own, which never take the handle: the clients'
 * side (struct dpfl_clients: the state blocks' fl_state_layout and fl_state_store), record-level DP on the clients
 * (struct dpfl_record_dp: fl_record_dp, read through fl_train_ctx by local training), the server's side (struct
 * dpfl_server: the sampler fl_sampler, the aggregation mode's state, its own type private to its file, with
 * fl_agg_params, the clip and noise it shares, and fl_round_view, what it sees of the round; SCAFFOLD's
 * fl_scaffold; the ledger) and the worker threads (fl_workers). */
#ifndef DPFL_FL_SIM_INTERNAL_H
#define DPFL_FL_SIM_INTERNAL_H
#include "dpfl/fl.h"
#include "dpfl/mech.h"
#include "dpfl/ddp.h"
#include "dpfl/secagg.h"
#include "dpfl/transport.h"
#include "core/exact_sum.h"
#include "client_state.h"

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

/* what one client's local training reports to the server (besides its update): include/dpfl/transport.h */
typedef dpfl_client_report client_result;

typedef struct eval_job eval_job;

typedef dpfl_transport fl_transport;
extern const fl_transport fl_transport_local;
void fl_sim_set_transport(dpfl_sim *s, const fl_transport *t);

/* Record-level DP (DP-SGD) as the clients run it. */
typedef struct {
    int on, poisson, e2e, secure;
    double z;
    dpfl_clip_spec clip;
    double *p;           /* rPDP-FL: per-record rates (NULL: uniform) */
    const double *denom; /* and per-client divisors */
    /* budget_policy = filter (Feldman-Zrnic): each record's Renyi loss at order filter_alpha, spent against its
     * filter_cap; a record is clipped to what it has left and leaves the sampler (p = 0) once it has spent all */
    double *spent;
    const double *cap;
    double filter_alpha;
} fl_record_dp;

/* What a client's local training reads (client.c): the round's public values and the run's settings. */
typedef struct {
    const dpfl_config *cfg;
    const dpfl_model *model;
    const dpfl_dataset *train, *test;
    const dpfl_partition *part;
    const dpfl_rng *root;
    const float *global;
    fl_record_dp *rdp;  /* record-level DP (rdp->on), with the filter's per-record spend */
    const fl_personal_slices *pers; /* the clients' personal slices (none: npr = 0) */
    const float *control; /* fl.scaffold: the server's c (NULL: off) */
    int32_t round, eval_batch;
    double lr;
    int threads;        /* threads the client's own noise may use (idle threads of a short chunk help) */
    int per_step;       /* client-level per-step clipping: the local model stays within S of the global one */
    double S;
} fl_train_ctx;

int64_t fl_client_steps(const dpfl_config *cfg, int32_t n);
/* client k's local training by worker w, with its state block (S's, laid out as L): its update Delta into out, its
 * report into res */
void fl_client_train(const fl_train_ctx *t, const fl_state_layout *L, fl_state_store *S, worker *w, int32_t k,
                     float *out, client_result *res);
void fl_gather(const dpfl_dataset *d, const int32_t *idx, int32_t n, float *x, int32_t *y);

/* What a round's client sampling design depends on (fl_sampler_view). */
typedef struct {
    const dpfl_config *cfg;
    int32_t clients;                  /* K */
    dpfl_client_sampling sampling;
    int32_t round;                    /* the round sampled (or set up) last */
    const dpfl_mech_clients *design;  /* the design the client sampler returned for `round` (NULL: none yet) */
} fl_sampling_view;
/* The round's client-level mechanism: the sampling design (the sampler's own for the round it sampled, else the
 * one it would draw from). */
dpfl_mech_clients fl_round_design(const fl_sampling_view *smp, int32_t round);

/* What every aggregation mode shares with the simulation: the update clip and the noise multipliers in force (the
 * handle holds it; a mode with client-level DP reads and sets it through the pointer its set-up gave it). */
typedef struct {
    double S;         /* the update clip (client-level DP, central or distributed; adaptive clipping moves it) */
    double z_sum;     /* multiplier of the noise on the sum of updates (adaptive: z_Delta) */
    double sigma_b;   /* adaptive: noise std on the unclipped count */
    double z_release; /* the multiplier of the whole release, from the noises drawn (adaptive: dpfl_mech_adaptive) */
} fl_agg_params;
/* every mode, until its set_noise says otherwise: the update sum's and the release's multiplier are z */
void fl_agg_params_plain(fl_agg_params *p, double z);

/* Where a release goes (every mode's): the global model steps by eta along the server's buffer acc. */
typedef struct {
    size_t nparam;
    float *global, *acc;
    double eta;       /* fl.eta */
} fl_agg_model;
void fl_agg_step(const fl_agg_model *m);

/* What a mode's create reads: the run's settings and the buffers that stay for the simulation's life. */
typedef struct {
    const dpfl_config *cfg;
    const dpfl_model *model;
    const dpfl_partition *part;
    int uniform_weights;
    const dpfl_rng *root;
    dpfl_client_sampling sampling;
    int32_t nslots, nthreads;
    worker *workers;                  /* their distributed DP buffers are the mode's to allocate */
    fl_agg_model out;
    fl_agg_params *par;
} fl_agg_setup;

/* What begin and release see of the round. */
typedef struct {
    int32_t round;
    dpfl_mech_clients design;         /* the round's client sampling design (fl_round_design) */
    int32_t nsampled;
    const int32_t *sampled;
    const client_result *results;     /* in client order */
    float *const *slots;
    const fl_transport *transport;
    const dpfl_round_job *job;        /* the transport's current call */
} fl_round_view;

/* One update that arrived at the server. */
typedef struct {
    int32_t i;                /* the client's index in the round */
    int32_t j;                /* in process: the slot of the transport's current call the client's worker used */
    const client_result *r;   /* its report */
    float *u;                 /* the update: the server's buffer, which add may change */
    float *keep;              /* whole-round modes: where the update is kept until release (slot i); else NULL */
} fl_arrival;

/* The server's aggregation mode: how the updates of a round become the next global model, and the client-level
 * event that release is.  One implementation per mode, chosen once (fl_aggregator_for), each with a state of its
 * own type that only its file knows: create makes it, every other callback gets it back as `self` and casts it
 * once.  The round (round.c) calls begin, then add for each update as it arrives -- in any order: the sums are
 * exact and order-independent, so the server holds O(model), not a slot per client -- then release, and charges
 * event.  What release counts over the round's clients (replied, clipped, norms) it reads from the reports, in
 * client order. */
typedef struct fl_aggregator {
    const char *name;
    int client_level;  /* a client-level DP release: dropouts are drawn, the round is charged event() */
    int whole_round;   /* add keeps every update of the round in its client's slot until release (median clipping:
                          the clip is the median of all the round's norms; O(cohort x model), documented) */
    dpfl_status (*create)(const fl_agg_setup *su, void **self, dpfl_error *err);
    void (*free)(void *self);
    /* the noise multiplier z from `round` on (client_dp.noise, or a calibrated one), after fl_agg_params_plain:
     * what else it implies (NULL: nothing) */
    dpfl_status (*set_noise)(void *self, const dpfl_mech_clients *design, int32_t round, double z, dpfl_error *err);
    dpfl_status (*begin)(void *self, const fl_round_view *v, dpfl_error *err);
    /* after begin: 0 when the round can release nothing whoever replies (distributed DP with fewer than two
     * clients); then nobody is asked to train, on every transport (NULL: every round can release) */
    int (*can_release)(const void *self);
    /* a worker thread, after client i (slot j, report r) trained: what the client itself does to u before sending */
    void (*client_send)(void *self, worker *w, int32_t i, int32_t j, client_result *r, float *u);
    /* the server: an update arrived (in any order) */
    dpfl_status (*add)(void *self, const fl_arrival *a, dpfl_error *err);
    dpfl_status (*release)(void *self, const fl_round_view *v, dpfl_round_metrics *m, dpfl_error *err);
    /* what release is, at the noise in force */
    dpfl_event (*event)(const void *self, const dpfl_mech_clients *design);
    /* what release would be at multiplier z from `round` on, the state and the noise in force unchanged (a trial
     * charge, calibration) */
    dpfl_status (*event_at)(const void *self, const dpfl_mech_clients *design, int32_t round, double z,
                            dpfl_event *ev, dpfl_error *err);
} fl_aggregator;
extern const fl_aggregator fl_agg_mean, fl_agg_cdp, fl_agg_cdp_median, fl_agg_ddp;
const fl_aggregator *fl_aggregator_for(const dpfl_config *cfg);
/* distributed DP's state (fl_agg_ddp's self): its plan for the noise in force (NULL: none yet), the round's public
 * values */
const dpfl_ddp_plan *fl_ddp_plan(const void *self);
void fl_ddp_round_info(const void *self, dpfl_ddp_round_info *info);
/* 32 bytes from the stream (a, b, c) of root: the round's rotation seed, a secure-aggregation client's seed */
void fl_ddp_seed_bytes(const dpfl_rng *root, uint64_t a, uint64_t b, uint64_t c, uint8_t out[32]);

/* The client sampler's state (dpfl_sim_sample): what a round's client design depends on; the server's. */
typedef struct {
    const dpfl_config *cfg;
    int32_t clients;                  /* K */
    dpfl_client_sampling sampling;
    int32_t round;                    /* the round sampled (or set up) last */
    dpfl_mech_clients design;         /* the design the sampler drew round design_round from (0: none yet) */
    int32_t design_round;
} fl_sampler;
fl_sampling_view fl_sampler_view(const fl_sampler *smp);

/* The public sub-handle of the clients' side (include/dpfl/fl.h, dpfl_sim_clients): every client's own state,
 * kept across rounds, with the run's settings it needs (borrowed).  Its functions are sim_clients.c's; it reads
 * nothing else of the simulation. */
struct dpfl_clients {
    const dpfl_config *cfg;
    const dpfl_partition *part;
    dpfl_optim_config optcfg; /* the local optimizer and the round's learning-rate schedule */
    fl_state_layout layout;   /* what a client's state block holds (client_state.h) */
    fl_state_store store;     /* every client's block, in memory or paged out to its file */
};

/* The public sub-handle of record-level DP as the clients run it (include/dpfl/fl.h, dpfl_sim_record_dp): the
 * noise, rPDP-FL's per-record rates and the individual filter's spend (fl_record_dp, which local training reads),
 * with the run's settings it needs (borrowed).  Its functions are sim_record_dp.c's; it reads the server's sampler
 * (the round's client design, for the rPDP design) and nothing else of the simulation. */
struct dpfl_record_dp {
    const dpfl_config *cfg;
    const dpfl_partition *part;
    const fl_sampler *smp;    /* the server's (dpfl_server.smp) */
    size_t nparam;            /* the model's parameters (the exact sampler's range) */
    fl_record_dp rdp;
};

/* The round's cohort, the server's: the clients sampled (the round smp.round), ascending, and the reports they sent,
 * in the same order.  What round.c's steps before and around training read and write of the server (who drops out,
 * the clients' state blocks), without the server's aggregation mode, ledger or observer. */
typedef struct {
    int32_t *sampled;
    int32_t n;
    client_result *results;
} fl_cohort;

/* The public sub-handle of the server's side (include/dpfl/fl.h, dpfl_sim_server): the client sampler, the round's
 * cohort and the reports it received, the aggregation mode (chosen once at dpfl_sim_create), its state and the clip
 * and noise it shares, the ledger of what it released, SCAFFOLD's c, and the auditing observer.  Its functions are
 * sim_server.c's and sim_ledger.c's. */
struct dpfl_server {
    const dpfl_config *cfg;
    const dpfl_partition *part;
    const dpfl_model *model;
    fl_sampler smp;
    fl_cohort cohort;         /* the round's clients (smp.round) and their reports */
    int64_t *steps;           /* the sampled clients' local steps (what the ledger charges) */
    dpfl_ledger ledger;       /* every round this simulation trained, charged as it ran */
    const fl_aggregator *agg;
    void *aggself;
    fl_agg_params aggp;
    fl_scaffold scaffold;     /* fl.scaffold: the server's c (scaffold.on = 0: off) */
    dpfl_server_update_fn observer; /* auditing: sees each arrived update */
    void *observer_ctx;
};

/* The worker threads and their buffers (transport_local.c runs jobs on them). */
typedef struct {
    struct dpfl_par *pool;    /* nthreads workers (core/parallel.c), NULL with one thread */
    int32_t nthreads, nslots;
    worker *workers;
    float **slots;
    atomic_int next;          /* the next job of the current call */
    int32_t count;            /* the current call's jobs */
} fl_workers;

struct dpfl_sim {
    const dpfl_config *cfg;
    const dpfl_model *model;
    const dpfl_dataset *train, *test;
    const dpfl_partition *part;
    const fl_transport *transport;
    dpfl_rng root;
    float *global;
    int32_t max_client, eval_batch;
    fl_workers wk;
    float *acc;
    double t0;
    int uniform_weights;
    struct dpfl_clients cl; /* the clients' side (dpfl_sim_clients) */
    struct dpfl_record_dp rd; /* record-level DP on the clients (dpfl_sim_record_dp) */
    struct dpfl_server sv;  /* the server's side (dpfl_sim_server) */
    /* per-round job shared with the threads */
    int32_t chunk_start, chunk_len;
    double lr;
    fl_train_ctx tctx;   /* what the current chunk's clients train with */
    eval_job *jobs;
    dpfl_round_job job;  /* the transport's current call */
    dpfl_ddp_round_info ddp_round;
};

/* sim.c: what local training reads */
fl_train_ctx fl_sim_train_ctx(dpfl_sim *s); /* for the current round and chunk */
/* transport_local.c: fn(ctx, worker index) on the worker threads, which take the call's `count` jobs from wk->next
 * (job state lives in ctx) */
void fl_run_parallel(fl_workers *wk, void (*fn)(void *ctx, int32_t id), void *ctx, int32_t count);
#endif
