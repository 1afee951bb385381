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
                    return dpfl_fail(err, DPFL_EINVAL, "gdp accountant: poisson events under replace-one adjacency "
                                                       "have no CLT here (event %zu); use rdp", i);
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
        default: /* the table lets two-stage events through: GDP has them only alone at record rate 1 */
            return dpfl_fail(err, DPFL_EINVAL, "gdp accountant answers %s events only alone and at record rate 1 "
                                               "(Gaussian participations, exact); event %zu is not; use rdp or pld",
                             dpfl_event_kind_name(e->kind), i);
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

/* The RDP curve: the given orders (or the default ones), then each rdp-filter event's own alpha, where its statement
 * is made (an rdp-filter is finite only at orders <= its alpha).  One buffer: orders[0..n), rdp[0..n); free(orders). */
static dpfl_status rdp_curve(const dpfl_event *ev, size_t nev, const dpfl_account_opts *o, double **orders,
                             size_t *n, double **rdp, dpfl_error *err)
{
    size_t given;
    const double *base = o && o->orders ? o->orders : dpfl_rdp_default_orders(&given);
    if (o && o->orders) given = o->norders;
    size_t extra = 0;
    for (size_t i = 0; i < nev; i++) extra += ev[i].kind == DPFL_EV_RDP_FILTER && ev[i].count > 0;
    *n = given + extra;
    *orders = malloc(2 * (*n ? *n : 1) * sizeof **orders);
    if (!*orders) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (RDP curve)");
    if (given) memcpy(*orders, base, given * sizeof **orders);
    for (size_t i = 0, k = given; i < nev; i++)
        if (ev[i].kind == DPFL_EV_RDP_FILTER && ev[i].count > 0) (*orders)[k++] = ev[i].alpha;
    *rdp = *orders + *n;
    dpfl_status s = dpfl_rdp_compose(ev, nev, *orders, *n, *rdp, err);
    if (s) {
        free(*orders);
        *orders = *rdp = NULL;
    }
    return s;
}

/* Why PLD's own computation does not answer these events (RDP's floor answers), or NULL: a kind the table gives
 * RDP's floor, or Poisson sampling under replace-one (no PLD of that pair here). */
static const char *pld_unsupported(const dpfl_event *ev, size_t nev, char *why, size_t len)
{
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].count == 0) continue;
        if (dpfl_event_support(ev[i].kind, DPFL_ACC_PLD) == DPFL_SUPPORT_RDP_FLOOR) {
            snprintf(why, len, "PLD does not compute %s events; RDP's bound answers",
                     dpfl_event_kind_name(ev[i].kind));
            return why;
        }
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
    char whybuf[96];
    const char *why = pld_unsupported(ev, nev, whybuf, sizeof whybuf);
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

/* The one body of dpfl_account_epsilon (want_delta = 0: x is delta, *out gets epsilon) and dpfl_account_delta
 * (want_delta = 1: x is epsilon, *out gets delta). */
static dpfl_status account(const dpfl_event *ev, size_t nev, double x, int want_delta, dpfl_accountant acc,
                           const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err)
{
    if (want_delta && (!(x >= 0) || isinf(x)))
        return dpfl_fail(err, DPFL_EINVAL, "epsilon (%g) must be finite and >= 0", x);
    if (!want_delta && !(x > 0 && x < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", x);
    if ((unsigned)acc > (unsigned)DPFL_ACC_GDP) return dpfl_fail(err, DPFL_EINVAL, "unknown accountant %d", (int)acc);
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (s) return s;
    if ((s = dpfl_events_supported(ev, nev, acc, 0, err))) return s;
    double *val = want_delta ? &out->delta : &out->epsilon; /* what is asked; the other is x */
    *(want_delta ? &out->epsilon : &out->delta) = x;
    out->epsilon_lower = 0;
    out->order = 0;
    out->mu = 0;
    out->asymptotic = 0;
    out->answered = acc;
    out->fallback[0] = '\0';
    switch (acc) {
    case DPFL_ACC_RDP: {
        double *orders = NULL, *rdp = NULL;
        size_t n = 0;
        s = rdp_curve(ev, nev, opts, &orders, &n, &rdp, err);
        if (s) return s;
        dpfl_conversion conv = opts ? opts->conversion : DPFL_CONV_TIGHT;
        *val = want_delta ? dpfl_rdp_to_delta(orders, rdp, n, x, conv, &out->order)
                          : dpfl_rdp_to_epsilon(orders, rdp, n, x, conv, &out->order);
        free(orders);
        if (!(opts && opts->orders) && out->order > 0 && out->order < 128 && (!want_delta || *val > 0)) {
            rdp_ctx c = {ev, nev};
            *val = dpfl_rdp_refine(rdp_at, &c, out->order, *val, x, want_delta, conv, &out->order);
        }
        /* sampled DDP: the binomial mixture over participations where smaller (skellam_visible.c) */
        if (!(opts && opts->orders)) dpfl_skellam_mixture_tighten(ev, nev, x, want_delta, conv, val, &out->order);
        return DPFL_OK;
    }
    case DPFL_ACC_PLD: return pld_or_rdp(ev, nev, x, want_delta, opts, out, err);
    case DPFL_ACC_GDP:
        if (gdp_visible(ev, nev, &out->mu)) {
            *val = want_delta ? dpfl_gdp_visible_delta(out->mu, ev->lambda, ev->count, x)
                              : dpfl_gdp_visible_epsilon(out->mu, ev->lambda, ev->count, x);
            return DPFL_OK;
        }
        s = gdp_mu(ev, nev, &out->mu, &out->asymptotic, err);
        if (s) return s;
        *val = want_delta ? dpfl_gdp_delta(out->mu, x) : dpfl_gdp_epsilon(out->mu, x);
        return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "unknown accountant %d", (int)acc);
}

dpfl_status dpfl_account_epsilon(const dpfl_event *ev, size_t nev, double delta, dpfl_accountant acc,
                                 const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err)
{
    return account(ev, nev, delta, 0, acc, opts, out, err);
}

dpfl_status dpfl_account_delta(const dpfl_event *ev, size_t nev, double epsilon, dpfl_accountant acc,
                               const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err)
{
    return account(ev, nev, epsilon, 1, acc, opts, out, err);
}
