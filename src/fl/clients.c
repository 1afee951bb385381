/* The clients' own state (PriFedSync, Zheng et al., Algorithm 1: each client's helper model h(i), kept across the
 * rounds it sits out; fl.client_state = keep: its local optimizer state; PrivateFL, Yang et al. 2023: its own input
 * transform; fl.personal: its own normalization layers (FedBN, Li et al. 2021; FedGN in PrivateFL's Table 5) or
 * personal head (PP-SGD, Bietti et al. 2022)).  One block per client, allocated the first time it trains: the
 * helper model (P floats), then the optimizer's vectors, then the personal parameters.  A worker borrows the block of the client it trains (client.c); a
 * client is trained by one worker at a time, so the state does not depend on the thread count. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t fl_clients_state_floats(const fl_clients *c)
{
    return ((size_t)c->helper + (size_t)c->state_vecs + (size_t)c->scaffold) * c->nparam + c->npers;
}

/* Marks the layers fl.personal names ("norm", "head", positions in model.arch; the input transform, layer 0 when
 * there is one, always): mark[i] = 1.  One line naming the token when it names no layer with parameters. */
static dpfl_status mark_personal(const dpfl_config *cfg, const dpfl_model *m, int shift, char *mark, dpfl_error *err)
{
    if (shift) mark[0] = 1;
    for (const char *p = cfg->fl.personal; *p;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const size_t n = strcspn(p, " ,");
        int found = 0;
        if (n == 4 && !strncmp(p, "norm", 4)) {
            for (int32_t i = 0; i < m->nlayers; i++)
                if (m->layers[i].kind == DPFL_LAYER_GROUPNORM && m->layers[i].nparam) mark[i] = 1, found = 1;
            if (!found)
                return dpfl_fail(err, DPFL_EINVAL, "fl.personal: norm names no layer (model.arch '%s' has no "
                                                   "GroupNorm; BatchNorm is refused under DP)", cfg->model.arch);
        } else if (n == 4 && !strncmp(p, "head", 4)) {
            for (int32_t i = m->nlayers - 1; i >= shift && !found; i--)
                if (m->layers[i].nparam) mark[i] = 1, found = 1;
        } else {
            const long i = strtol(p, NULL, 10) + shift;
            if (i >= m->nlayers || !m->layers[i].nparam)
                return dpfl_fail(err, DPFL_EINVAL, "fl.personal: layer %ld of model.arch '%s' %s", i - shift,
                                 cfg->model.arch, i >= m->nlayers ? "does not exist" : "has no parameters");
            mark[i] = 1;
            found = 1;
        }
        DPFL_ASSERT(found);
        p += n;
    }
    return DPFL_OK;
}

/* The personal slices (adjacent layers' merged) and their initial values: the global model's, the transform's
 * identity. */
static dpfl_status personal_slices(fl_clients *c, const dpfl_config *cfg, const dpfl_model *m, const float *global,
                                   dpfl_error *err)
{
    const int shift = m->nlayers > 0 && m->layers[0].kind == DPFL_LAYER_AFFINE;
    char *mark = calloc((size_t)m->nlayers + 1, 1);
    if (!mark) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (personal layers)");
    dpfl_status st = mark_personal(cfg, m, shift, mark, err);
    for (int32_t i = 0; !st && i < m->nlayers; i++) {
        const dpfl_layer *L = &m->layers[i];
        if (!mark[i] || !L->nparam) continue;
        DPFL_ASSERT(c->npr == 0 || L->param_off >= c->pr_off[c->npr - 1] + c->pr_len[c->npr - 1]);
        if (c->npr && c->pr_off[c->npr - 1] + c->pr_len[c->npr - 1] == L->param_off) {
            c->pr_len[c->npr - 1] += L->nparam;
        } else {
            size_t *o = realloc(c->pr_off, (size_t)(c->npr + 1) * sizeof *o);
            if (o) c->pr_off = o;
            size_t *l = realloc(c->pr_len, (size_t)(c->npr + 1) * sizeof *l);
            if (l) c->pr_len = l;
            if (!o || !l) st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (personal layers)");
            else c->pr_off[c->npr] = L->param_off, c->pr_len[c->npr++] = L->nparam;
        }
        if (!st) c->npers += L->nparam;
    }
    free(mark);
    if (st) return st;
    if (c->npers >= m->nparam && c->npers)
        return dpfl_fail(err, DPFL_EINVAL, "fl.personal: every parameter of model.arch '%s' would be personal; "
                                           "nothing is left to federate", cfg->model.arch);
    if (!c->npers) return DPFL_OK;
    if (!(c->pinit = dpfl_alloc(c->npers * sizeof(float), err))) return DPFL_ENOMEM;
    fl_personal_store(c, global, c->pinit);
    if (shift) dpfl_model_affine_identity(&m->layers[0], c->pinit); /* the first slice, at offset 0 */
    return DPFL_OK;
}

/* The settings, the cap on what the blocks may take, the table and w0 (Algorithm 1: h_i <- w0). */
dpfl_status fl_clients_init(fl_clients *c, const dpfl_config *cfg, const dpfl_model *model,
                            const dpfl_optim_config *opt, int32_t clients, const float *global, dpfl_error *err)
{
    memset(c, 0, sizeof *c);
    c->nparam = model->nparam;
    c->count = clients;
    c->keep_opt = (cfg->fl.client_state == DPFL_STATE_KEEP);
    c->helper = (cfg->fl.personalization == DPFL_PERSONAL_HELPER);
    c->alpha = (float)cfg->fl.helper_alpha;
    dpfl_status st = personal_slices(c, cfg, model, global, err);
    if (st) return st;
    c->scaffold = cfg->fl.scaffold;
    c->keep = c->keep_opt || c->helper || c->npers || c->scaffold;
    c->state_vecs = c->keep_opt ? (opt->kind != DPFL_OPT_SGD || opt->momentum != 0.0) + (opt->kind != DPFL_OPT_SGD) : 0;
    if (!c->keep) return DPFL_OK;
    /* the worst case: every client takes part at least once */
    const double per_client = (double)fl_clients_state_floats(c) * sizeof(float) + sizeof(client_opt);
    const double need_mb = per_client * (double)clients / 1048576.0;
    if (need_mb > cfg->fl.client_state_max_mb)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: the clients' own state (%s%s%s%s%s) could take "
                                           "up to %.0f MiB (%d clients x %.3g MiB), over the cap of %d MiB; use fewer "
                                           "clients, client_state = reset, personalization = none or a larger cap",
                         c->helper ? "helper models" : "", c->helper && c->keep_opt ? " + " : "",
                         c->keep_opt ? "optimizer state" : "", (c->helper || c->keep_opt) && c->npers ? " + " : "",
                         c->npers ? "personal parameters" : c->scaffold ? "control variates" : "", need_mb, clients, per_client / 1048576.0,
                         cfg->fl.client_state_max_mb);
    if (!(c->cstate = calloc((size_t)clients, sizeof *c->cstate)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state: table of %d clients)", clients);
    for (int32_t k = 0; k < clients; k++) c->cstate[k].local_acc = NAN;
    if (c->scaffold && !(c->cbar = dpfl_calloc(model->nparam, sizeof(float), err))) return DPFL_ENOMEM;
    if (c->helper) {
        if (!(c->w0 = dpfl_alloc(model->nparam * sizeof(float), err))) return DPFL_ENOMEM;
        dpfl_vec_copy(c->w0, global, model->nparam); /* Algorithm 1: h_i <- w0 */
    }
    return DPFL_OK;
}

void fl_clients_free(fl_clients *c)
{
    for (int32_t k = 0; c->cstate && k < c->count; k++) dpfl_free(c->cstate[k].state);
    free(c->cstate);
    dpfl_free(c->w0);
    dpfl_free(c->cbar);
    c->cbar = NULL;
    free(c->pr_off);
    free(c->pr_len);
    dpfl_free(c->pinit);
    c->cstate = NULL;
    c->w0 = NULL;
    c->pr_off = c->pr_len = NULL;
    c->pinit = NULL;
}

/* A client's first participation gets its state block: a zero optimizer state, as a reset optimizer has, and the
 * helper model w0. */
dpfl_status fl_clients_alloc(fl_clients *c, const dpfl_model *model, int32_t k, int64_t steps, dpfl_error *err)
{
    const size_t floats = fl_clients_state_floats(c);
    client_opt *o = c->keep ? &c->cstate[k] : NULL;
    if (!o || floats == 0 || o->state || steps == 0) return DPFL_OK;
    if (!(o->state = dpfl_calloc(floats, sizeof(float), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d, %zu floats)", k, floats);
    if (c->helper) dpfl_vec_copy(o->state, c->w0, c->nparam); /* h(i) = w0 until its first sync */
    (void)model;
    if (c->npers) dpfl_vec_copy(fl_client_personal(c, k), c->pinit, c->npers); /* the initial values */
    return DPFL_OK;
}

dpfl_status fl_clients_set(fl_clients *c, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    if (!c->keep) return dpfl_fail(err, DPFL_EINVAL, "a client state was given to a run without per-client state");
    if (k < 0 || k >= c->count || t <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state: bad client state (client %d of %d, %lld steps)", k,
                         c->count, (long long)t);
    const size_t n = fl_clients_state_floats(c);
    client_opt *o = &c->cstate[k];
    if (n > 0) {
        if (!o->state && !(o->state = dpfl_alloc(n * sizeof(float), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d)", k);
        memcpy(o->state, state, n * sizeof(float));
    }
    o->t = t;
    return DPFL_OK;
}

float *fl_client_variate(const fl_clients *c, int32_t k)
{
    const client_opt *o = &c->cstate[k];
    return c->scaffold && o->state ? o->state + fl_clients_state_floats(c) - c->npers - c->nparam : NULL;
}

float *fl_client_personal(const fl_clients *c, int32_t k)
{
    const client_opt *o = &c->cstate[k];
    return c->npers && o->state ? o->state + fl_clients_state_floats(c) - c->npers : NULL;
}

void fl_personal_load(const fl_clients *c, const float *vals, float *model)
{
    for (int32_t i = 0; i < c->npr; i++) {
        dpfl_vec_copy(model + c->pr_off[i], vals, c->pr_len[i]);
        vals += c->pr_len[i];
    }
}

void fl_personal_store(const fl_clients *c, const float *model, float *vals)
{
    for (int32_t i = 0; i < c->npr; i++) {
        dpfl_vec_copy(vals, model + c->pr_off[i], c->pr_len[i]);
        vals += c->pr_len[i];
    }
}

void fl_personal_zero(const fl_clients *c, float *v)
{
    for (int32_t i = 0; i < c->npr; i++) dpfl_vec_zero(v + c->pr_off[i], c->pr_len[i]);
}

void fl_personal_reset(const fl_clients *c, float *model) { fl_personal_load(c, c->pinit, model); }

const float *fl_client_model(const fl_clients *c, int32_t k)
{
    return c->cstate[k].state ? c->cstate[k].state : c->w0;
}

void fl_clients_sync_helpers(fl_clients *c, const client_result *results, int32_t n, const float *global)
{
    const size_t P = c->nparam;
    const float a = c->alpha, b = 1.0f - c->alpha;
    for (int32_t i = 0; i < n; i++) {
        const client_result *r = &results[i];
        float *h = c->cstate[r->client].state;
        if (r->dropped || r->steps == 0 || !h) continue; /* did not sync: keeps its helper */
        for (size_t j = 0; j < P; j++) h[j] = b * h[j] + a * global[j];
    }
}
