/* RDP of the Skellam mechanism for distributed DP (Agarwal, Kairouz, Liu, "The Skellam Mechanism for
 * Differentially Private Federated Learning", NeurIPS 2021, Corollary 3.6).  An integer-valued sum (in the units of
 * the rounding grid) whose neighbour differs by an integer vector of L1 norm <= d1 and L2 norm <= d2, released
 * with Skellam noise of total variance mu (Sk(mu/2, mu/2); a sum of clients' Skellams is Skellam), satisfies at
 * every integer order alpha > 1
 *   eps(alpha) <= alpha d2^2 / (2 mu) + min(((2 alpha - 1) d2^2 + 6 d1) / (4 mu^2), 3 d1 / (2 mu)),
 * the Gaussian term plus a correction that vanishes as mu grows.  Rounds with a client taking part with
 * probability q < 1 use the joint-convexity bound for Poisson subsampling of any mechanism,
 * (1 / (alpha - 1)) log(1 - q + q e^{(alpha - 1) eps(alpha)}) (valid in both add-remove directions because the
 * corollary's bound is), and T rounds compose by adding RDP; (epsilon, delta) by the tight conversion.  With
 * q < 1 dpfl_skellam_epsilon answers the smaller of that and the binomial mixture over the client's participations
 * (skellam_visible.c, never larger at the same orders: the derivation is there). */
#include "dpfl/privacy.h"

#include <math.h>

double dpfl_skellam_rdp(int alpha, double d1, double d2, double mu)
{
    const double a = alpha;
    return a * d2 * d2 / (2 * mu) + fmin(((2 * a - 1) * d2 * d2 + 6 * d1) / (4 * mu * mu), 3 * d1 / (2 * mu));
}

double dpfl_skellam_l1_bound(double d2, size_t dim)
{
    /* an integer vector's nonzero entries have |x_i| >= 1, so |x_i| <= x_i^2 and ||x||_1 <= ||x||_2^2; and
     * ||x||_1 <= sqrt(dim) ||x||_2 (Cauchy-Schwarz) */
    return fmin(d2 * d2, sqrt((double)dim) * d2);
}

#define SK_NORD (255 + 96)
dpfl_status dpfl_skellam_epsilon(double d1, double d2, double mu, double q, int64_t rounds, double delta,
                                 double *eps, dpfl_error *err)
{
    if (!(d1 >= 0 && d2 >= 0 && mu > 0 && q > 0 && q <= 1 && rounds >= 0 && delta > 0 && delta < 1) || isinf(mu))
        return dpfl_fail(err, DPFL_EINVAL, "Skellam accountant: bad parameters (d1 %g, d2 %g, mu %g, q %g, rounds "
                                           "%lld, delta %g)", d1, d2, mu, q, (long long)rounds, delta);
    double orders[SK_NORD], rdp[SK_NORD];
    size_t n = 0;
    for (int a = 2; a <= 256; a++) orders[n++] = a;
    for (int a = 264; a <= 1024; a += 8) orders[n++] = a;
    for (size_t i = 0; i < n; i++) {
        const int a = (int)orders[i];
        double r = dpfl_skellam_rdp(a, d1, d2, mu);
        if (q < 1) {
            /* log(1 - q + q e^{(a-1) r}) / (a - 1), computed without overflow */
            double x = (a - 1) * r, l = x > 700 ? log(q) + x + log1p((1 - q) * exp(-x) / q) : log1p(q * expm1(x));
            r = fmin(r, l / (a - 1));
        }
        rdp[i] = (double)rounds * r;
    }
    *eps = dpfl_rdp_to_epsilon(orders, rdp, n, delta, DPFL_CONV_TIGHT, NULL);
    if (q < 1 && rounds > 0) {
        dpfl_event e = dpfl_event_skellam(q, d1, d2, mu, rounds);
        double mix;
        dpfl_status s = dpfl_skellam_mixture_epsilon(&e, 1, delta, DPFL_CONV_TIGHT, &mix, err);
        if (s) return s;
        if (mix < *eps) *eps = mix;
    }
    return DPFL_OK;
}
