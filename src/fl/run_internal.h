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

/* rPDP-FL in training (record_dp.budgets, rpdp_plan.c): records share (budget, p, rounds) levels. */
#define FL_RPDP_LEVELS 256
#define FL_RPDP_DROPPED (-1) /* budget_policy = dropout: below the mean, never sampled */
typedef struct {
    double budget;     /* every record of the level has at least this budget */
    double p;          /* its sampling rate: exact epsilon*(p) over the planned rounds <= budget (0: unusable) */
    int32_t rounds;    /* rounds charged to its records */
    int32_t opted_out; /* its next round would have passed the budget: p = 0 from then on */
    int64_t records;
} fl_rpdp_level;

typedef struct {
    int on;
    int64_t n;        /* training records */
    int32_t clients;
    double *budget;   /* per record: its own budget */
    int32_t *level;   /* per record: its level, or FL_RPDP_DROPPED */
    double *p;        /* per record: the rate in force, what the sampler reads (0: unused, dropped, opted out) */
    double *denom;    /* per client: the plan's expected batch sum_i p_i (the DP-SGD divisor) */
    fl_rpdp_level *lv;
    int32_t nlevels, planned_rounds;
    double z;
    dpfl_scf_fit fit;
    int fit_ok;
    /* budget_policy = filter: one level at p = 1 (records with a budget below the conversion's cost dropped);
     * each record's Renyi loss at order alpha is spent against cap = budget - conv, the cost of converting
     * order alpha to (epsilon, delta) */
    int filter;
    double alpha, conv;
    double *cap, *spent;
} fl_rpdp;

dpfl_status fl_rpdp_alloc(fl_rpdp *rp, int64_t n, int32_t clients, int32_t nlevels, dpfl_error *err);
/* budget_policy = filter: alpha and conv from the config and the budgets (rp->budget filled), caps and spent. */
dpfl_status fl_rpdp_filter_setup(fl_rpdp *rp, const dpfl_config *cfg, dpfl_error *err);
void fl_rpdp_free(fl_rpdp *rp);
/* Budgets, calibrated z, levels and rates of a new run (rng: the budgets' own stream). */
dpfl_status fl_rpdp_plan(fl_rpdp *rp, const dpfl_config *cfg, const dpfl_dataset *train, const dpfl_partition *part,
                         dpfl_rng *rng, dpfl_error *err);
/* Per-record rates and per-client divisors from the levels (after a plan or a checkpoint). */
dpfl_status fl_rpdp_rates(fl_rpdp *rp, const dpfl_partition *part, dpfl_error *err);
/* Before a round: levels whose next round would pass their budget opt out (*changed = 1 if any did). */
dpfl_status fl_rpdp_before_round(fl_rpdp *rp, const dpfl_config *cfg, int *changed, dpfl_error *err);
/* After a trained round: every active level is charged one two-stage round. */
void fl_rpdp_charge(fl_rpdp *rp);
dpfl_status fl_rpdp_level_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, const fl_rpdp_level *lv, int32_t rounds,
                                  double *eps, dpfl_error *err);
/* The largest epsilon of any record so far (a few accountant calls: what every round reports). */
dpfl_status fl_rpdp_max_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, double *max, dpfl_error *err);
/* The event of the level whose records have the largest epsilon: a two-stage event, and the accountant and orders
 * dpfl_rpdp_epsilon answers it with; under the filter the record with the largest cap, an rdp-filter event (RDP),
 * none before a round is trained; out->epsilon the run's number for it. */
dpfl_status fl_rpdp_max_event(const fl_rpdp *rp, const dpfl_config *cfg, dpfl_run_event *out, dpfl_error *err);
/* eps[level] of the rounds charged so far; *max over levels with records. */
dpfl_status fl_rpdp_epsilons(const fl_rpdp *rp, const dpfl_config *cfg, double *eps, double *max, dpfl_error *err);
/* summary.json's "record_budgets" object into o (NULL: only *eps_max). */
struct cJSON;
dpfl_status fl_rpdp_report(const fl_rpdp *rp, const dpfl_config *cfg, const dpfl_partition *part, struct cJSON *o,
                           double *eps_max, dpfl_error *err);

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
    dpfl_record_report report; /* epsilon: the record-level guarantee (fl_record_guarantee) */
    double ledger_eps;         /* the ledger's own epsilon, when federated f-DP's bound is the smaller */
    fl_rpdp rpdp;           /* record_dp.budgets: per-record budgets and their ledger */
    double *per_client;     /* record-level epsilon per client (<= 1,000 clients, RDP) */
    double t_start, wall0, ceps;
    double started_at;      /* wall-clock time (seconds since the epoch) this session started */
    int rdp_on, cdp_on, stopped_early, cprivate;
    int64_t comm;
    run_state rs;
    dpfl_round_metrics last_eval;
    double emd_mean, emd_std; /* PrivateFL's EMD at the latest evaluated round of this session (NAN: none) */
    int absent_ok; /* dpfl join: sources absent here are other clients' (checked: its own is here) */
    char warnings[4][256];
    int nwarn;
    /* a deployed client (src/net/client.c) sets up the same run without its files, with the server's partition key */
    int no_files;
    const uint8_t *partition_key;
    const struct dpfl_transport *transport; /* NULL: the in-process threads */
} run_ctx;

/* summary.json's "events": the composition behind each reported epsilon (report_events.c). */
dpfl_status fl_summary_events(const run_ctx *c, struct cJSON *sum, dpfl_error *err);

/* dpfl_run with the clients reached through transport t (NULL: in-process threads; src/net/server.c: the network). */
dpfl_status fl_run(const dpfl_config *cfg, const dpfl_run_options *opt, const struct dpfl_transport *t, dpfl_error *err);

dpfl_status fl_run_setup(run_ctx *c, dpfl_error *err);
/* A process that trains client k (dpfl join, an MPI worker) must hold the files of its records (data.source_rows
 * lets the others be absent): fails naming the first missing file; who names the process for the message. */
dpfl_status fl_client_data_here(const run_ctx *c, int32_t k, const char *who, dpfl_error *err);
void fl_run_free(run_ctx *c);
/* Round r: charge a copy of the ledger, stop (*stop = 1, nothing released) if that would pass a budget, else
 * train, checkpoint and release the round. */
dpfl_status fl_run_round(run_ctx *c, int32_t r, int *stop, dpfl_error *err);
/* report.c: the round's metrics line (malloc'd) and its diagnostics line; summary.json; the final lines. */
dpfl_status fl_report_round_line(const run_ctx *c, const dpfl_round_metrics *m, char **line, dpfl_error *err);
dpfl_status fl_report_diagnostics(run_ctx *c, const dpfl_round_metrics *m, dpfl_error *err);
dpfl_status fl_report_summary(run_ctx *c, dpfl_error *err);
void fl_report_final_lines(const run_ctx *c);
/* The terminal's progress line (on a TTY): round, test accuracy, epsilon so far against its target, elapsed time
 * and ETA; fl_report_progress_line formats it into buf. */
void fl_report_progress_line(const run_ctx *c, const dpfl_round_metrics *m, char *buf, size_t len);
void fl_report_progress(const run_ctx *c, const dpfl_round_metrics *m);

/* sim (may be NULL: none) supplies the per-client optimizer states of fl.client_state = keep. */
dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, const dpfl_sim *sim, const fl_rpdp *rp, const char *line,
                               dpfl_error *err);
/* The run state of a checkpoint alone (to redraw its partition before anything else is set up). */
dpfl_status fl_checkpoint_peek(const char *dir, run_state *rs, dpfl_error *err);
/* *line (malloc'd) gets the last released round's metrics line; sim gets the saved client states back. */
dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_sim *sim, fl_rpdp *rp, char **line, dpfl_error *err);
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
dpfl_status fl_record_guarantee(const run_ctx *c, const dpfl_ledger *l, dpfl_record_report *rep, double *per_client,
                                double *ledger_eps, dpfl_error *err);

dpfl_event fl_client_round_event(const dpfl_config *cfg, int32_t K, double z, int32_t round);
double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round);
/* The accountant client-level epsilons are composed with (client_dp.accountant; GDP's CLT is not a bound: RDP). */
dpfl_accountant fl_client_accountant(const dpfl_config *cfg);
dpfl_status fl_client_epsilon(const dpfl_config *cfg, const dpfl_ledger *l, double *eps, int *private,
                              dpfl_error *err);
dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_ledger *l,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_event *ev,
                                  dpfl_error *err);
#endif
