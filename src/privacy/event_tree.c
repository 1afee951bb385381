/* Events as a tree, the algebra of Google dp_accounting's DpEvent (dp_event.py), in JSON: leaves (a Gaussian, a
 * Skellam sum, a release with no guarantee, an individual Renyi filter) under combinators (Poisson sampling,
 * sampling without replacement, rPDP-FL's two-stage round, self-composition, composition, and a record held by c
 * clients).  Accountants take the flat form, a list of self-composed sampled events (dpfl/privacy.h): a tree is
 * normalized into it, and a shape that has no flat form -- a sampled composition, a sampled sample -- is refused
 * with its path, never approximated.  Which accountant answers which flat kind stays the table DPFL_EVENT_KINDS.
 *
 *   {"gaussian": {"z": Z}}                    {"skellam": {"l1": D1, "l2": D2, "z": Z}}
 *   {"not_private": {}}                       {"rdp_filter": {"alpha": A, "cap": C}}
 *   {"poisson_sampled": {"q": Q, "event": gaussian | skellam}}
 *   {"sampled_without_replacement": {"n": N, "batch": B, "event": gaussian}}
 *   {"two_stage": {"lambda": L, "inner": TAU, "event": poisson_sampled(gaussian)}}   participation visible
 *   {"self_composed": {"count": K, "event": NODE}}   {"composed": [NODE, ...]}
 *   {"held_by": {"clients": C, "event": NODE}}       the unit's data in C clients: every count times C
 * A leaf may name its "adjacency" (add-remove, replace-one, zero-out); otherwise it is its combinator's: Poisson
 * and plain Gaussian add-remove, sampling without replacement replace-one, Skellam zero-out. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    dpfl_event *ev;
    size_t n, cap;
} ev_list;

static dpfl_status push(ev_list *l, dpfl_event e, dpfl_error *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        dpfl_event *p = realloc(l->ev, cap * sizeof *p);
        if (!p) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (event tree)");
        l->ev = p;
        l->cap = cap;
    }
    l->ev[l->n++] = e;
    return DPFL_OK;
}

static const char *const adj_names[] = {"add-remove", "replace-one", "zero-out"};
#define LEAF_ROW(k) dpfl_event_kind_row_of((dpfl_event_kind)(k))

/* the body's number `key`; *ok = 0 (and the error filled) when it is missing or not a number */
static double number(const cJSON *body, const char *key, const char *what, const char *path, int *ok, dpfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (*ok && !cJSON_IsNumber(v)) {
        *ok = 0;
        dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"%s\" must be a number", what, path, key);
    }
    return *ok ? v->valuedouble : 0.0;
}

static int64_t integer(const cJSON *body, const char *key, int64_t min, const char *what, const char *path, int *ok,
                       dpfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (*ok && !(cJSON_IsNumber(v) && v->valuedouble >= (double)min && v->valuedouble < 9.0e15 &&
                 v->valuedouble == floor(v->valuedouble))) {
        *ok = 0;
        dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"%s\" must be an integer >= %lld", what, path, key, (long long)min);
    }
    return *ok ? (int64_t)v->valuedouble : 0;
}

/* a node is an object with exactly one key, its kind; *body is that key's value */
static const char *node_kind(const cJSON *o, const cJSON **body)
{
    if (!cJSON_IsObject(o) || !o->child || o->child->next) return NULL;
    *body = o->child;
    return o->child->string;
}

/* "a gaussian or skellam": the leaves a poisson_sampled node takes (DPFL_EVENT_KINDS' POISSON column) */
static const char *poisson_leaves(char *buf, size_t len)
{
    int n = 0, at = snprintf(buf, len, "a");
    for (int k = 0; k < DPFL_EV_NKINDS; k++) n += LEAF_ROW(k)->leaf && LEAF_ROW(k)->poisson != DPFL_EV_NONE;
    for (int k = 0, i = 0; k < DPFL_EV_NKINDS && at < (int)len; k++)
        if (LEAF_ROW(k)->leaf && LEAF_ROW(k)->poisson != DPFL_EV_NONE)
            at += snprintf(buf + at, len - at, "%s%s", i++ == 0 ? " " : i == n ? " or " : ", ", LEAF_ROW(k)->leaf);
    return buf;
}

#define USES(kinds, k) (((kinds) & DPFL_EVK(k)) != 0)
/* a leaf's own fields (dpfl_event_own_field) in the schema's order, its noise multiplier z last */
#define OWN_FIELD(key, kinds, k, z_pass) (USES(kinds, k) && dpfl_event_own_field(key) && (strcmp(key, "z") == 0) == (z_pass))
#define READ_DPFL_EVT_F64(name, key) e->name = number(b, key, what, path, &ok, err);
#define READ_DPFL_EVT_I64(name, key) e->name = integer(b, key, 0, what, path, &ok, err);
#define READ_DPFL_EVT_ENUM(name, key) /* kind, adjacency, bound: never a leaf's own */
#define READ_OWN(codec, ctype, name, key, kinds) \
    if (OWN_FIELD(key, kinds, e->kind, z_pass)) { READ_##codec(name, key) }

/* A noise leaf (a kind with a LEAF in DPFL_EVENT_KINDS), under a sampling combinator or alone: its event with count
 * 1, rate 1, its own fields, and the adjacency it names (*named = 1), else its row's. */
static dpfl_status leaf_read(const cJSON *o, const char *what, const char *path, dpfl_event *e, int *named,
                             dpfl_error *err)
{
    const cJSON *b;
    const char *k = node_kind(o, &b);
    int ok = 1;
    char leaves[200];
    if (!k) return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: a node is an object with one key, its kind", what, path);
    int kind = dpfl_event_leaf_kind(k);
    if (kind == DPFL_EV_NONE)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"%s\" here: a sampling node takes %s leaf", what, path, k,
                         poisson_leaves(leaves, sizeof leaves));
    *e = dpfl_event_noise((dpfl_event_kind)kind, 0.0, 1);
    for (int z_pass = 0; z_pass < 2; z_pass++) {
        DPFL_EVENT_ALL_FIELDS(READ_OWN)
    }
    if (!ok) return DPFL_EFORMAT;
    const cJSON *adj = cJSON_GetObjectItemCaseSensitive(b, "adjacency");
    *named = adj != NULL;
    if (adj) {
        int a = -1;
        for (int i = 0; i < 3; i++)
            if (cJSON_IsString(adj) && !strcmp(adj->valuestring, adj_names[i])) a = i;
        if (a < 0)
            return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"adjacency\" is add-remove, replace-one or zero-out", what,
                             path);
        e->adjacency = (dpfl_adjacency)a;
    }
    return DPFL_OK;
}

static dpfl_status node_read(const cJSON *o, const char *what, const char *path, int depth, ev_list *out,
                             dpfl_error *err);

/* self_composed and held_by: the child's events, every count multiplied by k */
static dpfl_status repeat_read(const cJSON *b, const char *k, const char *what, const char *path, int depth,
                               ev_list *out, dpfl_error *err)
{
    int ok = 1, held = !strcmp(k, "held_by");
    int64_t times = integer(b, held ? "clients" : "count", held ? 1 : 0, what, path, &ok, err);
    if (!ok) return DPFL_EFORMAT;
    char sub[512];
    if (snprintf(sub, sizeof sub, "%s.%s.event", path, k) >= (int)sizeof sub)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: nested too deep", what, path);
    size_t from = out->n;
    dpfl_status st = node_read(cJSON_GetObjectItemCaseSensitive(b, "event"), what, sub, depth + 1, out, err);
    for (size_t i = from; !st && i < out->n; i++) {
        if (out->ev[i].count > 0 && times > INT64_MAX / out->ev[i].count)
            return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: the count overflows", what, path);
        out->ev[i].count *= times;
    }
    return st;
}

/* the sampling combinators: one leaf, sampled */
static dpfl_status sampled_read(const cJSON *b, const char *k, const char *what, const char *path, dpfl_event *e,
                                dpfl_error *err)
{
    char sub[512];
    if (snprintf(sub, sizeof sub, "%s.%s.event", path, k) >= (int)sizeof sub)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: nested too deep", what, path);
    const cJSON *child = cJSON_GetObjectItemCaseSensitive(b, "event");
    dpfl_status st;
    int ok = 1;
    int named;
    if (!strcmp(k, "poisson_sampled")) {
        double q = number(b, "q", what, path, &ok, err);
        if (!ok) return DPFL_EFORMAT;
        if ((st = leaf_read(child, what, sub, e, &named, err))) return st;
        int sampled = LEAF_ROW(e->kind)->poisson; /* the Gaussian's Poisson kind, or a leaf that carries q */
        if (sampled == DPFL_EV_NONE) {
            char leaves[200];
            return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"%s\" here: a sampling node takes %s leaf", what, sub,
                             LEAF_ROW(e->kind)->leaf, poisson_leaves(leaves, sizeof leaves));
        }
        e->kind = (dpfl_event_kind)sampled;
        e->q = q;
        return DPFL_OK;
    }
    if (!strcmp(k, "sampled_without_replacement")) {
        int64_t n = integer(b, "n", 1, what, path, &ok, err), batch = integer(b, "batch", 1, what, path, &ok, err);
        if (!ok) return DPFL_EFORMAT;
        if ((st = leaf_read(child, what, sub, e, &named, err))) return st;
        if (e->kind != DPFL_EV_GAUSSIAN)
            return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: sampling without replacement takes a gaussian leaf", what, sub);
        dpfl_adjacency a = named ? e->adjacency : DPFL_ADJ_REPLACE_ONE;
        *e = dpfl_event_fixed(n, batch, e->z, 1);
        e->adjacency = a;
        return DPFL_OK;
    }
    /* two_stage: a client takes part w.p. lambda (visibly), then `inner` Poisson-sampled steps */
    double lambda = number(b, "lambda", what, path, &ok, err);
    int64_t inner = integer(b, "inner", 1, what, path, &ok, err);
    if (!ok) return DPFL_EFORMAT;
    const cJSON *pb;
    const char *pk = node_kind(child, &pb);
    if (!pk || strcmp(pk, "poisson_sampled"))
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: a two-stage round takes a poisson_sampled gaussian", what, sub);
    if ((st = sampled_read(pb, pk, what, sub, e, err))) return st;
    if (e->kind != DPFL_EV_POISSON)
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: a two-stage round takes a poisson_sampled gaussian", what, sub);
    dpfl_adjacency a = e->adjacency;
    *e = dpfl_event_two_stage(lambda, e->q, e->z, inner, 1, DPFL_BOUND_RPDP);
    e->adjacency = a;
    return DPFL_OK;
}

static dpfl_status node_read(const cJSON *o, const char *what, const char *path, int depth, ev_list *out,
                             dpfl_error *err)
{
    const cJSON *b;
    const char *k = node_kind(o, &b);
    if (!k) return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: a node is an object with one key, its kind", what, path);
    if (depth > 64) return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: nested more than 64 deep", what, path);
    dpfl_event e;
    dpfl_status st;
    if (!strcmp(k, "composed")) {
        if (!cJSON_IsArray(b)) return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: \"composed\" is an array of nodes", what, path);
        size_t i = 0;
        for (const cJSON *c = b->child; c; c = c->next, i++) {
            char sub[512];
            if (snprintf(sub, sizeof sub, "%s.composed[%zu]", path, i) >= (int)sizeof sub)
                return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: nested too deep", what, path);
            if ((st = node_read(c, what, sub, depth + 1, out, err))) return st;
        }
        return DPFL_OK;
    }
    if (!strcmp(k, "self_composed") || !strcmp(k, "held_by")) return repeat_read(b, k, what, path, depth, out, err);
    if (!strcmp(k, "poisson_sampled") || !strcmp(k, "sampled_without_replacement") || !strcmp(k, "two_stage")) {
        if ((st = sampled_read(b, k, what, path, &e, err))) return st;
    } else if (dpfl_event_leaf_kind(k) != DPFL_EV_NONE) {
        int named;
        if ((st = leaf_read(o, what, path, &e, &named, err))) return st;
    } else if (!strcmp(k, "not_private")) {
        e = dpfl_event_not_private(1);
    } else if (!strcmp(k, "rdp_filter")) {
        int ok = 1;
        double alpha = number(b, "alpha", what, path, &ok, err), cap = number(b, "cap", what, path, &ok, err);
        if (!ok) return DPFL_EFORMAT;
        e = dpfl_event_rdp_filter(alpha, cap, 1);
    } else {
        char leaves[200] = "";
        for (int i = 0, at = 0; i < DPFL_EV_NKINDS && at < (int)sizeof leaves; i++)
            if (LEAF_ROW(i)->leaf) at += snprintf(leaves + at, sizeof leaves - at, "%s, ", LEAF_ROW(i)->leaf);
        return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: unknown node \"%s\" (%snot_private, rdp_filter, "
                                            "poisson_sampled, sampled_without_replacement, two_stage, self_composed, "
                                            "composed, held_by)", what, path, k, leaves);
    }
    dpfl_error cerr;
    if (dpfl_event_check(&e, &cerr)) return dpfl_fail(err, DPFL_EFORMAT, "%s: %s: %s", what, path, cerr.msg);
    return push(out, e, err);
}

dpfl_status dpfl_event_tree_read(const cJSON *tree, const char *what, dpfl_event **ev, size_t *nev, dpfl_error *err)
{
    ev_list l = {0};
    dpfl_status st = node_read(tree, what, "tree", 0, &l, err);
    if (!st && !l.ev && !(l.ev = calloc(1, sizeof *l.ev))) /* an empty composition: no events, a valid pointer */
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (event tree)");
    if (st) {
        free(l.ev);
        return st;
    }
    *ev = l.ev;
    *nev = l.n;
    return DPFL_OK;
}

dpfl_status dpfl_event_tree_parse(const char *json, const char *what, dpfl_event **ev, size_t *nev, dpfl_error *err)
{
    *ev = NULL;
    *nev = 0;
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!o) return dpfl_fail(err, DPFL_EFORMAT, "%s: not valid JSON", what);
    dpfl_status st = dpfl_event_tree_read(o, what, ev, nev, err);
    cJSON_Delete(o);
    return st;
}

/* ---------------------------------------------------------------- the flat form as a tree */
#define WRITE_DPFL_EVT_F64(name, key) cJSON_AddNumberToObject(b, key, e->name);
#define WRITE_DPFL_EVT_I64(name, key) cJSON_AddNumberToObject(b, key, (double)e->name);
#define WRITE_DPFL_EVT_ENUM(name, key)
#define WRITE_OWN(codec, ctype, name, key, kinds) \
    if (OWN_FIELD(key, kinds, leaf_kind, z_pass)) { WRITE_##codec(name, key) }

/* the noise leaf of kind leaf_kind holding e's own fields, z last, and e's adjacency unless it is dflt */
static cJSON *leaf(int leaf_kind, const dpfl_event *e, dpfl_adjacency dflt)
{
    cJSON *o = cJSON_CreateObject(), *b = cJSON_AddObjectToObject(o, LEAF_ROW(leaf_kind)->leaf);
    for (int z_pass = 0; z_pass < 2; z_pass++) {
        DPFL_EVENT_ALL_FIELDS(WRITE_OWN)
    }
    if (e->adjacency != dflt) cJSON_AddStringToObject(b, "adjacency", adj_names[e->adjacency]);
    return o;
}

static cJSON *wrap(const char *kind, cJSON **body)
{
    cJSON *o = cJSON_CreateObject();
    *body = cJSON_AddObjectToObject(o, kind);
    return o;
}

static cJSON *poisson_node(const dpfl_event *e, int leaf_kind)
{
    cJSON *b, *o = wrap("poisson_sampled", &b);
    cJSON_AddNumberToObject(b, "q", e->q);
    cJSON_AddItemToObject(b, "event", leaf(leaf_kind, e, LEAF_ROW(leaf_kind)->adjacency));
    return o;
}

/* one flat event, count 1 */
static cJSON *event_node(const dpfl_event *e)
{
    cJSON *b, *o;
    int noise = dpfl_event_noise_kind(e->kind);
    switch (e->kind) {
    case DPFL_EV_FIXED:
        o = wrap("sampled_without_replacement", &b);
        cJSON_AddNumberToObject(b, "n", (double)e->n);
        cJSON_AddNumberToObject(b, "batch", (double)e->batch);
        cJSON_AddItemToObject(b, "event", leaf(DPFL_EV_GAUSSIAN, e, DPFL_ADJ_REPLACE_ONE));
        return o;
    case DPFL_EV_TWO_STAGE:
        o = wrap("two_stage", &b);
        cJSON_AddNumberToObject(b, "lambda", e->lambda);
        cJSON_AddNumberToObject(b, "inner", (double)e->inner);
        cJSON_AddItemToObject(b, "event", poisson_node(e, DPFL_EV_GAUSSIAN));
        return o;
    case DPFL_EV_RDP_FILTER:
        o = wrap("rdp_filter", &b);
        cJSON_AddNumberToObject(b, "alpha", e->alpha);
        cJSON_AddNumberToObject(b, "cap", e->cap);
        return o;
    case DPFL_EV_NOT_PRIVATE: break;
    default: /* a noise leaf, Poisson-sampled when it is the leaf's Poisson kind or carries a rate below 1 */
        if (noise == DPFL_EV_NONE) break;
        if ((int)e->kind != noise || (LEAF_ROW(noise)->poisson == noise && e->q < 1.0)) return poisson_node(e, noise);
        return leaf(noise, e, LEAF_ROW(noise)->adjacency);
    }
    return wrap("not_private", &b);
}

cJSON *dpfl_event_tree_build(const dpfl_event *ev, size_t nev, int64_t held_by)
{
    int whole = held_by > 1;
    for (size_t i = 0; whole && i < nev; i++) whole = ev[i].count % held_by == 0;
    const int64_t div = whole ? held_by : 1; /* counts already summed over the copies: held_by only if it divides */
    cJSON *top = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(top, "composed"), *b;
    for (size_t i = 0; i < nev; i++) {
        cJSON *n = event_node(&ev[i]);
        if (ev[i].count != 1 || div > 1) {
            cJSON *s = wrap("self_composed", &b);
            cJSON_AddNumberToObject(b, "count", (double)(ev[i].count / div));
            cJSON_AddItemToObject(b, "event", n);
            n = s;
        }
        cJSON_AddItemToArray(a, n);
    }
    if (div == 1) return top;
    cJSON *h = wrap("held_by", &b);
    cJSON_AddNumberToObject(b, "clients", (double)div);
    cJSON_AddItemToObject(b, "event", top);
    return h;
}
