/* Reading a composed privacy loss distribution (pld.c): delta at epsilon and epsilon at delta for each direction and
 * each discretization (upper: pessimistic, lower: optimistic), with every error allowance added to the upper and
 * taken from the lower; and the public entry points, which compose again -- a wider window, or the exponential tilt
 * re-aimed at the answer -- wherever an allowance is a visible part of delta at the answer. */
#include "dpfl/privacy.h"
#include "pld_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* f_k of the side at grid index i (0 where g is 0) */
static double side_f(const pld_composed *c, const pld_side *sd, size_t i)
{
    if (!(sd->g[i] > 0)) return 0;
    return exp(log(sd->g[i]) + sd->logm - c->lam * (double)(c->klo + (int64_t)i) * c->h);
}

/* delta(eps) of one direction: side 0 an upper bound, side 1 a lower bound on the true delta */
static double dir_delta(const pld_composed *c, int dir, int side, double eps)
{
    const pld_side *sd = &c->s[dir][side];
    double s = 0;
    for (size_t i = c->N; i-- > 0;) {
        double l = (double)(c->klo + (int64_t)i) * c->h;
        if (l <= eps) break;
        s += side_f(c, sd, i) * -expm1(eps - l);
    }
    double sl = dpfl_pld_side_rel(c, sd, eps) * exp(sd->logm - c->lam * eps);
    double d = side == 0 ? s * (1 + 1e-12 + sd->lost) + sd->cabs + sl : s * (1 - 1e-12 - sd->lost) - sl;
    if (isnan(d)) d = side == 0 ? 1 : 0;
    return d > 1 ? 1 : d < 0 ? 0 : d;
}

/* Side 0: an eps >= 0 with delta_upper(eps) <= delta (+inf if none); side 1: an eps with delta_lower > delta just
 * below it (so the true epsilon is at least it), or 0. */
static double dir_epsilon(const pld_composed *c, int dir, int side, double delta)
{
    const pld_side *sd = &c->s[dir][side];
    double h = c->h, emh = exp(-h);
    double top = (double)(c->klo + (int64_t)c->N - 1) * h; /* the top bin: delta there is the allowances only */
    if (side == 0 && sd->cabs + dpfl_pld_side_rel(c, sd, top) * exp(sd->logm - c->lam * top) >= delta) return INFINITY;
    double A = 0, B = 0; /* A_j = sum_{k>=j} f_k; B_j = sum_{k>=j} f_k e^{-(k-j)h} */
    for (size_t i = c->N; i-- > 0;) {
        double f = side_f(c, sd, i);
        A += f;
        B = f + emh * B;
        if (!isfinite(A) || !isfinite(B)) return side == 0 ? INFINITY : 0; /* never 0 by falling through on NaN */
        double kj = (double)(c->klo + (int64_t)i) * h; /* j h */
        double el = kj - h;                            /* the interval [el, jh): delta = A - e^{eps - jh} B */
        int last = el <= 0;
        if (last) el = 0;
        double sl = dpfl_pld_side_rel(c, sd, el) * exp(sd->logm - c->lam * el); /* the largest allowance on the interval */
        double d = A - exp(el - kj) * B;
        if (side == 0) {
            double t = (delta - sd->cabs - sl) / (1 + 1e-12 + sd->lost);
            if (t <= 0 || d > t) {
                double e = t > 0 && B > 0 ? kj + log((A - t) / B) : kj;
                if (!(e >= el)) e = el;
                if (e > kj) e = kj;
                e += 4 * DBL_EPSILON * fabs(e) + 1e-15;
                return e;
            }
        } else {
            double t = delta + sl;
            if (d * (1 - 1e-12 - sd->lost) > t) {
                double e = B > 0 ? kj + log((A - t / (1 - 1e-12 - sd->lost)) / B) : el;
                if (!(e >= el)) e = el;
                if (e > kj) e = kj;
                e -= 4 * DBL_EPSILON * fabs(e) + 1e-15;
                return e > 0 ? e : 0;
            }
        }
        if (last) break;
    }
    return 0.0;
}

/* The parts of delta(eps) that are allowances (largest side): for mass wrapped around from above the window, and
 * for the FFT's round-off and the tilted mass below it */
static void shares(const pld_composed *c, double eps, double *wrap, double *rest)
{
    *wrap = *rest = 0;
    for (int d = 0; d < c->ndir; d++)
        for (int k = 0; k < c->nside; k++) {
            const pld_side *sd = &c->s[d][k];
            double f = exp(sd->logm - c->lam * eps);
            *wrap = fmax(*wrap, dpfl_pld_tilted_above(sd, eps + (double)c->N * c->h) * f);
            *rest = fmax(*rest, sd->crel * f);
        }
}

#define PLD_ATTEMPTS 4 /* a window 3 times the RDP window's top, tilted for delta; then wider / retilted */

/* Where an allowance is a visible part of delta at the answer (or there is no answer), compose again: the wrapped
 * mass's (a loose Chernoff bound) with a window 3 times wider, the round-off's with the tilt re-aimed at the
 * answer's epsilon (the RDP order is a poor aim where the loss has heavy tails or epsilon is tiny). */
static int again(const pld_composed *c, double at, double delta, double *span, double *tilt_eps)
{
    double wrap, rest;
    shares(c, at, &wrap, &rest);
    int redo = 0;
    if (wrap > 1e-3 * delta) *span *= 3, redo = 1;
    if (rest > 1e-3 * delta && isnan(*tilt_eps) && isfinite(at)) *tilt_eps = at, redo = 1;
    return redo;
}

dpfl_status dpfl_pld_epsilon_bounds(const dpfl_event *ev, size_t nev, double delta, size_t bins, double *upper,
                                    double *lower, dpfl_error *err)
{
    if (!(delta > 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", delta);
    double e = 0, el = 0, span = 3, tilt_eps = NAN;
    for (int attempt = 0; attempt < PLD_ATTEMPTS; attempt++) {
        pld_composed c;
        dpfl_status s = dpfl_pld_compose(ev, nev, delta, tilt_eps, bins, span, lower != NULL, &c, err);
        if (s) return s;
        if (c.invalid[0]) {
            dpfl_pld_composed_free(&c);
            return dpfl_fail(err, DPFL_ENUM, "PLD discretization not valid here: %s", c.invalid);
        }
        e = 0, el = 0;
        double fin = 0; /* the largest finite answer of a direction: where to aim a retilt if e is +inf */
        for (int d = 0; d < c.ndir; d++) {
            double x = dir_epsilon(&c, d, 0, delta);
            e = fmax(e, x);
            if (isfinite(x)) fin = fmax(fin, x);
            if (lower) el = fmax(el, dir_epsilon(&c, d, 1, delta));
        }
        int redo = again(&c, isinf(e) ? fmax(fin, el) : e, delta, &span, &tilt_eps);
        dpfl_pld_composed_free(&c);
        if (!redo) break;
    }
    if (isinf(e))
        return dpfl_fail(err, DPFL_ENUM, "PLD: delta %g is below the discretization's own error allowance",
                         delta);
    *upper = e;
    if (lower) *lower = el < e ? el : e;
    return DPFL_OK;
}

dpfl_status dpfl_pld_epsilon(const dpfl_event *ev, size_t nev, double delta, size_t bins, double *eps,
                             dpfl_error *err)
{
    return dpfl_pld_epsilon_bounds(ev, nev, delta, bins, eps, NULL, err);
}

dpfl_status dpfl_pld_delta_bounds(const dpfl_event *ev, size_t nev, double epsilon, size_t bins, double *upper,
                                  double *lower, dpfl_error *err)
{
    if (!(epsilon >= 0) || isinf(epsilon))
        return dpfl_fail(err, DPFL_EINVAL, "epsilon (%g) must be finite and >= 0", epsilon);
    /* the window and the mass sent to +inf are sized by a hint: RDP's delta (an upper bound) below 1e-12 */
    double hint = 1e-12;
    {
        dpfl_guarantee g;
        dpfl_account_opts ro = {DPFL_CONV_CLASSIC, NULL, 0, 0};
        dpfl_error e2;
        if (!dpfl_account_delta(ev, nev, epsilon, DPFL_ACC_RDP, &ro, &g, &e2) && g.delta * 1e-4 < hint)
            hint = fmax(g.delta * 1e-4, 1e-290);
    }
    double d = 0, dl = 0, span = 3, tilt_eps = epsilon;
    for (int attempt = 0; attempt < PLD_ATTEMPTS; attempt++) {
        pld_composed c;
        dpfl_status s = dpfl_pld_compose(ev, nev, hint, epsilon, bins, span, lower != NULL, &c, err);
        if (s) return s;
        if (c.invalid[0]) {
            dpfl_pld_composed_free(&c);
            return dpfl_fail(err, DPFL_ENUM, "PLD discretization not valid here: %s", c.invalid);
        }
        d = 0, dl = 0;
        for (int k = 0; k < c.ndir; k++) {
            d = fmax(d, dir_delta(&c, k, 0, epsilon));
            if (lower) dl = fmax(dl, dir_delta(&c, k, 1, epsilon));
        }
        int redo = again(&c, epsilon, d, &span, &tilt_eps); /* the tilt is already aimed at epsilon */
        dpfl_pld_composed_free(&c);
        if (!redo) break;
    }
    *upper = d;
    if (lower) *lower = dl < d ? dl : d;
    return DPFL_OK;
}

dpfl_status dpfl_pld_delta(const dpfl_event *ev, size_t nev, double epsilon, size_t bins, double *delta,
                           dpfl_error *err)
{
    return dpfl_pld_delta_bounds(ev, nev, epsilon, bins, delta, NULL, err);
}
