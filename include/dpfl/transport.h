/* dpfl transport: how the server of a run reaches the clients of a round.
 *
 * The run (dpfl_run's loop) samples the clients, draws who drops out, and for each chunk of the sampled list hands
 * a transport a dpfl_round_job: the global model and the round's public values; the transport has each client of
 * the chunk train (in process, on another MPI rank, over the network) and writes its update into the job's slot
 * and its report into the job's report (in process), or hands each update to job->arrive as it comes in (a
 * whole-round transport: the network, MPI).  The server's sum is exact and order-independent, so the model's bits
 * depend neither on the transport nor on the order of arrival, and the server holds O(model) for the updates.  Three implementations: in-process worker threads (src/fl/
 * transport_local.c), ZeroMQ (src/net/server.c, `dpfl serve`) and MPI (src/cli/mpi_train.c).  A transport sees no
 * simulation internals: only this header, the job, and the public accessors of the simulation and of its sides
 * (dpfl_sim_clients, dpfl_sim_record_dp, dpfl_sim_server). */
#ifndef DPFL_TRANSPORT_H
#define DPFL_TRANSPORT_H

#include "dpfl/fl.h"
#include "dpfl/secagg.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* What one client reports with its update (besides the update itself). */
typedef struct {
    int32_t client;
    double loss_sum;   /* sum over batches of mean loss * batch size */
    int64_t examples;
    int64_t steps;
    int64_t clipped;   /* DP-SGD: examples whose gradient norm exceeded C */
    double norm;       /* L2 norm of the raw update */
    int dropped;       /* sampled but no update: set by the server before the call (client_dp.dropout), or by the
                          transport for a client that never answered -- charged all the same */
    dpfl_status ddp_status; /* distributed DP in process: the client's encoding failed */
} dpfl_client_report;

/* Distributed DP's public values of the round (client_dp.mechanism = ddp). */
typedef struct {
    int32_t threshold;           /* survivors secure aggregation needs; 0: the round can release nothing */
    double client_z;             /* the plan's noise multiplier (a client checks it against its own plan) */
    uint8_t seed[32];            /* the round's public rotation seed */
    dpfl_secagg_server *secagg;  /* remote clients: rounds 0-2 of secure aggregation go to this server */
} dpfl_ddp_round_info;

/* One call of run_clients: clients sampled[start .. start + count) of the round. */
typedef struct dpfl_round_job dpfl_round_job;
struct dpfl_round_job {
    dpfl_sim *sim;               /* opaque: for the public accessors (dpfl_sim_clients, dpfl_sim_record_dp,
                                    dpfl_sim_server; the in-process transport trains with it) */
    int32_t round;               /* 1-based */
    int32_t released;            /* rounds released before this one */
    int32_t nsampled;            /* the whole round's sampled clients, in order */
    const int32_t *sampled;
    dpfl_client_report *reports; /* nsampled: reports[i] is sampled[i]'s */
    int32_t start, count;        /* this call's clients */
    float *const *slots;         /* count slots of nparam floats: the update of sampled[start + j] into slots[j]
                                    (NULL for a whole-round transport: it calls arrive instead) */
    /* a whole-round transport: client i's update u (nparam floats, the transport's own buffer, which the server may
     * change: it clips in place) to the server as soon as it arrives, after reports[i]; any order, each arrived
     * update once (not for distributed DP, whose masked inputs go to ddp->secagg); an error ends the run */
    dpfl_status (*arrive)(dpfl_round_job *job, int32_t i, float *u, dpfl_error *err);
    const float *global;         /* the model the clients train from */
    size_t nparam;
    double lr;                   /* the round's learning rate */
    double update_clip;          /* client-level DP's clip S (0 without) */
    double record_z;             /* DP-SGD's noise multiplier (0 without record-level DP) */
    int client_level;            /* client-level DP: the server measures each update's norm itself */
    const dpfl_ddp_round_info *ddp;   /* distributed DP; NULL otherwise */
    const float *control;        /* fl.scaffold: the server's control variate c (nparam floats), sent with the model;
                                    NULL otherwise */
};

/* What a transport learns once the run is set up, before its first round. */
typedef struct {
    const dpfl_config *cfg;
    int32_t clients;                                 /* the partition's clients */
    size_t nparam;
    const uint8_t *partition_key, *partition_digest; /* 32 bytes each: what a client needs to draw the same split */
    int32_t released;                                /* rounds released before this session (a resume) */
    const float *initial_model; /* personalization = helper: w0, every helper model until its first sync (else NULL) */
    dpfl_sim *sim;              /* opaque: the public accessors (the client states a resume restored) */
} dpfl_transport_setup;

typedef struct dpfl_transport dpfl_transport;
struct dpfl_transport {
    /* train the job's clients; an error ends the run */
    dpfl_status (*run_clients)(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err);
    int whole_round;       /* 1: one call per round for every sampled client (one deadline per round); each update
                              goes to job->arrive as it comes in (no slots) */
    int clients_hold_data; /* 1: every client is a process with its own data: files absent here are never read;
                              its own state (optimizer, helper model, input transform) lives there too, so the
                              server keeps none and does not evaluate the clients' own models */
    /* optional: once the run is set up, and when it ends (released: rounds released in all; st: how; why: the
     * error, or for DPFL_OK "interrupted" (dpfl_run_options.stop: the run can be resumed) or "" (finished)) */
    dpfl_status (*start)(const dpfl_transport *t, const dpfl_transport_setup *setup, dpfl_error *err);
    void (*finish)(const dpfl_transport *t, int32_t released, dpfl_status st, const char *why);
    /* distributed DP with remote clients (NULL: in process): run_clients carried secure aggregation's rounds 0-2
     * into job->ddp->secagg; this carries the unmasking round (req: the UNMASK_REQ for the clients not dropped)
     * and finishes into sum (d values): *released = 1 when sum holds the sum of exactly `arrived` inputs, 0 when
     * too few answered (the round then releases nothing, and is charged all the same). */
    dpfl_status (*secagg_finish)(const dpfl_transport *t, const dpfl_round_job *job, const uint8_t *req, size_t len,
                                 int32_t arrived, uint32_t *sum, int *released, dpfl_error *err);
    /* optional: after each round's release (job->global: the released model; job->reports: whose update arrived).
     * fl.personalization = helper: the processes that hold the helper models sync them (dpfl_clients_sync) */
    void (*after_round)(const dpfl_transport *t, const dpfl_round_job *job);
    void *ctx;
    const char *about; /* optional: how the clients are reached (e.g. "mpirun, 4 ranks"), summary.json's transport */
};

/* ---------------------------------------------------------------------------- the client's side of a round
 * What a process that holds clients (a deployed client, an MPI worker rank) runs with its own dpfl_sim, set up
 * like the server's: the same local training, encoding and streams as the in-process simulation. */

/* Client k's part of round `round`: local training from the global model the server sent (copied into the
 * simulation's global model by the caller) with update clip S, its update into out (nparam floats) and its report
 * into rep, on all the simulation's threads; the client's own state block is allocated on its first
 * participation. */
dpfl_status dpfl_sim_client_round(dpfl_sim *s, int32_t round, double update_clip, int32_t k, float *out,
                                  dpfl_client_report *rep, dpfl_error *err);
/* personalization = helper: client k's helper model after its update of a round arrived, h_k <- (1 - alpha) h_k +
 * alpha global with global the model that round released (the simulation's own sync; nothing without a helper
 * or before client k first trained). */
void dpfl_clients_sync(dpfl_clients *c, int32_t k, const float *global);
/* fl.scaffold: the control variate c (nparam floats) the simulation's clients train with -- the server's own on the
 * server, the one the server sent on a client process (copied in by the caller before dpfl_sim_client_round);
 * NULL without SCAFFOLD. */
float *dpfl_server_control(dpfl_server *sv);
/* The learning rate of round `round` (1-based) as the server's schedule gives it. */
double dpfl_clients_round_lr(const dpfl_clients *c, int32_t round);
/* Distributed DP: the round's public values as the server sent them (n sampled, threshold t, rotation seed; t is
 * checked against this client's plan), then client k's update u encoded (clip, rotate, round, Skellam noise, wrap)
 * into enc (the plan's d values) with its own stream. */
dpfl_status dpfl_sim_ddp_client_setup(dpfl_sim *s, int32_t round, int32_t n, int32_t t, const uint8_t seed[32],
                                      dpfl_error *err);
dpfl_status dpfl_sim_ddp_client_encode(dpfl_sim *s, int32_t k, const float *u, uint32_t *enc, double *norm,
                                       dpfl_error *err);
/* Secure aggregation: client k's seed for round `round`, from the run's root stream (a seeded, reproducible run;
 * otherwise a client draws its own). */
void dpfl_sim_secagg_seed(const dpfl_rng *root, int32_t round, int32_t k, uint8_t out[32]);

/* The rates digest of client k's records (rPDP-FL; all zero without per-record rates): what server and client
 * compare before a round. */
void dpfl_record_dp_rates_digest(const dpfl_record_dp *r, int32_t k, uint8_t out[32]);

#pragma GCC visibility pop
#endif
