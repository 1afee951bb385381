/* Lower bounds on epsilon from a membership-inference attack's guesses (include/dpfl/audit.h):
 * Clopper-Pearson intervals on FPR and FNR at a threshold (Jagielski, Ullman, Oprea 2020) and the one-run bound of
 * Steinke, Nasr, Jagielski 2023 (Theorem 5.2), written from the papers' statements with GSL's beta and binomial
 * distributions. */
#include "dpfl/audit.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>

double dpfl_audit_cp_upper(int64_t k, int64_t n, double alpha)
{
    if (n <= 0 || k >= n) return 1.0;
    if (k < 0) k = 0;
    /* P[Bin(n, p) <= k] falls from 1 to 0 as p goes from k / n to 1: bisection (GSL's inverse beta can fail to
     * converge, and its error handler would abort) */
    double lo = (double)k / (double)n, hi = 1.0;
    for (int it = 0; it < 200 && hi - lo > 1e-15; it++) {
        double mid = 0.5 * (lo + hi);
        if (gsl_cdf_binomial_P((unsigned)k, mid, (unsigned)n) > alpha) lo = mid;
        else hi = mid;
    }
    return hi;
}

typedef struct {
    double s;
    int in;
} trial;

static int by_score(const void *a, const void *b)
{
    double x = ((const trial *)a)->s, y = ((const trial *)b)->s;
    return (x > y) - (x < y);
}

static dpfl_status sorted_trials(const double *scores, const int *member, int64_t n, trial **out, int64_t *nin,
                                 dpfl_error *err)
{
    trial *t = malloc((size_t)n * sizeof *t);
    if (!t) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit: %lld trials)", (long long)n);
    *nin = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(scores[i])) {
            free(t);
            return dpfl_fail(err, DPFL_EINVAL, "audit: score %lld is not finite", (long long)i);
        }
        t[i].s = scores[i];
        t[i].in = member[i] != 0;
        *nin += t[i].in;
    }
    qsort(t, (size_t)n, sizeof *t, by_score);
    *out = t;
    return DPFL_OK;
}

static double eps_from_rates(double fpr_u, double fnr_u, double delta)
{
    double e = 0.0;
    if (fpr_u > 0 && 1.0 - delta - fnr_u > 0) e = fmax(e, log((1.0 - delta - fnr_u) / fpr_u));
    if (fnr_u > 0 && 1.0 - delta - fpr_u > 0) e = fmax(e, log((1.0 - delta - fpr_u) / fnr_u));
    return e;
}

dpfl_status dpfl_audit_multi_run(const double *scores, const int *member, int64_t n, double delta, double alpha,
                                 dpfl_audit_bound *out, dpfl_error *err)
{
    if (!(alpha > 0 && alpha < 1)) return dpfl_fail(err, DPFL_EINVAL, "audit: confidence must be in (0, 1)");
    if (!(delta >= 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "audit: delta must be in [0, 1)");
    trial *t;
    int64_t nin;
    dpfl_status st = sorted_trials(scores, member, n, &t, &nin, err);
    if (st) return st;
    const int64_t nout = n - nin;
    if (nin == 0 || nout == 0) {
        free(t);
        return dpfl_fail(err, DPFL_EINVAL, "audit: the multi-run estimator needs canaries both in (%lld) and out "
                                           "(%lld) of training", (long long)nin, (long long)nout);
    }
    dpfl_audit_bound b = {0};
    b.confidence = 1.0 - alpha;
    b.trials = n;
    b.threshold = -INFINITY;
    b.tpr = b.fpr = b.fpr_upper = 1.0;
    b.fnr_upper = dpfl_audit_cp_upper(0, nin, alpha / 2);
    b.guesses = n;
    b.correct = nin;
    /* guess "in" when score > t for t below everything, then at each boundary between distinct scores */
    int64_t fn = 0, tn = 0; /* trials at or below the threshold */
    for (int64_t i = 0; i <= n; i++) {
        if (i > 0) {
            if (t[i - 1].in) fn++;
            else tn++;
            if (i < n && t[i].s == t[i - 1].s) continue; /* not a boundary */
        }
        const int64_t fp = nout - tn;
        double fpr_u = dpfl_audit_cp_upper(fp, nout, alpha / 2), fnr_u = dpfl_audit_cp_upper(fn, nin, alpha / 2);
        double e = eps_from_rates(fpr_u, fnr_u, delta);
        if (e > b.epsilon || (i == 0 && e >= b.epsilon)) {
            b.epsilon = e;
            b.threshold = i == 0 ? -INFINITY : t[i - 1].s;
            b.tpr = (double)(nin - fn) / (double)nin;
            b.fpr = (double)fp / (double)nout;
            b.fpr_upper = fpr_u;
            b.fnr_upper = fnr_u;
            b.correct = (nin - fn) + tn;
        }
    }
    free(t);
    *out = b;
    return DPFL_OK;
}

double dpfl_audit_one_run_pvalue(int64_t m, int64_t r, int64_t v, double eps, double delta)
{
    if (v <= 0) return 1.0;
    if (v > r) return 0.0;
    const double p = 1.0 / (1.0 + exp(-eps)); /* accuracy of eps-DP randomized response */
    const unsigned ur = (unsigned)r;
    double tail = gsl_cdf_binomial_Q((unsigned)(v - 1), p, ur); /* P[Bin(r, p) >= v] */
    if (delta > 0) {
        double sum = 0, worst = 0; /* sum = P[v - i <= Bin(r, p) < v] */
        for (int64_t i = 1; i <= v; i++) {
            sum += gsl_ran_binomial_pdf((unsigned)(v - i), p, ur);
            if (sum / (double)i > worst) worst = sum / (double)i;
        }
        tail += 2.0 * (double)m * delta * worst;
    }
    return tail < 1.0 ? tail : 1.0;
}

dpfl_status dpfl_audit_one_run_epsilon(int64_t m, int64_t r, int64_t v, double delta, double beta, double *eps,
                                       dpfl_error *err)
{
    if (v < 0 || v > r || r > m)
        return dpfl_fail(err, DPFL_EINVAL, "audit: need 0 <= correct (%lld) <= guesses (%lld) <= canaries (%lld)",
                         (long long)v, (long long)r, (long long)m);
    if (!(beta > 0 && beta < 1)) return dpfl_fail(err, DPFL_EINVAL, "audit: confidence must be in (0, 1)");
    if (!(delta >= 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "audit: delta must be in [0, 1)");
    *eps = 0.0;
    if (dpfl_audit_one_run_pvalue(m, r, v, 0.0, delta) >= beta) return DPFL_OK;
    /* the p-value grows with eps: lo is rejected, hi is not */
    double lo = 0.0, hi = 1.0;
    while (dpfl_audit_one_run_pvalue(m, r, v, hi, delta) < beta) {
        lo = hi;
        hi *= 2.0;
        if (hi > 1e3) break; /* every correct guess of many: an enormous bound, reported as 1000 at most */
    }
    while (hi - lo > 1e-6) {
        double mid = 0.5 * (lo + hi);
        if (dpfl_audit_one_run_pvalue(m, r, v, mid, delta) < beta) lo = mid;
        else hi = mid;
    }
    *eps = lo;
    return DPFL_OK;
}

dpfl_status dpfl_audit_one_run(const double *scores, const int *member, int64_t m, double delta, double beta,
                               dpfl_audit_bound *out, dpfl_error *err)
{
    if (m < 2) return dpfl_fail(err, DPFL_EINVAL, "audit: the one-run estimator needs at least 2 canaries (%lld)",
                                (long long)m);
    if (!(beta > 0 && beta < 1)) return dpfl_fail(err, DPFL_EINVAL, "audit: confidence must be in (0, 1)");
    trial *t;
    int64_t nin;
    dpfl_status st = sorted_trials(scores, member, m, &t, &nin, err);
    if (st) return st;
    const int64_t nout = m - nin;
    int64_t rs[5];
    int nr = 0;
    for (int d = 16; d >= 1; d /= 2) {
        int64_t r = (m / d) & ~(int64_t)1;
        if (r < 2 || (nr > 0 && rs[nr - 1] == r)) continue;
        rs[nr++] = r;
    }
    dpfl_audit_bound b = {0};
    b.confidence = 1.0 - beta;
    b.trials = m;
    b.threshold = NAN;
    b.fpr_upper = b.fnr_upper = NAN;
    b.epsilon = -1.0;
    for (int j = 0; j < nr; j++) {
        const int64_t r = rs[j], h = r / 2;
        int64_t tp = 0, tn = 0;
        for (int64_t i = 0; i < h; i++) tn += !t[i].in;     /* the h lowest: guessed out */
        for (int64_t i = m - h; i < m; i++) tp += t[i].in;  /* the h highest: guessed in */
        double e;
        if ((st = dpfl_audit_one_run_epsilon(m, r, tp + tn, delta, beta / nr, &e, err))) {
            free(t);
            return st;
        }
        if (e > b.epsilon) {
            b.epsilon = e;
            b.guesses = r;
            b.correct = tp + tn;
            b.threshold = t[m - h].s; /* guessed in at or above this score */
            b.tpr = nin > 0 ? (double)tp / (double)nin : NAN;
            b.fpr = nout > 0 ? (double)(h - tp) / (double)nout : NAN;
        }
    }
    free(t);
    *out = b;
    return DPFL_OK;
}
