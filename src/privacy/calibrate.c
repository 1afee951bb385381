/* Calibration by bracketing and bisection on the safe side: the returned value always satisfies the target
 * (it is the end of the final bracket that was evaluated and found <= target).  One bisection (bisect.h, shared with
 * rpdp.c and gdp.c) serves the noise multiplier, the step count and the sampling rate. */
#include "dpfl/privacy.h"
#include "bisect.h"
#include "privacy_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SET_Z, SET_T, SET_Q } what;

static dpfl_status eps_with(const dpfl_event *ev, size_t nev, what w, double x, double delta,
                            const dpfl_calibrate_opts *o, double *eps, dpfl_error *err)
{
    dpfl_event stackev[16];
    dpfl_event *tmp = nev <= 16 ? stackev : malloc(nev * sizeof *tmp);
    if (!tmp) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (calibration)");
    memcpy(tmp, ev, nev * sizeof *tmp);
    for (size_t i = 0; i < nev; i++) {
        if (w == SET_Z) tmp[i].z = x;
        if (w == SET_T) tmp[i].count = (int64_t)x;
        if (w == SET_Q && (tmp[i].kind == DPFL_EV_POISSON || tmp[i].kind == DPFL_EV_TWO_STAGE)) tmp[i].q = x;
    }
    dpfl_guarantee g;
    dpfl_status s = dpfl_account_epsilon(tmp, nev, delta, o ? o->accountant : DPFL_ACC_RDP, o ? &o->opts : NULL,
                                         &g, err);
    if (tmp != stackev) free(tmp);
    if (s == DPFL_ENUM) {
        /* PLD could not certify at this point: treat as "over target" (safe) */
        *eps = INFINITY;
        return DPFL_OK;
    }
    if (!s && g.asymptotic) /* a CLT approximation can be below the truth: never a calibration's answer */
        return dpfl_fail(err, DPFL_EINVAL, "calibration needs an upper bound, and the gdp accountant's answer for "
                                           "these events is asymptotic (a central limit approximation, not a bound): "
                                           "use rdp or pld");
    *eps = g.epsilon;
    return s;
}

static dpfl_status check_target(double target, double delta, dpfl_error *err)
{
    if (!(target > 0) || isinf(target))
        return dpfl_fail(err, DPFL_EINVAL, "target epsilon (%g) must be finite and > 0", target);
    if (!(delta > 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", delta);
    return DPFL_OK;
}

/* One calibration: the events, the value it sets and the target. */
typedef struct {
    const dpfl_event *ev;
    size_t nev;
    what w;
    double target, delta;
    const dpfl_calibrate_opts *o;
} probe;

/* *ok = 1 if the events with x in place reach epsilon <= target (a dpfl_bisect_test over a probe) */
static dpfl_status fits(const void *ctx, double x, int *ok, dpfl_error *err)
{
    const probe *p = ctx;
    double e;
    dpfl_status s = eps_with(p->ev, p->nev, p->w, x, p->delta, p->o, &e, err);
    *ok = !s && e <= p->target;
    return s;
}

/* The shared bisection (bisect.h) over [lo, hi], exactly one of them fitting (good_hi: hi does, else lo): halve
 * until hi - lo <= tol * hi (integer: until hi - lo <= 1, midpoints rounded down).  The caller answers the end that
 * fits, so the answer always satisfies the target. */
static dpfl_status bisect(const probe *p, double *lo, double *hi, int good_hi, int integer, double tol,
                          dpfl_error *err)
{
    const dpfl_bisect_opts o = {.good_hi = good_hi, .integer = integer, .rel_tol = tol};
    return dpfl_bisect(fits, p, lo, hi, &o, err);
}

dpfl_status dpfl_calibrate_noise(const dpfl_event *ev, size_t nev, double target, double delta,
                                 const dpfl_calibrate_opts *o, double *z, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    const probe p = {ev, nev, SET_Z, target, delta, o};
    double tol = o && o->tol > 0 ? o->tol : (o && o->accountant == DPFL_ACC_PLD ? 1e-4 : 1e-6);
    double lo, hi;
    int ok;
    /* PLD is never looser than RDP, so the RDP answer is a valid upper end of the bracket */
    double start = 1.0;
    if (o && o->accountant == DPFL_ACC_PLD) {
        dpfl_calibrate_opts ro = *o;
        ro.accountant = DPFL_ACC_RDP;
        ro.tol = 1e-3;
        s = dpfl_calibrate_noise(ev, nev, target, delta, &ro, &start, err);
        if (s) return s;
    }
    hi = start;
    if ((s = fits(&p, hi, &ok, err))) return s;
    if (ok) { /* smaller until it does not fit */
        lo = hi;
        for (;;) {
            lo *= o && o->accountant == DPFL_ACC_PLD ? 0.9 : 0.5;
            if (lo < 1e-4) {
                *z = hi;
                return DPFL_OK; /* essentially no noise needed at this resolution */
            }
            if ((s = fits(&p, lo, &ok, err))) return s;
            if (!ok) break;
            hi = lo;
        }
    } else { /* larger until it fits */
        lo = hi;
        for (;;) {
            hi *= 2;
            if (hi > 1e7)
                return dpfl_fail(err, DPFL_ENUM, "no noise multiplier up to 1e7 reaches epsilon %g", target);
            if ((s = fits(&p, hi, &ok, err))) return s;
            if (ok) break;
            lo = hi;
        }
    }
    if ((s = bisect(&p, &lo, &hi, 1, 0, tol, err))) return s;
    *z = hi;
    return DPFL_OK;
}

dpfl_status dpfl_calibrate_steps(const dpfl_event *ev, size_t nev, double target, double delta,
                                 const dpfl_calibrate_opts *o, int64_t *T, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    const probe p = {ev, nev, SET_T, target, delta, o};
    int ok;
    if ((s = fits(&p, 1, &ok, err))) return s;
    if (!ok) {
        *T = 0;
        return DPFL_OK;
    }
    double lo = 1, hi = 2; /* lo fits; doubled until hi does not */
    for (;;) {
        if ((s = fits(&p, hi, &ok, err))) return s;
        if (!ok) break;
        lo = hi;
        if (hi > (double)((int64_t)1 << 40)) {
            *T = (int64_t)hi;
            return DPFL_OK;
        }
        hi *= 2;
    }
    if ((s = bisect(&p, &lo, &hi, 0, 1, 0, err))) return s;
    *T = (int64_t)lo;
    return DPFL_OK;
}

dpfl_status dpfl_calibrate_rate(const dpfl_event *ev, size_t nev, double target, double delta,
                                const dpfl_calibrate_opts *o, double *q, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    const probe p = {ev, nev, SET_Q, target, delta, o};
    double tol = o && o->tol > 0 ? o->tol : 1e-6;
    int ok;
    if ((s = fits(&p, 1.0, &ok, err))) return s;
    if (ok) {
        *q = 1.0;
        return DPFL_OK;
    }
    double lo = 0, hi = 1; /* lo fits (no sampling, nothing released), hi does not */
    if ((s = bisect(&p, &lo, &hi, 0, 0, tol, err))) return s;
    *q = lo;
    return DPFL_OK;
}
