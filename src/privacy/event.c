/* Events: the only thing accountants see.  Constructors fill the fields a kind uses and leave the rest zero; a
 * noise distribution's kind is built, described and checked from its row of DPFL_EVENT_KINDS and the fields
 * DPFL_EVENT_ALL_FIELDS gives it, the kinds with their own wording (sampling schemes, Skellam, the filter) apart. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>
#include <string.h>

static dpfl_event blank(dpfl_event_kind k, int64_t count)
{
    dpfl_event e;
    memset(&e, 0, sizeof e);
    e.kind = k;
    e.adjacency = dpfl_event_kind_row_of(k)->adjacency;
    e.count = count;
    e.q = 1.0;
    e.lambda = 1.0;
    return e;
}

dpfl_event dpfl_event_noise(dpfl_event_kind kind, double z, int64_t count)
{
    if (!dpfl_event_kind_row_of(kind) || !dpfl_event_kind_row_of(kind)->leaf) { /* no noise distribution: refused */
        dpfl_event e = blank(DPFL_EV_NOT_PRIVATE, count);
        e.kind = (dpfl_event_kind)DPFL_EV_NKINDS;
        return e;
    }
    dpfl_event e = blank(kind, count);
    e.z = z;
    return e;
}

dpfl_event dpfl_event_gaussian(double z, int64_t count)
{
    return dpfl_event_noise(DPFL_EV_GAUSSIAN, z, count);
}

dpfl_event dpfl_event_poisson(double q, double z, int64_t count)
{
    dpfl_event e = blank(DPFL_EV_POISSON, count);
    e.q = q;
    e.z = z;
    return e;
}

dpfl_event dpfl_event_fixed(int64_t n, int64_t batch, double z, int64_t count)
{
    dpfl_event e = blank(DPFL_EV_FIXED, count);
    e.n = n;
    e.batch = batch;
    e.q = n > 0 ? (double)batch / (double)n : 0.0;
    e.z = z;
    return e;
}

dpfl_event dpfl_event_two_stage(double lambda, double q, double z, int64_t inner, int64_t count,
                                dpfl_two_stage_bound bound)
{
    dpfl_event e = blank(DPFL_EV_TWO_STAGE, count);
    e.lambda = lambda;
    e.q = q;
    e.z = z;
    e.inner = inner;
    e.bound = bound;
    return e;
}

dpfl_event dpfl_event_skellam(double q, double d1, double d2, double mu, int64_t count)
{
    dpfl_event e = blank(DPFL_EV_SKELLAM, count);
    e.q = q;
    e.d1 = d1;
    e.d2 = d2;
    e.z = d2 > 0 ? sqrt(mu) / d2 : 0.0;
    return e;
}

dpfl_event dpfl_event_rdp_filter(double alpha, double cap, int64_t count)
{
    dpfl_event e = blank(DPFL_EV_RDP_FILTER, count);
    e.alpha = alpha;
    e.cap = cap;
    return e;
}

dpfl_event dpfl_event_not_private(int64_t count)
{
    return blank(DPFL_EV_NOT_PRIVATE, count);
}

const char *dpfl_adjacency_name(dpfl_adjacency a)
{
    switch (a) {
    case DPFL_ADJ_ADD_REMOVE: return "add-remove";
    case DPFL_ADJ_REPLACE_ONE: return "replace-one";
    case DPFL_ADJ_ZERO_OUT: return "zero-out";
    }
    return "unknown";
}

#define USES(kinds, e) (((kinds) & DPFL_EVK((e)->kind)) != 0)
#define FINITE_DPFL_EVT_F64(name, key)                                                                            \
    if (!isfinite(e->name)) return dpfl_fail(err, DPFL_EINVAL, "%s: %s (%g) must be finite", kind, key, e->name);
#define FINITE_DPFL_EVT_I64(name, key)                                                                            \
    if (e->name < 0) return dpfl_fail(err, DPFL_EINVAL, "%s: %s (%lld) must be >= 0", kind, key, (long long)e->name);
#define FINITE_DPFL_EVT_ENUM(name, key)
#define FINITE(codec, ctype, name, key, kinds) \
    if (USES(kinds, e) && dpfl_event_own_field(key)) { FINITE_##codec(name, key) }

/* A noise distribution's kind (its row has a LEAF): a rate q it carries in [0, 1], its own numbers finite (z was
 * checked before), any adjacency (z is relative to the sensitivity under the event's). */
static dpfl_status own_fields_check(const dpfl_event *e, dpfl_error *err)
{
    const char *kind = dpfl_event_kind_name(e->kind);
    if (USES(DPFL_EVK_SAMPLED, e) && !(e->q >= 0 && e->q <= 1))
        return dpfl_fail(err, DPFL_EINVAL, "sampling rate q (%g) must be in [0, 1]", e->q);
    DPFL_EVENT_ALL_FIELDS(FINITE)
    return DPFL_OK;
}

dpfl_status dpfl_event_check(const dpfl_event *e, dpfl_error *err)
{
    if ((unsigned)e->kind >= (unsigned)DPFL_EV_NKINDS)
        return dpfl_fail(err, DPFL_EINVAL, "unknown event kind %d", (int)e->kind);
    if ((unsigned)e->adjacency > (unsigned)DPFL_ADJ_ZERO_OUT)
        return dpfl_fail(err, DPFL_EINVAL, "unknown adjacency %d", (int)e->adjacency);
    if (e->bound != DPFL_BOUND_RPDP)
        return dpfl_fail(err, DPFL_EINVAL, "two-stage bound %d: only the published (joint convexity) bound holds "
                                           "when participation is visible", (int)e->bound);
    if (e->count < 0) return dpfl_fail(err, DPFL_EINVAL, "event count (%lld) is negative", (long long)e->count);
    if (e->kind == DPFL_EV_NOT_PRIVATE) return DPFL_OK;
    if (!(e->z >= 0) || isinf(e->z)) /* the filter has no z of its own: 0 */
        return dpfl_fail(err, DPFL_EINVAL, "noise multiplier z (%g) must be finite and >= 0", e->z);
    switch (e->kind) {
    case DPFL_EV_POISSON:
        if (!(e->q >= 0 && e->q <= 1))
            return dpfl_fail(err, DPFL_EINVAL, "sampling rate q (%g) must be in [0, 1]", e->q);
        return DPFL_OK;
    case DPFL_EV_FIXED:
        if (e->n <= 0 || e->batch <= 0 || e->batch > e->n)
            return dpfl_fail(err, DPFL_EINVAL, "fixed-size sampling needs 0 < batch (%lld) <= n (%lld)",
                             (long long)e->batch, (long long)e->n);
        if (e->adjacency != DPFL_ADJ_REPLACE_ONE)
            return dpfl_fail(err, DPFL_EINVAL,
                             "fixed-size sampling without replacement is accounted under replace-one adjacency "
                             "only (Wang-Balle-Kasiviswanathan); got %s",
                             dpfl_adjacency_name(e->adjacency));
        return DPFL_OK;
    case DPFL_EV_TWO_STAGE:
        if (!(e->q >= 0 && e->q <= 1))
            return dpfl_fail(err, DPFL_EINVAL, "record rate p (%g) must be in [0, 1]", e->q);
        if (!(e->lambda >= 0 && e->lambda <= 1))
            return dpfl_fail(err, DPFL_EINVAL, "client rate lambda (%g) must be in [0, 1]", e->lambda);
        if (e->inner <= 0)
            return dpfl_fail(err, DPFL_EINVAL, "local steps per round (%lld) must be > 0", (long long)e->inner);
        return DPFL_OK;
    case DPFL_EV_NOT_PRIVATE: return DPFL_OK;
    case DPFL_EV_SKELLAM:
        if (!(e->q >= 0 && e->q <= 1))
            return dpfl_fail(err, DPFL_EINVAL, "client rate q (%g) must be in [0, 1]", e->q);
        if (!(e->d2 > 0 && e->d1 > 0) || isinf(e->d1) || isinf(e->d2))
            return dpfl_fail(err, DPFL_EINVAL, "Skellam sensitivities (L1 %g, L2 %g) must be finite and > 0", e->d1,
                             e->d2);
        if (e->adjacency != DPFL_ADJ_ZERO_OUT)
            return dpfl_fail(err, DPFL_EINVAL, "the Skellam (distributed DP) event is accounted under zero-out "
                                               "adjacency only; got %s", dpfl_adjacency_name(e->adjacency));
        return DPFL_OK;
    case DPFL_EV_RDP_FILTER:
        if (!(e->alpha > 1) || isinf(e->alpha))
            return dpfl_fail(err, DPFL_EINVAL, "filter order alpha (%g) must be finite and > 1", e->alpha);
        if (!(e->cap >= 0) || isinf(e->cap))
            return dpfl_fail(err, DPFL_EINVAL, "filter cap (%g) must be finite and >= 0", e->cap);
        if (e->adjacency != DPFL_ADJ_ADD_REMOVE)
            return dpfl_fail(err, DPFL_EINVAL, "the Renyi filter's losses are for add-remove adjacency; got %s",
                             dpfl_adjacency_name(e->adjacency));
        return DPFL_OK;
    default: break; /* the Gaussian and any noise distribution: the generic check */
    }
    return own_fields_check(e, err);
}

#define SAY_DPFL_EVT_F64(name, key) at += snprintf(s + at, sizeof s - at, "%s%s=%g", at > 0 ? ", " : "", key, e->name);
#define SAY_DPFL_EVT_I64(name, key)                                                                               \
    at += snprintf(s + at, sizeof s - at, "%s%s=%lld", at > 0 ? ", " : "", key, (long long)e->name);
#define SAY_DPFL_EVT_ENUM(name, key)
#define SAY(codec, ctype, name, key, kinds)                                                                      \
    if (USES(kinds, e) && strcmp(key, "kind") && strcmp(key, "adjacency") && strcmp(key, "count") &&             \
        at < (int)sizeof s)                                                                                      \
    {                                                                                                             \
        SAY_##codec(name, key)                                                                                   \
    }

/* "NAME(field=value, ...) x count [adjacency]": every field the kind uses, by its JSON key, in the schema's order */
static void own_fields_describe(const dpfl_event *e, const char *adj, char *buf, size_t len)
{
    char s[256] = "";
    int at = 0;
    if ((unsigned)e->kind >= (unsigned)DPFL_EV_NKINDS) {
        snprintf(buf, len, "unknown kind %d", (int)e->kind);
        return;
    }
    DPFL_EVENT_ALL_FIELDS(SAY)
    snprintf(buf, len, "%s(%s) x %lld [%s]", dpfl_event_kind_name(e->kind), s, (long long)e->count, adj);
}

void dpfl_event_describe(const dpfl_event *e, char *buf, size_t len)
{
    const char *adj = dpfl_adjacency_name(e->adjacency);
    switch (e->kind) {
    case DPFL_EV_GAUSSIAN: own_fields_describe(e, adj, buf, len); break;
    case DPFL_EV_POISSON:
        snprintf(buf, len, "poisson(q=%g, z=%g) x %lld [%s]", e->q, e->z, (long long)e->count, adj);
        break;
    case DPFL_EV_FIXED:
        snprintf(buf, len, "fixed(batch=%lld of n=%lld, z=%g) x %lld [%s]", (long long)e->batch,
                 (long long)e->n, e->z, (long long)e->count, adj);
        break;
    case DPFL_EV_TWO_STAGE:
        snprintf(buf, len, "two-stage(lambda=%g, p=%g, z=%g, tau=%lld, %s) x %lld [%s]", e->lambda, e->q, e->z,
                 (long long)e->inner, "rpdp", (long long)e->count,
                 adj);
        break;
    case DPFL_EV_NOT_PRIVATE: snprintf(buf, len, "not-private x %lld", (long long)e->count); break;
    case DPFL_EV_SKELLAM:
        snprintf(buf, len, "skellam(q=%g, L1=%g, L2=%g, variance=%.6g) x %lld [%s]", e->q, e->d1, e->d2,
                 (e->z * e->d2) * (e->z * e->d2), (long long)e->count, adj);
        break;
    case DPFL_EV_RDP_FILTER:
        snprintf(buf, len, "rdp-filter(alpha=%g, cap=%g) x %lld [%s]", e->alpha, e->cap, (long long)e->count, adj);
        break;
    default: own_fields_describe(e, adj, buf, len);
    }
}

dpfl_status dpfl_events_check(const dpfl_event *ev, size_t nev, dpfl_error *err)
{
    for (size_t i = 0; i < nev; i++) {
        dpfl_status s = dpfl_event_check(&ev[i], err);
        if (s) return s;
        if (ev[i].kind == DPFL_EV_NOT_PRIVATE && ev[i].count > 0) {
            char d[128];
            dpfl_event_describe(&ev[i], d, sizeof d);
            return dpfl_fail(err, DPFL_ENOTPRIVATE, "no guarantee: event %zu (%s) is not differentially private",
                             i, d);
        }
    }
    return DPFL_OK;
}
