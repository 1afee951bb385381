/* Gaussian differential privacy (Dong, Roth, Su 2019): conversions, tradeoff functions and CLT limits.
 * Only plain Gaussian compositions are exact here; CLT values are asymptotic and callers must say so. */
#include "dpfl/privacy.h"
#include "bisect.h"
#include "privacy_internal.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sf_erf.h>
#include <math.h>

double dpfl_gdp_delta(double mu, double epsilon)
{
    if (mu <= 0) return 0.0;
    if (isinf(mu)) return 1.0;
    /* Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2); the second term via log to avoid inf * 0 */
    double a = dpfl_normal_cdf(-epsilon / mu + mu / 2);
    double lb = epsilon + log(dpfl_normal_cdf(-epsilon / mu - mu / 2));
    double d = a - exp(lb);
    return d < 0 ? 0 : d;
}

/* A bisection test (bisect.h) on one of the delta curves of this file, x in the place named: *ok = 1 if the delta at
 * x is within the target.  Each inversion below answers the end that passes, so its delta never exceeds the target
 * (an epsilon or a mu never on the wrong side). */
typedef enum { X_IS_EPSILON, X_IS_MU, X_IS_VISIBLE_EPSILON } gdp_unknown;
typedef struct {
    gdp_unknown x_is;
    double mu, epsilon, q;
    int64_t T;
    double delta;
} gdp_test;

static dpfl_status gdp_fits(const void *ctx, double x, int *ok, dpfl_error *err)
{
    (void)err;
    const gdp_test *t = ctx;
    const double d = t->x_is == X_IS_MU        ? dpfl_gdp_delta(x, t->epsilon)
                     : t->x_is == X_IS_EPSILON ? dpfl_gdp_delta(t->mu, x)
                                               : dpfl_gdp_visible_delta(t->mu, t->q, t->T, x);
    *ok = d <= t->delta;
    return DPFL_OK;
}

/* [*lo, *hi] halved as bisect.h does (the test cannot fail) */
static void gdp_bisect(const gdp_test *t, double *lo, double *hi, int good_hi, double rel_tol)
{
    const dpfl_bisect_opts o = {.good_hi = good_hi, .rel_tol = rel_tol, .max_halvings = 200};
    dpfl_status s = dpfl_bisect(gdp_fits, t, lo, hi, &o, NULL);
    DPFL_ASSERT(s == DPFL_OK);
}

double dpfl_gdp_epsilon(double mu, double delta)
{
    if (mu <= 0) return 0.0;
    if (isinf(mu)) return INFINITY;
    if (dpfl_gdp_delta(mu, 0) <= delta) return 0.0;
    double lo = 0, hi = 1;
    while (dpfl_gdp_delta(mu, hi) > delta) {
        lo = hi;
        hi *= 2;
        if (hi > 1e6) return INFINITY;
    }
    const gdp_test t = {.x_is = X_IS_EPSILON, .mu = mu, .delta = delta};
    gdp_bisect(&t, &lo, &hi, 1, 1e-13);
    return hi;
}

double dpfl_gdp_mu(double epsilon, double delta)
{
    double lo = 0, hi = 1;
    while (dpfl_gdp_delta(hi, epsilon) <= delta) {
        lo = hi;
        hi *= 2;
        if (hi > 1e6) return INFINITY;
    }
    const gdp_test t = {.x_is = X_IS_MU, .epsilon = epsilon, .delta = delta};
    gdp_bisect(&t, &lo, &hi, 0, 1e-13);
    return lo;
}

double dpfl_gdp_tradeoff(double mu, double a)
{
    if (a <= 0) return 1.0;
    if (a >= 1) return 0.0;
    return gsl_cdf_ugaussian_P(gsl_cdf_ugaussian_Qinv(a) - mu);
}

double dpfl_gdp_clt_poisson(double q, double z, double T)
{
    if (z <= 0) return INFINITY;
    return q * sqrt(T * expm1(1.0 / (z * z)));
}

double dpfl_gdp_clt_fixed(double B, double n, double z, double T)
{
    if (z <= 0) return INFINITY;
    double inner = exp(1.0 / (z * z)) * dpfl_normal_cdf(1.5 / z) + 3 * dpfl_normal_cdf(-0.5 / z) - 2;
    return sqrt(2.0) * (B / n) * sqrt(T) * sqrt(inner > 0 ? inner : 0);
}

double dpfl_tradeoff_from_profile(const double *eps, const double *delta, size_t ne, double a)
{
    double f = 0;
    for (size_t i = 0; i < ne; i++) {
        double e = eps[i], d = delta[i];
        double v1 = 1 - d - exp(e) * a, v2 = exp(-e) * (1 - d - a);
        if (v1 > f) f = v1;
        if (v2 > f) f = v2;
    }
    return f;
}

/* ---------------------------------------------------------------- sampled rounds with visible participation
 * A unit takes part in each of T rounds independently with probability q; when it does, the round is dominated
 * by the Gaussian pair N(mu, 1) vs N(0, 1) (mu-GDP); when it does not, both worlds see the same thing, and whether
 * it took part is visible (its own noise, or a published count).  This is Poisson sampling under "replace by a
 * special element" (a neighbour that takes part like any other unit but contributes nothing): not add-remove, so
 * the Mironov-Talwar-Zhang amplification does not apply.  The composed pair's privacy loss, given J ~ Bin(T, q)
 * participations, is that of mu sqrt(J)-GDP, and J has the same law in both worlds, so exactly
 *     delta(eps) = sum_j Bin(j; T, q) delta_G(mu sqrt(j), eps).
 * Terms with pmf below a threshold tau are skipped and (T + 1) tau added (delta_G <= 1); the sum is padded by a
 * relative 1e-9 for rounding.  Result: an upper bound on delta, tight to that padding. */
static double log_normal_cdf(double x)
{
    return x < -5 ? gsl_sf_log_erfc(-x / M_SQRT2) - M_LN2 : log(dpfl_normal_cdf(x));
}

static double gdp_delta_log(double mu, double eps)
{
    if (mu <= 0) return 0.0;
    double a = exp(log_normal_cdf(-eps / mu + mu / 2)), b = exp(eps + log_normal_cdf(-eps / mu - mu / 2));
    return a > b ? a - b : 0.0;
}

double dpfl_gdp_visible_delta(double mu, double q, int64_t T, double epsilon)
{
    if (T <= 0 || q <= 0 || mu <= 0) return 0.0;
    if (isinf(mu)) return 1.0;
    if (q >= 1) return fmin(1.0, gdp_delta_log(mu * sqrt((double)T), epsilon) * (1 + 1e-9));
    const double lq = log(q), l1q = log1p(-q), lgT = lgamma((double)T + 1);
    const double ltau = -745.0; /* exp(ltau) is the smallest normal-ish double: skipped mass <= (T + 1) e^-745 */
    double d = 0, skipped = 0;
    /* walk j outwards from the mode in both directions, stopping once the pmf is below tau (it is unimodal) */
    int64_t mode = (int64_t)floor(q * (double)(T + 1));
    if (mode > T) mode = T;
    for (int dir = 0; dir < 2; dir++) {
        for (int64_t j = dir ? mode - 1 : mode; j >= 0 && j <= T; j += dir ? -1 : 1) {
            double lp = lgT - lgamma((double)j + 1) - lgamma((double)(T - j) + 1) + (double)j * lq + (double)(T - j) * l1q;
            if (lp < ltau) {
                skipped = 1;
                break;
            }
            d += exp(lp) * gdp_delta_log(mu * sqrt((double)j), epsilon);
        }
    }
    if (skipped) d += (double)(T + 1) * exp(ltau);
    return fmin(1.0, d * (1 + 1e-9));
}

double dpfl_gdp_visible_epsilon(double mu, double q, int64_t T, double delta)
{
    if (dpfl_gdp_visible_delta(mu, q, T, 0) <= delta) return 0.0;
    double lo = 0, hi = 1;
    while (dpfl_gdp_visible_delta(mu, q, T, hi) > delta) {
        lo = hi;
        hi *= 2;
        if (hi > 1e9) return INFINITY;
    }
    const gdp_test t = {.x_is = X_IS_VISIBLE_EPSILON, .mu = mu, .q = q, .T = T, .delta = delta};
    gdp_bisect(&t, &lo, &hi, 1, 1e-10);
    return hi;
}
