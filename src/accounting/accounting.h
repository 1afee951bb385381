/* Accounting a run beyond the ledger's own (ledger.c): rPDP-FL's per-record budgets, levels and rates (rpdp_plan.c)
 * and its report (rpdp_report.c), and the client-level guarantees (client_accounting.c).  Below the simulation
 * (src/fl), which charges the ledger, and the run driver (src/run); it sees the config, the ledger and the
 * accountants, never the round loop or a run's files. */
#ifndef DPFL_SRC_ACCOUNTING_H
#define DPFL_SRC_ACCOUNTING_H
#include "dpfl/accounting.h"
#include "dpfl/mech.h"

#define FL_RPDP_LEVELS 256
#define FL_RPDP_DROPPED (-1) /* budget_policy = dropout: below the mean, never sampled */
typedef struct {
    double budget;     /* every record of the level has at least this budget */
    double p;          /* its sampling rate: exact epsilon*(p) over the planned rounds <= budget (0: unusable) */
    int32_t rounds;    /* rounds charged to its records */
    int32_t opted_out; /* its next round would have passed the budget: p = 0 from then on */
    int64_t records;
} fl_rpdp_level;

/* rPDP-FL's plan is three parts, each the concern of its own functions:
 *   levels   what the accountant charges: the records' shared (budget, p, rounds) profiles and the one round they
 *            all compose (the ledger round by round: fl_rpdp_charge, fl_rpdp_epsilons, fl_rpdp_check_round)
 *   records  what the sampler reads: each record's budget, level and rate in force, each client's divisor
 *   filter   budget_policy = filter only: the individual Renyi filter's order and every record's cap and spend */
typedef struct {
    fl_rpdp_level *lv;
    int32_t nlevels, planned_rounds;
    /* the round the simulation runs (dpfl_record_dp_design: client design, local steps) at the plan's noise z:
     * every level's event and accountant question is built from it (mech/rpdp.c) */
    dpfl_mech_rpdp mech;
    dpfl_scf_fit fit;
    int fit_ok;
} fl_rpdp_levels;

typedef struct {
    int64_t n;        /* training records */
    int32_t clients;
    double *budget;   /* per record: its own budget */
    int32_t *level;   /* per record: its level, or FL_RPDP_DROPPED */
    double *p;        /* per record: the rate in force, what the sampler reads (0: unused, dropped, opted out) */
    double *denom;    /* per client: the plan's expected batch sum_i p_i (the DP-SGD divisor) */
} fl_rpdp_records;

/* budget_policy = filter: one level at p = 1 (records with a budget below the conversion's cost dropped); each
 * record's Renyi loss at order alpha is spent against cap = budget - conv, the cost of converting order alpha to
 * (epsilon, delta) */
typedef struct {
    int on;
    double alpha, conv;
    double *cap, *spent; /* per record */
} fl_rpdp_filter;

typedef struct {
    int on;
    fl_rpdp_levels levels;
    fl_rpdp_records rec;
    fl_rpdp_filter filter;
} fl_rpdp;

/* Whether cfg plans per-record budgets (record_dp on, record_dp.budgets set): the run's fl_rpdp is on. */
int fl_rpdp_configured(const dpfl_config *cfg);
dpfl_status fl_rpdp_alloc(fl_rpdp *rp, int64_t n, int32_t clients, int32_t nlevels, dpfl_error *err);
/* budget_policy = filter: alpha and conv from the config and the records' budgets, caps and spent. */
dpfl_status fl_rpdp_filter_setup(fl_rpdp_filter *f, const fl_rpdp_records *rec, const dpfl_config *cfg,
                                 dpfl_error *err);
void fl_rpdp_free(fl_rpdp *rp);
/* Budgets, calibrated z, levels and rates of a new run of the round `design` (dpfl_record_dp_design; its z is not
 * read: calibrated) (rng: the budgets' own stream). */
dpfl_status fl_rpdp_plan(fl_rpdp *rp, const dpfl_config *cfg, const dpfl_mech_rpdp *design, const dpfl_dataset *train,
                         const dpfl_partition *part, dpfl_rng *rng, dpfl_error *err);
/* After a checkpoint's plan is loaded: the round the simulation runs (client design, local steps; L's z kept). */
void fl_rpdp_set_design(fl_rpdp_levels *L, const dpfl_mech_rpdp *design);
/* Before round `round` is trained: DPFL_EINVAL (naming what differs) unless the round the simulation sampled
 * (dpfl_record_dp_design) is the plan's -- the same client sampling, rate, local steps and noise -- since every
 * level composes that one round. */
dpfl_status fl_rpdp_check_round(const fl_rpdp_levels *L, const dpfl_mech_rpdp *ran, int32_t round, dpfl_error *err);
/* Per-record rates and per-client divisors from the levels (after a plan or a checkpoint). */
dpfl_status fl_rpdp_rates(fl_rpdp *rp, const dpfl_partition *part, dpfl_error *err);
/* Before a round: levels whose next round would pass their budget opt out (*changed = 1 if any did). */
dpfl_status fl_rpdp_before_round(fl_rpdp *rp, const dpfl_config *cfg, int *changed, dpfl_error *err);
/* After a trained round: every active level is charged one two-stage round. */
void fl_rpdp_charge(fl_rpdp_levels *L);
/* The two-stage accountant's parameters of `rounds` of the plan's rounds (round: the levels' mech;
 * dpfl_mech_rpdp_params, with the configured two_stage_bound's use_pld). */
dpfl_rpdp_params fl_rpdp_params(const dpfl_mech_rpdp *round, const dpfl_config *cfg, int32_t rounds);
/* Record i's epsilon under the filter: the RDP accountant on its rdp-filter event, at most its budget; 0 for a
 * record that cannot contribute (i < 0 included) and before a round is trained. */
dpfl_status fl_rpdp_filter_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, int64_t i, double *eps, dpfl_error *err);
/* qsort's comparison of doubles, ascending. */
int fl_cmp_double(const void *a, const void *b);
dpfl_status fl_rpdp_level_epsilon(const fl_rpdp_levels *L, const dpfl_config *cfg, const fl_rpdp_level *lv,
                                  int32_t rounds, double *eps, dpfl_error *err);
/* The largest epsilon of any record so far (a few accountant calls: what every round reports). */
dpfl_status fl_rpdp_max_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, double *max, dpfl_error *err);
/* The event of the level whose records have the largest epsilon: a two-stage event, and the accountant and orders
 * dpfl_rpdp_epsilon answers it with; under the filter the record with the largest cap, an rdp-filter event (RDP),
 * none before a round is trained; out->epsilon the run's number for it. */
dpfl_status fl_rpdp_max_event(const fl_rpdp *rp, const dpfl_config *cfg, dpfl_run_event *out, dpfl_error *err);
/* eps[level] of the rounds charged so far; *max over levels with records. */
dpfl_status fl_rpdp_epsilons(const fl_rpdp_levels *L, const dpfl_config *cfg, double *eps, double *max,
                             dpfl_error *err);
/* summary.json's "record_budgets" object into o (NULL: only *eps_max). */
struct cJSON;
dpfl_status fl_rpdp_report(const fl_rpdp *rp, const dpfl_config *cfg, const dpfl_partition *part, struct cJSON *o,
                           double *eps_max, dpfl_error *err);
/* Under the filter: the records of idx[0..m) (NULL: all m) that left the sampler, their Renyi budget spent.  Which
 * ones did depends on their gradient norms: a count of raw data, for summary.json's not_private only. */
int64_t fl_rpdp_filtered_out(const fl_rpdp_levels *L, const fl_rpdp_records *rec, const int32_t *idx, int64_t m);

/* The client sampling rate round `round` with K clients is accounted at (the round mechanism's, mech/round.c). */
double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round);
/* The client-level releases one client's data enters in `rounds` rounds, which calibration composes: rounds, or
 * with cross-device cohorts its participations (dpfl_mech_clients_releases). */
int64_t fl_client_releases(const dpfl_config *cfg, int32_t K, int32_t rounds);
/* The accountant client-level epsilons are composed with (client_dp.accountant; GDP's CLT is not a bound: RDP). */
dpfl_accountant fl_client_accountant(const dpfl_config *cfg);
dpfl_status fl_client_epsilon(const dpfl_config *cfg, const dpfl_ledger *l, double *eps, int *private,
                              dpfl_error *err);
dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_event *ev,
                                  dpfl_error *err);
#endif
