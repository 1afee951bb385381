/* The federated simulation: set-up and settings.  A round is round.c (sampling, dropouts, the clients through the
 * transport, the server in client order); a client's local training is client.c; the server's client-level
 * release is an aggregation mode (aggregate_*.c); evaluation is eval.c; every privacy mechanism is in mech/.
 *
 * Per-client state: with fl.personalization = helper each client's helper model, with fl.client_state = keep its
 * optimizer state (momentum buffer or Adam m, v, and the step count t), live in a block of its own, allocated the
 * first time the client trains.  A worker borrows the block of the client it trains (no copy) and hands it back
 * with the new step count; a client is trained by one worker at a time, so the state, like everything else, does
 * not depend on the thread count. */
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
    dpfl_optim_free(&w->opt);
}

void dpfl_sim_free(dpfl_sim *s)
{
    if (!s) return;
    if (s->agg && s->agg->free) s->agg->free(s);
    for (int32_t i = 0; s->workers && i < s->nthreads; i++) worker_free(&s->workers[i]);
    for (int32_t i = 0; s->slots && i < s->nslots; i++) dpfl_free(s->slots[i]);
    for (int32_t k = 0; s->cstate && k < s->part->clients; k++) dpfl_free(s->cstate[k].state);
    free(s->cstate);
    dpfl_free(s->w0);
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
        if (s->rdp && (!(w->part = dpfl_alloc(P * sizeof(float), err)) ||
                       !(w->norms = dpfl_alloc((size_t)B * sizeof(float), err)) ||
                       !(w->radius = dpfl_alloc((size_t)B * sizeof(float), err))))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
        if ((st = dpfl_optim_init(&w->opt, &s->optcfg, P, err))) return st;
    }
    return DPFL_OK;
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
    dpfl_status st;
    dpfl_optim_defaults(&s->optcfg);
    s->optcfg.kind = cfg->fl.optimizer;
    s->optcfg.sched = cfg->fl.schedule;
    s->optcfg.lr = cfg->fl.lr;
    s->optcfg.momentum = cfg->fl.momentum;
    s->optcfg.weight_decay = cfg->fl.weight_decay;
    s->optcfg.gamma = cfg->fl.lr_gamma;
    s->optcfg.step_size = cfg->fl.lr_step;
    s->keep_opt = (cfg->fl.client_state == DPFL_STATE_KEEP);
    s->helper = (cfg->fl.personalization == DPFL_PERSONAL_HELPER);
    s->alpha = (float)cfg->fl.helper_alpha;
    s->tr = model->nlayers > 0 && model->layers[0].kind == DPFL_LAYER_AFFINE ? model->layers[0].nparam : 0;
    s->keep = s->keep_opt || s->helper || s->tr;
    s->state_vecs = s->keep_opt ? (s->optcfg.kind != DPFL_OPT_SGD || s->optcfg.momentum != 0.0) +
                                      (s->optcfg.kind != DPFL_OPT_SGD)
                                : 0;
    if (s->keep) {
        /* the worst case: every client takes part at least once */
        const double per_client = (double)dpfl_sim_client_state_floats(s) * sizeof(float) + sizeof(client_opt);
        const double need_mb = per_client * (double)part->clients / 1048576.0;
        if (need_mb > cfg->fl.client_state_max_mb) {
            st = dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: the clients' own state (%s%s%s%s%s) could take "
                                             "up to %.0f MiB (%d clients x %.3g MiB), over the cap of %d MiB; use fewer "
                                             "clients, client_state = reset, personalization = none or a larger cap",
                           s->helper ? "helper models" : "", s->helper && s->keep_opt ? " + " : "",
                           s->keep_opt ? "optimizer state" : "", (s->helper || s->keep_opt) && s->tr ? " + " : "",
                           s->tr ? "input transforms" : "", need_mb, part->clients, per_client / 1048576.0,
                           cfg->fl.client_state_max_mb);
            goto fail;
        }
        if (!(s->cstate = calloc((size_t)part->clients, sizeof *s->cstate))) {
            st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state: table of %d clients)", part->clients);
            goto fail;
        }
        for (int32_t k = 0; k < part->clients; k++) s->cstate[k].local_acc = NAN;
        if (s->helper) {
            if (!(s->w0 = dpfl_alloc(model->nparam * sizeof(float), err))) {
                st = DPFL_ENOMEM;
                goto fail;
            }
            dpfl_vec_copy(s->w0, global, model->nparam); /* Algorithm 1: h_i <- w0 */
        }
    }
    for (int32_t k = 0; k < part->clients; k++)
        if (dpfl_partition_size(part, k) > s->max_client) s->max_client = dpfl_partition_size(part, k);
    s->rdp = cfg->record_dp.enabled;
    s->rdp_poisson = (cfg->record_dp.sampler == DPFL_BATCH_POISSON);
    s->rdp_e2e = cfg->record_dp.e2e;
    s->rdp_secure = cfg->record_dp.secure_mode;
    s->rdp_z = cfg->record_dp.noise;
    s->clip.clip = cfg->record_dp.clip;
    s->clip.per_layer = cfg->record_dp.per_layer;
    s->agg = fl_aggregator_for(cfg);
    s->ddp.secagg = cfg->client_dp.ddp_secagg;
    s->transport = &fl_transport_local;
    s->sampling = cfg->fl.sampling;
    s->uniform_weights = (cfg->fl.weighting == DPFL_WEIGHT_UNIFORM);
    s->cdp.strategy = cfg->client_dp.clip_strategy;
    s->cdp.S = cfg->client_dp.clip;
    const size_t P = model->nparam;
    const int32_t B = cfg->fl.batch > s->eval_batch ? cfg->fl.batch : s->eval_batch;
    st = DPFL_ENOMEM;
    s->workers = calloc((size_t)s->nthreads, sizeof *s->workers);
    s->slots = calloc((size_t)s->nslots, sizeof *s->slots);
    s->results = calloc((size_t)part->clients, sizeof *s->results);
    s->sampled = calloc((size_t)part->clients, sizeof *s->sampled);
    s->steps = calloc((size_t)part->clients, sizeof *s->steps);
    if ((st = dpfl_ledger_init(&s->ledger, part->clients, err))) goto fail;
    st = DPFL_ENOMEM;
    if (!s->workers || !s->slots || !s->results || !s->sampled || !s->steps ||
        !(s->acc = dpfl_alloc(P * sizeof(float), err)))
        goto oom;
    for (int32_t i = 0; i < s->nslots; i++)
        if (!(s->slots[i] = dpfl_alloc(P * sizeof(float), err))) goto oom;
    /* Parallelism is across clients: each worker computes single-threaded (no BLAS or nn helper threads), which
     * also keeps results independent of the thread count. */
    openblas_set_num_threads(1);
    if ((st = workers_create(s, B, err))) goto fail;
    if ((s->agg->create && (st = s->agg->create(s, err))) ||
        (s->agg->client_level && (st = dpfl_sim_set_client_noise(s, 1, cfg->client_dp.noise, err))))
        goto fail;
    s->pool = dpfl_par_create(s->nthreads); /* NULL: one thread, or none could start (then serial, same bits) */
    *out = s;
    return DPFL_OK;
oom:
    st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
fail:
    dpfl_sim_free(s);
    return st;
}

void fl_sim_set_transport(dpfl_sim *s, const fl_transport *t)
{
    s->transport = t ? t : &fl_transport_local;
    s->ddp.remote = s->transport->secagg_finish != NULL;
}

int64_t dpfl_sim_client_steps(const dpfl_sim *s, int32_t k)
{
    return fl_client_steps(s->cfg, dpfl_partition_size(s->part, k));
}

void dpfl_sim_set_record_noise(dpfl_sim *s, double z)
{
    s->rdp_z = z;
    /* the exact sampler's range is checked by the run driver before any release */
    DPFL_ASSERT(!s->rdp_secure || dpfl_mech_discrete_in_range(s->model->nparam, z));
}

void dpfl_sim_set_record_rates(dpfl_sim *s, double *p, const double *client_denom)
{
    DPFL_ASSERT(s->rdp_poisson && !s->rdp_secure && !s->rdp_e2e);
    s->rec_p = p;
    s->rec_denom = client_denom;
}

void dpfl_sim_set_record_filter(dpfl_sim *s, double *spent, const double *cap, double alpha)
{
    DPFL_ASSERT(s->rec_p && !s->clip.per_layer && alpha > 1.0);
    s->rec_spent = spent;
    s->rec_cap = cap;
    s->filter_alpha = alpha;
}

dpfl_status dpfl_sim_set_client_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err)
{
    s->cdp.z_sum = z;
    s->cdp.sigma_b = 0.0;
    return s->agg->set_noise ? s->agg->set_noise(s, round, z, err) : DPFL_OK;
}

double dpfl_sim_client_release_noise(const dpfl_sim *s)
{
    if (s->cdp.strategy != DPFL_CLIP_ADAPTIVE || !(s->cdp.sigma_b > 0)) return s->cdp.z_sum;
    return dpfl_mech_adaptive_release_z(s->cdp.z_sum, s->cdp.sigma_b);
}

double dpfl_sim_quantile_noise(const dpfl_sim *s) { return s->cdp.sigma_b; }
double dpfl_sim_update_noise(const dpfl_sim *s) { return s->cdp.z_sum; }
const dpfl_ddp_plan *dpfl_sim_ddp_plan(const dpfl_sim *s)
{
    return s->agg == &fl_agg_ddp && s->ddp.plan.z > 0 ? &s->ddp.plan : NULL;
}

int dpfl_sim_keeps_client_state(const dpfl_sim *s) { return s->keep; }

size_t dpfl_sim_client_state_floats(const dpfl_sim *s)
{
    return ((size_t)s->helper + (size_t)s->state_vecs) * s->model->nparam + s->tr;
}

const float *dpfl_sim_initial_model(const dpfl_sim *s) { return s->w0; }

void dpfl_sim_set_initial_model(dpfl_sim *s, const float *w0)
{
    DPFL_ASSERT(s->w0);
    dpfl_vec_copy(s->w0, w0, s->model->nparam);
}

const float *dpfl_sim_helper_model(const dpfl_sim *s, int32_t k)
{
    DPFL_ASSERT(s->helper && k >= 0 && k < s->part->clients);
    return fl_client_model(s, k);
}

int64_t dpfl_sim_client_state(const dpfl_sim *s, int32_t k, const float **state)
{
    DPFL_ASSERT(k >= 0 && k < s->part->clients);
    if (state) *state = s->keep ? s->cstate[k].state : NULL;
    return s->keep ? s->cstate[k].t : 0;
}

dpfl_status dpfl_sim_set_client_state(dpfl_sim *s, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    if (!s->keep) return dpfl_fail(err, DPFL_EINVAL, "a client state was given to a run without per-client state");
    if (k < 0 || k >= s->part->clients || t <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state: bad client state (client %d of %d, %lld steps)", k,
                         s->part->clients, (long long)t);
    const size_t n = dpfl_sim_client_state_floats(s);
    client_opt *c = &s->cstate[k];
    if (n > 0) {
        if (!c->state && !(c->state = dpfl_alloc(n * sizeof(float), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d)", k);
        memcpy(c->state, state, n * sizeof(float));
    }
    c->t = t;
    return DPFL_OK;
}

void dpfl_sim_set_update_observer(dpfl_sim *s, dpfl_sim_update_fn fn, void *ctx)
{
    s->observer = fn;
    s->observer_ctx = ctx;
}

double dpfl_sim_update_clip(const dpfl_sim *s) { return s->cdp.S; }
void dpfl_sim_set_update_clip(dpfl_sim *s, double S) { s->cdp.S = S; }

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
    if (!s->rec_p) return;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    const int32_t *idx = s->part->index + s->part->offset[k];
    const int32_t n = dpfl_partition_size(s->part, k);
    for (int32_t i = 0; i < n; i++) crypto_generichash_update(&st, (const unsigned char *)&s->rec_p[idx[i]], 8);
    crypto_generichash_update(&st, (const unsigned char *)&s->rec_denom[k], 8);
    crypto_generichash_final(&st, out, 32);
}

double dpfl_sim_round_lr(const dpfl_sim *s, int32_t round) { return dpfl_optim_lr(&s->optcfg, (int64_t)round - 1); }
