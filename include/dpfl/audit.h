/* dpfl audit: empirical LOWER bounds on epsilon from membership inference on canaries -- an attack's measured
 * success turned into the smallest epsilon that could explain it at a stated confidence.  Not a guarantee: a lower
 * bound far below the claimed epsilon says the attack was weak, one above it says the claim (or the mechanism) is
 * wrong.
 *
 * Canaries (record level): m extra records, each with a feature dimension of its own that no other record uses
 * (value `canary_scale`), a label of its own, and included in the training set independently with probability 1/2.
 * A logistic-regression model learns a weight for that dimension only from the canary, so the canary's score --
 * how much the model's margin for its label on its own input moved during training -- is the canary's clipped
 * gradients plus DP-SGD noise when it was in, noise alone when it was out.
 *
 * Estimators:
 *   one run (Steinke, Nasr, Jagielski 2023): guess "in" for the r/2 highest and "out" for the r/2 lowest scores;
 *     under (eps, delta)-DP the number of correct guesses W satisfies P[W >= v] <= P[Bin(r, e^eps/(1+e^eps)) >= v]
 *     + 2 m delta (their Theorem, delta term taken generously); eps_lower is the largest eps rejected at
 *     confidence 1 - beta, over r in {m/8, m/4, m/2, m} with a union bound (beta/4 each).
 *   several runs (Jagielski, Ullman, Oprea 2020): canaries of all runs pooled, at each threshold the false positive
 *     and false negative rates with Clopper-Pearson upper bounds; eps_lower = max over thresholds of
 *     log((1 - delta - FNR_upper) / FPR_upper), union bound over the thresholds tried. */
#ifndef DPFL_AUDIT_H
#define DPFL_AUDIT_H

#include "dpfl/core.h"

/* One-run estimator on scores[0..m) with membership in[0..m) (1 = included). */
double dpfl_audit_one_run(const double *scores, const int *in, int32_t m, double delta, double beta, int32_t *correct,
                          int32_t *guesses);
/* Several-runs estimator (pooled canaries). */
double dpfl_audit_multi_run(const double *scores, const int *in, int32_t m, double delta, double beta);

typedef struct {
    int32_t canaries;     /* m per run */
    int32_t runs;         /* 1: one-run estimator; > 1: both, the multi-run on the pooled canaries */
    int32_t n;            /* ordinary records (synthetic, 20 features, 10 classes) */
    int32_t batch;        /* expected Poisson batch */
    int64_t steps;        /* DP-SGD steps (one client, every step) */
    double noise, clip, lr, delta, beta;
    double canary_scale;  /* the canary feature's value (its gradient is clipped to clip anyway) */
    uint64_t seed;        /* 0 = OS entropy */
} dpfl_audit_params;

typedef struct {
    double claimed_epsilon;      /* the accountant's bound for the run (RDP, Poisson, add-remove) */
    double eps_one_run;          /* lower bound of the one-run estimator (first run) */
    int32_t correct, guesses;    /* its best r: correct guesses out of r */
    double eps_multi_run;        /* lower bound of the pooled estimator (runs > 1), else NAN */
    double mean_in, mean_out;    /* mean score of included / excluded canaries */
    double seconds;
} dpfl_audit_result;

/* Train with DP-SGD on synthetic data plus canaries (params->runs times) and audit.  Honours the test-only
 * DPFL_TEST_NOISE_DIVISOR (mech/noise.c). */
dpfl_status dpfl_audit_run(const dpfl_audit_params *p, dpfl_audit_result *r, dpfl_error *err);

#endif
