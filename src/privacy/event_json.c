/* A run's privacy event as JSON, and back: the composition an accountant turned into the run's epsilon, written
 * into summary.json so that `dpfl account --event` -- or Google dp_accounting, through the DpEvent expression
 * written beside each event -- recomputes it.  The fields come from the event schema (DPFL_EVENT_FIELDS in
 * dpfl/privacy.h, with the report-only fields): each kind writes and requires exactly the fields it uses, enums by name.  Events compress as
 * self-compositions ("count"), so 10^5 steps stay one object. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIND_NAME(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) name,
static const char *const kind_names[] = {DPFL_EVENT_KINDS(KIND_NAME)};
static const char *const adj_names[] = {"add-remove", "replace-one", "zero-out"};
static const char *const bound_names[] = {"rpdp"};
static const char *const orders_names[] = {"default", "integer", "rpdp"};
#define COUNT(a) (sizeof a / sizeof a[0])

static int name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(names[i], s)) return (int)i;
    return -1;
}

static const char *enum_name(const char *field, int v)
{
    if (!strcmp(field, "kind")) return v >= 0 && (size_t)v < COUNT(kind_names) ? kind_names[v] : "?";
    if (!strcmp(field, "adjacency")) return v >= 0 && (size_t)v < COUNT(adj_names) ? adj_names[v] : "?";
    return v >= 0 && (size_t)v < COUNT(bound_names) ? bound_names[v] : "?";
}

static int enum_value(const char *field, const char *s)
{
    if (!strcmp(field, "kind")) return name_index(kind_names, COUNT(kind_names), s);
    if (!strcmp(field, "adjacency")) return name_index(adj_names, COUNT(adj_names), s);
    return name_index(bound_names, COUNT(bound_names), s);
}

/* The same event in Google dp_accounting's classes, where it has them: the leaf's class from DPFL_EVENT_KINDS,
 * Poisson-sampled (the leaf's Poisson kind, or a leaf that carries its rate at q < 1) or sampled without replacement
 * (fixed, a Gaussian), self-composed. */
static void dp_accounting_expr(const dpfl_event *e, char *buf, size_t len)
{
    buf[0] = '\0'; /* no class there: docs/privacy.md says how to recompute these */
    if (e->kind == DPFL_EV_NOT_PRIVATE) {
        snprintf(buf, len, "NonPrivateDpEvent()");
        return;
    }
    int leaf = e->kind == DPFL_EV_FIXED ? DPFL_EV_GAUSSIAN : dpfl_event_noise_kind(e->kind);
    const char *cls = leaf >= 0 ? dpfl_event_kind_row_of((dpfl_event_kind)leaf)->dp_accounting : NULL;
    if (!cls) return;
    char in[160];
    snprintf(in, sizeof in, "%s(%.17g)", cls, e->z);
    if (e->kind == DPFL_EV_FIXED)
        snprintf(buf, len, "SelfComposedDpEvent(SampledWithoutReplacementDpEvent(%lld, %lld, %s), %lld)",
                 (long long)e->n, (long long)e->batch, in, (long long)e->count);
    else if ((int)e->kind != leaf || (dpfl_event_kind_row_of(e->kind)->poisson == leaf && e->q < 1.0))
        snprintf(buf, len, "SelfComposedDpEvent(PoissonSampledDpEvent(%.17g, %s), %lld)", e->q, in,
                 (long long)e->count);
    else
        snprintf(buf, len, "SelfComposedDpEvent(%s, %lld)", in, (long long)e->count);
}

#define WRITE_DPFL_EVT_ENUM(name, key) cJSON_AddStringToObject(o, key, enum_name(#name, (int)e->name))
#define WRITE_DPFL_EVT_F64(name, key) cJSON_AddNumberToObject(o, key, e->name)
#define WRITE_DPFL_EVT_I64(name, key) cJSON_AddNumberToObject(o, key, (double)e->name)
#define WRITE_FIELD(codec, ctype, name, key, kinds) \
    if ((kinds) & DPFL_EVK(e->kind)) WRITE_##codec(name, key);

static cJSON *event_json(const dpfl_event *e)
{
    cJSON *o = cJSON_CreateObject();
    DPFL_EVENT_ALL_FIELDS(WRITE_FIELD)
    char d[320];
    dp_accounting_expr(e, d, sizeof d);
    if (d[0]) cJSON_AddStringToObject(o, "dp_accounting", d);
    return o;
}

dpfl_status dpfl_run_event_json(const dpfl_run_event *r, char **json, dpfl_error *err)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", r->unit);
    cJSON_AddStringToObject(o, "accountant", dpfl_accountant_name(r->accountant));
    cJSON_AddStringToObject(o, "orders", orders_names[r->orders]);
    cJSON_AddNumberToObject(o, "delta", r->delta);
    if (isfinite(r->epsilon)) cJSON_AddNumberToObject(o, "epsilon", r->epsilon);
    cJSON_AddNumberToObject(o, "held_by", (double)r->held_by);
    cJSON *a = cJSON_AddArrayToObject(o, "composed");
    for (size_t i = 0; i < r->nevents; i++) cJSON_AddItemToArray(a, event_json(&r->events[i]));
    cJSON_AddItemToObject(o, "tree", dpfl_event_tree_build(r->events, r->nevents, r->held_by));
    *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return *json ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (event JSON)");
}

/* A number that must be an integer (counts, sizes). */
static int get_i64(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) < 9.0e15) || v->valuedouble != floor(v->valuedouble)) return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

#define READ_DPFL_EVT_ENUM(ctype, name, key)                                                                     \
    {                                                                                                           \
        int k_ = enum_value(#name, cJSON_GetStringValue(v));                                                    \
        if (k_ < 0) return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu: \"%s\" is not a known name", what, i, key); \
        e->name = (ctype)k_;                                                                                    \
    }
#define READ_DPFL_EVT_F64(ctype, name, key)                                                                      \
    if (!cJSON_IsNumber(v)) return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu: \"%s\" is not a number", what, i, key); \
    e->name = v->valuedouble;
#define READ_DPFL_EVT_I64(ctype, name, key)                                                                      \
    if (!get_i64(v, &e->name))                                                                                  \
        return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu: \"%s\" is not an integer", what, i, key);
#define READ_FIELD(codec, ctype, name, key, kinds)                                                               \
    if (strcmp(key, "kind") && ((kinds) & DPFL_EVK(e->kind))) {                                                 \
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);                                              \
        if (!v) return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu (%s) has no \"%s\"", what, i, kind_names[e->kind], key); \
        READ_##codec(ctype, name, key)                                                                          \
    }

static dpfl_status event_read(const cJSON *o, const char *what, size_t i, dpfl_event *e, dpfl_error *err)
{
    int kind = enum_value("kind", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind")));
    if (kind < 0) return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu has no known \"kind\"", what, i);
    *e = dpfl_event_not_private(0); /* the constructors' defaults for the fields a kind does not use */
    e->q = e->lambda = 1.0;
    e->kind = (dpfl_event_kind)kind;
    DPFL_EVENT_ALL_FIELDS(READ_FIELD)
    dpfl_error cerr;
    if (dpfl_event_check(e, &cerr)) return dpfl_fail(err, DPFL_EFORMAT, "%s: event %zu: %s", what, i, cerr.msg);
    return DPFL_OK;
}

#define SAME_FIELD(codec, ctype, name, key, kinds) &&a->name == b->name
static int same_event(const dpfl_event *a, const dpfl_event *b)
{
    return 1 DPFL_EVENT_ALL_FIELDS(SAME_FIELD);
}

static dpfl_status run_event_read(const cJSON *o, const char *what, dpfl_run_event *r, dpfl_error *err)
{
    const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "unit"));
    const char *acc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "accountant"));
    const char *ord = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "orders"));
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(o, "delta");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(o, "epsilon");
    const cJSON *held = cJSON_GetObjectItemCaseSensitive(o, "held_by");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "composed");
    if (!unit || strlen(unit) >= sizeof r->unit) return dpfl_fail(err, DPFL_EFORMAT, "%s: no \"unit\"", what);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    int ai = -1;
    for (int k = DPFL_ACC_RDP; k <= DPFL_ACC_GDP; k++)
        if (acc && !strcmp(acc, dpfl_accountant_name((dpfl_accountant)k))) ai = k;
    if (ai < 0) return dpfl_fail(err, DPFL_EFORMAT, "%s: \"accountant\" is not rdp, pld or gdp", what);
    r->accountant = (dpfl_accountant)ai;
    int oi = name_index(orders_names, COUNT(orders_names), ord);
    if (oi < 0) return dpfl_fail(err, DPFL_EFORMAT, "%s: \"orders\" is not default, integer or rpdp", what);
    r->orders = (dpfl_orders_set)oi;
    if (!cJSON_IsNumber(delta) || !(delta->valuedouble > 0 && delta->valuedouble < 1))
        return dpfl_fail(err, DPFL_EFORMAT, "%s: \"delta\" must be a number in (0, 1)", what);
    r->delta = delta->valuedouble;
    r->epsilon = cJSON_IsNumber(eps) ? eps->valuedouble : NAN;
    r->held_by = 1; /* optional: the tree's held_by nodes are in its counts already */
    if (held && (!get_i64(held, &r->held_by) || r->held_by < 1))
        return dpfl_fail(err, DPFL_EFORMAT, "%s: \"held_by\" must be an integer >= 1", what);
    const cJSON *tree = cJSON_GetObjectItemCaseSensitive(o, "tree");
    if (!cJSON_IsArray(a) && !tree)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: no \"composed\" array of events and no \"tree\"", what);
    dpfl_status st;
    if (cJSON_IsArray(a)) {
        r->nevents = (size_t)cJSON_GetArraySize(a);
        r->events = calloc(r->nevents + 1, sizeof *r->events);
        if (!r->events) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (event JSON)");
        size_t i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++)
            if ((st = event_read(e, what, i, &r->events[i], err))) return st;
    }
    if (!tree) return DPFL_OK;
    dpfl_event *ev;
    size_t nev;
    if ((st = dpfl_event_tree_read(tree, what, &ev, &nev, err))) return st;
    if (!r->events) { /* the tree alone */
        r->events = ev;
        r->nevents = nev;
        return DPFL_OK;
    }
    size_t i = 0; /* both: they must be one composition */
    while (i < nev && i < r->nevents && same_event(&ev[i], &r->events[i])) i++;
    free(ev);
    if (i < nev || i < r->nevents)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: \"tree\" and \"composed\" differ at event %zu", what, i);
    return DPFL_OK;
}

dpfl_status dpfl_run_event_parse(const char *json, const char *what, dpfl_run_event *r, dpfl_error *err)
{
    memset(r, 0, sizeof *r);
    cJSON *o = cJSON_Parse(json);
    if (!o) return dpfl_fail(err, DPFL_EFORMAT, "%s: not valid JSON", what);
    dpfl_status st = cJSON_IsObject(o) ? run_event_read(o, what, r, err)
                                       : dpfl_fail(err, DPFL_EFORMAT, "%s: not a JSON object", what);
    cJSON_Delete(o);
    if (st) dpfl_run_event_free(r);
    return st;
}

void dpfl_run_event_free(dpfl_run_event *r)
{
    free(r->events);
    r->events = NULL;
    r->nevents = 0;
}
