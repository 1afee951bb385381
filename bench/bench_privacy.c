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
    return 0;
}
