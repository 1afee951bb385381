/* Accountant speed: the queries of issue 3, each timed as the best of a few repetitions (in-process; the
 * whole-process figure adds about 1-2 ms of start-up, see docs/privacy.md). */
#include "dpfl/privacy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef double (*bench_fn)(void);

static double r_rdp(void)
{
    dpfl_event e = dpfl_event_poisson(0.01, 1.1, 100000);
    dpfl_guarantee g;
    dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, NULL);
    return g.epsilon;
}

static double r_pld(void)
{
    dpfl_event e = dpfl_event_poisson(0.01, 1.1, 100000);
    dpfl_guarantee g;
    dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_PLD, NULL, &g, NULL);
    return g.epsilon;
}

static double r_cal_rdp(void)
{
    dpfl_event e = dpfl_event_poisson(0.01, 1.0, 100000);
    double z = 0;
    dpfl_calibrate_noise(&e, 1, 8, 1e-5, NULL, &z, NULL);
    return z;
}

static double r_cal_pld(void)
{
    dpfl_event e = dpfl_event_poisson(0.01, 1.0, 100000);
    dpfl_calibrate_opts o = {DPFL_ACC_PLD, {DPFL_CONV_TIGHT, NULL, 0, 0}, 0};
    double z = 0;
    dpfl_calibrate_noise(&e, 1, 8, 1e-5, &o, &z, NULL);
    return z;
}

static dpfl_scf_fit g_fit;
static double *g_budgets, *g_p;
#define NB 1000000

static double r_scf(void)
{
    double s = 0;
    for (size_t i = 0; i < NB; i++) {
        g_p[i] = dpfl_scf_rate(&g_fit, g_budgets[i]);
        s += g_p[i];
    }
    return s / NB;
}

/* rPDP-FL Table 3 (SCF vs BinarySearch, centralized DP-SGD on 1,000 records): the distinct budgets of Group-3
 * ([1, 2, 3]), Group-100 ([1, 1.05, ..., 5.95]) and Individual-1000 (BoundedMixGauss, 1,000 distinct values).
 * The paper gives no noise or step count for it: lambda = 1, T = 1000 steps, z = 1.1, delta = 1e-5 here (the cost
 * of one epsilon*(p) does not depend on them).  Three ways to budgets -> p:
 *   fit       the paper's SCF: the curve fit, then its closed-form inverse per budget (an estimate)
 *   safe      dpfl's: the fit, then the exact safe inverse (dpfl_rpdp_safe_rate) per distinct budget, or per
 *             lattice level (256) when there are more, as training does
 *   bisect    BinarySearch (Boenisch et al.): bisection on the exact epsilon to 1e-6 per distinct budget */
static dpfl_rpdp_params t3 = {1.1, 1.0, 1, 1000, 1e-5, DPFL_BOUND_RPDP, 0, NULL, 0};
static double t3_budgets[1000];
static int t3_n;

static double r_t3_fit(void)
{
    dpfl_scf_fit fit;
    if (dpfl_scf_fit_curve(&t3, &fit, NULL)) return NAN;
    double s = 0;
    for (int i = 0; i < t3_n; i++) s += dpfl_scf_rate(&fit, t3_budgets[i]);
    return s / t3_n;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double r_t3_safe(void)
{
    dpfl_scf_fit fit;
    if (dpfl_scf_fit_curve(&t3, &fit, NULL)) return NAN;
    double lv[1000], e1, lo = 0, elo = 0, s = 0, p;
    int n = t3_n;
    for (int i = 0; i < n; i++) lv[i] = t3_budgets[i];
    qsort(lv, (size_t)n, sizeof *lv, cmp_d);
    if (n > 256) { /* the lattice training uses */
        double a = lv[0], b = lv[n - 1];
        for (int k = 0; k < 256; k++) lv[k] = a * pow(b / a, k / 255.0);
        n = 256;
    }
    dpfl_rpdp_epsilon(&t3, 1.0, &e1, NULL);
    for (int i = 0; i < n; i++) {
        if (dpfl_rpdp_safe_rate(&t3, &fit, lv[i], e1, lo, elo, &p, NULL)) return NAN;
        if (p > lo) {
            lo = p;
            dpfl_rpdp_epsilon(&t3, lo, &elo, NULL);
        }
        s += p;
    }
    return s / n;
}

static double r_t3_bisect(void)
{
    double s = 0, p;
    for (int i = 0; i < t3_n; i++) {
        if (dpfl_rpdp_rate_for_budget(&t3, t3_budgets[i], &p, NULL)) return NAN;
        s += p;
    }
    return s / t3_n;
}

static void run(const char *name, bench_fn f, int reps, const char *unit)
{
    double best = INFINITY, v = 0;
    for (int i = 0; i < reps; i++) {
        double t0 = dpfl_now();
        v = f();
        double t = dpfl_now() - t0;
        if (t < best) best = t;
    }
    printf("%-44s %10.2f ms   %s = %.6g\n", name, best * 1e3, unit, v);
}

int main(void)
{
    printf("privacy accountants (best of repetitions)\n");
    run("rdp    eps  q=0.01 z=1.1 T=1e5 d=1e-5", r_rdp, 20, "epsilon");
    run("pld    eps  q=0.01 z=1.1 T=1e5 d=1e-5", r_pld, 5, "epsilon");
    run("calibrate rdp  eps=8 q=0.01 T=1e5 d=1e-5", r_cal_rdp, 5, "z");
    run("calibrate pld  eps=8 q=0.01 T=1e5 d=1e-5", r_cal_pld, 2, "z");
    dpfl_rpdp_params rp = {3.508, 0.5, 5, 20, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
    double t0 = dpfl_now();
    if (dpfl_scf_fit_curve(&rp, &g_fit, NULL)) {
        fprintf(stderr, "scf fit failed\n");
        return 1;
    }
    printf("%-44s %10.2f ms   r2 = %.6f\n", "scf fit (190 grid points, rPDP bound)", (dpfl_now() - t0) * 1e3, g_fit.r2);
    g_budgets = malloc(NB * sizeof *g_budgets);
    g_p = malloc(NB * sizeof *g_p);
    if (!g_budgets || !g_p) return 1;
    for (size_t i = 0; i < NB; i++) g_budgets[i] = (i % 10 < 7) ? 0.1 : (i % 10 < 9 ? 1.0 : 5.0);
    run("scf    1e6 budgets -> p (after the fit)", r_scf, 5, "mean p");
    free(g_budgets);
    free(g_p);
    printf("rPDP-FL Table 3 (distinct budgets -> p; paper: SCF 13.1 / 13.4 / 14.0 s, BinarySearch 1.69 / 52.5 / 598 s)\n");
    const char *names[3] = {"Group-3", "Group-100", "Individual-1000"};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 7);
    for (int sc = 0; sc < 3; sc++) {
        if (sc == 0) {
            t3_n = 3;
            t3_budgets[0] = 1, t3_budgets[1] = 2, t3_budgets[2] = 3;
        } else if (sc == 1) {
            t3_n = 100;
            for (int i = 0; i < 100; i++) t3_budgets[i] = 1 + 0.05 * i;
        } else {
            t3_n = 1000;
            dpfl_budgets_generate(DPFL_PREF_MIXGAUSS, 1000, 0.1, 10, 1, &r, t3_budgets);
        }
        char name[64];
        snprintf(name, sizeof name, "%s fit (paper's SCF)", names[sc]);
        run(name, r_t3_fit, 3, "mean p");
        snprintf(name, sizeof name, "%s safe (dpfl)", names[sc]);
        run(name, r_t3_safe, 1, "mean p");
        snprintf(name, sizeof name, "%s bisect (BinarySearch)", names[sc]);
        run(name, r_t3_bisect, 1, "mean p");
    }
    return 0;
}
