/* Privacy accountants: published check values (REFERENCES.md sections 1-9) and properties. */
#include "testutil.h"
#include "dpfl/privacy.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double eps_of(dpfl_event e, double delta, dpfl_accountant acc, const dpfl_account_opts *o)
{
    dpfl_guarantee g;
    dpfl_error err;
    dpfl_status s = dpfl_account_epsilon(&e, 1, delta, acc, o, &g, &err);
    if (s) print_error("%s\n", err.msg);
    assert_int_equal(s, DPFL_OK);
    return g.epsilon;
}

/* section 7: per-step SGM RDP, q = 0.1, z = 1 */
static void sgm_rdp_check_values(void **state)
{
    (void)state;
    assert_close(dpfl_rdp_sgm(0.1, 1, 2), 0.0170369, 1e-5);
    assert_close(dpfl_rdp_sgm(0.1, 1, 3), 0.0317123, 1e-5);
    assert_close(dpfl_rdp_sgm(0.1, 1, 10), 2.442816, 1e-6);
    /* special cases */
    assert_true(dpfl_rdp_sgm(0, 1, 5) == 0);
    assert_close(dpfl_rdp_sgm(1, 2, 5), 5.0 / 8.0, 1e-12);
    assert_true(isinf(dpfl_rdp_sgm(0.1, 0, 5)));
    /* integer closed form at alpha = 2: log(1 + q^2 (e^{1/z^2} - 1)) */
    double q = 1e-6, z = 0.7;
    assert_close(dpfl_rdp_sgm(q, z, 2), log1p(q * q * expm1(1 / (z * z))), 1e-9);
}

/* fractional orders agree with the integer ones in the limit and sit below the convex chord */
static void sgm_rdp_fractional(void **state)
{
    (void)state;
    double qs[] = {1e-5, 0.01, 0.3}, zs[] = {0.5, 1.1, 5};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double q = qs[i], z = zs[j];
            double a3 = dpfl_rdp_sgm(q, z, 3), a35 = dpfl_rdp_sgm(q, z, 3.5), a4 = dpfl_rdp_sgm(q, z, 4);
            assert_true(a3 <= a35 * (1 + 1e-9) + 1e-300);
            assert_true(a35 <= a4 * (1 + 1e-9) + 1e-300);
            double near = dpfl_rdp_sgm(q, z, 3.0001);
            assert_true(fabs(near - a3) <= 1e-3 * a3 + 1e-12);
        }
}

/* section 6: Geyer's TF moments accountant (orders 1..32, classic conversion) */
static void geyer_moments_accountant(void **state)
{
    (void)state;
    double ord[31];
    for (int i = 0; i < 31; i++) ord[i] = i + 2;
    dpfl_account_opts o = {DPFL_CONV_CLASSIC, ord, 31, 0};
    assert_close(eps_of(dpfl_event_poisson(0.01, 4, 10000), 1e-5, DPFL_ACC_RDP, &o), 1.2586, 1e-4);
}

/* section 7: rPDP-FL eps*(p) table and calibrated noise */
static void rpdp_check_values(void **state)
{
    (void)state;
    dpfl_rpdp_params rp = {1.0, 0.5, 5, 20, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
    double p[] = {0.001, 0.01, 0.1, 0.5, 1.0}, want[] = {0.268093, 0.561703, 4.209907, 30.49293, 91.79282};
    dpfl_error err;
    for (int i = 0; i < 5; i++) {
        double e;
        assert_int_equal(dpfl_rpdp_epsilon(&rp, p[i], &e, &err), DPFL_OK);
        assert_close(e, want[i], 2e-6);
    }
    /* the calibrated noise is on the safe side: epsilon at z within the target, at z - tol above it */
    double z, e;
    assert_int_equal(dpfl_rpdp_calibrate_noise(&rp, 10, 0.01, &z, &err), DPFL_OK);
    assert_true(fabs(z - 3.508) <= 0.01);
    dpfl_rpdp_params at = rp;
    at.z = z;
    assert_int_equal(dpfl_rpdp_epsilon(&at, 1.0, &e, &err), DPFL_OK);
    assert_true(e <= 10);
    at.z = z - 0.01;
    assert_int_equal(dpfl_rpdp_epsilon(&at, 1.0, &e, &err), DPFL_OK);
    assert_true(e > 10);
    dpfl_rpdp_params hp = {1.0, 1.0, 50, 15, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
    assert_int_equal(dpfl_rpdp_calibrate_noise(&hp, 10, 0.01, &z, &err), DPFL_OK);
    assert_true(fabs(z - 12.25) <= 0.01);
    hp.z = z;
    assert_int_equal(dpfl_rpdp_epsilon(&hp, 1.0, &e, &err), DPFL_OK);
    assert_true(e <= 10);
    /* exact inverse, never above the budget */
    double pr;
    assert_int_equal(dpfl_rpdp_rate_for_budget(&rp, 4.209907, &pr, &err), DPFL_OK);
    assert_true(fabs(pr - 0.1) < 1e-4);
    assert_int_equal(dpfl_rpdp_epsilon(&rp, pr, &e, &err), DPFL_OK);
    assert_true(e <= 4.209907);
}

/* section 7: the SCF fit on the paper's setting has a high R^2 and inverts monotonically */
static void scf_fit(void **state)
{
    (void)state;
    dpfl_rpdp_params rp = {3.508, 0.5, 5, 20, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
    dpfl_scf_fit f;
    dpfl_error err;
    assert_int_equal(dpfl_scf_fit_curve(&rp, &f, &err), DPFL_OK);
    assert_true(f.r2 > 0.99);
    assert_true(dpfl_scf_rate(&f, 0.1) < dpfl_scf_rate(&f, 1) && dpfl_scf_rate(&f, 1) < dpfl_scf_rate(&f, 5));
    assert_true(dpfl_scf_rate(&f, 100) == 1.0);
    assert_true(dpfl_scf_rate(&f, 0.0) == 0.0);
}

/* section 5: PriFedSync mu table */
static void prifedsync_mu_table(void **state)
{
    (void)state;
    struct {
        double z;
        long n, K, R;
        double mu;
    } t[] = {{1.0, 600, 38, 93, 2.71}, {0.9, 600, 38, 83, 3.10}, {0.75, 600, 38, 64, 3.96},
             {1.0, 600, 38, 194, 3.92}, {1.0, 600, 38, 386, 5.52}, {1.0, 500, 32, 468, 6.70}};
    dpfl_error err;
    for (int i = 0; i < 6; i++) {
        dpfl_fdp_params fp = {10, 0.5, t[i].z, 16, t[i].n, t[i].K, t[i].R, 1};
        dpfl_fdp_result r;
        assert_int_equal(dpfl_fdp_prifedsync(&fp, 1e-5, &r, &err), DPFL_OK);
        assert_true(fabs(r.mu_weak - t[i].mu) <= 0.005);
        assert_close(r.mu_strong, 3 * r.mu_weak, 1e-12);
        /* keeping the sync probability p < 1 lowers the bound below the one that ignores it (p = 1) */
        dpfl_fdp_params f1 = fp;
        f1.p = 1.0;
        dpfl_fdp_result r1;
        assert_int_equal(dpfl_fdp_prifedsync(&f1, 1e-5, &r1, &err), DPFL_OK);
        assert_true(r.eps_exact < r1.eps_exact);
    }
}

/* delta(eps) of one PriFedSync round of one step on the worst pair that actually occurs: with probability p the
 * client syncs and its fixed batch (B of n, q = B / n) holds the differing record with probability q, whose clipped
 * gradient is +C in one dataset and -C in the other (noise std 2 C z); without a sync the server sees that j did not
 * sync, an output of its own.  So delta = p * H_{e^eps}((1-q) N(0,1) + q N(a,1) || (1-q) N(0,1) + q N(-a,1)),
 * a = 1/(2z), by quadrature. */
static double prifedsync_round_delta(double p, double q, double z, double eps)
{
    const double a = 0.5 / z, h = 1e-3, ee = exp(eps);
    double sum = 0;
    for (double x = -40; x <= 40; x += h) {
        double P = (1 - q) * exp(-0.5 * x * x) + q * exp(-0.5 * (x - a) * (x - a));
        double Q = (1 - q) * exp(-0.5 * x * x) + q * exp(-0.5 * (x + a) * (x + a));
        if (P > ee * Q) sum += P - ee * Q;
    }
    return p * sum * h / sqrt(2 * M_PI);
}

/* The non-asymptotic PriFedSync bound sits above what the mechanism actually leaks on its worst pair (a lower
 * reference computed independently, one round of one step), below the bound that ignores the sync probability,
 * and gets tighter as p falls. */
static void prifedsync_exact_bound_is_bracketed(void **state)
{
    (void)state;
    dpfl_error err;
    const struct {
        double p, z;
        long n, B;
    } c[] = {{0.5, 0.8, 10, 5}, {0.2, 0.7, 4, 4}, {1.0, 1.0, 8, 2}, {0.05, 0.6, 2, 2}};
    for (int i = 0; i < 4; i++) {
        dpfl_fdp_params fp = {10, c[i].p, c[i].z, c[i].B, c[i].n, 1, 1, 1};
        dpfl_fdp_result r, r1;
        assert_int_equal(dpfl_fdp_prifedsync(&fp, 1e-5, &r, &err), DPFL_OK);
        double lo = 0, hi = 50;
        for (int it = 0; it < 60; it++) {
            double mid = 0.5 * (lo + hi);
            if (prifedsync_round_delta(c[i].p, (double)c[i].B / c[i].n, c[i].z, mid) > 1e-5) lo = mid;
            else hi = mid;
        }
        print_message("p %g z %g q %g: bound %.4f, reference %.4f\n", c[i].p, c[i].z, (double)c[i].B / c[i].n,
                      r.eps_exact, hi);
        assert_true(r.eps_exact >= hi);
        fp.p = 1.0;
        assert_int_equal(dpfl_fdp_prifedsync(&fp, 1e-5, &r1, &err), DPFL_OK);
        assert_true(r.eps_exact <= r1.eps_exact);
    }
}

/* section 9: PrivateFL noise multipliers (Opacus RDP orders; the paper's bisection stops within 0.01 in
 * epsilon, so the published z meets the target and is at most a little above ours) */
static void privatefl_calibration(void **state)
{
    (void)state;
    double ord[200];
    size_t no = 0;
    for (int x = 1; x < 100; x++) ord[no++] = 1 + x / 10.0;
    for (int k = 12; k < 64; k++) ord[no++] = k;
    dpfl_calibrate_opts co = {DPFL_ACC_RDP, {DPFL_CONV_TIGHT, ord, no, 0}, 1e-6};
    struct {
        double q;
        long T;
        double eps, z;
    } t[] = {{1.0, 60, 2, 12.5}, {1.0, 150, 8, 6.372}, {0.1, 1500, 8, 2.147}, {0.1, 600, 2, 4.0625}};
    dpfl_error err;
    for (int i = 0; i < 4; i++) {
        dpfl_event e = t[i].q >= 1 ? dpfl_event_gaussian(1, t[i].T) : dpfl_event_poisson(t[i].q, 1, t[i].T);
        double z;
        assert_int_equal(dpfl_calibrate_noise(&e, 1, t[i].eps, 1e-3, &co, &z, &err), DPFL_OK);
        assert_true(z <= t[i].z + 1e-9);
        assert_true(z >= 0.99 * t[i].z);
        e.z = t[i].z;
        double ep = eps_of(e, 1e-3, DPFL_ACC_RDP, &co.opts);
        assert_true(ep <= t[i].eps && ep >= t[i].eps - 0.01);
    }
}

/* properties: monotone in T, q, z */
static void monotonicity(void **state)
{
    (void)state;
    double base = eps_of(dpfl_event_poisson(0.01, 1.0, 1000), 1e-5, DPFL_ACC_RDP, NULL);
    assert_true(eps_of(dpfl_event_poisson(0.01, 1.0, 2000), 1e-5, DPFL_ACC_RDP, NULL) > base);
    assert_true(eps_of(dpfl_event_poisson(0.02, 1.0, 1000), 1e-5, DPFL_ACC_RDP, NULL) > base);
    assert_true(eps_of(dpfl_event_poisson(0.01, 1.2, 1000), 1e-5, DPFL_ACC_RDP, NULL) < base);
    dpfl_account_opts o = {DPFL_CONV_TIGHT, NULL, 0, 1 << 15};
    double pb = eps_of(dpfl_event_poisson(0.01, 1.0, 1000), 1e-5, DPFL_ACC_PLD, &o);
    assert_true(eps_of(dpfl_event_poisson(0.01, 1.0, 2000), 1e-5, DPFL_ACC_PLD, &o) > pb);
    assert_true(eps_of(dpfl_event_poisson(0.02, 1.0, 1000), 1e-5, DPFL_ACC_PLD, &o) > pb);
    assert_true(eps_of(dpfl_event_poisson(0.01, 1.2, 1000), 1e-5, DPFL_ACC_PLD, &o) < pb);
    /* fixed-size (WBK) grows with the batch */
    dpfl_event f1 = dpfl_event_fixed(1000, 10, 1.0, 500), f2 = dpfl_event_fixed(1000, 20, 1.0, 500);
    assert_true(eps_of(f2, 1e-5, DPFL_ACC_RDP, NULL) > eps_of(f1, 1e-5, DPFL_ACC_RDP, NULL));
}

/* PLD is the tightest, and an upper bound: plain Gaussian compositions are exact in GDP */
static void pld_vs_exact_and_rdp(void **state)
{
    (void)state;
    struct {
        double q, z;
        long T;
        double d;
    } c[] = {{0.01, 1.1, 1000, 1e-5}, {0.1, 2.0, 100, 1e-6}, {0.5, 0.8, 10, 1e-5}, {0.001, 0.6, 10000, 1e-5}};
    for (int i = 0; i < 4; i++) {
        dpfl_event e = dpfl_event_poisson(c[i].q, c[i].z, c[i].T);
        double r = eps_of(e, c[i].d, DPFL_ACC_RDP, NULL), p = eps_of(e, c[i].d, DPFL_ACC_PLD, NULL);
        assert_true(p <= r);
    }
    /* Gaussian: exact eps of sqrt(T)/z-GDP; PLD above it by < 1% */
    dpfl_event g = dpfl_event_gaussian(2.0, 10);
    double exact = dpfl_gdp_epsilon(sqrt(10.0) / 2.0, 1e-5);
    double p = eps_of(g, 1e-5, DPFL_ACC_PLD, NULL);
    assert_true(p >= exact * (1 - 1e-9) && p <= exact * 1.01);
    assert_close(eps_of(g, 1e-5, DPFL_ACC_GDP, NULL), exact, 1e-9);
    /* one step of a subsampled Gaussian: exact hockey stick in closed form */
    dpfl_event s = dpfl_event_poisson(0.3, 0.9, 1);
    double lo = 0, hi = 60;
    for (int k = 0; k < 200; k++) {
        double m = 0.5 * (lo + hi);
        if (dpfl_pld_sgm_delta_exact(0.3, 0.9, m) > 1e-5) lo = m;
        else hi = m;
    }
    double ps = eps_of(s, 1e-5, DPFL_ACC_PLD, NULL);
    assert_true(ps >= hi * (1 - 1e-9) && ps <= hi * 1.01);
    /* delta direction: PLD delta at the PLD epsilon is within the target */
    dpfl_guarantee gd;
    dpfl_error err;
    dpfl_event e = dpfl_event_poisson(0.01, 1.1, 1000);
    double pe = eps_of(e, 1e-5, DPFL_ACC_PLD, NULL);
    assert_int_equal(dpfl_account_delta(&e, 1, pe, DPFL_ACC_PLD, NULL, &gd, &err), DPFL_OK);
    assert_true(gd.delta <= 1e-5 * 1.001);
}

/* q = 1 is the plain Gaussian */
static void q_one_is_gaussian(void **state)
{
    (void)state;
    double a = eps_of(dpfl_event_poisson(1.0, 1.5, 20), 1e-5, DPFL_ACC_RDP, NULL);
    double b = eps_of(dpfl_event_gaussian(1.5, 20), 1e-5, DPFL_ACC_RDP, NULL);
    assert_close(a, b, 1e-12);
    dpfl_account_opts o = {DPFL_CONV_TIGHT, NULL, 0, 1 << 15};
    a = eps_of(dpfl_event_poisson(1.0, 1.5, 20), 1e-5, DPFL_ACC_PLD, &o);
    b = eps_of(dpfl_event_gaussian(1.5, 20), 1e-5, DPFL_ACC_PLD, &o);
    assert_close(a, b, 1e-12);
}

/* GDP conversions round-trip */
static void gdp_roundtrip(void **state)
{
    (void)state;
    double mus[] = {0.1, 0.5, 1, 2.71, 6};
    for (int i = 0; i < 5; i++) {
        /* each inversion answers its safe end: exactly within delta, not merely within rounding */
        double e = dpfl_gdp_epsilon(mus[i], 1e-5);
        assert_true(dpfl_gdp_delta(mus[i], e) <= 1e-5);
        if (e > 0) assert_close(dpfl_gdp_mu(e, 1e-5), mus[i], 1e-8);
        if (e > 0) assert_true(dpfl_gdp_delta(dpfl_gdp_mu(e, 1e-5), e) <= 1e-5);
        assert_true(dpfl_gdp_visible_delta(mus[i], 0.1, 20, dpfl_gdp_visible_epsilon(mus[i], 0.1, 20, 1e-5)) <= 1e-5);
    }
    assert_close(dpfl_gdp_tradeoff(1.0, 0.5), 0.5 * erfc(1.0 / sqrt(2.0)), 1e-12);
    assert_close(dpfl_gdp_clt_poisson(0.01, 1.1, 1e5), 0.01 * sqrt(1e5 * expm1(1 / 1.21)), 1e-12);
}

/* RDP conversions: delta(eps(delta)) <= delta; tight never looser than classic */
static void conversions(void **state)
{
    (void)state;
    size_t no;
    const double *ord = dpfl_rdp_default_orders(&no);
    double *r = malloc(no * sizeof *r);
    dpfl_event e = dpfl_event_poisson(0.02, 0.9, 3000);
    assert_int_equal(dpfl_rdp_compose(&e, 1, ord, no, r, NULL), DPFL_OK);
    double a1, a2;
    double et = dpfl_rdp_to_epsilon(ord, r, no, 1e-6, DPFL_CONV_TIGHT, &a1);
    double ec = dpfl_rdp_to_epsilon(ord, r, no, 1e-6, DPFL_CONV_CLASSIC, &a2);
    assert_true(et <= ec);
    assert_true(a1 > 1 && a2 > 1);
    assert_true(dpfl_rdp_to_delta(ord, r, no, et, DPFL_CONV_TIGHT, NULL) <= 1e-6 * (1 + 1e-9));
    free(r);
}

/* calibration: satisfies the target; 1% less noise does not */
static void calibration_safe_side(void **state)
{
    (void)state;
    dpfl_error err;
    dpfl_event e = dpfl_event_poisson(0.01, 1.0, 10000);
    for (int acc = 0; acc < 2; acc++) {
        dpfl_calibrate_opts co = {acc ? DPFL_ACC_PLD : DPFL_ACC_RDP, {DPFL_CONV_TIGHT, NULL, 0, acc ? 1 << 15 : 0},
                                  0};
        double z;
        assert_int_equal(dpfl_calibrate_noise(&e, 1, 3.0, 1e-5, &co, &z, &err), DPFL_OK);
        dpfl_event t = e;
        t.z = z;
        assert_true(eps_of(t, 1e-5, co.accountant, &co.opts) <= 3.0);
        t.z = 0.99 * z;
        assert_true(eps_of(t, 1e-5, co.accountant, &co.opts) > 3.0);
    }
    int64_t T;
    assert_int_equal(dpfl_calibrate_steps(&e, 1, 3.0, 1e-5, NULL, &T, &err), DPFL_OK);
    dpfl_event t = e;
    t.count = T;
    assert_true(eps_of(t, 1e-5, DPFL_ACC_RDP, NULL) <= 3.0);
    t.count = T + 1;
    assert_true(eps_of(t, 1e-5, DPFL_ACC_RDP, NULL) > 3.0);
    double q;
    assert_int_equal(dpfl_calibrate_rate(&e, 1, 3.0, 1e-5, NULL, &q, &err), DPFL_OK);
    t = e;
    t.q = q;
    assert_true(eps_of(t, 1e-5, DPFL_ACC_RDP, NULL) <= 3.0);
    t.q = q * 1.01;
    assert_true(eps_of(t, 1e-5, DPFL_ACC_RDP, NULL) > 3.0);
}

/* The gdp accountant's answer for a sampled event is a CLT limit, not a bound: calibrating on it gave z = 0.69 at
 * q = 0.01, T = 100, target 1 (delta 1e-5) where the truth at that z is above 2.47 (audit 5).  Refused for the noise,
 * the steps and the rate; the exact Gaussian (no sampling) still calibrates, and meets its target. */
static void calibration_refuses_an_asymptotic_accountant(void **state)
{
    (void)state;
    dpfl_error err;
    dpfl_calibrate_opts co = {DPFL_ACC_GDP, {DPFL_CONV_TIGHT, NULL, 0, 0}, 0};
    dpfl_event e = dpfl_event_poisson(0.01, 0.8, 100);
    double z, q;
    int64_t T;
    assert_int_equal(dpfl_calibrate_noise(&e, 1, 1.0, 1e-5, &co, &z, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "asymptotic"));
    assert_int_equal(dpfl_calibrate_steps(&e, 1, 1.0, 1e-5, &co, &T, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_calibrate_rate(&e, 1, 1.0, 1e-5, &co, &q, &err), DPFL_EINVAL);
    dpfl_event g = dpfl_event_gaussian(1.0, 10);
    assert_int_equal(dpfl_calibrate_noise(&g, 1, 1.0, 1e-5, &co, &z, &err), DPFL_OK);
    g.z = z;
    assert_true(eps_of(g, 1e-5, DPFL_ACC_GDP, NULL) <= 1.0);
    assert_true(eps_of(g, 1e-5, DPFL_ACC_RDP, NULL) > 1.0); /* the exact GDP answer, tighter than RDP's */
}

/* a not-private event yields no number from any accountant; bad events are rejected */
static void not_private_and_bad_input(void **state)
{
    (void)state;
    dpfl_event ev[2] = {dpfl_event_poisson(0.01, 1, 100), dpfl_event_not_private(1)};
    dpfl_guarantee g;
    dpfl_error err;
    for (int a = 0; a < 3; a++) {
        g.epsilon = -1;
        assert_int_equal(dpfl_account_epsilon(ev, 2, 1e-5, (dpfl_accountant)a, NULL, &g, &err), DPFL_ENOTPRIVATE);
        assert_true(g.epsilon == -1);
    }
    dpfl_event bad = dpfl_event_poisson(1.5, 1, 10);
    assert_int_equal(dpfl_account_epsilon(&bad, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_EINVAL);
    bad = dpfl_event_poisson(0.1, -1, 10);
    assert_int_equal(dpfl_account_epsilon(&bad, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_account_epsilon(ev, 1, 1.0, DPFL_ACC_RDP, NULL, &g, &err), DPFL_EINVAL);
    dpfl_event fx = dpfl_event_fixed(100, 10, 1, 10);
    fx.adjacency = DPFL_ADJ_ADD_REMOVE;
    assert_int_equal(dpfl_account_epsilon(&fx, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_EINVAL);
    /* PLD does not cover fixed-size sampling: it falls back to RDP, and says so */
    fx = dpfl_event_fixed(100, 10, 1, 10);
    dpfl_guarantee r;
    assert_int_equal(dpfl_account_epsilon(&fx, 1, 1e-5, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&fx, 1, 1e-5, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
    assert_int_equal(g.answered, DPFL_ACC_RDP);
    assert_true(strlen(g.fallback) > 0);
    assert_close(g.epsilon, r.epsilon, 0);
}

/* schedules: composing two halves equals one event of the full length */
static void schedules_compose(void **state)
{
    (void)state;
    dpfl_event two[2] = {dpfl_event_poisson(0.01, 1.0, 500), dpfl_event_poisson(0.01, 1.0, 500)};
    dpfl_event one = dpfl_event_poisson(0.01, 1.0, 1000);
    dpfl_guarantee a, b;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(two, 2, 1e-5, DPFL_ACC_RDP, NULL, &a, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&one, 1, 1e-5, DPFL_ACC_RDP, NULL, &b, &err), DPFL_OK);
    assert_close(a.epsilon, b.epsilon, 1e-9);
}

/* section 8: e2e client level uses z = sigma / B per step, composed over k steps to mu = sqrt(k) B / sigma */
static void e2e_client_level(void **state)
{
    (void)state;
    dpfl_e2e_params p = {50.0, 10, 1000, 4, 1.0, 1, 0, DPFL_ADJ_ZERO_OUT, 1e-5};
    dpfl_e2e_result r;
    dpfl_error err;
    assert_int_equal(dpfl_e2e(&p, &r, &err), DPFL_OK);
    assert_close(r.client_noise, 50.0 / (10 * 2.0), 1e-12); /* sigma / (B sqrt(k)) */
    /* with client rate 1 and one round: exactly the Gaussian mechanism with that multiplier */
    assert_close(r.client_epsilon, dpfl_gdp_epsilon(1.0 / r.client_noise, 1e-5), 1e-9);
    assert_true(r.client_epsilon <= eps_of(dpfl_event_gaussian(r.client_noise, 1), 1e-5, DPFL_ACC_RDP, NULL));
    p.client_adjacency = DPFL_ADJ_REPLACE_ONE;
    assert_int_equal(dpfl_e2e(&p, &r, &err), DPFL_OK);
    assert_close(r.client_noise, 50.0 / (2 * 10 * 2.0), 1e-12);
    /* server noise on the same release: mu = min(local, 2 / z2) */
    p.server_z = 1.0; /* 2 / z2 = 2 > 0.8: no change */
    assert_int_equal(dpfl_e2e(&p, &r, &err), DPFL_OK);
    assert_close(r.client_noise, 50.0 / (2 * 10 * 2.0), 1e-12);
    p.server_z = 4.0; /* 2 / z2 = 0.5 < 0.8 */
    assert_int_equal(dpfl_e2e(&p, &r, &err), DPFL_OK);
    assert_close(r.client_noise, 2.0, 1e-12);
}

/* Issue 18, item 2: with Poisson client sampling the client's own noise makes participation visible, so the
 * rounds are Poisson sampling under replacement by a special client, not add-remove.  `dpfl e2e --noise 30
 * --batch 10 --n 1000 --local-steps 10 --client-rate 0.1 --rounds 100 --delta 1e-5` said 8.74 (add-remove); the
 * exact epsilon of that pair is about 24.7 (an auditor's independent value).  Checked here: the value, that it
 * lies between the add-remove RDP value (not a bound for this pair) and the joint-convexity RDP upper bound for
 * the special-element pair, that it equals the closed form sum_j Bin(j) delta_G(mu sqrt j) recomputed in the test
 * by direct summation, and that server noise (noise on the same release) never raises it. */
static void e2e_client_sampling_is_visible(void **state)
{
    (void)state;
    dpfl_e2e_params p = {30.0, 10, 1000, 10, 0.1, 100, 0, DPFL_ADJ_ZERO_OUT, 1e-5};
    dpfl_e2e_result r;
    dpfl_error err;
    assert_int_equal(dpfl_e2e(&p, &r, &err), DPFL_OK);
    const double mu = sqrt(10.0) * 10 / 30.0;
    assert_close(r.client_mu, mu, 1e-12);
    if (fabs(r.client_epsilon - 24.7) > 0.1) {
        print_error("client epsilon %.4f, exact value about 24.7\n", r.client_epsilon);
        fail();
    }
    assert_true(r.client_epsilon > eps_of(dpfl_event_poisson(0.1, 1 / mu, 100), 1e-5, DPFL_ACC_RDP, NULL) + 10);
    /* joint convexity: e^{(a-1) D_a} <= 1 - q + q e^{(a-1) a mu^2 / 2}, per round, an upper bound */
    double best = INFINITY;
    for (double a = 1.05; a < 200; a *= 1.02) {
        double x = (a - 1) * a * mu * mu / 2;
        double rdp = 100 * log1p(0.1 * expm1(x)) / (a - 1);
        double e = rdp + log((a - 1) / a) - (log(1e-5) + log(a)) / (a - 1);
        if (e < best) best = e;
    }
    assert_true(r.client_epsilon <= best);
    /* delta at the reported epsilon, summed directly over j = 0..100 with exact binomial weights */
    double d = 0, lc = 0;
    for (int j = 0; j <= 100; j++) {
        if (j > 0) lc += log((100.0 - j + 1) / j);
        double w = exp(lc + j * log(0.1) + (100 - j) * log(0.9));
        double m = mu * sqrt((double)j), e = r.client_epsilon;
        if (j > 0) d += w * (0.5 * erfc((e / m - m / 2) / M_SQRT2) - exp(e) * 0.5 * erfc((e / m + m / 2) / M_SQRT2));
    }
    assert_true(d <= 1e-5 * (1 + 1e-6));
    assert_true(d >= 1e-5 * (1 - 1e-4)); /* and it is tight: epsilon is not padded */
    /* server noise can only help, whatever its size */
    for (double z2 = 0.1; z2 < 100; z2 *= 3) {
        dpfl_e2e_params ps = p;
        ps.server_z = z2;
        dpfl_e2e_result rs;
        assert_int_equal(dpfl_e2e(&ps, &rs, &err), DPFL_OK);
        assert_true(rs.client_epsilon <= r.client_epsilon);
    }
}

/* section 6: the stop rule never releases the crossing round */
static void stop_rule(void **state)
{
    (void)state;
    int64_t R;
    dpfl_error err;
    assert_int_equal(dpfl_stop_rule_rounds(NULL, NULL, 0.01, 1.0, 100000, 8, 1e-5, &R, &err), DPFL_OK);
    assert_true(R > 0 && R < 100000);
    size_t no;
    const double *ord = dpfl_rdp_default_orders(&no);
    double *r = malloc(no * sizeof *r);
    dpfl_event e = dpfl_event_poisson(0.01, 1.0, R);
    dpfl_rdp_compose(&e, 1, ord, no, r, NULL);
    assert_true(dpfl_rdp_to_delta(ord, r, no, 8, DPFL_CONV_TIGHT, NULL) <= 1e-5);
    e.count = R + 1;
    dpfl_rdp_compose(&e, 1, ord, no, r, NULL);
    assert_true(dpfl_rdp_to_delta(ord, r, no, 8, DPFL_CONV_TIGHT, NULL) > 1e-5);
    free(r);
}

/* extreme parameters stay finite and ordered */
static void extremes(void **state)
{
    (void)state;
    double qs[] = {1e-6, 1e-3, 0.5, 1}, zs[] = {0.3, 1, 100};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            double e1 = eps_of(dpfl_event_poisson(qs[i], zs[j], 10), 1e-5, DPFL_ACC_RDP, NULL);
            double e2 = eps_of(dpfl_event_poisson(qs[i], zs[j], 10000000), 1e-5, DPFL_ACC_RDP, NULL);
            assert_true(isfinite(e1) && isfinite(e2) && e1 >= 0 && e2 >= e1);
        }
}

/* dpfl scf leads with the guarantee: p_safe's exact epsilon is within the budget; the SCF fit's p is an estimate
 * and its exact epsilon is printed beside it (here 1.31 > 1: the fit over-shoots at small budgets). */
static void scf_cli_leads_with_the_guarantee(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/dpfl scf --noise 1 --client-rate 0.5 --local-steps 5 --rounds 20 --delta 1e-3 "
                              "--epsilon 1 --json", b ? b : "build");
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    assert_int_equal(pclose(f), 0);
    cJSON *j = cJSON_Parse(buf);
    assert_non_null(j);
    double safe = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "p_safe"), 0)->valuedouble;
    double pfit = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "p_fit"), 0)->valuedouble;
    double efit = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "p_fit_epsilon"), 0)->valuedouble;
    dpfl_rpdp_params pp = {1.0, 0.5, 5, 20, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
    double e;
    dpfl_error err;
    assert_int_equal(dpfl_rpdp_epsilon(&pp, safe, &e, &err), DPFL_OK);
    assert_true(safe > 0 && e <= 1.0);
    assert_int_equal(dpfl_rpdp_epsilon(&pp, pfit, &e, &err), DPFL_OK);
    assert_close(efit, e, 1e-9);
    assert_true(efit > 1.0);
    cJSON_Delete(j);
}

/* Help texts say what the tools do: every epsilon key dpfl fdp --json writes is named in its --help (it named
 * epsilon_*_exact keys that did not exist); train --help explains calibration and the stop rule; no file cites a
 * REFERENCES.md, which is not in the repository. */
static void help_texts_match_the_outputs(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpfl fdp --clients 100 --p 0.5 --noise 1.0 --batch 16 --n 600 --local-steps 38 "
                              "--rounds 93 --delta 1e-5 --json | grep -o '\"epsilon[a-z_]*\"' | tr -d '\"' | sort -u > "
                              "/tmp/dpfl_test_fdp_keys && %s/dpfl fdp --help > /tmp/dpfl_test_fdp_help",
             b ? b : "build", b ? b : "build");
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen("/tmp/dpfl_test_fdp_keys", "r");
    assert_non_null(f);
    char key[64];
    int n = 0;
    while (fscanf(f, "%63s", key) == 1) {
        snprintf(cmd, sizeof cmd, "grep -qw '%s' /tmp/dpfl_test_fdp_help", key);
        if (system(cmd) != 0) {
            print_error("dpfl fdp --help does not name the key %s\n", key);
            fail();
        }
        n++;
    }
    fclose(f);
    assert_true(n >= 3); /* epsilon, epsilon_clt, epsilon_strong_clt */
    unlink("/tmp/dpfl_test_fdp_keys");
    unlink("/tmp/dpfl_test_fdp_help");
    snprintf(cmd, sizeof cmd, "%s/dpfl train --help | grep -q 'stop rule'", b ? b : "build");
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(system("grep -rq 'REFERENCES\\.md' README.md docs examples src include 2>/dev/null"), 0);
}

static void cli_rejects_bad_args(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    char bin[512];
    snprintf(bin, sizeof bin, "%s/dpfl", b ? b : "build");
    if (access(bin, X_OK) != 0) {
        print_message("dpfl binary not found at %s; CLI checks skipped\n", bin);
        skip();
    }
    const char *bad[] = {"account --noise 1 --q 1.5 --steps 10 --delta 1e-5", "account --noise -1 --q 0.1 --steps 10 --delta 1e-5",
                         "account --noise 1 --q 0.1 --steps 0 --delta 1e-5", "account --noise 1 --q 0.1 --steps 10 --delta 1",
                         "account --noise 1 --q 0.1 --steps 10", "account --noise 1 --q 0.1 --steps 10 --delta 1e-5 --accountant foo",
                         "calibrate --target-epsilon 0 --delta 1e-5 --q 0.1 --steps 10",
                         "fdp --clients 10 --p 2 --noise 1 --batch 16 --n 600 --local-steps 38 --rounds 93",
                         "scf --noise 1 --client-rate 0.5 --local-steps 5 --rounds 20 --delta 1e-3 --p 1.5",
                         "scf --noise 1 --client-rate 0.5 --local-steps 5 --rounds 20 --delta 1e-3 --epsilon -1",
                         "e2e --noise 1 --batch 100 --n 50 --local-steps 1 --client-rate 1 --rounds 1 --delta 1e-5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", bin, bad[i]);
        int rc = system(cmd);
        if (rc == 0) print_error("accepted: %s\n", bad[i]);
        assert_int_not_equal(rc, 0);
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s account --noise 1.1 --q 0.01 --steps 1000 --delta 1e-5 --json >/dev/null", bin);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgm_rdp_check_values),   cmocka_unit_test(sgm_rdp_fractional),
        cmocka_unit_test(geyer_moments_accountant), cmocka_unit_test(rpdp_check_values),
        cmocka_unit_test(scf_fit), cmocka_unit_test(scf_cli_leads_with_the_guarantee),
        cmocka_unit_test(help_texts_match_the_outputs),                cmocka_unit_test(prifedsync_mu_table),
        cmocka_unit_test(prifedsync_exact_bound_is_bracketed),
        cmocka_unit_test(privatefl_calibration),  cmocka_unit_test(monotonicity),
        cmocka_unit_test(pld_vs_exact_and_rdp),   cmocka_unit_test(q_one_is_gaussian),
        cmocka_unit_test(gdp_roundtrip),          cmocka_unit_test(conversions),
        cmocka_unit_test(calibration_safe_side),  cmocka_unit_test(calibration_refuses_an_asymptotic_accountant),
        cmocka_unit_test(not_private_and_bad_input),
        cmocka_unit_test(schedules_compose),      cmocka_unit_test(e2e_client_level), cmocka_unit_test(e2e_client_sampling_is_visible),
        cmocka_unit_test(stop_rule),              cmocka_unit_test(extremes),
        cmocka_unit_test(cli_rejects_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
