/* rPDP-FL per-record budgets (rPDP-FL, Theorem 1 and SCF): epsilon*(p) of two-stage sampling, its exact inverse,
 * Simulation-CurveFitting (SCF) and the noise calibration of the paper. */
#include "dpfl/privacy.h"
#include "core/parallel.h"
#include "bisect.h"
#include "privacy_internal.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define RPDP_NORD 993
static double rpdp_orders[RPDP_NORD];
static pthread_once_t rpdp_orders_once = PTHREAD_ONCE_INIT;

static void rpdp_orders_init(void)
{
    for (int i = 0; i < RPDP_NORD; i++) rpdp_orders[i] = 2 + i; /* 2 .. 994, as the paper's code */
}

static dpfl_status check(const dpfl_rpdp_params *pp, dpfl_error *err)
{
    if (!(pp->z > 0) || isinf(pp->z)) return dpfl_fail(err, DPFL_EINVAL, "noise (%g) must be > 0", pp->z);
    if (!(pp->lambda >= 0 && pp->lambda <= 1))
        return dpfl_fail(err, DPFL_EINVAL, "client rate (%g) must be in [0, 1]", pp->lambda);
    if (pp->inner <= 0 || pp->rounds <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "local steps and rounds must be > 0");
    if (!(pp->delta > 0 && pp->delta < 1))
        return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", pp->delta);
    return DPFL_OK;
}

const double *dpfl_rpdp_orders(size_t *n)
{
    pthread_once(&rpdp_orders_once, rpdp_orders_init);
    *n = RPDP_NORD;
    return rpdp_orders;
}

dpfl_status dpfl_rpdp_epsilon(const dpfl_rpdp_params *pp, double p, double *eps, dpfl_error *err)
{
    dpfl_status s = check(pp, err);
    if (s) return s;
    if (!(p >= 0 && p <= 1)) return dpfl_fail(err, DPFL_EINVAL, "sampling probability p (%g) must be in [0, 1]", p);
    if (p == 0) {
        *eps = 0;
        return DPFL_OK;
    }
    dpfl_event e = dpfl_event_two_stage(pp->lambda, p, pp->z, pp->inner, pp->rounds, pp->bound);
    dpfl_account_opts o = {DPFL_CONV_TIGHT, NULL, 0, 0};
    if (pp->use_pld) {
        /* PLD of the two-stage round ((1 - lambda) no output + lambda K steps, pld.c) composed over the rounds,
         * with RDP (the bound chosen) as its floor of trust: whichever is smaller */
        e.bound = pp->bound;
        dpfl_guarantee pg;
        dpfl_status ps = dpfl_account_epsilon(&e, 1, pp->delta, DPFL_ACC_PLD, NULL, &pg, err);
        if (ps) return ps;
        *eps = pg.epsilon;
        return DPFL_OK;
    }
    if (pp->orders) {
        o.orders = pp->orders;
        o.norders = pp->norders;
    } else if (pp->bound == DPFL_BOUND_RPDP) {
        o.orders = dpfl_rpdp_orders(&o.norders);
    }
    dpfl_guarantee g;
    s = dpfl_account_epsilon(&e, 1, pp->delta, DPFL_ACC_RDP, &o, &g, err);
    if (s) return s;
    *eps = g.epsilon;
    return DPFL_OK;
}

/* A bisection test (bisect.h): *ok = 1 if epsilon*(p) <= eps with x as the rate p (set_z: as the noise, at p = 1). */
typedef struct {
    const dpfl_rpdp_params *pp;
    double eps;
    int set_z;
} rpdp_test;

static dpfl_status rpdp_fits(const void *ctx, double x, int *ok, dpfl_error *err)
{
    const rpdp_test *t = ctx;
    dpfl_rpdp_params q = *t->pp;
    if (t->set_z) q.z = x;
    double e;
    dpfl_status s = dpfl_rpdp_epsilon(&q, t->set_z ? 1.0 : x, &e, err);
    *ok = !s && e <= t->eps;
    return s;
}

dpfl_status dpfl_rpdp_rate_for_budget(const dpfl_rpdp_params *pp, double eps, double *p, dpfl_error *err)
{
    double e;
    dpfl_status s = dpfl_rpdp_epsilon(pp, 1.0, &e, err);
    if (s) return s;
    if (e <= eps) {
        *p = 1;
        return DPFL_OK;
    }
    double lo = 0, hi = 1; /* lo fits (nothing sampled), hi does not; the answer is lo, never above the budget */
    const rpdp_test t = {pp, eps, 0};
    const dpfl_bisect_opts o = {.good_hi = 0, .abs_tol = 1e-6};
    if ((s = dpfl_bisect(rpdp_fits, &t, &lo, &hi, &o, err))) return s;
    *p = lo;
    return DPFL_OK;
}

/* Regula falsi (Illinois) from the bracket [lo, hi]; epsilon(lo) <= eps always holds, so the answer never passes
 * the budget.  The SCF estimate, when given, narrows the bracket first.  Not the shared bisection (bisect.h): the
 * secant steps need fewer epsilon evaluations (each over 993 orders) for the same safe end. */
dpfl_status dpfl_rpdp_safe_rate(const dpfl_rpdp_params *pp, const dpfl_scf_fit *fit, double eps, double eps1,
                                double lo, double eps_lo, double *p, dpfl_error *err)
{
    if (eps1 <= eps) {
        *p = 1.0;
        return DPFL_OK;
    }
    double hi = 1.0, flo = eps_lo - eps, fhi = eps1 - eps, e; /* flo <= 0 < fhi */
    double g = fit ? dpfl_scf_rate(fit, eps) : 0.0;
    dpfl_status st;
    if (g > lo && g < hi) {
        if ((st = dpfl_rpdp_epsilon(pp, g, &e, err))) return st;
        if (e <= eps) lo = g, flo = e - eps;
        else hi = g, fhi = e - eps;
    }
    int side = 0;
    for (int it = 0; it < 100 && hi - lo > 1e-4 * hi && hi > DPFL_RPDP_P_FLOOR; it++) {
        double m = lo - flo * (hi - lo) / (fhi - flo);
        if (!(m > lo && m < hi) || it % 8 == 7) m = 0.5 * (lo + hi); /* guard, and a bisection now and then */
        if ((st = dpfl_rpdp_epsilon(pp, m, &e, err))) return st;
        if (e <= eps) {
            lo = m, flo = e - eps;
            if (side == -1) fhi *= 0.5; /* Illinois: the stuck end's value halved */
            side = -1;
        } else {
            hi = m, fhi = e - eps;
            if (side == 1) flo *= 0.5;
            side = 1;
        }
    }
    *p = lo >= DPFL_RPDP_P_FLOOR ? lo : 0.0;
    return DPFL_OK;
}

/* ---------------------------------------------------------------- SCF */
typedef struct {
    const double *p, *e;
    size_t n;
} fit_data;

static int f_res(const gsl_vector *x, void *data, gsl_vector *f)
{
    fit_data *d = data;
    double a = gsl_vector_get(x, 0), b = gsl_vector_get(x, 1), c = gsl_vector_get(x, 2);
    for (size_t i = 0; i < d->n; i++) gsl_vector_set(f, i, exp(a * d->p[i] + b) + c - d->e[i]);
    return GSL_SUCCESS;
}

static int f_jac(const gsl_vector *x, void *data, gsl_matrix *J)
{
    fit_data *d = data;
    double a = gsl_vector_get(x, 0), b = gsl_vector_get(x, 1);
    for (size_t i = 0; i < d->n; i++) {
        double v = exp(a * d->p[i] + b);
        gsl_matrix_set(J, i, 0, d->p[i] * v);
        gsl_matrix_set(J, i, 1, v);
        gsl_matrix_set(J, i, 2, 1.0);
    }
    return GSL_SUCCESS;
}

#define SCF_MAX 256

typedef struct {
    const dpfl_rpdp_params *pp;
    const double *p;
    double *e;
    dpfl_status *st;
} scf_points;

static void scf_points_range(void *ctx, int64_t lo, int64_t hi)
{
    scf_points *j = ctx;
    for (int64_t i = lo; i < hi; i++) j->st[i] = dpfl_rpdp_epsilon(j->pp, j->p[i], &j->e[i], NULL);
}

/* epsilon*(p) at the simulation points, spread over the machine's cores (each point is independent, so the
 * values do not depend on the thread count); the first point runs alone so that a bad parameter is reported once
 * with its message. */
static dpfl_status scf_simulate(const dpfl_rpdp_params *pp, const double *p, double *e, size_t n, dpfl_error *err)
{
    dpfl_status st[SCF_MAX], s = dpfl_rpdp_epsilon(pp, p[0], &e[0], err);
    if (s) return s;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    dpfl_par *par = dpfl_par_create(cpus > 16 ? 16 : cpus > 1 ? (int)cpus : 1);
    scf_points j = {pp, p + 1, e + 1, st};
    dpfl_par_for(par, (int64_t)n - 1, scf_points_range, &j);
    dpfl_par_free(par);
    for (size_t i = 0; i + 1 < n; i++)
        if (st[i]) return dpfl_rpdp_epsilon(pp, p[i + 1], &e[i + 1], err); /* again, for its message */
    return DPFL_OK;
}

dpfl_status dpfl_scf_fit_curve(const dpfl_rpdp_params *pp, dpfl_scf_fit *fit, dpfl_error *err)
{
    double p[SCF_MAX], e[SCF_MAX];
    size_t n = 0;
    for (int i = 1; i <= 100; i++) p[n++] = 0.001 * i;
    for (int i = 11; i <= 100; i++) p[n++] = 0.01 * i;
    dpfl_status s = scf_simulate(pp, p, e, n, err);
    if (s) return s;
    fit->npoints = n;
    fit->p_min = p[0];
    fit->eps_min = e[0];
    fit->eps_max = e[n - 1];
    /* start: c below the smallest value, exponential through the end points */
    double c0 = e[0] - 0.1 * (e[n - 1] - e[0]) - 1e-3;
    double b0 = log(e[0] - c0) - 0.0;
    double a0 = (log(e[n - 1] - c0) - b0) / (p[n - 1] - p[0]);
    b0 -= a0 * p[0];
    fit_data d = {p, e, n};
    gsl_multifit_nlinear_fdf fdf = {f_res, f_jac, NULL, n, 3, &d, 0, 0, 0};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, n, 3);
    if (!w) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (SCF fit)");
    gsl_vector *x = gsl_vector_alloc(3);
    gsl_vector_set(x, 0, a0);
    gsl_vector_set(x, 1, b0);
    gsl_vector_set(x, 2, c0);
    gsl_multifit_nlinear_init(x, &fdf, w);
    int info;
    int st = gsl_multifit_nlinear_driver(500, 1e-12, 1e-12, 1e-12, NULL, NULL, &info, w);
    gsl_vector *xs = gsl_multifit_nlinear_position(w);
    fit->a = gsl_vector_get(xs, 0);
    fit->b = gsl_vector_get(xs, 1);
    fit->c = gsl_vector_get(xs, 2);
    gsl_vector_free(x);
    gsl_multifit_nlinear_free(w);
    if (st != GSL_SUCCESS && st != GSL_EMAXITER)
        return dpfl_fail(err, DPFL_ENUM, "SCF fit failed (GSL status %d)", st);
    double mean = 0, ss = 0, sr = 0;
    for (size_t i = 0; i < n; i++) mean += e[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double r = exp(fit->a * p[i] + fit->b) + fit->c - e[i];
        sr += r * r;
        ss += (e[i] - mean) * (e[i] - mean);
    }
    fit->r2 = ss > 0 ? 1 - sr / ss : 1;
    return DPFL_OK;
}

double dpfl_scf_rate(const dpfl_scf_fit *fit, double eps)
{
    if (eps >= fit->eps_max) return 1.0;
    if (eps <= fit->eps_min) return 0.0;
    double v = eps - fit->c;
    if (v <= 0) return 0.0;
    double p = (log(v) - fit->b) / fit->a;
    if (!(p > 0)) return 0.0;
    return p > 1 ? 1.0 : p;
}

dpfl_status dpfl_rpdp_calibrate_noise(const dpfl_rpdp_params *pp, double max_eps, double tol, double *z,
                                      dpfl_error *err)
{
    if (!(max_eps > 0)) return dpfl_fail(err, DPFL_EINVAL, "maximum epsilon (%g) must be > 0", max_eps);
    if (!(tol > 0)) tol = 0.01;
    dpfl_rpdp_params q = *pp;
    double e, lo = 0, hi = 1;
    for (;;) { /* doubled until it fits */
        q.z = hi;
        dpfl_status s = dpfl_rpdp_epsilon(&q, 1.0, &e, err);
        if (s) return s;
        if (e <= max_eps) break;
        lo = hi;
        hi *= 2;
        if (hi > 1e6) return dpfl_fail(err, DPFL_ENUM, "no noise up to 1e6 reaches epsilon %g", max_eps);
    }
    /* hi fits, lo does not (or is 0); the answer is hi, never below the noise the budget needs */
    const rpdp_test t = {pp, max_eps, 1};
    const dpfl_bisect_opts o = {.good_hi = 1, .abs_tol = tol};
    dpfl_status s = dpfl_bisect(rpdp_fits, &t, &lo, &hi, &o, err);
    if (s) return s;
    *z = hi;
    return DPFL_OK;
}
