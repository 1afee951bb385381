/* The exact Poisson and Skellam samplers (src/core/poisson.c) against their exact distributions. */
#include "testutil.h"
#include "dpfl/core.h"
#include "dpfl/privacy.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_sf_bessel.h>
#include <gsl/gsl_sf_gamma.h>
#include <limits.h>
#include <stdlib.h>

/* Mean and variance within 5 standard errors (the variance's from the fourth central moment of the law). */
static void check_moments(double m, double v, double want_mean, double want_var, double mu4, int n)
{
    double se_m = sqrt(want_var / n), se_v = sqrt((mu4 - want_var * want_var) / n);
    if (fabs(m - want_mean) > 5 * se_m || fabs(v - want_var) > 5 * se_v)
        print_error("mean %g (want %g, se %g), variance %g (want %g, se %g)\n", m, want_mean, se_m, v, want_var, se_v);
    assert_true(fabs(m - want_mean) <= 5 * se_m);
    assert_true(fabs(v - want_var) <= 5 * se_v);
}

static void poisson_and_skellam_moments(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 11);
    const double lambdas[] = {0.3, 4.7, 250.5};
    for (int i = 0; i < 3; i++) {
        const double l = lambdas[i];
        const int n = l > 100 ? 20000 : 100000;
        double s = 0, s2 = 0;
        for (int j = 0; j < n; j++) {
            double x = (double)dpfl_rng_poisson(&r, l);
            s += x, s2 += x * x;
        }
        double m = s / n;
        check_moments(m, s2 / n - m * m, l, l, l * (1 + 3 * l), n); /* Poisson: mu4 = l (1 + 3 l) */
    }
    const double mus[] = {0.5, 10, 1000};
    for (int i = 0; i < 3; i++) {
        const double mu = mus[i];
        const int n = mu > 100 ? 20000 : 100000;
        double s = 0, s2 = 0;
        for (int j = 0; j < n; j++) {
            double x = (double)dpfl_rng_skellam(&r, mu);
            s += x, s2 += x * x;
        }
        double m = s / n;
        check_moments(m, s2 / n - m * m, 0, mu, mu * (1 + 3 * mu), n); /* Skellam(mu/2, mu/2): mu4 = mu + 3 mu^2 */
    }
    assert_int_equal(dpfl_rng_poisson(&r, 0.0), 0);
}

/* Chi-square of 200,000 draws against the exact pmf (cells with expected count >= 20, tails pooled): Poisson at
 * 0.7 and 6.3, Skellam at mu = 3 and 50 with P(k) = e^-mu I_|k|(mu); p-value above 1e-4. */
static void chi_square(const double *pmf, int64_t lo, int64_t hi, const int64_t *count, int64_t n)
{
    double chi = 0, exp_tail = 0, obs_tail = 0;
    int cells = 0;
    for (int64_t k = lo; k <= hi; k++) {
        double e = pmf[k - lo] * n, o = (double)count[k - lo];
        if (e >= 20) {
            chi += (o - e) * (o - e) / e;
            cells++;
        } else {
            exp_tail += e, obs_tail += o;
        }
    }
    double left = 0;
    for (int64_t k = lo; k <= hi; k++) left += pmf[k - lo];
    exp_tail += (1 - left) * n; /* beyond [lo, hi]: never observed (the draws are asserted inside) */
    if (exp_tail > 0) {
        chi += (obs_tail - exp_tail) * (obs_tail - exp_tail) / exp_tail;
        cells++;
    }
    double p = gsl_cdf_chisq_Q(chi, cells - 1);
    if (!(p > 1e-4)) print_error("chi-square %g on %d cells: p = %g\n", chi, cells, p);
    assert_true(p > 1e-4);
}

static void samplers_match_the_exact_pmf(void **state)
{
    (void)state;
    gsl_set_error_handler_off(); /* far tails underflow to 0: the pmf there is 0 to double precision */
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 12);
    const int64_t n = 200000;
    enum { W = 200 };
    double pmf[2 * W + 1];
    int64_t count[2 * W + 1];
    const double lambdas[] = {0.7, 6.3};
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k <= 2 * W; k++) pmf[k] = exp(-lambdas[i] + k * log(lambdas[i]) - gsl_sf_lngamma(k + 1.0)), count[k] = 0;
        for (int64_t j = 0; j < n; j++) {
            uint64_t x = dpfl_rng_poisson(&r, lambdas[i]);
            assert_true(x <= 2 * W);
            count[x]++;
        }
        chi_square(pmf, 0, 2 * W, count, n);
    }
    const double mus[] = {3, 50};
    for (int i = 0; i < 2; i++) {
        for (int k = -W; k <= W; k++) pmf[k + W] = gsl_sf_bessel_In_scaled(abs(k), mus[i]), count[k + W] = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t x = dpfl_rng_skellam(&r, mus[i]);
            assert_true(x >= -W && x <= W);
            count[x + W]++;
        }
        chi_square(pmf, -W, W, count, n);
    }
}

/* The Skellam accountant: the corollary's value by hand; at least the Gaussian RDP of the same variance at every
 * order and within 1% of it at large variance; epsilon at least the Gaussian mechanism's at integer orders and
 * within 2% of it at large variance; monotone in the variance, the rounds and the client rate. */
static void skellam_accounting_bounds_the_gaussian(void **state)
{
    (void)state;
    assert_close(dpfl_skellam_rdp(2, 10, 3, 50), 0.18 + 87.0 / 10000, 1e-14);
    assert_close(dpfl_skellam_rdp(7, 1e4, 3, 50), 7 * 9 / 100.0 + 3e4 / 100.0 < 7 * 9 / 100.0 + (13 * 9 + 6e4) / 1e4
                                                      ? 7 * 9 / 100.0 + 3e4 / 100.0
                                                      : 7 * 9 / 100.0 + (13 * 9 + 6e4) / 1e4,
                 1e-14);
    assert_close(dpfl_skellam_l1_bound(2, 100), 4, 1e-15);
    assert_close(dpfl_skellam_l1_bound(10, 4), 20, 1e-15);
    for (int a = 2; a <= 512; a *= 2)
        for (double mu = 1; mu <= 1e8; mu *= 100) {
            double g = a * 30.0 * 30.0 / (2 * mu), r = dpfl_skellam_rdp(a, dpfl_skellam_l1_bound(30, 1000), 30, mu);
            assert_true(r >= g);
            if (mu >= 1e6) assert_true(r <= 1.01 * g);
        }
    dpfl_error err;
    double prev = INFINITY;
    for (double mu = 1e3; mu <= 1e9; mu *= 10) {
        const double d2 = 50, d1 = dpfl_skellam_l1_bound(d2, 4096);
        double e, g;
        assert_int_equal(dpfl_skellam_epsilon(d1, d2, mu, 1.0, 100, 1e-5, &e, &err), DPFL_OK);
        /* the Gaussian mechanism of the same variance at the same integer orders (2..1024) */
        static double orders[1023], rdp[1023];
        for (int a = 2; a <= 1024; a++) orders[a - 2] = a, rdp[a - 2] = 100 * a * d2 * d2 / (2 * mu);
        g = dpfl_rdp_to_epsilon(orders, rdp, 1023, 1e-5, DPFL_CONV_TIGHT, NULL);
        assert_true(e >= g);
        if (mu >= 1e7) assert_true(e <= 1.02 * g);
        assert_true(e < prev); /* more noise, less epsilon */
        prev = e;
    }
    double e1, e2, e3, e4;
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 1e5, 0.1, 100, 1e-5, &e1, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 1e5, 0.1, 200, 1e-5, &e2, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 1e5, 0.3, 100, 1e-5, &e3, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 1e5, 1.0, 100, 1e-5, &e4, &err), DPFL_OK);
    assert_true(e1 < e2 && e1 < e3 && e3 < e4);
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 0, 1.0, 100, 1e-5, &e4, &err), DPFL_EINVAL);
}

/* ---------------------------------------------------------------- sampled DDP: brute force in one dimension
 * The exact pair of T rounds with visible participation, independent of the library: Skellam(mu/2, mu/2) noise
 * (pmf summed from Poisson products in long double), a shift by the integer v in a round the client takes part in
 * (probability q, its participation seen), nothing otherwise.  Given j participations the hockey-stick divergence
 * is E_P[(1 - e^{eps - L})_+], L the j-fold sum of the one-round privacy loss log(p(x) / p(x + v)) under P (noise
 * plus v); the loss rounded down to a grid of h gives a lower bound lo, rounded up (plus the truncated mass) an
 * upper bound hi, and delta(eps) = sum_j Bin(j; T, q) H_j. */
#define BF_MAXT 8
#define BF_NE 4
#define BF_K 90

static long double bf_skellam_pmf(int k, long double mu)
{
    const long double l = mu / 2, ll = logl(l);
    const int a = abs(k);
    long double s = 0;
    for (int n = 0; n < 600; n++) s += expl(-2 * l + (2 * n + a) * ll - lgammal(n + 1.0L) - lgammal(n + a + 1.0L));
    return s;
}

/* H[side][j][e]: side 0 lower, 1 upper bound on the hockey-stick divergence of j participations at eps[e] */
static void bf_profile(double mu, int v, int T, const double *eps, int ne, double h, long double H[2][BF_MAXT + 1][BF_NE])
{
    long double p[2 * BF_K + 1 + 8];
    assert_true(v >= 1 && v <= 8 && T <= BF_MAXT && ne <= BF_NE);
    for (int x = -BF_K; x <= BF_K + v; x++) p[x + BF_K] = bf_skellam_pmf(x, mu);
    for (int side = 0; side < 2; side++) {
        long idx[2 * BF_K + 1], imin = LONG_MAX, imax = LONG_MIN;
        long double m[2 * BF_K + 1], kept = 0;
        int na = 0;
        for (int x = -BF_K; x <= BF_K; x++) {
            if (p[x + BF_K] < 1e-45L) continue;
            long double l = logl(p[x + BF_K] / p[x + v + BF_K]) / h;
            idx[na] = (long)(side ? ceill(l) : floorl(l));
            m[na] = p[x + BF_K];
            kept += m[na];
            if (idx[na] < imin) imin = idx[na];
            if (idx[na] > imax) imax = idx[na];
            na++;
        }
        const long double lost = fmaxl(0, 1 - kept) + 1e-30L; /* the noise's mass outside the atoms */
        const long w = imax - imin;
        long double *cur = calloc((size_t)(T * w + 1), sizeof *cur), *nxt = calloc((size_t)(T * w + 1), sizeof *nxt);
        assert_non_null(cur);
        assert_non_null(nxt);
        cur[0] = 1;
        long off = 0, size = 1;
        for (int j = 0; j <= T; j++) {
            for (int e = 0; e < ne; e++) {
                long double d = 0;
                for (long i = 0; i < size; i++)
                    if (cur[i] > 0) d += cur[i] * fmaxl(0, 1 - expl(eps[e] - (long double)(off + i) * h));
                H[side][j][e] = side ? d + j * lost : d;
            }
            if (j == T) break;
            memset(nxt, 0, (size_t)(size + w) * sizeof *nxt);
            for (long i = 0; i < size; i++)
                if (cur[i] > 0)
                    for (int a = 0; a < na; a++) nxt[i + idx[a] - imin] += cur[i] * m[a];
            long double *t = cur;
            cur = nxt, nxt = t;
            size += w, off += imin;
        }
        free(cur), free(nxt);
    }
}

static long double bf_mixture(long double H[BF_MAXT + 1][BF_NE], int T, double q, int e)
{
    long double d = 0;
    for (int j = 0; j <= T; j++)
        d += expl(lgammal(T + 1.0L) - lgammal(j + 1.0L) - lgammal(T - j + 1.0L)) * powl(q, j) * powl(1 - q, T - j) *
             H[j][e];
    return d;
}

/* The per-round joint-convexity bound (the RDP accountant at explicit integer orders: no mixture) */
static double old_delta(const dpfl_event *ev, double eps)
{
    static double orders[255];
    for (int a = 2; a <= 256; a++) orders[a - 2] = a;
    dpfl_account_opts o = {.orders = orders, .norders = 255};
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_delta(ev, 1, eps, DPFL_ACC_RDP, &o, &g, &err), DPFL_OK);
    return g.delta;
}

/* The binomial mixture against the brute force: never below it (delta at eps, and epsilon at the brute force's
 * delta, which is at most 2 eps + 1), never above the joint-convexity bound and well below it where the best order
 * depends on the participations; dpfl_skellam_epsilon and the accountant answer it. */
static void sampled_ddp_mixture_bounds_the_exact_pair(void **state)
{
    (void)state;
    const double eps[BF_NE] = {0.5, 1.0, 2.0, 3.0};
    const struct {
        double mu;
        int v, T;
        double q;
    } cs[] = {{8, 1, 6, 0.3}, {8, 1, 6, 0.1}, {6, 2, 4, 0.5}, {20, 1, 8, 0.2}};
    static long double H[2][BF_MAXT + 1][BF_NE];
    int below_old = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        bf_profile(cs[c].mu, cs[c].v, cs[c].T, eps, BF_NE, 1e-3, H);
        const double v = cs[c].v, q = cs[c].q;
        dpfl_event ev = dpfl_event_skellam(q, v, v, cs[c].mu, cs[c].T); /* 1-D: L1 = L2 = |v| */
        dpfl_error err;
        for (int e = 0; e < BF_NE; e++) {
            const long double lo = bf_mixture(H[0], cs[c].T, q, e), hi = bf_mixture(H[1], cs[c].T, q, e);
            assert_true(lo > 0 && lo <= hi && hi <= lo * 1.1L); /* the brute force is accurate */
            double d, o = old_delta(&ev, eps[e]);
            assert_int_equal(dpfl_skellam_mixture_delta(&ev, 1, eps[e], DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
            if (!(d >= lo) || !(d <= o * (1 + 1e-9)))
                print_error("case %zu eps %g: mixture %g, brute force [%Lg, %Lg], joint convexity %g\n", c, eps[e], d,
                            lo, hi, o);
            assert_true(d >= lo);
            assert_true(d <= o * (1 + 1e-9));
            if (d < 0.8 * o) below_old++;
            dpfl_guarantee g;
            assert_int_equal(dpfl_account_delta(&ev, 1, eps[e], DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
            assert_true(g.delta >= lo && g.delta <= d * (1 + 1e-12));
            /* epsilon at the brute force's (lower) delta: at least eps */
            double es;
            assert_int_equal(dpfl_skellam_epsilon(v, v, cs[c].mu, q, cs[c].T, (double)lo, &es, &err), DPFL_OK);
            assert_true(es >= eps[e] * (1 - 1e-9));
            assert_true(es <= 2 * eps[e] + 1); /* and not far above it */
            assert_int_equal(dpfl_account_epsilon(&ev, 1, (double)lo, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
            assert_true(g.epsilon >= eps[e] * (1 - 1e-9));
        }
    }
    assert_true(below_old >= 4);
}

/* The mixture: pinned values (an independent Python sum over the same order grid, without the monotone search,
 * gives 0.89704921799 and 2.13769232709: the library's are the same padded up by ~1e-10), below the joint-convexity
 * bound at DDP's sizes; monotone in q, rounds, noise and epsilon; q = 1 unchanged; several events (rates and
 * sensitivities that differ) between the bounds of their extremes; bad input refused. */
static void sampled_ddp_mixture_pinned_and_monotone(void **state)
{
    (void)state;
    dpfl_error err;
    double e, prev;
    assert_int_equal(dpfl_skellam_epsilon(400, 20, 1e5, 0.1, 100, 1e-5, &e, &err), DPFL_OK);
    assert_close(e, 0.8970492180519614, 1e-9);
    const double d2 = 1290, d1 = dpfl_skellam_l1_bound(d2, 131072), mu6 = (6 * d2) * (6 * d2);
    assert_int_equal(dpfl_skellam_epsilon(d1, d2, mu6, 0.03, 200, 1e-5, &e, &err), DPFL_OK);
    assert_close(e, 2.1376923272382555, 1e-9);
    dpfl_event ev = dpfl_event_skellam(0.03, d1, d2, mu6, 200);
    double d, o = old_delta(&ev, e);
    assert_int_equal(dpfl_skellam_mixture_delta(&ev, 1, e, DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
    assert_true(d <= 1e-5 * (1 + 1e-6) && o > 1.5e-5); /* the joint-convexity delta at the same epsilon */
    dpfl_guarantee g;
    assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_close(g.epsilon, e, 1e-12);
    assert_true(g.order == 0); /* the mixture answered */
    /* monotone */
    prev = 0;
    for (double q = 0.01; q <= 0.5; q += 0.01) {
        assert_int_equal(dpfl_skellam_epsilon(d1, d2, mu6, q, 200, 1e-5, &e, &err), DPFL_OK);
        assert_true(e >= prev);
        prev = e;
    }
    prev = 0;
    for (int64_t T = 1; T <= 400; T += 7) {
        assert_int_equal(dpfl_skellam_epsilon(d1, d2, mu6, 0.03, T, 1e-5, &e, &err), DPFL_OK);
        assert_true(e >= prev);
        prev = e;
    }
    prev = INFINITY;
    for (double z = 1; z <= 10; z += 0.25) {
        assert_int_equal(dpfl_skellam_epsilon(d1, d2, (z * d2) * (z * d2), 0.03, 200, 1e-5, &e, &err), DPFL_OK);
        assert_true(e <= prev);
        prev = e;
    }
    prev = 1;
    for (double x = 0; x <= 10; x += 0.125) {
        assert_int_equal(dpfl_skellam_mixture_delta(&ev, 1, x, DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
        assert_true(d <= prev && d > 0);
        prev = d;
    }
    /* q = 1: the RDP composition (the mixture is a point mass there; the accountant does not call it) */
    dpfl_event full = dpfl_event_skellam(1.0, d1, d2, mu6, 50);
    assert_false(dpfl_skellam_mixture_applies(&full, 1));
    assert_int_equal(dpfl_skellam_epsilon(d1, d2, mu6, 1.0, 50, 1e-5, &e, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&full, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_true(g.order > 0 && g.epsilon <= e * (1 + 1e-12) && g.epsilon >= 0.99 * e);
    /* several events: 100 rounds at 0.03 and 100 at 0.1, or one of them at twice the noise */
    dpfl_event two[2] = {dpfl_event_skellam(0.03, d1, d2, mu6, 100), dpfl_event_skellam(0.1, d1, d2, mu6, 100)};
    dpfl_event lo = dpfl_event_skellam(0.03, d1, d2, mu6, 200), hi = dpfl_event_skellam(0.1, d1, d2, mu6, 200);
    double el, eh, e2;
    assert_int_equal(dpfl_skellam_mixture_epsilon(two, 2, 1e-5, DPFL_CONV_TIGHT, &e2, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_mixture_epsilon(&lo, 1, 1e-5, DPFL_CONV_TIGHT, &el, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_mixture_epsilon(&hi, 1, 1e-5, DPFL_CONV_TIGHT, &eh, &err), DPFL_OK);
    assert_true(el < e2 && e2 <= eh * (1 + 1e-12));
    /* each epsilon is the safe end of its bisection: its delta is within the target, exactly */
    assert_int_equal(dpfl_skellam_mixture_delta(two, 2, e2, DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
    assert_true(d <= 1e-5);
    assert_int_equal(dpfl_skellam_mixture_delta(&lo, 1, el, DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
    assert_true(d <= 1e-5);
    assert_int_equal(dpfl_skellam_mixture_delta(&hi, 1, eh, DPFL_CONV_TIGHT, &d, &err), DPFL_OK);
    assert_true(d <= 1e-5);
    two[1] = dpfl_event_skellam(0.03, d1, d2, 4 * mu6, 100);
    assert_int_equal(dpfl_skellam_mixture_epsilon(two, 2, 1e-5, DPFL_CONV_TIGHT, &e2, &err), DPFL_OK);
    assert_close(e2, el, 1e-12); /* the largest RDP charged to every participation */
    /* a round known to include the client, and the sampled rest: between all-known and all-sampled */
    two[1] = dpfl_event_skellam(1.0, d1, d2, mu6, 10);
    assert_true(dpfl_skellam_mixture_applies(two, 2));
    assert_int_equal(dpfl_skellam_mixture_epsilon(two, 2, 1e-5, DPFL_CONV_TIGHT, &e2, &err), DPFL_OK);
    dpfl_event ten = dpfl_event_skellam(1.0, d1, d2, mu6, 10), t100 = dpfl_event_skellam(0.03, d1, d2, mu6, 100);
    assert_int_equal(dpfl_skellam_mixture_epsilon(&ten, 1, 1e-5, DPFL_CONV_TIGHT, &el, &err), DPFL_OK);
    assert_int_equal(dpfl_skellam_mixture_epsilon(&t100, 1, 1e-5, DPFL_CONV_TIGHT, &eh, &err), DPFL_OK);
    assert_true(e2 > el && e2 > eh);
    /* not Skellam: not applicable, refused */
    two[1] = dpfl_event_gaussian(1.0, 10);
    assert_false(dpfl_skellam_mixture_applies(two, 2));
    assert_int_equal(dpfl_skellam_mixture_epsilon(two, 2, 1e-5, DPFL_CONV_TIGHT, &e2, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_skellam_mixture_delta(&lo, 1, -1, DPFL_CONV_TIGHT, &d, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_skellam_mixture_epsilon(&lo, 1, 0, DPFL_CONV_TIGHT, &e2, &err), DPFL_EINVAL);
}

/* The table sampler (src/core/poisson_table.c) against the exact laws: moments at small, medium and large lambda;
 * chi-square of 200,000 draws against the Poisson pmf at lambda = 6.3 and 2,000.5 and against the Skellam pmf
 * (difference of two draws) at mu = 2 lambda = 100; its total-variation bound tiny at the sizes DDP uses; bad
 * lambdas refused. */
static void table_sampler_matches_the_exact_pmf(void **state)
{
    (void)state;
    gsl_set_error_handler_off();
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 13);
    dpfl_error err;
    const double lambdas[] = {0.4, 37.2, 5e5};
    for (int i = 0; i < 3; i++) {
        dpfl_poisson_table *t;
        assert_int_equal(dpfl_poisson_table_make(lambdas[i], &t, &err), DPFL_OK);
        assert_true(dpfl_poisson_table_tv(t) < 1e-20);
        assert_true(dpfl_poisson_table_lambda(t) == lambdas[i]);
        const int n = 200000;
        double s = 0, s2 = 0;
        for (int j = 0; j < n; j++) {
            double x = (double)dpfl_poisson_table_draw(t, &r);
            s += x, s2 += x * x;
        }
        double m = s / n, l = lambdas[i];
        check_moments(m, s2 / n - m * m, l, l, l * (1 + 3 * l), n);
        dpfl_poisson_table_free(t);
    }
    const int64_t n = 200000;
    enum { W = 400 };
    static double pmf[2 * W + 1];
    static int64_t count[2 * W + 1];
    const double pl[] = {6.3, 2000.5};
    for (int i = 0; i < 2; i++) {
        const int64_t lo = pl[i] > 100 ? 2000 - W : 0;
        dpfl_poisson_table *t;
        assert_int_equal(dpfl_poisson_table_make(pl[i], &t, &err), DPFL_OK);
        for (int k = 0; k <= 2 * W; k++)
            pmf[k] = exp(-pl[i] + (double)(k + lo) * log(pl[i]) - gsl_sf_lngamma((double)(k + lo) + 1.0)), count[k] = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t x = (int64_t)dpfl_poisson_table_draw(t, &r) - lo;
            assert_true(x >= 0 && x <= 2 * W);
            count[x]++;
        }
        chi_square(pmf, lo, lo + 2 * W, count, n);
        dpfl_poisson_table_free(t);
    }
    dpfl_poisson_table *t;
    assert_int_equal(dpfl_poisson_table_make(50.0, &t, &err), DPFL_OK);
    for (int k = -W; k <= W; k++) pmf[k + W] = gsl_sf_bessel_In_scaled(abs(k), 100.0), count[k + W] = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t x = 0;
        dpfl_poisson_table_add_skellam(t, &r, &x, 1);
        assert_true(x >= -W && x <= W);
        count[x + W]++;
    }
    chi_square(pmf, -W, W, count, n);
    dpfl_poisson_table_free(t);
    assert_int_equal(dpfl_poisson_table_make(0.0, &t, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_poisson_table_make(NAN, &t, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_poisson_table_make(2e9, &t, &err), DPFL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(poisson_and_skellam_moments),
        cmocka_unit_test(samplers_match_the_exact_pmf),
        cmocka_unit_test(skellam_accounting_bounds_the_gaussian),
        cmocka_unit_test(table_sampler_matches_the_exact_pmf),
        cmocka_unit_test(sampled_ddp_mixture_bounds_the_exact_pair),
        cmocka_unit_test(sampled_ddp_mixture_pinned_and_monotone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
