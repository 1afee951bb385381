/* The two epsilon lower bounds of dpfl audit (see include/dpfl/audit.h). */
#include "dpfl/audit.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <stdlib.h>

/* P[Bin(r, p) >= v] */
static double binom_tail(int32_t r, double p, int32_t v)
{
    if (v <= 0) return 1.0;
    if (v > r) return 0.0;
    return gsl_cdf_binomial_Q((unsigned)(v - 1), p, (unsigned)r);
}

/* largest eps with P[Bin(r, e^eps/(1+e^eps)) >= W] + slack <= alpha (0 if none) */
static double one_run_eps(int32_t r, int32_t W, double slack, double alpha)
{
    if (slack >= alpha || binom_tail(r, 0.5, W) + slack > alpha) return 0.0;
    double lo = 0, hi = 1;
    while (hi < 50 && binom_tail(r, 1 / (1 + exp(-hi)), W) + slack <= alpha) lo = hi, hi *= 2;
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        if (binom_tail(r, 1 / (1 + exp(-mid)), W) + slack <= alpha) lo = mid;
        else hi = mid;
    }
    return lo;
}

typedef struct {
    double s;
    int in;
} scored;

static int by_score(const void *a, const void *b)
{
    double x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

static scored *sorted(const double *scores, const int *in, int32_t m)
{
    scored *v = malloc((size_t)m * sizeof *v);
    DPFL_ASSERT(v);
    for (int32_t i = 0; i < m; i++) v[i] = (scored){scores[i], in[i]};
    qsort(v, (size_t)m, sizeof *v, by_score);
    return v;
}

double dpfl_audit_one_run(const double *scores, const int *in, int32_t m, double delta, double beta, int32_t *correct,
                          int32_t *guesses)
{
    scored *v = sorted(scores, in, m);
    const int32_t rs[4] = {m / 8, m / 4, m / 2, m};
    double best = 0;
    *correct = *guesses = 0;
    for (int k = 0; k < 4; k++) {
        int32_t r = rs[k] & ~1, W = 0;
        if (r < 2) continue;
        for (int32_t i = 0; i < r / 2; i++) W += v[m - 1 - i].in + !v[i].in; /* top r/2 "in", bottom r/2 "out" */
        double e = one_run_eps(r, W, 2.0 * m * delta, beta / 4);
        if (e > best || *guesses == 0) {
            if (e > best) best = e;
            *correct = W;
            *guesses = r;
        }
    }
    free(v);
    return best;
}

/* Clopper-Pearson upper bound of a rate: k successes of n, one-sided level alpha -- the p with
 * P[Bin(n, p) <= k] = alpha, by bisection on the binomial CDF (GSL's beta inverse can fail to converge, and its
 * error handler aborts) */
static double cp_upper(int32_t k, int32_t n, double alpha)
{
    if (k >= n) return 1.0;
    if (k == 0) return -expm1(log(alpha) / n); /* 1 - alpha^(1/n) */
    double lo = (double)k / n, hi = 1.0;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (gsl_cdf_binomial_P((unsigned)k, mid, (unsigned)n) > alpha) lo = mid;
        else hi = mid;
    }
    return hi;
}

double dpfl_audit_multi_run(const double *scores, const int *in, int32_t m, double delta, double beta)
{
    scored *v = sorted(scores, in, m);
    int32_t nin = 0;
    for (int32_t i = 0; i < m; i++) nin += v[i].in;
    const int32_t nout = m - nin;
    if (nin == 0 || nout == 0) {
        free(v);
        return 0.0;
    }
    /* thresholds: between consecutive distinct scores, at most 64 (union bound: two rates each) */
    const int32_t nt = m < 64 ? m : 64;
    const double a = beta / (2.0 * nt);
    double best = 0;
    for (int32_t t = 1; t <= nt; t++) {
        int32_t cut = (int32_t)((double)t * m / (nt + 1)); /* predict "in" for v[cut..m) */
        int32_t fp = 0, fn = 0;
        for (int32_t i = 0; i < m; i++) {
            if (i >= cut && !v[i].in) fp++;
            if (i < cut && v[i].in) fn++;
        }
        double fpr = cp_upper(fp, nout, a), fnr = cp_upper(fn, nin, a);
        double e1 = (1 - delta - fnr) > 0 ? log((1 - delta - fnr) / fpr) : 0;
        double e2 = (1 - delta - fpr) > 0 ? log((1 - delta - fpr) / fnr) : 0;
        if (e1 > best) best = e1;
        if (e2 > best) best = e2;
    }
    free(v);
    return best;
}
