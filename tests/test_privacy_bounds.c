/* Differential tests of the accountants against LOWER bounds computed here, independently of src/privacy: an
 * upper bound that falls below a valid lower bound is a bug, whatever the accountant.
 *
 * The lower bounds are those of explicit distinguishing tests on T steps of the Poisson-subsampled Gaussian
 * (remove direction: P = prod_t ((1-q) N(0, z^2) + q N(1, z^2)), Q = N(0, z^2)^T), by the definition of
 * (eps, delta)-DP: for any event S, delta(eps) >= P(S) - e^eps Q(S), so eps(delta) >= log((P(S) - delta) / Q(S)).
 *   - sum test S = {sum_t x_t > c}: Q-law N(0, T z^2); P-law the mixture over J ~ Bin(T, q) of N(J, T z^2);
 *   - max test S = {max_t x_t > c}: P(S) = 1 - (1 - q Qc((c-1)/z) - (1-q) Qc(c/z))^T, Q(S) = 1 - (1 - Qc(c/z))^T;
 *   - T = 1: the likelihood-ratio test, i.e. the exact hockey-stick divergence in closed form.
 * The sum test is what the central limit makes optimal for many steps, the max test catches few, strong steps. */
#include "testutil.h"
#include "dpfl/privacy.h"

#include <gsl/gsl_sf_erf.h>
#include <gsl/gsl_sf_gamma.h>
#include <stdlib.h>
#include <string.h>

/* log of the standard normal upper tail, accurate far out */
static double log_qc(double x) { return gsl_sf_log_erfc(x / M_SQRT2) - M_LN2; }
static double qc(double x) { return 0.5 * erfc(x / M_SQRT2); }

/* the best eps lower bound over a family of tests given as (P(S), log Q(S)) pairs */
static double eps_from_tests(const double *p, const double *lq, int n, double delta)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        double pv = p[i] * (1 - 1e-9) - 1e-15; /* rounding only lowers the bound */
        if (!(pv > delta)) continue;
        double e = log(pv - delta) - (lq[i] + 1e-9);
        if (e > best) best = e;
    }
    return best;
}

/* delta lower bound at eps over the same tests */
static double delta_from_tests(const double *p, const double *lq, int n, double eps)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        double d = p[i] * (1 - 1e-9) - 1e-15 - exp(eps + lq[i] + 1e-9);
        if (d > best) best = d;
    }
    return best;
}

enum { NC = 500 };

/* The tests' (P(S), log Q(S)) for the sum and max statistics at NC thresholds each (and T = 1's exact test). */
static int make_tests(double q, double z, int64_t T, double *p, double *lq)
{
    int n = 0;
    const double sd = z * sqrt((double)T), mean = q * (double)T;
    /* binomial weights of J over mean +- 9 sd (the rest is dropped: dropping mass only lowers P(S)) */
    const double jsd = sqrt((double)T * q * (1 - q)) + 1;
    int64_t j0 = (int64_t)floor(mean - 9 * jsd), j1 = (int64_t)ceil(mean + 9 * jsd);
    if (j0 < 0) j0 = 0;
    if (j1 > T) j1 = T;
    const int nj = (int)(j1 - j0 + 1);
    double *w = malloc((size_t)nj * sizeof *w);
    for (int64_t j = j0; j <= j1; j++)
        w[j - j0] = q >= 1 ? (j == T) : exp(gsl_sf_lnchoose((unsigned)T, (unsigned)j) + (double)j * log(q) +
                                            (double)(T - j) * log1p(-q));
    for (int i = 0; i < NC; i++) { /* sum test: thresholds from the Q-mean to far above the P-mean */
        double c = -2 * sd + (mean + 14 * sd + 3) * i / (NC - 1.0);
        double pv = 0;
        for (int64_t j = j0; j <= j1; j++) pv += w[j - j0] * qc((c - (double)j) / sd);
        p[n] = pv;
        lq[n++] = log_qc(c / sd);
    }
    free(w);
    for (int i = 0; i < NC; i++) { /* max test */
        double c = -1 + (2 + 14 * z) * i / (NC - 1.0);
        double a = q * qc((c - 1) / z) + (1 - q) * qc(c / z); /* one step exceeds c under P */
        p[n] = -expm1((double)T * log1p(-a));
        double lb = log_qc(c / z); /* log P_Q(one step exceeds c) */
        double lqs = T * exp(lb) < 1e-8 ? log((double)T) + lb : log(-expm1((double)T * log1p(-exp(lb))));
        lq[n++] = lqs;
    }
    if (T == 1) { /* the likelihood-ratio test {L > eps} for every eps: the exact curve */
        for (int i = 0; i < NC; i++) {
            double e = 12.0 * i / NC, a = expm1(e) + q;
            double x = a > 0 && q > 0 ? z * z * log(a / q) + 0.5 : -INFINITY;
            p[n] = (1 - q) * qc(x / z) + q * qc((x - 1) / z);
            lq[n++] = log_qc(x / z);
        }
    }
    return n;
}

static double eps_rdp_pld(const dpfl_event *e, double delta, dpfl_accountant acc, int *fell_back)
{
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(e, 1, delta, acc, NULL, &g, &err), DPFL_OK);
    if (fell_back) *fell_back = g.answered != acc;
    return g.epsilon;
}

/* 100 random cases (q in [1e-3, 1], z in [0.5, 10], T in [1, 1e4], delta in [1e-8, 1e-3]): RDP's and PLD's epsilon
 * are never below the lower bound; nor is their delta at a random epsilon; and where the bound is informative PLD
 * stays close to it. */
static void accountants_are_never_below_a_lower_bound(void **state)
{
    (void)state;
    srand(2024);
    double *p = malloc(3 * NC * sizeof *p), *lq = malloc(3 * NC * sizeof *lq);
    int fallbacks = 0, informative = 0;
    double worst_pld = 0, worst_rdp = 0, ratios[100];
    for (int k = 0; k < 100; k++) {
        double u1 = rand() / (double)RAND_MAX, u2 = rand() / (double)RAND_MAX, u3 = rand() / (double)RAND_MAX,
               u4 = rand() / (double)RAND_MAX;
        double q = k % 10 == 0 ? 1.0 : pow(10, -3 + 3 * u1), z = 0.5 + 9.5 * u2 * u2;
        int64_t T = (int64_t)llround(pow(10, 4 * u3));
        double delta = pow(10, -8 + 5 * u4);
        dpfl_event e = dpfl_event_poisson(q, z, T);
        int n = make_tests(q, z, T, p, lq);
        double lb = eps_from_tests(p, lq, n, delta);
        int fb;
        double er = eps_rdp_pld(&e, delta, DPFL_ACC_RDP, NULL), ep = eps_rdp_pld(&e, delta, DPFL_ACC_PLD, &fb);
        fallbacks += fb;
        if (!(er >= lb * (1 - 1e-9) - 1e-9) || !(ep >= lb * (1 - 1e-9) - 1e-9)) {
            print_error("case %d (q %g, z %g, T %lld, delta %g): rdp %.6g, pld %.6g, lower bound %.6g\n", k, q, z,
                        (long long)T, delta, er, ep, lb);
            fail();
        }
        if (lb > 0.2) {
            ratios[informative++] = ep / lb;
            if (ep / lb > worst_pld) worst_pld = ep / lb;
            if (er / lb > worst_rdp) worst_rdp = er / lb;
        }
        /* delta at an epsilon around the answer */
        double eps = er * (0.5 + u1);
        dpfl_guarantee g;
        dpfl_error err;
        double dlb = delta_from_tests(p, lq, n, eps);
        for (int a = 0; a < 2; a++) {
            assert_int_equal(dpfl_account_delta(&e, 1, eps, a ? DPFL_ACC_PLD : DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
            if (!(g.delta >= dlb * (1 - 1e-9) - 1e-15)) {
                print_error("case %d: %s delta(%g) = %.6g below the lower bound %.6g\n", k, a ? "pld" : "rdp", eps,
                            g.delta, dlb);
                fail();
            }
        }
    }
    print_message("  100 cases: %d PLD fallbacks to RDP; over %d informative cases (lower bound > 0.2) the worst "
                  "ratio to the lower bound is %.3f (PLD) and %.3f (RDP)\n",
                  fallbacks, informative, worst_pld, worst_rdp);
    assert_true(informative >= 50);
    /* PLD is near-exact, so it sits close to the explicit tests where they are strong (most cases): the median
     * ratio is small; the worst cases are those where neither the sum nor the max statistic is a good test */
    for (int i = 1; i < informative; i++)
        for (int j = i; j > 0 && ratios[j] < ratios[j - 1]; j--) {
            double t = ratios[j];
            ratios[j] = ratios[j - 1];
            ratios[j - 1] = t;
        }
    print_message("  PLD / lower bound: median %.3f, 90th percentile %.3f\n", ratios[informative / 2],
                  ratios[informative * 9 / 10]);
    assert_true(ratios[informative / 2] < 1.15);
    free(p);
    free(lq);
}

/* Calibration never overshoots, by either accountant, and the lower bound at the returned z is within the
 * target too (40 random cases, one in five by PLD). */
static void calibration_is_never_below_a_lower_bound(void **state)
{
    (void)state;
    srand(77);
    double *p = malloc(3 * NC * sizeof *p), *lq = malloc(3 * NC * sizeof *lq);
    for (int k = 0; k < 40; k++) {
        double q = pow(10, -3 + 3 * (rand() / (double)RAND_MAX));
        int64_t T = (int64_t)llround(pow(10, 3.5 * (rand() / (double)RAND_MAX)));
        double target = 0.3 + 7.7 * (rand() / (double)RAND_MAX), delta = pow(10, -7 + 3 * (rand() / (double)RAND_MAX));
        dpfl_accountant acc = k % 5 == 0 ? DPFL_ACC_PLD : DPFL_ACC_RDP; /* PLD calibration costs ~30 PLD runs */
        dpfl_event e = dpfl_event_poisson(q, 1.0, T);
        dpfl_calibrate_opts co = {0};
        co.accountant = acc;
        double z;
        dpfl_error err;
        if (dpfl_calibrate_noise(&e, 1, target, delta, &co, &z, &err) != DPFL_OK) {
            print_error("case %d: calibration failed: %s\n", k, err.msg);
            fail();
        }
        e.z = z;
        double got = eps_rdp_pld(&e, delta, acc, NULL);
        int n = make_tests(q, z, T, p, lq);
        double lb = eps_from_tests(p, lq, n, delta);
        if (!(got <= target) || !(lb <= target)) {
            print_error("case %d (%s, q %g, T %lld, delta %g): z %g gives %.6g, lower bound %.6g, target %g\n", k,
                        dpfl_accountant_name(acc), q, (long long)T, delta, z, got, lb, target);
            fail();
        }
    }
    free(p);
    free(lq);
}

/* The PLD answers below the truth: 10^12 steps printed epsilon = 0 (and delta = 0 at epsilon 1); now the
 * discretization is found not to hold and RDP answers, saying so. */
static void pld_never_answers_zero_for_huge_compositions(void **state)
{
    (void)state;
    dpfl_event e = dpfl_event_poisson(0.01, 1.1, 1000000000000LL);
    dpfl_guarantee g, r;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
    assert_true(g.epsilon >= r.epsilon * (1 - 1e-12) && g.epsilon > 1e7);
    assert_int_equal(g.answered, DPFL_ACC_RDP);
    assert_non_null(strstr(g.fallback, "PLD"));
    assert_int_equal(dpfl_account_delta(&e, 1, 1.0, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    assert_true(g.delta > 0.99);
    /* and the sum test says the same: after 10^10 expected participations at z = 1.1, epsilon 1 is nothing */
}

/* log sum_x exp(f(x)) over the integers |x| <= L, in long double, the largest term factored out */
static long double lse_int(long double (*f)(long x, const long double *a), const long double *a, long L)
{
    long double m = -INFINITY, s = 0;
    for (long x = -L; x <= L; x++) m = fmaxl(m, f(x, a));
    for (long x = -L; x <= L; x++) s += expl(f(x, a) - m);
    return m + logl(s);
}
/* a = {alpha, Delta, sigma}: log of P(x - Delta)^alpha P(x)^(1 - alpha), and of P(x), unnormalized */
static long double mixed_term(long x, const long double *a)
{
    const long double s2 = 2 * a[2] * a[2], d = (long double)x - a[1];
    return (-a[0] * d * d - (1 - a[0]) * (long double)x * (long double)x) / s2;
}
static long double plain_term(long x, const long double *a)
{
    return -(long double)x * (long double)x / (2 * a[2] * a[2]);
}

/* The discrete Gaussian's RDP is never below its Renyi divergence computed by definition: D_alpha(N_Z(Delta, s^2) ||
 * N_Z(0, s^2)) = log(sum_x P(x - Delta)^alpha P(x)^(1 - alpha)) / (alpha - 1), P(x) = e^{-x^2 / (2 s^2)} / Theta,
 * summed over every integer that matters (both directions are the same by symmetry); and it is that divergence
 * where alpha Delta is an integer (Canonne-Kamath-Steinke: the bound is attained there). */
static void discrete_gaussian_rdp_is_never_below_the_exact_divergence(void **state)
{
    (void)state;
    const double sigmas[] = {0.6, 1.0, 2.5, 7.0}, alphas[] = {1.5, 2, 2.7, 3, 8, 20.5, 64};
    const int deltas[] = {1, 2, 3};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++) {
            const double z = sigmas[i] / deltas[j];
            dpfl_event e = dpfl_event_noise(DPFL_EV_DISCRETE_GAUSSIAN, z, 1);
            double rdp[7];
            dpfl_error err;
            assert_int_equal(dpfl_rdp_compose(&e, 1, alphas, 7, rdp, &err), DPFL_OK);
            for (size_t k = 0; k < 7; k++) {
                const long double a[3] = {alphas[k], deltas[j], sigmas[i]};
                const long L = (long)(alphas[k] * deltas[j] + 60 * sigmas[i]) + 10;
                const double exact =
                    (double)((lse_int(mixed_term, a, L) - lse_int(plain_term, a, L)) / (long double)(alphas[k] - 1));
                if (!(rdp[k] >= exact * (1 - 1e-12))) {
                    print_error("discrete Gaussian sigma %g Delta %d alpha %g: RDP %.17g below the exact %.17g\n",
                                sigmas[i], deltas[j], alphas[k], rdp[k], exact);
                    fail();
                }
                double ad = alphas[k] * deltas[j];
                if (ad == floor(ad)) assert_true(fabs(rdp[k] - exact) <= 1e-9 * exact);
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accountants_are_never_below_a_lower_bound),
        cmocka_unit_test(calibration_is_never_below_a_lower_bound),
        cmocka_unit_test(pld_never_answers_zero_for_huge_compositions),
        cmocka_unit_test(discrete_gaussian_rdp_is_never_below_the_exact_divergence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
