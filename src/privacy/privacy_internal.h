/* Helpers shared by the privacy sources (not public). */
#ifndef DPFL_PRIVACY_INTERNAL_H
#define DPFL_PRIVACY_INTERNAL_H
#include "dpfl/privacy.h"

#include <math.h>
#include <string.h>

/* Validate a list: ranges, and DPFL_ENOTPRIVATE if any not-private event has count > 0. */
dpfl_status dpfl_events_check(const dpfl_event *ev, size_t nev, dpfl_error *err);

/* DPFL_EINVAL, one line naming the kind, the event and the accountant, if an event that happened (count > 0) is of
 * a kind the accountant does not support (support.c, the table DPFL_EVENT_KINDS); pld_itself: the PLD computation
 * itself, which refuses the kinds the table gives RDP's floor as well. */
dpfl_status dpfl_events_supported(const dpfl_event *ev, size_t nev, dpfl_accountant acc, int pld_itself,
                                  dpfl_error *err);

/* A row of DPFL_EVENT_KINDS (dpfl/privacy.h) beyond its name and support cells: the kind's tree leaf (NULL when the
 * kind is no unsampled noise distribution), the adjacency its constructor and leaf default to, the kind
 * poisson_sampled makes of the leaf (DPFL_EV_NONE: refused), dp_accounting's class of the leaf (NULL: none). */
typedef struct {
    const char *leaf;
    dpfl_adjacency adjacency;
    int poisson;
    const char *dp_accounting;
} dpfl_event_kind_row;
/* NULL outside the enum. */
const dpfl_event_kind_row *dpfl_event_kind_row_of(dpfl_event_kind kind);
/* The kind whose LEAF is `node`, or DPFL_EV_NONE. */
int dpfl_event_leaf_kind(const char *node);
/* The leaf kind of a kind's noise: itself for a leaf, the leaf whose POISSON column names it (DPFL_EV_POISSON: the
 * Gaussian), else DPFL_EV_NONE (fixed and two-stage, Gaussian-only combinators, are their callers' to say). */
int dpfl_event_noise_kind(dpfl_event_kind kind);
/* A field (its JSON key) that is a kind's own -- in its tree leaf, its generic description -- rather than the event's
 * kind, adjacency or count, or a sampling combinator's (q, lambda, n, batch, inner, bound). */
static inline int dpfl_event_own_field(const char *key)
{
    static const char *const not_own[] = {"kind", "adjacency", "count", "q", "lambda", "n", "batch", "inner", "bound"};
    for (size_t i = 0; i < sizeof not_own / sizeof not_own[0]; i++)
        if (!strcmp(key, not_own[i])) return 0;
    return 1;
}

/* event_tree.c: a DpEvent-style tree (JSON) normalized to the flat composition (*ev malloc'd, never NULL on
 * success; errors name `what` and the node's path), and a flat composition as a tree (held_by > 1 wraps it in a
 * held_by node when it divides every count, which are sums over the copies). */
struct cJSON;
dpfl_status dpfl_event_tree_read(const struct cJSON *tree, const char *what, dpfl_event **ev, size_t *nev,
                                 dpfl_error *err);
struct cJSON *dpfl_event_tree_build(const dpfl_event *ev, size_t nev, int64_t held_by);

/* The integer orders 2 .. 994 of rPDP-FL's published accountant. */
const double *dpfl_rpdp_orders(size_t *n);

/* log(exp(a) + exp(b)), exact at -inf. */
static inline double dpfl_logaddexp(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b, d = -fabs(a - b);
    return m + log1p(exp(d));
}

/* log(expm1(x)) for x > 0, accurate for tiny and huge x. */
static inline double dpfl_log_expm1(double x)
{
    return x > 30 ? x + log1p(-exp(-x)) : log(expm1(x));
}

/* Standard normal upper tail Q(x) = P(N(0,1) > x), accurate in both tails. */
static inline double dpfl_normal_sf(double x)
{
    return 0.5 * erfc(x / 1.4142135623730951);
}
static inline double dpfl_normal_cdf(double x)
{
    return 0.5 * erfc(-x / 1.4142135623730951);
}

/* Per-step RDP of the two-stage round for an integer order (cached sgm values in sgm[0..alpha], sgm[l] = per
 * step SGM RDP at order l). */
double dpfl_rdp_int_sgm(double q, double z, int alpha);
/* Golden-section refinement of the RDP conversion around best_order (see rdp_convert.c); returns epsilon. */
double dpfl_rdp_refine(double (*f)(double alpha, void *ctx), void *ctx, double best_order, double best_val,
                       double target, int want_delta, dpfl_conversion conv, double *order);
#endif
