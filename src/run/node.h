/* A node of a run: what every process that trains clients sets up alike -- the data, the partition, the model,
 * the simulation and the noise (configured, calibrated or planned by rPDP-FL) -- without the run's files.  dpfl
 * train's own run is a node plus its files (run_internal.h); a deployed client (src/net/client.c, dpfl join) and an
 * MPI worker (src/cli/mpi_train.c) set up a node from the partition key their server (rank 0) sends, and train
 * their clients with the simulation's own local training (dpfl_sim_client_round). */
#ifndef DPFL_RUN_NODE_H
#define DPFL_RUN_NODE_H
#include "dpfl/fl.h"
#include "accounting/accounting.h"

/* What the run is given and builds before its first round. */
typedef struct {
    const dpfl_config *cfg;
    dpfl_rng root;
    uint64_t seed;
    dpfl_dataset train, test;
    dpfl_partition part;
    dpfl_model model;
    dpfl_sim *sim;
    dpfl_clients *clients; /* its sides (dpfl_sim_clients, dpfl_sim_record_dp, dpfl_sim_server), NULL until it exists */
    dpfl_record_dp *record_dp;
    dpfl_server *server;
    float *global;
    int rdp_on, cdp_on;
    int borrowed; /* train and test are views of the caller's arrays (dpfl_run_options.train): never freed */
} run_inputs;

/* The run state a checkpoint saves besides the model, the ledger and the client states. */
typedef struct {
    double record_z, client_z, wall, S;
    int64_t examples;
    uint8_t partition_key[32];    /* the stream the client partition was drawn from: a resume draws it again */
    uint8_t partition_digest[32]; /* SHA-256 of the partition it gave (dpfl_partition_digest) */
    uint8_t config_digest[32];    /* the settings a resume must keep (fl_config_digest) */
} run_state;

/* The guarantees after the rounds released so far: what metrics.jsonl, summary.json and the terminal report. */
typedef struct {
    dpfl_record_report report;     /* epsilon: the record-level guarantee (fl_record_guarantee; rPDP-FL: the largest
                                    * record epsilon) */
    double ledger_eps;             /* the ledger's own epsilon, when federated f-DP's bound is the smaller (else NAN) */
    double *per_client;            /* record-level epsilon per client (<= 1,000 clients, RDP) */
    double ceps;                   /* client-level epsilon */
    int cprivate;                  /* 0: the client level is not private (median clipping) */
} run_guarantees;

/* The run's privacy accounting: what it has charged, the mechanisms it charges for, and the guarantees it reports. */
typedef struct {
    dpfl_ledger ledger, trial;     /* the rounds released; trial: the next round charged on a copy */
    dpfl_record_accounting ra;     /* the record-level mechanism the simulation runs */
    fl_rpdp rpdp;                  /* record_dp.budgets: per-record budgets and their ledger */
    run_guarantees g;
    run_state rs;
} run_acct;

/* Warnings of the set-up (delta against 1/n, preprocessing no epsilon covers), kept for summary.json. */
typedef struct {
    char text[4][256];
    int n;
} run_warnings;

typedef struct {
    run_inputs in;
    run_acct acct;
    run_warnings warn;
} fl_node;

/* Sets up n for cfg (validated by the caller) without files, its partition drawn from partition_key (the server's,
 * rank 0's): the streams come from run.seed when given (reproducible: the same as one process), else from this
 * process's own entropy.  Data files of other processes' clients may be absent (fl_node_data_here checks its own).
 * n is zeroed first; fl_node_free frees it, also after a failure. */
dpfl_status fl_node_setup(fl_node *n, const dpfl_config *cfg, const uint8_t partition_key[32], dpfl_error *err);
/* A process that trains client k (dpfl join, an MPI worker) must hold the files of its records (data.source_rows
 * lets the others be absent): fails naming the first missing file; who names the process for the message. */
dpfl_status fl_node_data_here(const fl_node *n, int32_t k, const char *who, dpfl_error *err);
void fl_node_free(fl_node *n);
/* SHA-256 of the config keys not at their default, but for those a resume may change (fl.rounds, and those that
 * change no result): a checkpoint resumes only under the same digest, and every MPI rank has rank 0's
 * (config_digest.c). */
void fl_config_digest(const dpfl_config *cfg, uint8_t out[32]);

#endif
