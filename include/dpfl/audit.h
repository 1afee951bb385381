/* dpfl audit: empirical LOWER bounds on epsilon from membership inference on canaries, to set beside the claimed
 * (upper-bound) epsilon.  A lower bound above the claim means the mechanism that ran is not what the accountant
 * analysed (a bug), whatever the attack; a lower bound below it says nothing about tightness beyond "this attack
 * got this far" (docs/privacy.md, "Auditing").
 *
 * The statistics (src/audit/audit_stats.c) take plain scores and memberships:
 *   - multi-run (Jagielski, Ullman, Oprea 2020): canaries in and out of training, a threshold on the score;
 *     Clopper-Pearson upper bounds FPR_u, FNR_u (each at confidence 1 - alpha/2, so both hold with 1 - alpha);
 *     eps_lower = max over thresholds of max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u)).
 *   - one-run (Steinke, Nasr, Jagielski 2023): m canaries, each in with probability 1/2; the auditor guesses "in"
 *     for the r/2 highest scores and "out" for the r/2 lowest; with W correct guesses of r, an (eps, delta)-DP
 *     mechanism has P[W >= v] <= P[Bin(r, p) >= v] + 2 m delta max_{1<=i<=v} P[v - i <= Bin(r, p) < v] / i,
 *     p = e^eps / (1 + e^eps) (their Theorem 5.2); eps_lower is the largest eps this rejects at level beta.
 *
 * The record-level attack on the federated simulation (src/audit/audit_fl.c) is declared at the end. */
#ifndef DPFL_AUDIT_H
#define DPFL_AUDIT_H

#include "dpfl/core.h"
#include "dpfl/data.h"
#include "dpfl/fl.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* One-sided Clopper-Pearson upper bound on a binomial proportion: the p with P[Bin(n, p) <= k] = alpha
 * (1 when k = n; 0 trials give 1). */
double dpfl_audit_cp_upper(int64_t k, int64_t n, double alpha);

typedef struct {
    double epsilon;   /* the lower bound (0 when the attack shows nothing) */
    double confidence; /* the level it holds at: 1 - alpha (multi-run) or 1 - beta (one-run) */
    /* the attack at the chosen operating point */
    double threshold; /* multi-run: guess "in" when score > threshold */
    double tpr, fpr;  /* empirical rates at that point (one-run: among the guesses made) */
    double fpr_upper, fnr_upper; /* multi-run: the Clopper-Pearson bounds used */
    int64_t guesses, correct;    /* one-run: r and W at the chosen r; multi-run: trials and correct at threshold */
    int64_t trials;              /* canary trials (canaries x runs) */
} dpfl_audit_bound;

/* Multi-run estimator over n trials (scores[i], member[i] in {0, 1}); needs at least one of each.  alpha in
 * (0, 1), delta in [0, 1).  The threshold is chosen on the same trials (as in Jagielski et al.), so the confidence
 * is nominal; the one-run estimator has no such choice. */
dpfl_status dpfl_audit_multi_run(const double *scores, const int *member, int64_t n, double delta, double alpha,
                                 dpfl_audit_bound *out, dpfl_error *err);

/* Steinke et al.'s p-value: the bound on P[W >= v] above for m canaries, r guesses, eps, delta (at most 1). */
double dpfl_audit_one_run_pvalue(int64_t m, int64_t r, int64_t v, double eps, double delta);
/* The largest eps (bisection to 1e-6) whose p-value for v correct of r guesses is below beta; 0 when even eps = 0
 * is not rejected.  Fails for v > r > m or beta outside (0, 1). */
dpfl_status dpfl_audit_one_run_epsilon(int64_t m, int64_t r, int64_t v, double delta, double beta, double *eps,
                                       dpfl_error *err);
/* One-run estimator on m canaries' scores: r/2 "in" guesses on the highest scores and r/2 "out" on the lowest,
 * for r in {m/16, m/8, m/4, m/2, m} (rounded down to even, at least 2), each tested at beta / (number of r
 * tried) (Bonferroni), so the reported bound holds at 1 - beta whichever r is reported. */
dpfl_status dpfl_audit_one_run(const double *scores, const int *member, int64_t m, double delta, double beta,
                               dpfl_audit_bound *out, dpfl_error *err);

/* ------------------------------------------------------------------------------------------ record-level attack */
typedef enum { DPFL_AUDIT_ONE_RUN = 0, DPFL_AUDIT_MULTI_RUN } dpfl_audit_method;

typedef struct {
    int32_t canaries;   /* canaries per run (each in with probability 1/2) */
    int32_t runs;       /* training runs (one-run: the bound pools every run's guesses, still valid) */
    dpfl_audit_method method;
    double confidence;  /* 1 - alpha or 1 - beta, e.g. 0.95 */
    double canary_value; /* the canary's single non-zero input feature */
    uint64_t seed;      /* canary memberships, model init and training noise of run r derive from (seed, r) */
    int quiet;          /* no progress lines on stderr */
} dpfl_audit_options;

typedef struct {
    double claimed_epsilon; /* the simulation's ledger: worst over clients and runs */
    double delta;
    double noise;           /* the record-level multiplier used (calibrated if the config asked) */
    dpfl_audit_bound bound; /* from the method asked for */
    dpfl_audit_bound other; /* the other estimator on the same scores (multi-run needs runs x canaries >= 2) */
    int32_t canary_client;  /* the client holding the canaries (the attacker watches its updates) */
    int32_t free_features;  /* input features zero in every training record (canary slots) */
    double seconds;         /* wall time of training and scoring */
} dpfl_audit_report;

void dpfl_audit_defaults(dpfl_audit_options *o);
/* Record-level audit of cfg's DP-SGD (record_dp.enabled): opt->runs simulations of cfg's rounds, each on train
 * plus opt->canaries gradient canaries (an input that is zero except one feature that is zero in every training
 * record) given to client 0 each with probability 1/2 (Poisson sampler: added or not; fixed sampler: the canary or
 * a blank record in its place, the replace-one neighbour).  The attacker is the server, which sees client 0's
 * update every round (what record-level DP in FL protects against): a canary's score is the sum over rounds of the
 * update of its own first-layer weights projected on minus the canary's gradient at the round's global model.
 * Needs a model whose first layer is linear (logreg, mlp, net:fc...) and at least opt->canaries free features. */
dpfl_status dpfl_audit_record_level(const dpfl_config *cfg, const dpfl_dataset *train,
                                    const dpfl_dataset *test, const dpfl_audit_options *opt,
                                    dpfl_audit_report *rep, dpfl_error *err);

#pragma GCC visibility pop

#endif
