/* Gaussian differential privacy (Dong, Roth, Su 2019): conversions, tradeoff functions and CLT limits.
 * Only plain Gaussian compositions are exact here; CLT values are asymptotic and callers must say so. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
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
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
        double m = 0.5 * (lo + hi);
        if (dpfl_gdp_delta(mu, m) > delta)
            lo = m;
        else
            hi = m;
    }
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
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
        double m = 0.5 * (lo + hi);
        if (dpfl_gdp_delta(m, epsilon) <= delta)
            lo = m;
        else
            hi = m;
    }
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
