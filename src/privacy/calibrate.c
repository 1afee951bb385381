/* Calibration by bracketing and bisection on the safe side: the returned value always satisfies the target
 * (it is the end of the final bracket that was evaluated and found <= target). */
#include "dpfl/privacy.h"
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

dpfl_status dpfl_calibrate_noise(const dpfl_event *ev, size_t nev, double target, double delta,
                                 const dpfl_calibrate_opts *o, double *z, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    double tol = o && o->tol > 0 ? o->tol : (o && o->accountant == DPFL_ACC_PLD ? 1e-4 : 1e-6);
    double lo, hi, e;
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
    s = eps_with(ev, nev, SET_Z, hi, delta, o, &e, err);
    if (s) return s;
    if (e <= target) {
        lo = hi;
        for (;;) {
            lo *= o && o->accountant == DPFL_ACC_PLD ? 0.9 : 0.5;
            if (lo < 1e-4) {
                *z = hi;
                return DPFL_OK; /* essentially no noise needed at this resolution */
            }
            s = eps_with(ev, nev, SET_Z, lo, delta, o, &e, err);
            if (s) return s;
            if (e > target) break;
            hi = lo;
        }
    } else {
        lo = hi;
        for (;;) {
            hi *= 2;
            if (hi > 1e7)
                return dpfl_fail(err, DPFL_ENUM, "no noise multiplier up to 1e7 reaches epsilon %g", target);
            s = eps_with(ev, nev, SET_Z, hi, delta, o, &e, err);
            if (s) return s;
            if (e <= target) break;
            lo = hi;
        }
    }
    while (hi - lo > tol * hi) {
        double m = 0.5 * (lo + hi);
        s = eps_with(ev, nev, SET_Z, m, delta, o, &e, err);
        if (s) return s;
        if (e <= target)
            hi = m;
        else
            lo = m;
    }
    *z = hi;
    return DPFL_OK;
}

dpfl_status dpfl_calibrate_steps(const dpfl_event *ev, size_t nev, double target, double delta,
                                 const dpfl_calibrate_opts *o, int64_t *T, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    double e;
    s = eps_with(ev, nev, SET_T, 1, delta, o, &e, err);
    if (s) return s;
    if (e > target) {
        *T = 0;
        return DPFL_OK;
    }
    int64_t lo = 1, hi = 2; /* eps(lo) <= target */
    for (;;) {
        s = eps_with(ev, nev, SET_T, (double)hi, delta, o, &e, err);
        if (s) return s;
        if (e > target) break;
        lo = hi;
        if (hi > ((int64_t)1 << 40)) {
            *T = hi;
            return DPFL_OK;
        }
        hi *= 2;
    }
    while (hi - lo > 1) {
        int64_t m = lo + (hi - lo) / 2;
        s = eps_with(ev, nev, SET_T, (double)m, delta, o, &e, err);
        if (s) return s;
        if (e <= target)
            lo = m;
        else
            hi = m;
    }
    *T = lo;
    return DPFL_OK;
}

dpfl_status dpfl_calibrate_rate(const dpfl_event *ev, size_t nev, double target, double delta,
                                const dpfl_calibrate_opts *o, double *q, dpfl_error *err)
{
    dpfl_status s = check_target(target, delta, err);
    if (s) return s;
    double tol = o && o->tol > 0 ? o->tol : 1e-6;
    double e;
    s = eps_with(ev, nev, SET_Q, 1.0, delta, o, &e, err);
    if (s) return s;
    if (e <= target) {
        *q = 1.0;
        return DPFL_OK;
    }
    double lo = 0, hi = 1; /* eps(lo) <= target < eps(hi) */
    while (hi - lo > tol * hi) {
        double m = 0.5 * (lo + hi);
        s = eps_with(ev, nev, SET_Q, m, delta, o, &e, err);
        if (s) return s;
        if (e <= target)
            lo = m;
        else
            hi = m;
    }
    *q = lo;
    return DPFL_OK;
}
