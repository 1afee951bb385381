/* One entry point for every accountant: events in, (epsilon, delta) out. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

const char *dpfl_accountant_name(dpfl_accountant a)
{
    switch (a) {
    case DPFL_ACC_RDP: return "rdp";
    case DPFL_ACC_PLD: return "pld";
    case DPFL_ACC_GDP: return "gdp";
    }
    return "unknown";
}

/* GDP mu of the composition: exact for plain Gaussians, CLT (asymptotic) for sampled events. */
static dpfl_status gdp_mu(const dpfl_event *ev, size_t nev, double *mu, int *asym, dpfl_error *err)
{
    double s = 0;
    *asym = 0;
    for (size_t i = 0; i < nev; i++) {
        const dpfl_event *e = &ev[i];
        double T = (double)e->count, m;
        if (e->count == 0) continue;
        if (e->z <= 0) {
            *mu = INFINITY;
            return DPFL_OK;
        }
        switch (e->kind) {
        case DPFL_EV_GAUSSIAN: m = sqrt(T) / e->z; break;
        case DPFL_EV_POISSON:
            if (e->q >= 1) {
                m = sqrt(T) / e->z;
            } else {
                if (e->adjacency == DPFL_ADJ_REPLACE_ONE)
                    return dpfl_fail(err, DPFL_EINVAL, "GDP accountant: Poisson sampling under replace-one "
                                                       "adjacency has no CLT here; use rdp");
                m = dpfl_gdp_clt_poisson(e->q, e->z, T);
                *asym = 1;
            }
            break;
        case DPFL_EV_FIXED:
            if (e->batch == e->n) {
                m = sqrt(T) / e->z;
            } else {
                m = dpfl_gdp_clt_fixed((double)e->batch, (double)e->n, e->z, T);
                *asym = 1;
            }
            break;
        default:
            return dpfl_fail(err, DPFL_EINVAL, "GDP accountant: a two-stage event only alone and at record rate 1 "
                                               "(Gaussian participations, exact); no Skellam; use rdp or pld");
        }
        s += m * m;
    }
    *mu = sqrt(s);
    return DPFL_OK;
}

/* One two-stage event whose participations are plain Gaussians (record rate 1): T rounds, each taken part in with
 * probability lambda, visibly, each then mu = sqrt(inner) / z -- the exact binomial mixture of gdp.c. */
static int gdp_visible(const dpfl_event *ev, size_t nev, double *mu)
{
    if (nev != 1 || ev->kind != DPFL_EV_TWO_STAGE || ev->q < 1) return 0;
    *mu = ev->z > 0 ? sqrt((double)ev->inner) / ev->z : INFINITY;
    return 1;
}

typedef struct {
    const dpfl_event *ev;
    size_t nev;
} rdp_ctx;

static double rdp_at(double alpha, void *ctx)
{
    rdp_ctx *c = ctx;
    double r;
    if (dpfl_rdp_compose(c->ev, c->nev, &alpha, 1, &r, NULL)) return INFINITY;
    return r;
}

static dpfl_status rdp_curve(const dpfl_event *ev, size_t nev, const dpfl_account_opts *o, const double **orders,
                             size_t *n, double **rdp, dpfl_error *err)
{
    if (o && o->orders) {
        *orders = o->orders;
        *n = o->norders;
    } else {
        *orders = dpfl_rdp_default_orders(n);
    }
    *rdp = malloc(*n * sizeof **rdp);
    if (!*rdp) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (RDP curve)");
    dpfl_status s = dpfl_rdp_compose(ev, nev, *orders, *n, *rdp, err);
    if (s) {
        free(*rdp);
        *rdp = NULL;
    }
    return s;
}

/* PLD answers for Gaussian, Poisson-sampled Gaussian and two-stage events under add-remove / zero-out only */
static const char *pld_unsupported(const dpfl_event *ev, size_t nev)
{
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].count == 0) continue;
        if (ev[i].kind != DPFL_EV_GAUSSIAN && ev[i].kind != DPFL_EV_POISSON && ev[i].kind != DPFL_EV_TWO_STAGE)
            return "PLD covers Gaussian, Poisson-sampled Gaussian and two-stage events only";
        if (ev[i].kind == DPFL_EV_POISSON && ev[i].q < 1 && ev[i].adjacency == DPFL_ADJ_REPLACE_ONE)
            return "PLD does not cover Poisson sampling under replace-one";
    }
    return NULL;
}

/* PLD with RDP as the floor of trust: a PLD failure of its discretization (or an event it does not cover) falls
 * back to RDP, and a valid PLD number larger than RDP's is replaced by it. want_delta: at `x` = epsilon. */
static dpfl_status pld_or_rdp(const dpfl_event *ev, size_t nev, double x, int want_delta, const dpfl_account_opts *opts,
                              dpfl_guarantee *out, dpfl_error *err)
{
    const char *why = pld_unsupported(ev, nev);
    double v = INFINITY, lower = 0;
    dpfl_error perr;
    dpfl_status s = DPFL_ENUM;
    if (!why) {
        s = want_delta ? dpfl_pld_delta(ev, nev, x, opts ? opts->pld_bins : 0, &v, &perr)
                       : dpfl_pld_epsilon_bounds(ev, nev, x, opts ? opts->pld_bins : 0, &v, &lower, &perr);
        if (s == DPFL_EINVAL || s == DPFL_ENOMEM || s == DPFL_ENOTPRIVATE) return dpfl_fail(err, s, "%s", perr.msg);
        if (s) why = perr.msg;
    }
    dpfl_guarantee r;
    dpfl_account_opts ro = {0};
    if (opts) ro.conversion = opts->conversion;
    dpfl_status rs = want_delta ? dpfl_account_delta(ev, nev, x, DPFL_ACC_RDP, &ro, &r, err)
                                : dpfl_account_epsilon(ev, nev, x, DPFL_ACC_RDP, &ro, &r, err);
    if (rs) return rs;
    double rv = want_delta ? r.delta : r.epsilon;
    if (!s && v <= rv) {
        if (want_delta) {
            out->delta = v;
        } else {
            out->epsilon = v;
            out->epsilon_lower = lower; /* the optimistic discretization: the truth lies in [lower, v] */
        }
        out->answered = DPFL_ACC_PLD;
        return DPFL_OK;
    }
    *out = r;
    out->answered = DPFL_ACC_RDP;
    out->epsilon_lower = 0; /* not computed: RDP answered */
    const char *note = s ? why : "RDP's bound is smaller here";
    size_t n = strlen(note) < sizeof out->fallback - 1 ? strlen(note) : sizeof out->fallback - 1;
    memcpy(out->fallback, note, n);
    out->fallback[n] = '\0';
    return DPFL_OK;
}

dpfl_status dpfl_account_epsilon(const dpfl_event *ev, size_t nev, double delta, dpfl_accountant acc,
                                 const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err)
{
    if (!(delta > 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", delta);
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (s) return s;
    out->delta = delta;
    out->epsilon_lower = 0;
    out->order = 0;
    out->mu = 0;
    out->asymptotic = 0;
    out->answered = acc;
    out->fallback[0] = '\0';
    switch (acc) {
    case DPFL_ACC_RDP: {
        const double *orders;
        size_t n;
        double *rdp;
        s = rdp_curve(ev, nev, opts, &orders, &n, &rdp, err);
        if (s) return s;
        dpfl_conversion conv = opts ? opts->conversion : DPFL_CONV_TIGHT;
        out->epsilon = dpfl_rdp_to_epsilon(orders, rdp, n, delta, conv, &out->order);
        free(rdp);
        if (!(opts && opts->orders) && out->order > 0 && out->order < 128) {
            rdp_ctx c = {ev, nev};
            out->epsilon = dpfl_rdp_refine(rdp_at, &c, out->order, out->epsilon, delta, 0, conv, &out->order);
        }
        /* sampled DDP: the binomial mixture over participations where smaller (skellam_visible.c) */
        if (!(opts && opts->orders)) dpfl_skellam_mixture_tighten(ev, nev, delta, 0, conv, &out->epsilon, &out->order);
        return DPFL_OK;
    }
    case DPFL_ACC_PLD: return pld_or_rdp(ev, nev, delta, 0, opts, out, err);
    case DPFL_ACC_GDP:
        if (gdp_visible(ev, nev, &out->mu)) {
            out->epsilon = dpfl_gdp_visible_epsilon(out->mu, ev->lambda, ev->count, delta);
            return DPFL_OK;
        }
        s = gdp_mu(ev, nev, &out->mu, &out->asymptotic, err);
        if (s) return s;
        out->epsilon = dpfl_gdp_epsilon(out->mu, delta);
        return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "unknown accountant %d", (int)acc);
}

dpfl_status dpfl_account_delta(const dpfl_event *ev, size_t nev, double epsilon, dpfl_accountant acc,
                               const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err)
{
    if (!(epsilon >= 0) || isinf(epsilon))
        return dpfl_fail(err, DPFL_EINVAL, "epsilon (%g) must be finite and >= 0", epsilon);
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (s) return s;
    out->epsilon = epsilon;
    out->epsilon_lower = 0;
    out->order = 0;
    out->mu = 0;
    out->asymptotic = 0;
    out->answered = acc;
    out->fallback[0] = '\0';
    switch (acc) {
    case DPFL_ACC_RDP: {
        const double *orders;
        size_t n;
        double *rdp;
        s = rdp_curve(ev, nev, opts, &orders, &n, &rdp, err);
        if (s) return s;
        dpfl_conversion conv = opts ? opts->conversion : DPFL_CONV_TIGHT;
        out->delta = dpfl_rdp_to_delta(orders, rdp, n, epsilon, conv, &out->order);
        free(rdp);
        if (!(opts && opts->orders) && out->order > 0 && out->order < 128 && out->delta > 0) {
            rdp_ctx c = {ev, nev};
            out->delta = dpfl_rdp_refine(rdp_at, &c, out->order, out->delta, epsilon, 1, conv, &out->order);
        }
        /* sampled DDP: the binomial mixture over participations where smaller (skellam_visible.c) */
        if (!(opts && opts->orders)) dpfl_skellam_mixture_tighten(ev, nev, epsilon, 1, conv, &out->delta, &out->order);
        return DPFL_OK;
    }
    case DPFL_ACC_PLD: return pld_or_rdp(ev, nev, epsilon, 1, opts, out, err);
    case DPFL_ACC_GDP:
        if (gdp_visible(ev, nev, &out->mu)) {
            out->delta = dpfl_gdp_visible_delta(out->mu, ev->lambda, ev->count, epsilon);
            return DPFL_OK;
        }
        s = gdp_mu(ev, nev, &out->mu, &out->asymptotic, err);
        if (s) return s;
        out->delta = dpfl_gdp_delta(out->mu, epsilon);
        return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "unknown accountant %d", (int)acc);
}
