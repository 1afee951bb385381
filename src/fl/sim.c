/* The federated simulation (McMahan et al. 2017): set-up, settings, and the views its parts get.  The handle
 * holds the parts, each with its own functions: the clients' own state (clients.c, fl_clients), record-level DP
 * (fl_record_dp, read by client.c's local training through an fl_train_ctx), the aggregation mode's state
 * (aggregate_*.c, each mode's own type behind a void *, with the clip and noise it shares in fl_agg_params; it sees
 * the round through an fl_round_view).  A round is round.c; evaluation is
 * eval.c; every privacy mechanism is in mech/.  The dpfl_sim_* functions here are the handle's methods: they pass
 * the parts down. */
#include "sim_internal.h"
#include "core/parallel.h"

#include <cblas.h>
#include <sodium.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void worker_free(worker *w)
{
    dpfl_nn_ws_free(w->ws);
    dpfl_free(w->local);
    dpfl_free(w->grad);
    dpfl_free(w->xbuf);
    dpfl_free(w->ybuf);
    dpfl_free(w->order);
    dpfl_free(w->part);
    dpfl_free(w->norms);
    dpfl_free(w->radius);
    dpfl_free(w->ddp_work); /* distributed DP's (aggregate_ddp.c allocates them) */
    dpfl_free(w->ddp_iwork);
    dpfl_optim_free(&w->opt);
}

void dpfl_sim_free(dpfl_sim *s)
{
    if (!s) return;
    if (s->agg && s->agg->free) s->agg->free(s->aggself);
    for (int32_t i = 0; s->workers && i < s->nthreads; i++) worker_free(&s->workers[i]);
    for (int32_t i = 0; s->slots && i < s->nslots; i++) dpfl_free(s->slots[i]);
    fl_clients_free(&s->clients);
    dpfl_par_free(s->pool);
    free(s->workers);
    free(s->slots);
    free(s->results);
    free(s->sampled);
    free(s->steps);
    dpfl_ledger_free(&s->ledger);
    dpfl_free(s->acc);
    free(s);
}

/* One worker per thread: its nn workspace (single-threaded unless it lends itself to a lone client), buffers and
 * optimizer. */
static dpfl_status workers_create(dpfl_sim *s, int32_t B, dpfl_error *err)
{
    const size_t P = s->model->nparam;
    dpfl_status st;
    for (int32_t i = 0; i < s->nthreads; i++) {
        worker *w = &s->workers[i];
        if (!(w->ws = dpfl_nn_ws_create(s->model, B, err))) return DPFL_ENOMEM;
        if ((st = dpfl_nn_ws_set_threads(w->ws, 1, err))) return st;
        w->ws_threads = 1;
        if (!(w->local = dpfl_alloc(P * sizeof(float), err)) || !(w->grad = dpfl_alloc(P * sizeof(float), err)) ||
            !(w->xbuf = dpfl_alloc((size_t)B * (size_t)s->train->dim * sizeof(float), err)) ||
            !(w->ybuf = dpfl_alloc((size_t)B * sizeof(int32_t), err)) ||
            !(w->order = dpfl_alloc(((size_t)s->max_client + 1) * sizeof(int32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
        if (s->rdp.on && (!(w->part = dpfl_alloc(P * sizeof(float), err)) ||
                       !(w->norms = dpfl_alloc((size_t)B * sizeof(float), err)) ||
                       !(w->radius = dpfl_alloc((size_t)B * sizeof(float), err))))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
        if ((st = dpfl_optim_init(&w->opt, &s->optcfg, P, err))) return st;
    }
    return DPFL_OK;
}

static void optim_config(dpfl_optim_config *o, const dpfl_config *cfg)
{
    dpfl_optim_defaults(o);
    o->kind = cfg->fl.optimizer;
    o->sched = cfg->fl.schedule;
    o->lr = cfg->fl.lr;
    o->momentum = cfg->fl.momentum;
    o->weight_decay = cfg->fl.weight_decay;
    o->gamma = cfg->fl.lr_gamma;
    o->step_size = cfg->fl.lr_step;
}

static void record_dp_init(fl_record_dp *r, const dpfl_config *cfg)
{
    memset(r, 0, sizeof *r);
    r->on = cfg->record_dp.enabled;
    r->poisson = (cfg->record_dp.sampler == DPFL_BATCH_POISSON);
    r->e2e = cfg->record_dp.e2e;
    r->secure = cfg->record_dp.secure_mode;
    r->z = cfg->record_dp.noise;
    r->clip.clip = cfg->record_dp.clip;
    r->clip.per_layer = cfg->record_dp.per_layer;
}

/* The round's buffers: slots, reports, the sampled list and steps, the ledger, the server's sum. */
static dpfl_status buffers_create(dpfl_sim *s, dpfl_error *err)
{
    const size_t P = s->model->nparam;
    const int32_t K = s->part->clients;
    s->workers = calloc((size_t)s->nthreads, sizeof *s->workers);
    s->slots = calloc((size_t)s->nslots, sizeof *s->slots);
    s->results = calloc((size_t)K, sizeof *s->results);
    s->sampled = calloc((size_t)K, sizeof *s->sampled);
    s->steps = calloc((size_t)K, sizeof *s->steps);
    dpfl_status st = dpfl_ledger_init(&s->ledger, K, err);
    if (st) return st;
    if (!s->workers || !s->slots || !s->results || !s->sampled || !s->steps ||
        !(s->acc = dpfl_alloc(P * sizeof(float), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
    for (int32_t i = 0; i < s->nslots; i++)
        if (!(s->slots[i] = dpfl_alloc(P * sizeof(float), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
    return DPFL_OK;
}

/* what the aggregation mode's create reads (after the buffers and workers exist) */
static fl_agg_setup agg_setup(dpfl_sim *s)
{
    return (fl_agg_setup){.cfg = s->cfg, .model = s->model, .part = s->part, .uniform_weights = s->uniform_weights,
                          .root = &s->root, .sampling = s->sampling, .nslots = s->nslots, .nthreads = s->nthreads,
                          .workers = s->workers, .par = &s->aggp,
                          .out = {.nparam = s->model->nparam, .global = s->global, .acc = s->acc,
                                  .eta = s->cfg->fl.eta}};
}

dpfl_status dpfl_sim_create(const dpfl_config *cfg, const dpfl_model *model, const dpfl_dataset *train,
                            const dpfl_dataset *test, const dpfl_partition *part, const dpfl_rng *root,
                            float *global, dpfl_sim **out, dpfl_error *err)
{
    dpfl_sim *s = calloc(1, sizeof *s);
    if (!s) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation)");
    s->cfg = cfg;
    s->model = model;
    s->train = train;
    s->test = test;
    s->part = part;
    s->root = *root;
    s->global = global;
    s->nthreads = cfg->run.threads > 0 ? cfg->run.threads : 1;
    s->nslots = 2 * s->nthreads;
    s->eval_batch = dpfl_eval_batch(cfg);
    s->t0 = dpfl_now();
    optim_config(&s->optcfg, cfg);
    dpfl_status st = fl_clients_init(&s->clients, cfg, model, &s->optcfg, part->clients, global, err);
    if (st) goto fail;
    for (int32_t k = 0; k < part->clients; k++)
        if (dpfl_partition_size(part, k) > s->max_client) s->max_client = dpfl_partition_size(part, k);
    record_dp_init(&s->rdp, cfg);
    s->agg = fl_aggregator_for(cfg);
    s->aggp.S = cfg->client_dp.clip;
    s->transport = &fl_transport_local;
    s->sampling = cfg->fl.sampling;
    s->uniform_weights = (cfg->fl.weighting == DPFL_WEIGHT_UNIFORM);
    const int32_t B = cfg->fl.batch > s->eval_batch ? cfg->fl.batch : s->eval_batch;
    if ((st = buffers_create(s, err))) goto fail;
    /* Parallelism is across clients: each worker computes single-threaded (no BLAS or nn helper threads), which
     * also keeps results independent of the thread count. */
    openblas_set_num_threads(1);
    if ((st = workers_create(s, B, err))) goto fail;
    const fl_agg_setup su = agg_setup(s);
    if ((st = s->agg->create(&su, &s->aggself, err)) ||
        (s->agg->client_level && (st = dpfl_sim_set_client_noise(s, 1, cfg->client_dp.noise, err))))
        goto fail;
    s->pool = dpfl_par_create(s->nthreads); /* NULL: one thread, or none could start (then serial, same bits) */
    *out = s;
    return DPFL_OK;
fail:
    dpfl_sim_free(s);
    return st;
}

fl_sampling_view fl_sim_sampling(const dpfl_sim *s)
{
    return (fl_sampling_view){.cfg = s->cfg, .clients = s->part->clients, .sampling = s->sampling,
                              .round = s->round,
                              .design = s->design_round > 0 && s->design_round == s->round ? &s->design : NULL};
}

fl_round_view fl_sim_view(const dpfl_sim *s)
{
    const fl_sampling_view smp = fl_sim_sampling(s);
    return (fl_round_view){.round = s->round, .design = fl_round_design(&smp, s->round), .nsampled = s->nsampled,
                           .sampled = s->sampled, .results = s->results, .slots = s->slots,
                           .transport = s->transport, .job = &s->job};
}

fl_train_ctx fl_sim_train_ctx(dpfl_sim *s)
{
    return (fl_train_ctx){.cfg = s->cfg, .model = s->model, .train = s->train, .test = s->test, .part = s->part,
                          .root = &s->root, .global = s->global, .rdp = &s->rdp, .round = s->round,
                          .eval_batch = s->eval_batch, .lr = s->lr,
                          .threads = s->chunk_len < s->nthreads ? s->nthreads / s->chunk_len : 1,
                          .per_step = s->agg->client_level && s->cfg->client_dp.clip_strategy == DPFL_CLIP_PER_STEP,
                          .S = s->aggp.S};
}

void fl_sim_set_transport(dpfl_sim *s, const fl_transport *t)
{
    s->transport = t ? t : &fl_transport_local; /* distributed DP: remote when it has secagg_finish (its begin) */
}

int64_t dpfl_sim_client_steps(const dpfl_sim *s, int32_t k)
{
    return fl_client_steps(s->cfg, dpfl_partition_size(s->part, k));
}

dpfl_mech_rpdp dpfl_sim_rpdp_design(const dpfl_sim *s)
{
    const fl_sampling_view smp = fl_sim_sampling(s);
    const dpfl_mech_clients d = fl_round_design(&smp, s->round > 0 ? s->round : 1);
    int64_t steps = 0;
    for (int32_t k = 0; k < s->part->clients; k++) {
        const int64_t sk = dpfl_sim_client_steps(s, k);
        if (sk > steps) steps = sk;
    }
    return dpfl_mech_rpdp_of(&d, steps, s->rdp.z);
}

void dpfl_sim_set_record_noise(dpfl_sim *s, double z)
{
    s->rdp.z = z;
    /* the exact sampler's range is checked by the run driver before any release */
    DPFL_ASSERT(!s->rdp.secure || dpfl_mech_discrete_in_range(s->model->nparam, z));
}

void dpfl_sim_set_record_rates(dpfl_sim *s, double *p, const double *client_denom)
{
    DPFL_ASSERT(s->rdp.poisson && !s->rdp.secure && !s->rdp.e2e);
    s->rdp.p = p;
    s->rdp.denom = client_denom;
}

void dpfl_sim_set_record_filter(dpfl_sim *s, double *spent, const double *cap, double alpha)
{
    DPFL_ASSERT(s->rdp.p && !s->rdp.clip.per_layer && alpha > 1.0);
    s->rdp.spent = spent;
    s->rdp.cap = cap;
    s->rdp.filter_alpha = alpha;
}

int32_t dpfl_sim_filter_spent(const dpfl_sim *s, int32_t k, double *out)
{
    if (!s->rdp.spent) return 0;
    const int32_t *idx = s->part->index + s->part->offset[k];
    const int32_t n = dpfl_partition_size(s->part, k);
    for (int32_t i = 0; out && i < n; i++) out[i] = s->rdp.spent[idx[i]];
    return n;
}

dpfl_status dpfl_sim_set_filter_spent(dpfl_sim *s, int32_t k, const double *v, dpfl_error *err)
{
    const int32_t *idx = s->part->index + s->part->offset[k];
    const int32_t n = s->rdp.spent ? dpfl_partition_size(s->part, k) : 0;
    for (int32_t i = 0; i < n; i++) /* all checked before any is taken */
        if (!(v[i] >= 0 && v[i] <= s->rdp.cap[idx[i]]))
            return dpfl_fail(err, DPFL_EINVAL, "client %d: filter loss %g of record %d is outside [0, its cap %g]", k,
                             v[i], idx[i], s->rdp.cap[idx[i]]);
    fl_record_dp *rd = &s->rdp;
    for (int32_t i = 0; i < n; i++) {
        const int32_t r = idx[i];
        rd->spent[r] = v[i];
        if (rd->cap[r] - rd->spent[r] < DPFL_FILTER_OUT * rd->cap[r]) rd->p[r] = 0.0; /* filtered out, as client.c */
    }
    return DPFL_OK;
}

dpfl_status dpfl_sim_set_client_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err)
{
    const fl_sampling_view smp = fl_sim_sampling(s);
    const dpfl_mech_clients d = fl_round_design(&smp, round);
    fl_agg_params_plain(&s->aggp, z);
    return s->agg->set_noise ? s->agg->set_noise(s->aggself, &d, round, z, err) : DPFL_OK;
}

double dpfl_sim_client_release_noise(const dpfl_sim *s) { return s->aggp.z_release; }
double dpfl_sim_quantile_noise(const dpfl_sim *s) { return s->aggp.sigma_b; }
double dpfl_sim_update_noise(const dpfl_sim *s) { return s->aggp.z_sum; }
const dpfl_ddp_plan *dpfl_sim_ddp_plan(const dpfl_sim *s)
{
    return s->agg == &fl_agg_ddp ? fl_ddp_plan(s->aggself) : NULL;
}

int dpfl_sim_keeps_client_state(const dpfl_sim *s) { return s->clients.keep; }
size_t dpfl_sim_client_state_floats(const dpfl_sim *s) { return fl_clients_state_floats(&s->clients); }
const float *dpfl_sim_initial_model(const dpfl_sim *s) { return s->clients.w0; }

void dpfl_sim_set_initial_model(dpfl_sim *s, const float *w0)
{
    DPFL_ASSERT(s->clients.w0);
    fl_clients_set_w0(&s->clients, w0); /* and the helper evaluations of w0 kept are stale */
}

const float *dpfl_sim_helper_model(const dpfl_sim *s, int32_t k)
{
    DPFL_ASSERT(s->clients.helper && k >= 0 && k < s->part->clients);
    return fl_client_model(&s->clients, k);
}

int64_t dpfl_sim_client_state(const dpfl_sim *s, int32_t k, const float **state)
{
    DPFL_ASSERT(k >= 0 && k < s->part->clients);
    const int keep = s->clients.keep;
    if (state) *state = keep ? fl_clients_peek(&s->clients, k) : NULL; /* a paged-out block: read back */
    return keep ? s->clients.cstate[k].t : 0;
}

void dpfl_sim_client_sync(dpfl_sim *s, int32_t k, const float *global)
{
    const client_result r = {.client = k, .steps = 1}; /* as the round syncs a client whose update arrived */
    if (s->clients.helper) fl_clients_sync_helpers(&s->clients, &r, 1, global);
}

dpfl_status dpfl_sim_set_client_state(dpfl_sim *s, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    return fl_clients_set(&s->clients, k, t, state, err);
}

void dpfl_sim_set_update_observer(dpfl_sim *s, dpfl_sim_update_fn fn, void *ctx)
{
    s->observer = fn;
    s->observer_ctx = ctx;
}

double dpfl_sim_update_clip(const dpfl_sim *s) { return s->aggp.S; }
void dpfl_sim_set_update_clip(dpfl_sim *s, double S) { s->aggp.S = S; }

int32_t dpfl_sim_client_losses(const dpfl_sim *s, int32_t *clients, double *losses)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->nsampled; i++) {
        const client_result *r = &s->results[i];
        if (r->dropped || r->examples == 0) continue;
        clients[n] = r->client;
        losses[n++] = r->loss_sum / (double)r->examples;
    }
    return n;
}

/* rPDP-FL: a digest of client k's records' rates and divisor, which a deployed client compares with its own. */
void dpfl_sim_rates_digest(const dpfl_sim *s, int32_t k, uint8_t out[32])
{
    memset(out, 0, 32);
    if (!s->rdp.p) return;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    const int32_t *idx = s->part->index + s->part->offset[k];
    const int32_t n = dpfl_partition_size(s->part, k);
    for (int32_t i = 0; i < n; i++) crypto_generichash_update(&st, (const unsigned char *)&s->rdp.p[idx[i]], 8);
    crypto_generichash_update(&st, (const unsigned char *)&s->rdp.denom[k], 8);
    crypto_generichash_final(&st, out, 32);
}

double dpfl_sim_round_lr(const dpfl_sim *s, int32_t round) { return dpfl_optim_lr(&s->optcfg, (int64_t)round - 1); }
