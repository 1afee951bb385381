/* Internals of the run driver shared by its files: a run is its node (node.h: inputs, accounting, set-up warnings)
 * plus its files (run_io) and this session's progress (run_progress); functions take the parts they read.  Also
 * the checkpoint (model + ledger + per-client optimizer state + the round's metrics line, one atomic file) and the
 * reports.  Nothing outside src/run needs this header: a deployed client and an MPI worker use node.h. */
#ifndef DPFL_RUN_INTERNAL_H
#define DPFL_RUN_INTERNAL_H
#include "dpfl/run.h"
#include "run/node.h"

#include <stdio.h>

/* How a node's inputs and accounting are set up (fl_setup_node): for dpfl train's run, or for a node without files. */
typedef struct {
    const dpfl_config *cfg;
    const char *dir;              /* the run folder: a resume reads its checkpoint */
    int resume, quiet;
    const uint8_t *partition_key; /* the server's (rank 0's); NULL: drawn from the root stream */
    int absent_ok;                /* dpfl join, an MPI worker: sources absent here are other clients' */
    const struct dpfl_transport *transport; /* NULL: the in-process threads */
    char **ckpt_line;             /* a resume: the checkpoint's last metrics line (malloc'd) */
    const dpfl_dataset *train, *test; /* the caller's arrays instead of data.dataset (NULL: none) */
} run_setup;

/* The run's files. */
typedef struct {
    const char *dir;        /* the run folder (dpfl_run_options.out_dir) */
    FILE *metrics, *diag;   /* metrics.jsonl (what the guarantee covers), diagnostics.jsonl (not private) */
    char *ini, *ckpt_line;  /* config.ini as written; the checkpoint's last metrics line (a resume) */
    char sha[65];           /* of config.ini */
} run_io;

/* the stages of a round that summary.json times; FILES: the clients' state files, written by a thread of their own
 * during the evaluation (the checkpoint stage counts the wait for them that the evaluation did not hide) */
enum { RUN_STAGE_TRAIN, RUN_STAGE_EVAL, RUN_STAGE_CHECKPOINT, RUN_STAGE_FILES, RUN_STAGES };

/* This session's progress: timing, the latest evaluation, what happened so far. */
typedef struct {
    double t_start, wall0;  /* dpfl_now() at the start; the wall time of earlier sessions (a resume) */
    double started_at;      /* wall-clock time (seconds since the epoch) this session started */
    int stopped_early;
    int interrupted;        /* dpfl_run_options.stop ended the run before fl.rounds */
    int64_t comm;
    dpfl_round_metrics last_eval;
    double emd_mean, emd_std; /* PrivateFL's EMD at the latest evaluated round of this session (NAN: none) */
    int64_t upd_sampled, upd_arrived; /* over the whole run (report_updates.c, at the summary) */
    int32_t upd_empty;                /* rounds that sampled clients and received no update */
    /* this session's wall and process CPU seconds per stage of its rounds (summary.json "stage_seconds"):
     * training (with aggregation and the helper sync), evaluation, checkpoint; the state files' thread (its own
     * wall and CPU time, inside the others': it overlaps the evaluation) */
    double stage_wall[RUN_STAGES], stage_cpu[RUN_STAGES];
    int32_t stage_rounds, stage_evals;
} run_progress;

typedef struct {
    fl_node node;           /* inputs, accounting, set-up warnings */
    run_io io;
    run_progress pr;
    const dpfl_run_options *opt;
    const struct dpfl_transport *transport; /* NULL: the in-process threads */
} run_ctx;

/* The inputs and the accounting of n (data, partition, model, simulation, noise, ledger), as s says. */
dpfl_status fl_setup_node(fl_node *n, const run_setup *s, dpfl_error *err);

/* End-to-end DP's client-level epsilon of the run (e2e_report.c): the record-level noise, with the server's where
 * it is a Gaussian with a sensitivity bound (fl_e2e_server_z: its smallest multiplier so far, else 0). */
double fl_e2e_server_z(const dpfl_config *cfg, const run_acct *a);
dpfl_status fl_run_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a,
                                      double *eps, double *client_noise, dpfl_event *ev, dpfl_error *err);

/* summary.json's "events": the composition behind each reported epsilon (report_events.c). */
dpfl_status fl_summary_events(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a, struct cJSON *sum,
                              dpfl_error *err);

/* dpfl_run with the clients reached through transport t (NULL: in-process threads; src/net/server.c: the network). */
dpfl_status fl_run(const dpfl_config *cfg, const dpfl_run_options *opt, const struct dpfl_transport *t, dpfl_error *err);

dpfl_status fl_run_setup(run_ctx *c, dpfl_error *err);
void fl_run_free(run_ctx *c);
/* Round r: charge a copy of the ledger, stop (*stop = 1, nothing released) if that would pass a budget, else
 * train, checkpoint and release the round. */
dpfl_status fl_run_round(run_ctx *c, int32_t r, int *stop, dpfl_error *err);
/* the process's CPU seconds so far (the stages' cost on a shared machine) */
double fl_cpu_seconds(void);
/* report.c: the round's metrics line (malloc'd) and its diagnostics line; summary.json; the final lines. */
dpfl_status fl_report_round_line(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a,
                                 const dpfl_round_metrics *m, char **line, dpfl_error *err);
/* (pr: the round's count of client messages in, the EMD at evaluated rounds out) */
dpfl_status fl_report_diagnostics(const run_inputs *in, const run_io *io, run_progress *pr, const dpfl_round_metrics *m,
                                  dpfl_error *err);
dpfl_status fl_report_summary(run_ctx *c, dpfl_error *err);
/* What the report reads of the server's aggregation mode, read once where the report is written
 * (fl_report_server_of, through dpfl_server's getters): adaptive clipping's two noises, and distributed DP's plan
 * (NULL: the mode is not distributed DP; borrowed from the server, valid while the simulation lives). */
typedef struct {
    double update_noise, quantile_noise;
    const dpfl_ddp_plan *ddp;
} run_server_report;
run_server_report fl_report_server_of(const dpfl_server *sv);
void fl_report_final_lines(const dpfl_config *cfg, const dpfl_partition *part, const run_server_report *srv,
                           const run_acct *a, const run_progress *pr, const char *dir);
/* summary.json's "updates" (sampled, arrived, per round) from diagnostics.jsonl, into pr too (report_updates.c) */
void fl_report_updates(const char *dir, run_progress *pr, struct cJSON *sum);
/* PriFedSync's federated f-DP after `rounds` released rounds at noise record_z into o's "federated_fdp" (or why it
 * does not apply; nothing without record-level DP). */
dpfl_status fl_report_fdp_json(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double record_z,
                               struct cJSON *o, dpfl_error *err);
/* v at key k of o, null when not finite. */
void fl_json_num(struct cJSON *o, const char *k, double v);
/* The terminal's progress line (on a TTY): round, test accuracy, epsilon so far against its target, elapsed time
 * and ETA; fl_report_progress_line formats it into buf. */
void fl_report_progress_line(const dpfl_config *cfg, const run_guarantees *g, const dpfl_round_metrics *last_eval,
                             const dpfl_round_metrics *m, char *buf, size_t len);
void fl_report_progress(const dpfl_config *cfg, const run_guarantees *g, const dpfl_round_metrics *last_eval,
                        const dpfl_round_metrics *m);

/* cs (may be NULL: none) supplies the per-client state (fl.client_state = keep, helper models, personal
 * parameters): the blocks that changed go to their state files first (the folder fl_run_setup gave the clients);
 * cv (NULL: none) is SCAFFOLD's server control variate (dpfl_server_control). */
/* checkpoint.bin's format: 9 the config digest; 8 client states in their own files (clients/), named there;
 * 7 Skellam (distributed DP) events; 6 the per-record budgets ledger; 5 helper models and w0; 4 the partition key;
 * 3 every field explicit (2 and 1 copied structs, padding included).  Older ones are refused with their number. */
#define FL_CKPT_VERSION 9u
dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, dpfl_clients *cs, const float *cv, const fl_rpdp *rp,
                               const char *line, dpfl_error *err);
/* The run state of a checkpoint alone (to redraw its partition before anything else is set up). */
dpfl_status fl_checkpoint_peek(const char *dir, run_state *rs, dpfl_error *err);
/* *line (malloc'd) gets the last released round's metrics line; cs gets the references to the client state files
 * back (read when each client next needs its block), cv the server's control variate (both may be NULL: none). */
dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_clients *cs, float *cv, fl_rpdp *rp, char **line, dpfl_error *err);
/* A resume's check, before anything is written: refused when DIR/metrics.jsonl has a round past the checkpoint's
 * rounds (the checkpoint is written before each round's metrics line, so only an older checkpoint put back leaves
 * one: the rounds after it were released, and running them again would release them twice, charged once). */
dpfl_status fl_metrics_check_resume(const char *dir, int32_t rounds, dpfl_error *err);
/* Keep only metrics lines of rounds <= rounds; restore the last round's line from the checkpoint if missing. */
dpfl_status fl_metrics_truncate(const char *path, int32_t rounds, const char *last_line, dpfl_error *err);

/* fdp_report.c: PriFedSync's federated f-DP of the rounds released so far (NULL from fl_fdp_not_applicable:
 * it applies, else the reason it does not). */
const char *fl_fdp_not_applicable(const dpfl_config *cfg, double z);
dpfl_status fl_fdp_of_run(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double z,
                          dpfl_fdp_params *pp, dpfl_fdp_result *r, dpfl_error *err);
/* The record-level guarantee of the run after l's rounds: the ledger's epsilon (the participations that happened,
 * no amplification), or PriFedSync's federated f-DP bound (sync probability p kept) where it applies and is smaller;
 * rep->epsilon is that guarantee and *ledger_eps the ledger's (NAN when the ledger's is the guarantee). */
dpfl_status fl_record_guarantee(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_record_accounting *ra,
                                double record_z, const dpfl_ledger *l, dpfl_record_report *rep, double *per_client,
                                double *ledger_eps, dpfl_error *err);

#endif
