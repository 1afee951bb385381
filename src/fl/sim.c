/* The federated simulation (McMahan et al. 2017): set-up, and what the round gives local training.  The handle
 * holds three public sides with functions of their own -- the clients' (struct dpfl_clients, sim_clients.c: every
 * client's own state, its block's fl_state_layout and the blocks' fl_state_store (client_state.h)), record-level
 * DP on the clients (struct dpfl_record_dp, sim_record_dp.c: fl_record_dp, read by client.c's local training
 * through an fl_train_ctx) and the server's (struct dpfl_server, sim_server.c and sim_ledger.c: the sampler, the aggregation mode's state, aggregate_*.c, each mode's
 * own type behind a void *, with the clip and noise it shares in fl_agg_params, SCAFFOLD's c in fl_scaffold, and
 * the ledger) -- and the worker threads (fl_workers, transport_local.c).  A round is round.c; evaluation is eval.c;
 * every privacy mechanism is in mech/. */
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
    if (s->sv.agg && s->sv.agg->free) s->sv.agg->free(s->sv.aggself);
    for (int32_t i = 0; s->wk.workers && i < s->wk.nthreads; i++) worker_free(&s->wk.workers[i]);
    for (int32_t i = 0; s->wk.slots && i < s->wk.nslots; i++) dpfl_free(s->wk.slots[i]);
    fl_store_free(&s->cl.store);
    fl_layout_free(&s->cl.layout);
    fl_scaffold_free(&s->sv.scaffold);
    dpfl_par_free(s->wk.pool);
    free(s->wk.workers);
    free(s->wk.slots);
    free(s->sv.cohort.results);
    free(s->sv.cohort.sampled);
    free(s->sv.steps);
    dpfl_ledger_free(&s->sv.ledger);
    dpfl_free(s->acc);
    free(s);
}

/* One worker per thread: its nn workspace (single-threaded unless it lends itself to a lone client), buffers
 * (examples of dim floats, batches of B, a client of up to max_client records, DP-SGD's when dp_sgd) and the
 * clients' optimizer opt; and the in-process transport's slots. */
static dpfl_status workers_create(fl_workers *wk, const dpfl_model *model, const dpfl_optim_config *opt, int dp_sgd,
                                  size_t dim, int32_t max_client, int32_t B, dpfl_error *err)
{
    const size_t P = model->nparam;
    wk->workers = calloc((size_t)wk->nthreads, sizeof *wk->workers);
    wk->slots = calloc((size_t)wk->nslots, sizeof *wk->slots);
    if (!wk->workers || !wk->slots)
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
    for (int32_t i = 0; i < wk->nslots; i++)
        if (!(wk->slots[i] = dpfl_alloc(P * sizeof(float), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
    dpfl_status st;
    for (int32_t i = 0; i < wk->nthreads; i++) {
        worker *w = &wk->workers[i];
        if (!(w->ws = dpfl_nn_ws_create(model, B, err))) return DPFL_ENOMEM;
        if ((st = dpfl_nn_ws_set_threads(w->ws, 1, err))) return st;
        w->ws_threads = 1;
        if (!(w->local = dpfl_alloc(P * sizeof(float), err)) || !(w->grad = dpfl_alloc(P * sizeof(float), err)) ||
            !(w->xbuf = dpfl_alloc((size_t)B * dim * sizeof(float), err)) ||
            !(w->ybuf = dpfl_alloc((size_t)B * sizeof(int32_t), err)) ||
            !(w->order = dpfl_alloc(((size_t)max_client + 1) * sizeof(int32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
        if (dp_sgd && (!(w->part = dpfl_alloc(P * sizeof(float), err)) ||
                           !(w->norms = dpfl_alloc((size_t)B * sizeof(float), err)) ||
                           !(w->radius = dpfl_alloc((size_t)B * sizeof(float), err))))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
        if ((st = dpfl_optim_init(&w->opt, opt, P, err))) return st;
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

/* The server's side (its aggregation mode is created later, once the workers exist): the sampler, the round's
 * buffers (the sampled list, reports, steps), the ledger and SCAFFOLD's c. */
static dpfl_status server_init(dpfl_server *sv, const dpfl_config *cfg, const dpfl_model *model,
                               const dpfl_partition *part, dpfl_error *err)
{
    const int32_t K = part->clients;
    sv->cfg = cfg;
    sv->part = part;
    sv->model = model;
    sv->smp = (fl_sampler){.cfg = cfg, .clients = K, .sampling = cfg->fl.sampling};
    sv->agg = fl_aggregator_for(cfg);
    sv->aggp.S = cfg->client_dp.clip;
    sv->cohort.results = calloc((size_t)K, sizeof *sv->cohort.results);
    sv->cohort.sampled = calloc((size_t)K, sizeof *sv->cohort.sampled);
    sv->steps = calloc((size_t)K, sizeof *sv->steps);
    dpfl_status st = dpfl_ledger_init(&sv->ledger, K, err);
    if (st || (st = fl_scaffold_init(&sv->scaffold, cfg->fl.scaffold, model->nparam, K, err))) return st;
    if (!sv->cohort.results || !sv->cohort.sampled || !sv->steps)
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %d clients)", K);
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
    s->wk.nthreads = cfg->run.threads > 0 ? cfg->run.threads : 1;
    s->wk.nslots = 2 * s->wk.nthreads;
    s->eval_batch = dpfl_eval_batch(cfg);
    s->t0 = dpfl_now();
    s->cl = (struct dpfl_clients){.cfg = cfg, .part = part};
    optim_config(&s->cl.optcfg, cfg);
    dpfl_status st = fl_layout_init(&s->cl.layout, cfg, model, &s->cl.optcfg, global, err);
    if (st || (st = fl_store_init(&s->cl.store, s->cl.layout.keep, part->clients, fl_layout_floats(&s->cl.layout),
                                  cfg->fl.client_state_max_mb, err)))
        goto fail;
    for (int32_t k = 0; k < part->clients; k++)
        if (dpfl_partition_size(part, k) > s->max_client) s->max_client = dpfl_partition_size(part, k);
    s->rd = (struct dpfl_record_dp){.cfg = cfg, .part = part, .smp = &s->sv.smp, .nparam = model->nparam};
    record_dp_init(&s->rd.rdp, cfg);
    s->transport = &fl_transport_local;
    s->uniform_weights = (cfg->fl.weighting == DPFL_WEIGHT_UNIFORM);
    const int32_t B = cfg->fl.batch > s->eval_batch ? cfg->fl.batch : s->eval_batch;
    if ((st = server_init(&s->sv, cfg, model, part, err))) goto fail;
    if (!(s->acc = dpfl_alloc(model->nparam * sizeof(float), err))) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", model->nparam);
        goto fail;
    }
    /* Parallelism is across clients: each worker computes single-threaded (no BLAS or nn helper threads), which
     * also keeps results independent of the thread count. */
    openblas_set_num_threads(1);
    st = workers_create(&s->wk, model, &s->cl.optcfg, s->rd.rdp.on, (size_t)train->dim, s->max_client, B, err);
    if (st) goto fail;
    /* the aggregation mode's create reads the run's settings and the buffers that stay for the simulation's life */
    const fl_agg_setup su = {.cfg = cfg, .model = model, .part = part, .uniform_weights = s->uniform_weights,
                             .root = &s->root, .sampling = s->sv.smp.sampling, .nslots = s->wk.nslots,
                             .nthreads = s->wk.nthreads, .workers = s->wk.workers, .par = &s->sv.aggp,
                             .out = {.nparam = model->nparam, .global = global, .acc = s->acc, .eta = cfg->fl.eta}};
    if ((st = s->sv.agg->create(&su, &s->sv.aggself, err)) ||
        (s->sv.agg->client_level && (st = dpfl_server_set_noise(&s->sv, 1, cfg->client_dp.noise, err))))
        goto fail;
    s->wk.pool = dpfl_par_create(s->wk.nthreads); /* NULL: one thread, or none could start (then serial, same bits) */
    *out = s;
    return DPFL_OK;
fail:
    dpfl_sim_free(s);
    return st;
}

fl_train_ctx fl_sim_train_ctx(dpfl_sim *s)
{
    return (fl_train_ctx){.cfg = s->cfg, .model = s->model, .train = s->train, .test = s->test, .part = s->part,
                          .root = &s->root, .global = s->global, .rdp = &s->rd.rdp, .pers = &s->cl.layout.pers,
                          .control = dpfl_server_control(&s->sv), .round = s->sv.smp.round,
                          .eval_batch = s->eval_batch, .lr = s->lr,
                          .threads = s->chunk_len < s->wk.nthreads ? s->wk.nthreads / s->chunk_len : 1,
                          .per_step = s->sv.agg->client_level && s->cfg->client_dp.clip_strategy == DPFL_CLIP_PER_STEP,
                          .S = s->sv.aggp.S};
}

void fl_sim_set_transport(dpfl_sim *s, const fl_transport *t)
{
    s->transport = t ? t : &fl_transport_local; /* distributed DP: remote when it has secagg_finish (its begin) */
}

