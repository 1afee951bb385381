/* The clients' own state (PriFedSync, Zheng et al., Algorithm 1: each client's helper model h(i), kept across the
 * rounds it sits out; fl.client_state = keep: its local optimizer state; PrivateFL, Yang et al. 2023: its own input
 * transform; fl.personal: its own normalization layers (FedBN, Li et al. 2021; FedGN in PrivateFL's Table 5) or
 * personal head (PP-SGD, Bietti et al. 2022)).  One block per client, allocated the first time it trains: the
 * helper model (P floats), then the optimizer's vectors, then the personal parameters.  A worker borrows the block of the client it trains (client.c); a
 * client is trained by one worker at a time, so the state does not depend on the thread count.
 * The blocks in memory are a cache under fl.client_state_max_mb: a block the round does not need may be paged out
 * to its state file (client_store.c) and is read back, bit for bit, when its client is next sampled. */
#include "sim_internal.h"

#include "core/file.h"

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
    /* a cache limit: a round needs its sampled clients' blocks together; at least one must fit */
    c->cap = (size_t)cfg->fl.client_state_max_mb << 20;
    const double block_mb = (double)fl_clients_state_floats(c) * sizeof(float) / 1048576.0;
    if (block_mb > cfg->fl.client_state_max_mb)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: one client's own state (%s%s%s%s%s) takes "
                                           "%.3g MiB, over the cap of %d MiB on the state kept in memory; use "
                                           "client_state = reset, personalization = none or a larger cap",
                         c->helper ? "helper model" : "", c->helper && c->keep_opt ? " + " : "",
                         c->keep_opt ? "optimizer state" : "", (c->helper || c->keep_opt) && c->npers ? " + " : "",
                         c->npers ? "personal parameters" : c->scaffold ? "control variates" : "", block_mb,
                         cfg->fl.client_state_max_mb);
    if (!(c->cstate = calloc((size_t)clients, sizeof *c->cstate)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state: table of %d clients)", clients);
    for (int32_t k = 0; k < clients; k++) c->cstate[k].local_acc = NAN;
    if (c->scaffold && (!(c->cbar = dpfl_calloc(model->nparam, sizeof(float), err)) ||
                        !(c->dcmean = dpfl_alloc(model->nparam * sizeof(float), err))))
        return DPFL_ENOMEM;
    if (c->scaffold && (st = dpfl_xsum_init(&c->dc, model->nparam, err))) return st;
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
    free(c->dir);
    dpfl_free(c->scratch);
    c->dir = NULL;
    c->scratch = NULL;
    dpfl_free(c->w0);
    dpfl_free(c->cbar);
    dpfl_free(c->dcmean);
    dpfl_xsum_free(&c->dc);
    c->cbar = c->dcmean = NULL;
    free(c->pr_off);
    free(c->pr_len);
    dpfl_free(c->pinit);
    c->cstate = NULL;
    c->w0 = NULL;
    c->pr_off = c->pr_len = NULL;
    c->pinit = NULL;
}

static size_t block_bytes(const fl_clients *c) { return fl_clients_state_floats(c) * sizeof(float); }

void fl_clients_begin_round(fl_clients *c, int32_t round) { c->stamp = round; }

/* Room for one more block in memory: page out the least recently used blocks no client of the current round
 * needs (their file first if they changed since it) until it fits under the cap. */
static dpfl_status make_room(fl_clients *c, int32_t k, dpfl_error *err)
{
    const size_t bytes = block_bytes(c);
    while ((size_t)(c->resident + 1) * bytes > c->cap) {
        int32_t v = -1, needed = 0;
        for (int32_t j = 0; j < c->count; j++) {
            const client_opt *o = &c->cstate[j];
            if (!o->state) continue;
            if (o->last_use >= c->stamp) needed++;
            else if (v < 0 || o->last_use < c->cstate[v].last_use) v = j;
        }
        if (v < 0)
            return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: client %d's state does not fit: %d clients "
                                               "of round %d already hold %d x %.3g MiB of the cap of %zu MiB; raise "
                                               "the cap or sample fewer clients per round", k, needed, c->stamp,
                             needed, (double)bytes / 1048576.0, c->cap >> 20);
        client_opt *o = &c->cstate[v];
        dpfl_status st;
        if (o->dirty) {
            if (!c->dir)
                return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: the clients' state is over the cap of "
                                                   "%zu MiB and this simulation has no folder to page it out to "
                                                   "(dpfl train pages to the run folder's clients/)", c->cap >> 20);
            if ((st = fl_store_write(c, &v, 1, c->stamp, err))) return st;
        }
        dpfl_free(o->state);
        o->state = NULL;
        c->resident--;
        c->evictions++;
    }
    return DPFL_OK;
}

/* client k's block into memory: its file, or (its first participation) a zero optimizer state, as a reset
 * optimizer has, the helper model w0 and the personal parameters' initial values */
static dpfl_status page_in(fl_clients *c, int32_t k, dpfl_error *err)
{
    client_opt *o = &c->cstate[k];
    dpfl_status st = make_room(c, k, err);
    if (st) return st;
    if (!(o->state = dpfl_calloc(fl_clients_state_floats(c), sizeof(float), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d, %zu floats)", k,
                         fl_clients_state_floats(c));
    c->resident++;
    if (o->gen > 0) {
        if ((st = fl_store_read(c, k, o->state, err))) {
            dpfl_free(o->state);
            o->state = NULL;
            c->resident--;
            return st;
        }
        c->files_read++;
        o->dirty = 0;
        return DPFL_OK;
    }
    if (c->helper) dpfl_vec_copy(o->state, c->w0, c->nparam); /* h(i) = w0 until its first sync */
    if (c->npers) dpfl_vec_copy(fl_client_personal(c, k), c->pinit, c->npers); /* the initial values */
    o->dirty = 1;
    return DPFL_OK;
}

/* Client k is about to train (steps local steps; none: no block): its block in memory, marked changed. */
dpfl_status fl_clients_alloc(fl_clients *c, const dpfl_model *model, int32_t k, int64_t steps, dpfl_error *err)
{
    (void)model;
    const size_t floats = fl_clients_state_floats(c);
    client_opt *o = c->keep ? &c->cstate[k] : NULL;
    if (!o || floats == 0 || steps == 0) return DPFL_OK;
    o->last_use = c->stamp;
    dpfl_status st;
    if (!o->state && (st = page_in(c, k, err))) return st;
    o->dirty = 1; /* training changes it */
    o->eval_ok = 0;
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
        dpfl_status st;
        if (!o->state) {
            if ((st = make_room(c, k, err))) return st;
            if (!(o->state = dpfl_alloc(n * sizeof(float), err)))
                return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d)", k);
            c->resident++;
        }
        o->last_use = c->stamp;
        memcpy(o->state, state, n * sizeof(float));
        o->dirty = 1;
    }
    o->eval_ok = 0;
    o->t = t;
    return DPFL_OK;
}

dpfl_status fl_clients_restore_ref(fl_clients *c, int32_t k, int64_t t, int32_t gen, uint32_t crc, dpfl_error *err)
{
    if (!c->keep || k < 0 || k >= c->count || t <= 0 || gen < 0 || (gen > 0) != (fl_clients_state_floats(c) > 0))
        return dpfl_fail(err, DPFL_EFORMAT, "bad client state reference (client %d of %d, %lld steps, generation %d)",
                         k, c->count, (long long)t, gen);
    client_opt *o = &c->cstate[k];
    if (o->state) {
        dpfl_free(o->state);
        o->state = NULL;
        c->resident--;
    }
    o->t = t;
    o->gen = o->ref_gen = gen;
    o->crc = crc;
    o->dirty = o->eval_ok = 0;
    return DPFL_OK;
}

dpfl_status fl_clients_set_dir(fl_clients *c, const char *dir, dpfl_error *err)
{
    dpfl_status st = dpfl_file_make_dirs(dir, 0755, err);
    if (st) return st;
    char *d = strdup(dir);
    if (!d) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    free(c->dir);
    c->dir = d;
    return DPFL_OK;
}

dpfl_status fl_clients_flush(fl_clients *c, int32_t gen, dpfl_error *err)
{
    int32_t n = 0;
    for (int32_t k = 0; c->cstate && k < c->count; k++) n += c->cstate[k].state && c->cstate[k].dirty;
    if (!n) return DPFL_OK;
    int32_t *ks = malloc((size_t)n * sizeof *ks);
    if (!ks) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client state files)");
    n = 0;
    for (int32_t k = 0; k < c->count; k++)
        if (c->cstate[k].state && c->cstate[k].dirty) ks[n++] = k;
    dpfl_status st = fl_store_write(c, ks, n, gen, err);
    free(ks);
    return st;
}

void fl_clients_commit(fl_clients *c)
{
    for (int32_t k = 0; c->cstate && k < c->count; k++) {
        client_opt *o = &c->cstate[k];
        if (o->ref_gen == o->gen) continue;
        if (o->ref_gen > 0) fl_store_remove(c, k, o->ref_gen); /* the durable checkpoint names gen now */
        o->ref_gen = o->gen;
    }
}

void fl_clients_set_w0(fl_clients *c, const float *w0)
{
    dpfl_vec_copy(c->w0, w0, c->nparam);
    for (int32_t k = 0; c->cstate && k < c->count; k++)
        if (!c->cstate[k].state && !c->cstate[k].gen) c->cstate[k].eval_ok = 0;
}

const float *fl_clients_peek(const fl_clients *c, int32_t k)
{
    const client_opt *o = &c->cstate[k];
    if (o->state || o->gen == 0) return o->state;
    fl_clients *m = (fl_clients *)c; /* the scratch block: a cache fill, not a change of state */
    if (!m->scratch && !(m->scratch = dpfl_alloc(block_bytes(c), NULL))) return NULL;
    return fl_store_read(c, k, m->scratch, NULL) ? NULL : m->scratch;
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
    return c->cstate[k].state || c->cstate[k].gen ? fl_clients_peek(c, k) : c->w0;
}

void fl_clients_sync_helpers(fl_clients *c, const client_result *results, int32_t n, const float *global)
{
    const size_t P = c->nparam;
    const float a = c->alpha, b = 1.0f - c->alpha;
    for (int32_t i = 0; i < n; i++) {
        const client_result *r = &results[i];
        float *h = c->cstate[r->client].state;
        if (r->dropped || r->steps == 0 || !h) continue; /* did not sync: keeps its helper */
        c->cstate[r->client].dirty = 1;
        c->cstate[r->client].eval_ok = 0;
        for (size_t j = 0; j < P; j++) h[j] = b * h[j] + a * global[j];
    }
}
