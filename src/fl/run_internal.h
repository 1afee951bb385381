/* Internals of the run driver shared by its files: the checkpoint (model + ledger + per-client optimizer state +
 * the round's metrics line, one atomic file) and the client-level accounting of a run's rounds. */
#ifndef DPFL_FL_RUN_INTERNAL_H
#define DPFL_FL_RUN_INTERNAL_H
#include "dpfl/fl.h"

#include <stdio.h>

typedef struct {
    double record_z, client_z, wall, S;
    int64_t examples;
    uint8_t partition_key[32];    /* the stream the client partition was drawn from: a resume draws it again */
    uint8_t partition_digest[32]; /* SHA-256 of the partition it gave (dpfl_partition_digest) */
} run_state;

/* One run of dpfl_run: set up by run.c (fl_run_setup), stepped round by round (run_round.c), reported by
 * report.c.  Owns everything it points to; fl_run_free releases it. */
typedef struct {
    const dpfl_config *cfg;
    const dpfl_run_options *opt;
    dpfl_rng root;
    uint64_t seed;
    dpfl_dataset train, test;
    dpfl_partition part;
    dpfl_model model;
    dpfl_sim *sim;
    float *global;
    FILE *metrics, *diag;   /* metrics.jsonl (what the guarantee covers), diagnostics.jsonl (not private) */
    char *ini, *ckpt_line;
    char sha[65];           /* of config.ini */
    dpfl_ledger ledger, trial;
    dpfl_record_accounting ra;
    dpfl_record_report report;
    double *per_client;     /* record-level epsilon per client (<= 1,000 clients, RDP) */
    double t_start, wall0, ceps;
    double started_at;      /* wall-clock time (seconds since the epoch) this session started */
    int rdp_on, cdp_on, stopped_early, cprivate;
    int64_t comm;
    run_state rs;
    dpfl_round_metrics last_eval;
    char warnings[4][256];
    int nwarn;
} run_ctx;

dpfl_status fl_run_setup(run_ctx *c, dpfl_error *err);
void fl_run_free(run_ctx *c);
/* Round r: charge a copy of the ledger, stop (*stop = 1, nothing released) if that would pass a budget, else
 * train, checkpoint and release the round. */
dpfl_status fl_run_round(run_ctx *c, int32_t r, int *stop, dpfl_error *err);
/* report.c: the round's metrics line (malloc'd) and its diagnostics line; summary.json; the final lines. */
dpfl_status fl_report_round_line(const run_ctx *c, const dpfl_round_metrics *m, char **line, dpfl_error *err);
dpfl_status fl_report_diagnostics(run_ctx *c, const dpfl_round_metrics *m, dpfl_error *err);
dpfl_status fl_report_summary(run_ctx *c, dpfl_error *err);
void fl_report_final_lines(const run_ctx *c);
void fl_report_progress(const dpfl_round_metrics *m, int32_t rounds, double acc);

/* sim (may be NULL: none) supplies the per-client optimizer states of fl.client_state = keep. */
dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, const dpfl_sim *sim, const char *line, dpfl_error *err);
/* The run state of a checkpoint alone (to redraw its partition before anything else is set up). */
dpfl_status fl_checkpoint_peek(const char *dir, run_state *rs, dpfl_error *err);
/* *line (malloc'd) gets the last released round's metrics line; sim gets the saved client states back. */
dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_sim *sim, char **line, dpfl_error *err);
/* Keep only metrics lines of rounds <= rounds; restore the last round's line from the checkpoint if missing. */
dpfl_status fl_metrics_truncate(const char *path, int32_t rounds, const char *last_line, dpfl_error *err);

/* fdp_report.c: PriFedSync's federated f-DP of the rounds released so far (NULL from fl_fdp_not_applicable:
 * it applies, else the reason it does not). */
const char *fl_fdp_not_applicable(const dpfl_config *cfg, double z);
dpfl_status fl_fdp_of_run(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double z,
                          dpfl_fdp_params *pp, dpfl_fdp_result *r, dpfl_error *err);

dpfl_event fl_client_round_event(const dpfl_config *cfg, int32_t K, double z, int32_t round);
double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round);
dpfl_status fl_client_epsilon(const dpfl_config *cfg, const dpfl_ledger *l, double *eps, int *private,
                              dpfl_error *err);
dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_ledger *l,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_error *err);
#endif
