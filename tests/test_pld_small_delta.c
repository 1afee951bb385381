/* PLD at small delta, and the bracket [epsilon_lower, epsilon] around the true epsilon (issue 32, item 5).
 *
 * Referee values: tests/reference/sgm_delta_ref.py (numpy/scipy, shares nothing with src/privacy and uses no
 * discretization: the composed delta(eps) by inversion of the loss's two-sided Laplace transform along a line
 * through the saddle point), run as
 *     python3 tests/reference/sgm_delta_ref.py 1e-3 1 10000 1e-5 1e-8 1e-10 1e-12 1e-15
 * (q 1e-3, z 1, T 1e4; the remove direction is the larger one throughout).  Google dp_accounting's PLD (a
 * pessimistic discretization) gives 0.8538 at 1e-10, just above the referee's 0.853353. */
#include "testutil.h"
#include "dpfl/privacy.h"

#include <time.h>

static const struct {
    double delta, eps;
} REF[] = {{1e-5, 0.475761289}, {1e-8, 0.696564324}, {1e-10, 0.853352603}, {1e-12, 1.184483802},
           {1e-15, 1.834917607}};

static dpfl_guarantee pld(dpfl_event e, double delta)
{
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(&e, 1, delta, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    return g;
}

/* PLD answers down to 1e-15 (no RDP fallback), within 1% of the referee, with the referee inside [lower, upper] */
static void small_delta_against_referee(void **state)
{
    (void)state;
    dpfl_event e = dpfl_event_poisson(1e-3, 1.0, 10000);
    for (size_t i = 0; i < sizeof REF / sizeof REF[0]; i++) {
        dpfl_guarantee g = pld(e, REF[i].delta);
        if (g.answered != DPFL_ACC_PLD) print_error("delta %g: fell back: %s\n", REF[i].delta, g.fallback);
        assert_int_equal(g.answered, DPFL_ACC_PLD);
        if (!(g.epsilon >= REF[i].eps * (1 - 1e-7) && g.epsilon_lower <= REF[i].eps * (1 + 1e-7)))
            print_error("delta %g: [%.9f, %.9f] misses the referee %.9f\n", REF[i].delta, g.epsilon_lower,
                        g.epsilon, REF[i].eps);
        assert_true(g.epsilon >= REF[i].eps * (1 - 1e-7));       /* an upper bound */
        assert_true(g.epsilon_lower <= REF[i].eps * (1 + 1e-7)); /* a lower bound */
        assert_true(g.epsilon <= REF[i].eps * 1.01);              /* tight: within 1% */
        assert_true(g.epsilon_lower >= REF[i].eps * 0.99);
    }
}

/* the same through the delta entry points: at the referee's epsilon, delta's bracket holds the target */
static void delta_bracket_against_referee(void **state)
{
    (void)state;
    dpfl_event e = dpfl_event_poisson(1e-3, 1.0, 10000);
    for (size_t i = 2; i < sizeof REF / sizeof REF[0]; i++) {
        double up, lo;
        dpfl_error err;
        assert_int_equal(dpfl_pld_delta_bounds(&e, 1, REF[i].eps, 0, &up, &lo, &err), DPFL_OK);
        assert_true(lo <= REF[i].delta * (1 + 1e-5) && up >= REF[i].delta * (1 - 1e-5));
        assert_true(up <= REF[i].delta * 1.1 && lo >= REF[i].delta * 0.9);
    }
}

/* one step: the closed form is exact; T = 10 Gaussian steps: sqrt(T)/z-GDP is exact */
static void bracket_holds_exact_values(void **state)
{
    (void)state;
    const double qs[] = {1e-3, 0.02, 0.3, 0.9}, zs[] = {0.7, 1.0, 3.0}, ds[] = {1e-4, 1e-9, 1e-14};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int k = 0; k < 3; k++) {
                double q = qs[a], z = zs[b], d = ds[k];
                double lo = 0, hi = 100;
                for (int it = 0; it < 200; it++) {
                    double m = 0.5 * (lo + hi);
                    if (dpfl_pld_sgm_delta_exact(q, z, m) > d) lo = m;
                    else hi = m;
                }
                dpfl_event e = dpfl_event_poisson(q, z, 1);
                double up, low;
                dpfl_error err;
                if (dpfl_pld_epsilon_bounds(&e, 1, d, 0, &up, &low, &err)) continue; /* may refuse, never lie */
                if (!(low <= hi * (1 + 1e-9) + 1e-12 && up >= lo * (1 - 1e-9)))
                    print_error("q %g z %g delta %g: [%.9g, %.9g] misses the exact %.9g\n", q, z, d, low, up, hi);
                assert_true(low <= hi * (1 + 1e-9) + 1e-12);
                assert_true(up >= lo * (1 - 1e-9));
            }
    dpfl_event g = dpfl_event_gaussian(2.0, 10);
    for (int k = 0; k < 3; k++) {
        double exact = dpfl_gdp_epsilon(sqrt(10.0) / 2.0, ds[k]), up, low;
        dpfl_error err;
        assert_int_equal(dpfl_pld_epsilon_bounds(&g, 1, ds[k], 0, &up, &low, &err), DPFL_OK);
        assert_true(low <= exact * (1 + 1e-9) && up >= exact * (1 - 1e-9));
        assert_true(up <= exact * 1.01 && low >= exact * 0.99);
    }
}

/* smaller delta, larger epsilon (both ends), and lower <= upper everywhere */
static void monotone_in_delta(void **state)
{
    (void)state;
    const dpfl_event evs[] = {dpfl_event_poisson(1e-3, 1.0, 10000), dpfl_event_poisson(0.01, 0.8, 2000),
                              dpfl_event_poisson(0.2, 2.0, 50)};
    for (int i = 0; i < 3; i++) {
        double pu = 0, pl = 0;
        for (int k = 4; k <= 15; k++) {
            dpfl_guarantee g = pld(evs[i], pow(10, -k));
            assert_true(g.epsilon_lower <= g.epsilon);
            if (g.answered == DPFL_ACC_PLD) {
                assert_true(g.epsilon_lower > 0);
                assert_true(g.epsilon >= pu * (1 - 1e-9) && g.epsilon_lower >= pl * (1 - 1e-9));
                pu = g.epsilon, pl = g.epsilon_lower;
            }
        }
    }
}

/* epsilon_lower is 0 wherever PLD did not answer an epsilon */
static void lower_zero_when_not_pld(void **state)
{
    (void)state;
    dpfl_event e = dpfl_event_poisson(1e-3, 1.0, 10000);
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-10, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_true(g.epsilon_lower == 0);
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-10, DPFL_ACC_GDP, NULL, &g, &err), DPFL_OK);
    assert_true(g.epsilon_lower == 0);
    assert_int_equal(dpfl_account_delta(&e, 1, 1.0, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    assert_true(g.epsilon_lower == 0);
    dpfl_event f = dpfl_event_fixed(1000, 10, 1.0, 100); /* PLD does not cover it: RDP answers */
    assert_int_equal(dpfl_account_epsilon(&f, 1, 1e-6, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
    assert_int_equal(g.answered, DPFL_ACC_RDP);
    assert_true(g.epsilon_lower == 0);
}

/* interactive: q 1e-3, z 1, T 1e4 at delta 1e-15 in well under a second of CPU */
static void small_delta_is_interactive(void **state)
{
    (void)state;
    clock_t t0 = clock();
    dpfl_guarantee g = pld(dpfl_event_poisson(1e-3, 1.0, 10000), 1e-15);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("q 1e-3 z 1 T 1e4 delta 1e-15: [%.6f, %.6f] in %.3f s CPU\n", g.epsilon_lower, g.epsilon, s);
    assert_true(s < 2.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_delta_against_referee), cmocka_unit_test(delta_bracket_against_referee),
        cmocka_unit_test(bracket_holds_exact_values),  cmocka_unit_test(monotone_in_delta),
        cmocka_unit_test(lower_zero_when_not_pld),     cmocka_unit_test(small_delta_is_interactive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
