/* The federated round loop: client sampling, parallel local training, ordered aggregation.
 *
 * Sampled clients are processed in chunks of `slots` clients: worker threads take clients of the chunk from an
 * atomic counter, each writes its update into the client's slot, and the main thread then adds the slots in
 * client order.  The order of floating-point additions is therefore fixed by the client list alone, not by the
 * number of threads or which thread ran which client.
 *
 * fl.client_state = keep: each client's optimizer state (momentum buffer or Adam m, v, and the step count t) lives
 * in a block of its own, allocated the first time the client trains.  A worker borrows the block of the client it
 * trains (no copy) and hands it back with the new step count; a client is trained by one worker at a time, so the
 * state, like everything else, does not depend on the thread count. */
#include "dpfl/fl.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { PURPOSE_SAMPLE_CLIENTS = 1, PURPOSE_LOCAL = 2, PURPOSE_DROPOUT = 5, PURPOSE_SERVER_NOISE = 6, EVAL_CHUNK = 500 };

typedef enum { CLIP_FIXED, CLIP_PER_STEP, CLIP_ADAPTIVE, CLIP_MEDIAN } clip_strategy;

typedef struct {
    dpfl_nn_ws *ws;
    float *local, *grad, *xbuf;
    int32_t *ybuf, *order;
    float *part, *norms; /* DP-SGD: one micro-batch's clipped sum; per-example norms */
    dpfl_optim opt;
    int ws_threads;      /* threads of ws's own pool (more than 1 when fewer clients than threads train) */
} worker;

typedef struct eval_job eval_job;

typedef struct {
    float *state; /* state_vecs * P floats: momentum or Adam m, then Adam v; NULL until the client first trains */
    int64_t t;    /* optimizer steps taken over all the client's rounds */
} client_opt;

typedef struct {
    int32_t client;
    double loss_sum; /* sum over batches of mean loss * batch size */
    int64_t examples;
    int64_t steps;
    int64_t clipped; /* DP-SGD: examples whose gradient norm exceeded C */
    double norm;     /* L2 norm of the raw update */
    int dropped;     /* client-level DP simulation: sampled but never replied */
} client_result;

struct dpfl_sim {
    const dpfl_config *cfg;
    const dpfl_model *model;
    const dpfl_dataset *train, *test;
    const dpfl_partition *part;
    dpfl_rng root;
    float *global;
    int32_t nthreads, nslots, max_client, eval_batch;
    worker *workers;
    float **slots;
    client_result *results;
    int32_t *sampled;
    float *acc;
    dpfl_optim_config optcfg;
    double t0;
    /* fl.client_state = keep */
    int keep;
    int state_vecs;     /* vectors of P floats per client: 0 (plain SGD), 1 (momentum) or 2 (Adam) */
    client_opt *cstate; /* one per client */
    /* record-level DP (DP-SGD) */
    int rdp, rdp_poisson, rdp_e2e, rdp_secure;
    double rdp_z;
    double grid; /* secure mode: quantisation step of the clipped sum */
    dpfl_clip_spec clip;
    int32_t nsampled;
    /* client-level DP */
    int cdp, cdp_per_layer;
    clip_strategy strategy;
    double S;       /* current update clip */
    double z_sum;   /* multiplier of the noise on the sum of updates (adaptive: z_Delta) */
    double sigma_b; /* adaptive: noise std on the unclipped count */
    float *raw_sum; /* V_c / U_s */
    double *norms;  /* per sampled client */
    /* per-round job shared with the threads */
    int32_t round, chunk_start, chunk_len;
    double lr;
    atomic_int next;
    eval_job *jobs;
};

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
    dpfl_optim_free(&w->opt);
}

void dpfl_sim_free(dpfl_sim *s)
{
    if (!s) return;
    for (int32_t i = 0; s->workers && i < s->nthreads; i++) worker_free(&s->workers[i]);
    for (int32_t i = 0; s->slots && i < s->nslots; i++) dpfl_free(s->slots[i]);
    for (int32_t k = 0; s->cstate && k < s->part->clients; k++) dpfl_free(s->cstate[k].state);
    free(s->cstate);
    free(s->workers);
    free(s->slots);
    free(s->results);
    free(s->sampled);
    free(s->norms);
    dpfl_free(s->raw_sum);
    dpfl_free(s->acc);
    free(s);
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
    s->nthreads = cfg->threads > 0 ? cfg->threads : 1;
    s->nslots = 2 * s->nthreads;
    s->eval_batch = 256;
    if (cfg->batch > s->eval_batch) s->eval_batch = cfg->batch;
    s->t0 = dpfl_now();
    dpfl_status st;
    dpfl_optim_defaults(&s->optcfg);
    if ((st = dpfl_optim_parse_kind(cfg->optimizer, &s->optcfg.kind, err))) goto fail;
    if ((st = dpfl_optim_parse_sched(cfg->schedule, &s->optcfg.sched, err))) goto fail;
    s->optcfg.lr = cfg->lr;
    s->optcfg.momentum = cfg->momentum;
    s->optcfg.weight_decay = cfg->weight_decay;
    s->optcfg.gamma = cfg->lr_gamma;
    s->optcfg.step_size = cfg->lr_step;
    s->keep = !strcmp(cfg->client_state, "keep");
    s->state_vecs = (s->optcfg.kind != DPFL_OPT_SGD || s->optcfg.momentum != 0.0) + (s->optcfg.kind != DPFL_OPT_SGD);
    if (s->keep) {
        /* the worst case: every client takes part at least once */
        const double per_client = (double)s->state_vecs * (double)model->nparam * sizeof(float) + sizeof(client_opt);
        const double need_mb = per_client * (double)part->clients / 1048576.0;
        if (need_mb > cfg->client_state_max_mb) {
            st = dpfl_fail(err, DPFL_EINVAL, "fl.client_state: keep would hold up to %.0f MiB of %s state (%d clients x "
                                             "%.3g MiB), over fl.client_state_max_mb = %d; use client_state = reset, "
                                             "fewer clients or a larger cap", need_mb, cfg->optimizer, part->clients,
                           per_client / 1048576.0, cfg->client_state_max_mb);
            goto fail;
        }
        if (!(s->cstate = calloc((size_t)part->clients, sizeof *s->cstate))) {
            st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (fl.client_state: table of %d clients)", part->clients);
            goto fail;
        }
    }
    for (int32_t k = 0; k < part->clients; k++)
        if (dpfl_partition_size(part, k) > s->max_client) s->max_client = dpfl_partition_size(part, k);
    s->rdp = !strcmp(cfg->rdp_enabled, "yes");
    s->rdp_poisson = !strcmp(cfg->rdp_sampler, "poisson");
    s->rdp_e2e = !strcmp(cfg->rdp_e2e, "yes");
    s->rdp_secure = !strcmp(cfg->rdp_secure, "yes");
    s->rdp_z = cfg->rdp_noise;
    s->clip.clip = cfg->rdp_clip;
    s->clip.per_layer = !strcmp(cfg->rdp_per_layer, "yes");
    s->cdp = !strcmp(cfg->cdp_enabled, "yes");
    s->cdp_per_layer = !strcmp(cfg->cdp_per_layer, "yes");
    s->strategy = !strcmp(cfg->cdp_strategy, "per-step")   ? CLIP_PER_STEP
                  : !strcmp(cfg->cdp_strategy, "adaptive") ? CLIP_ADAPTIVE
                  : !strcmp(cfg->cdp_strategy, "median")   ? CLIP_MEDIAN
                                                           : CLIP_FIXED;
    s->S = cfg->cdp_clip;
    if (s->cdp && (st = dpfl_sim_set_client_noise(s, 1, cfg->cdp_noise, err))) goto fail;
    if (s->rdp_secure) {
        s->grid = (s->rdp_poisson ? 1.0 : 2.0) * cfg->rdp_clip / (1000.0 * sqrt((double)model->nparam));
    }
    const size_t P = model->nparam;
    const int32_t B = cfg->batch > s->eval_batch ? cfg->batch : s->eval_batch;
    st = DPFL_ENOMEM;
    s->workers = calloc((size_t)s->nthreads, sizeof *s->workers);
    s->slots = calloc((size_t)s->nslots, sizeof *s->slots);
    s->results = calloc((size_t)part->clients, sizeof *s->results);
    s->sampled = calloc((size_t)part->clients, sizeof *s->sampled);
    s->norms = calloc((size_t)part->clients, sizeof *s->norms);
    if (!s->workers || !s->slots || !s->results || !s->sampled || !s->norms ||
        !(s->acc = dpfl_alloc(P * sizeof(float), err)) || !(s->raw_sum = dpfl_alloc(P * sizeof(float), err)))
        goto oom;
    for (int32_t i = 0; i < s->nslots; i++)
        if (!(s->slots[i] = dpfl_alloc(P * sizeof(float), err))) goto oom;
    /* Parallelism is across clients: each worker computes single-threaded (no BLAS or nn helper threads), which
     * also keeps results independent of the thread count. */
    openblas_set_num_threads(1);
    for (int32_t i = 0; i < s->nthreads; i++) {
        worker *w = &s->workers[i];
        if (!(w->ws = dpfl_nn_ws_create(model, B, err))) goto fail;
        if ((st = dpfl_nn_ws_set_threads(w->ws, 1, err))) goto fail;
        w->ws_threads = 1;
        if (!(w->local = dpfl_alloc(P * sizeof(float), err)) || !(w->grad = dpfl_alloc(P * sizeof(float), err)) ||
            !(w->xbuf = dpfl_alloc((size_t)B * (size_t)train->dim * sizeof(float), err)) ||
            !(w->ybuf = dpfl_alloc((size_t)B * sizeof(int32_t), err)) ||
            !(w->order = dpfl_alloc(((size_t)s->max_client + 1) * sizeof(int32_t), err)))
            goto oom;
        if (s->rdp && (!(w->part = dpfl_alloc(P * sizeof(float), err)) ||
                       !(w->norms = dpfl_alloc((size_t)B * sizeof(float), err))))
            goto oom;
        if ((st = dpfl_optim_init(&w->opt, &s->optcfg, P, err))) goto fail;
    }
    *out = s;
    return DPFL_OK;
oom:
    st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (simulation buffers for %zu parameters)", P);
fail:
    dpfl_sim_free(s);
    return st;
}

static void gather(const dpfl_dataset *d, const int32_t *idx, int32_t n, float *x, int32_t *y)
{
    const size_t dim = (size_t)d->dim;
    for (int32_t i = 0; i < n; i++) {
        memcpy(x + (size_t)i * dim, d->x + (size_t)idx[i] * dim, dim * sizeof(float));
        y[i] = d->y[idx[i]];
    }
}

/* The number of clients a round is designed to have (Poisson: its expectation; fixed: m; all: K): the
 * denominator of the client-level average, fixed by the sampling design, never by who replied. */
static double designed_clients(const dpfl_sim *s, int32_t round)
{
    const dpfl_config *cfg = s->cfg;
    if (!strcmp(cfg->sampling, "poisson")) return dpfl_round_client_rate(cfg, round) * s->part->clients;
    if (!strcmp(cfg->sampling, "fixed")) return dpfl_round_clients_per_round(cfg, round);
    return s->part->clients;
}

/* Threads each client of the current chunk may use for itself: more than 1 when fewer clients than threads train
 * (nn and the chunked noise give the same bits for any thread count). */
static int threads_per_client(const dpfl_sim *s)
{
    return s->chunk_len < s->nthreads ? s->nthreads / s->chunk_len : 1;
}

/* Client-level per-step clipping (McMahan et al. 2018): keep the local model within distance S of the global
 * model after every step, so the final update is bounded by construction. */
static void project_to_global(const dpfl_sim *s, float *local, float *tmp)
{
    const size_t P = s->model->nparam;
    dpfl_vec_sub(tmp, local, s->global, P);
    double norm = dpfl_vec_norm2(tmp, P);
    if (norm > s->S) {
        dpfl_vec_clip(tmp, P, s->S);
        for (size_t i = 0; i < P; i++) local[i] = s->global[i] + tmp[i];
    }
}

/* Secure mode: round the clipped sum to the grid g = sens / (1000 sqrt(P)) and add exact discrete-Gaussian
 * noise.  Rounding moves each coordinate by at most g/2, so neighbouring sums differ on the grid by at most
 * sens/g + sqrt(P) = 1001 sqrt(P) grid units: the noise (in grid units) is z times that, i.e. the accountant's
 * z holds for a sensitivity 0.1% above the clip.  The discrete Gaussian's Renyi divergence at integer orders is
 * bounded by the continuous one's (Canonne-Kamath-Steinke; their tau term is below 1e-300 at these sigmas), so
 * the accountant uses the sampled-Gaussian RDP at integer orders. */
static void add_discrete_noise(const dpfl_sim *s, dpfl_rng *rng, float *v)
{
    const size_t P = s->model->nparam;
    const double g = s->grid, sg = s->rdp_z * 1001.0 * sqrt((double)P);
    const uint64_t s2 = (uint64_t)ceil(sg * sg);
    for (size_t i = 0; i < P; i++) {
        int64_t q = llround((double)v[i] / g);
        if (s2 > 0) q += dpfl_rng_discrete_gaussian(rng, s2);
        v[i] = (float)(g * (double)q);
    }
}

/* Local steps of one client (record-level DP-SGD).  Each step samples its batch (Poisson: every record with
 * q = B/n; fixed: B of n without replacement), sums per-example gradients clipped to C, adds Gaussian noise of
 * std z * sensitivity (C under add-remove for Poisson, 2C under replace-one for fixed batches) and divides by
 * the expected batch size q n (Poisson) or B (fixed).  The accountant is told exactly this: see ledger.c. */
static void train_client_dp(dpfl_sim *s, worker *w, int32_t k, int64_t steps, dpfl_rng *rng, client_result *res)
{
    const dpfl_config *cfg = s->cfg;
    const size_t P = s->model->nparam;
    const int32_t n = dpfl_partition_size(s->part, k);
    const int32_t *mine = s->part->index + s->part->offset[k];
    const int32_t B = cfg->batch < n ? cfg->batch : n;
    const double q = (double)B / n;
    const double C = s->clip.clip;
    const double sd = s->rdp_z > 0 ? s->rdp_z * (s->rdp_poisson ? 1.0 : 2.0) * C : 0.0; /* z = 0, C = inf: no NaN */
    const double denom = s->rdp_poisson ? q * n : (double)B;
    const int32_t cap = s->eval_batch; /* workspace capacity: a Poisson batch may be larger than B */
    for (int64_t t = 0; t < steps; t++) {
        int32_t b = 0;
        if (s->rdp_poisson) {
            for (int32_t i = 0; i < n; i++)
                if (dpfl_rng_bernoulli(rng, q)) w->order[b++] = mine[i];
        } else {
            memcpy(w->order, mine, (size_t)n * sizeof(int32_t));
            for (int32_t i = 0; i < B; i++) { /* partial Fisher-Yates: B distinct records */
                int32_t j = i + (int32_t)dpfl_rng_below(rng, (uint64_t)(n - i));
                int32_t tmp = w->order[i];
                w->order[i] = w->order[j];
                w->order[j] = tmp;
            }
            b = B;
        }
        if (b == 0) dpfl_vec_zero(w->grad, P); /* an empty Poisson batch: the step is pure noise */
        for (int32_t off = 0; off < b; off += cap) {
            int32_t mb = b - off < cap ? b - off : cap;
            gather(s->train, w->order + off, mb, w->xbuf, w->ybuf);
            /* the first micro-batch writes the sum directly; only oversized Poisson batches accumulate */
            float *dst = off == 0 ? w->grad : w->part;
            double loss = dpfl_nn_clipped_grad_sum(s->model, w->local, w->ws, w->xbuf, w->ybuf, mb, &s->clip, rng,
                                                   dst, w->norms);
            if (off > 0) dpfl_vec_axpy(w->grad, 1.0f, w->part, P);
            res->loss_sum += loss * mb;
            for (int32_t i = 0; i < mb; i++) res->clipped += w->norms[i] > C;
        }
        /* e2e: project the step's sum onto the ball of radius B*C.  Projection is non-expansive, so one record
         * still moves it by at most C (record level unchanged), and the whole client by at most B*C. */
        if (s->rdp_e2e) dpfl_vec_clip(w->grad, P, (double)B * C);
        if (s->rdp_secure) {
            add_discrete_noise(s, rng, w->grad);
            dpfl_vec_scale(w->grad, (float)(1.0 / denom), P);
        } else { /* noise and the division in one pass; the threads a chunk of clients leaves idle help (the
                  * noise is the same for any thread count) */
            dpfl_rng_add_gaussian_chunked(rng, w->grad, P, sd, (float)(1.0 / denom), threads_per_client(s));
        }
        dpfl_optim_step(&w->opt, w->local, w->grad, s->lr);
        if (s->cdp && s->strategy == CLIP_PER_STEP) project_to_global(s, w->local, w->grad);
        res->examples += b;
        res->steps++;
    }
}

/* Local steps a client takes in one round: local_steps, or local_epochs passes of ceil(n / B) batches. */
static int64_t client_steps(const dpfl_config *cfg, int32_t n)
{
    if (n == 0) return 0;
    return cfg->local_steps > 0 ? cfg->local_steps : (int64_t)cfg->local_epochs * ((n + cfg->batch - 1) / cfg->batch);
}

static void train_client_from(dpfl_sim *s, worker *w, int32_t k, float *out, client_result *res);

/* The optimizer starts fresh (reset) or from the client's own state (keep: the worker borrows the client's block). */
static void train_client(dpfl_sim *s, worker *w, int32_t k, float *out, client_result *res)
{
    if (!s->keep) {
        dpfl_optim_reset(&w->opt);
        train_client_from(s, w, k, out, res);
        return;
    }
    client_opt *c = &s->cstate[k];
    float *own_m = w->opt.m, *own_v = w->opt.v;
    const size_t P = s->model->nparam;
    DPFL_ASSERT(c->state || s->state_vecs == 0 || client_steps(s->cfg, dpfl_partition_size(s->part, k)) == 0);
    if (c->state) {
        w->opt.m = c->state;
        w->opt.v = s->state_vecs == 2 ? c->state + P : NULL;
    }
    w->opt.t = c->t;
    train_client_from(s, w, k, out, res);
    c->t = w->opt.t;
    w->opt.m = own_m;
    w->opt.v = own_v;
}

/* Local training of one client from the global model; writes Delta = local - global into out. */
static void train_client_from(dpfl_sim *s, worker *w, int32_t k, float *out, client_result *res)
{
    const dpfl_config *cfg = s->cfg;
    const size_t P = s->model->nparam;
    const int32_t n = dpfl_partition_size(s->part, k);
    const int32_t *mine = s->part->index + s->part->offset[k];
    dpfl_rng rng;
    dpfl_rng_derive(&s->root, &rng, (uint64_t)s->round, (uint64_t)k, PURPOSE_LOCAL);
    dpfl_vec_copy(w->local, s->global, P);
    memset(res, 0, sizeof *res);
    res->client = k;
    if (n == 0) {
        dpfl_vec_zero(out, P);
        return;
    }
    const int32_t B = cfg->batch;
    const int64_t steps = client_steps(cfg, n);
    if (s->rdp) {
        train_client_dp(s, w, k, steps, &rng, res);
        dpfl_vec_sub(out, w->local, s->global, P);
        return;
    }
    memcpy(w->order, mine, (size_t)n * sizeof(int32_t));
    int32_t pos = n; /* reshuffle at the start and whenever the client's data is exhausted */
    for (int64_t t = 0; t < steps; t++) {
        if (pos >= n) {
            dpfl_rng_shuffle(&rng, w->order, (size_t)n);
            pos = 0;
        }
        int32_t b = n - pos < B ? n - pos : B;
        gather(s->train, w->order + pos, b, w->xbuf, w->ybuf);
        pos += b;
        double loss = dpfl_nn_grad(s->model, w->local, w->ws, w->xbuf, w->ybuf, b, &rng, w->grad, NULL);
        dpfl_optim_step(&w->opt, w->local, w->grad, s->lr);
        if (s->cdp && s->strategy == CLIP_PER_STEP) project_to_global(s, w->local, w->grad);
        res->loss_sum += loss * b;
        res->examples += b;
        res->steps++;
    }
    dpfl_vec_sub(out, w->local, s->global, P);
}

typedef struct {
    dpfl_sim *s;
    int32_t id;
} thread_arg;

static void *round_worker(void *p)
{
    thread_arg *a = p;
    dpfl_sim *s = a->s;
    for (;;) {
        int j = atomic_fetch_add(&s->next, 1);
        if (j >= s->chunk_len) break;
        int32_t i = s->chunk_start + j;
        if (s->results[i].dropped) continue; /* drops out before sending: its work is lost, not its charge */
        /* fewer clients than threads (one client per round, say): the idle threads join each client's own
         * forward/backward pool; nn results do not depend on its thread count */
        worker *w = &s->workers[a->id];
        int want = threads_per_client(s);
        if (want != w->ws_threads) w->ws_threads = dpfl_nn_ws_set_threads(w->ws, want, NULL) ? 0 : want;
        train_client(s, w, s->sampled[i], s->slots[j], &s->results[i]);
        if (s->cdp) s->results[i].norm = dpfl_vec_norm2(s->slots[j], s->model->nparam);
    }
    return NULL;
}

/* Run fn over `count` jobs with the worker threads (job state lives in s). */
static void run_parallel(dpfl_sim *s, void *(*fn)(void *), int32_t count)
{
    atomic_store(&s->next, 0);
    int32_t nt = s->nthreads < count ? s->nthreads : count;
    pthread_t th[256];
    thread_arg args[256];
    for (int32_t i = 0; i < nt; i++) {
        args[i] = (thread_arg){s, i};
        if (i > 0 && pthread_create(&th[i], NULL, fn, &args[i]) != 0) nt = i; /* run with what we have */
    }
    if (nt > 0) fn(&args[0]);
    for (int32_t i = 1; i < nt; i++) pthread_join(th[i], NULL);
}

static int32_t sample_clients(dpfl_sim *s, int32_t round)
{
    const dpfl_config *cfg = s->cfg;
    const int32_t K = s->part->clients;
    dpfl_rng rng;
    dpfl_rng_derive(&s->root, &rng, (uint64_t)round, UINT64_MAX, PURPOSE_SAMPLE_CLIENTS);
    int32_t m = 0;
    if (!strcmp(cfg->sampling, "all")) {
        for (int32_t k = 0; k < K; k++) s->sampled[m++] = k;
    } else if (!strcmp(cfg->sampling, "poisson")) {
        const double rate = dpfl_round_client_rate(cfg, round);
        for (int32_t k = 0; k < K; k++)
            if (dpfl_rng_bernoulli(&rng, rate)) s->sampled[m++] = k;
    } else { /* fixed: m of K without replacement, by a partial Fisher-Yates, then in client order */
        for (int32_t k = 0; k < K; k++) s->sampled[k] = k;
        m = dpfl_round_clients_per_round(cfg, round);
        for (int32_t i = 0; i < m; i++) {
            int32_t j = i + (int32_t)dpfl_rng_below(&rng, (uint64_t)(K - i));
            int32_t t = s->sampled[i];
            s->sampled[i] = s->sampled[j];
            s->sampled[j] = t;
        }
        /* insertion sort is fine for the usual m; use qsort for large m */
        for (int32_t i = 1; i < m; i++) {
            int32_t v = s->sampled[i], j = i - 1;
            while (j >= 0 && s->sampled[j] > v) {
                s->sampled[j + 1] = s->sampled[j];
                j--;
            }
            s->sampled[j + 1] = v;
        }
    }
    return m;
}

int32_t dpfl_sim_sample(dpfl_sim *s, int32_t round, const int32_t **clients)
{
    s->round = round;
    s->nsampled = sample_clients(s, round);
    if (clients) *clients = s->sampled;
    return s->nsampled;
}

int64_t dpfl_sim_client_steps(const dpfl_sim *s, int32_t k)
{
    return client_steps(s->cfg, dpfl_partition_size(s->part, k));
}

void dpfl_sim_set_record_noise(dpfl_sim *s, double z)
{
    s->rdp_z = z;
    if (s->rdp_secure) { /* the exact sampler takes sigma^2 <= 2^62 grid units (checked by the run driver) */
        double sg = z * 1001.0 * sqrt((double)s->model->nparam);
        DPFL_ASSERT(sg * sg <= 4.0e18);
    }
}

dpfl_status dpfl_sim_set_client_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err)
{
    const dpfl_config *cfg = s->cfg;
    s->z_sum = z;
    s->sigma_b = 0.0;
    if (s->strategy == CLIP_ADAPTIVE && z > 0) {
        /* Andrew et al. 2021: the count of unclipped updates gets noise sigma_b, the update sum z_Delta S with
         * z_Delta = (z^-2 - (2 sigma_b)^-2)^(-1/2): together one Gaussian mechanism with multiplier z.  That needs
         * 2 sigma_b > z, checked here on the value in force (the default sigma_b included), before any release. */
        double expected = designed_clients(s, round > 0 ? round : 1);
        int dflt = !(cfg->cdp_quantile_noise > 0);
        double sb = dflt ? expected / 20.0 : cfg->cdp_quantile_noise;
        double inv = 1.0 / (z * z) - 1.0 / (4.0 * sb * sb);
        if (!(inv > 0) || !isfinite(1.0 / sqrt(inv)))
            return dpfl_fail(err, DPFL_EINVAL,
                             "client_dp.quantile_noise: round %d: the count noise sigma_b = %g%s must exceed noise / 2 = %g, "
                             "or nothing is left for the update sum (z_Delta = (z^-2 - (2 sigma_b)^-2)^-1/2); set "
                             "quantile_noise > %g or lower client_dp.noise",
                             (int)round, sb, dflt ? " (default: expected clients per round / 20)" : "", z / 2.0, z / 2.0);
        s->sigma_b = sb;
        s->z_sum = 1.0 / sqrt(inv);
    }
    return DPFL_OK;
}

double dpfl_sim_client_release_noise(const dpfl_sim *s)
{
    if (s->strategy != CLIP_ADAPTIVE || !(s->sigma_b > 0)) return s->z_sum;
    /* the update sum (sensitivity S, noise z_Delta S) and the centred count (sensitivity 1/2, noise sigma_b) are
     * one Gaussian mechanism on the pair: 1/z^2 = 1/z_Delta^2 + 1/(2 sigma_b)^2 */
    return 1.0 / sqrt(1.0 / (s->z_sum * s->z_sum) + 1.0 / (4.0 * s->sigma_b * s->sigma_b));
}

double dpfl_sim_quantile_noise(const dpfl_sim *s) { return s->sigma_b; }
double dpfl_sim_update_noise(const dpfl_sim *s) { return s->z_sum; }

int dpfl_sim_keeps_client_state(const dpfl_sim *s) { return s->keep; }

size_t dpfl_sim_client_state_floats(const dpfl_sim *s)
{
    return s->keep ? (size_t)s->state_vecs * s->model->nparam : 0;
}

int64_t dpfl_sim_client_state(const dpfl_sim *s, int32_t k, const float **state)
{
    DPFL_ASSERT(k >= 0 && k < s->part->clients);
    if (state) *state = s->keep ? s->cstate[k].state : NULL;
    return s->keep ? s->cstate[k].t : 0;
}

dpfl_status dpfl_sim_set_client_state(dpfl_sim *s, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    if (!s->keep) return dpfl_fail(err, DPFL_EINVAL, "fl.client_state: a client state was given to a run with reset");
    if (k < 0 || k >= s->part->clients || t <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state: bad client state (client %d of %d, %lld steps)", k,
                         s->part->clients, (long long)t);
    const size_t n = dpfl_sim_client_state_floats(s);
    client_opt *c = &s->cstate[k];
    if (n > 0) {
        if (!c->state && !(c->state = dpfl_alloc(n * sizeof(float), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (fl.client_state = keep: state of client %d)", k);
        memcpy(c->state, state, n * sizeof(float));
    }
    c->t = t;
    return DPFL_OK;
}

double dpfl_sim_update_clip(const dpfl_sim *s) { return s->S; }
void dpfl_sim_set_update_clip(dpfl_sim *s, double S) { s->S = S; }

/* Clip one update to S: flat, or each layer to S sqrt(n_l / P) so that the whole stays within S. */
static void clip_update(const dpfl_sim *s, float *u, double S)
{
    const size_t P = s->model->nparam;
    if (!s->cdp_per_layer) {
        dpfl_vec_clip(u, P, S);
        return;
    }
    for (int32_t l = 0; l < s->model->nlayers; l++) {
        const dpfl_layer *L = &s->model->layers[l];
        if (L->nparam) dpfl_vec_clip(u + L->param_off, L->nparam, S * sqrt((double)L->nparam / (double)P));
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Client-level aggregation of the round's (already trained) updates in slots[0..ms): clip, sum, noise, divide
 * by the fixed denominator, adapt S.  Streaming callers pass chunks; median clipping passes the whole round. */
static void cdp_add(dpfl_sim *s, float *u, const client_result *r, double S, dpfl_round_metrics *m, double *sumsq,
                    int32_t *clipped)
{
    const size_t P = s->model->nparam;
    dpfl_vec_axpy(s->raw_sum, 1.0f, u, P);
    *sumsq += r->norm * r->norm;
    if (r->norm > S) (*clipped)++;
    clip_update(s, u, S);
    dpfl_vec_axpy(s->acc, 1.0f, u, P);
    m->replied++;
}

dpfl_status dpfl_sim_round(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    dpfl_sim_sample(s, round, NULL);
    return dpfl_sim_train(s, round, m, err);
}

dpfl_status dpfl_sim_train(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    const dpfl_config *cfg = s->cfg;
    const size_t P = s->model->nparam;
    DPFL_ASSERT(s->round == round);
    memset(m, 0, sizeof *m);
    m->round = round;
    m->test_accuracy = m->test_loss = m->client_acc_mean = m->client_acc_std = NAN;
    m->clip_fraction = NAN;
    s->lr = dpfl_optim_lr(&s->optcfg, round - 1);
    int32_t ms = s->nsampled;
    int64_t clipped = 0;
    double total_weight = 0;
    for (int32_t i = 0; i < ms; i++)
        total_weight += !strcmp(cfg->weighting, "uniform") ? 1.0 : dpfl_partition_size(s->part, s->sampled[i]);
    dpfl_vec_zero(s->acc, P);
    double loss_sum = 0, sumsq = 0;
    int32_t nclipped = 0;
    if (s->cdp) {
        dpfl_vec_zero(s->raw_sum, P);
        for (int32_t i = 0; i < ms; i++) { /* who drops out is decided before anyone trains */
            dpfl_rng drng;
            dpfl_rng_derive(&s->root, &drng, (uint64_t)round, (uint64_t)s->sampled[i], PURPOSE_DROPOUT);
            memset(&s->results[i], 0, sizeof s->results[i]);
            s->results[i].client = s->sampled[i];
            s->results[i].dropped = dpfl_rng_bernoulli(&drng, cfg->cdp_dropout);
        }
    } else {
        for (int32_t i = 0; i < ms; i++) s->results[i].dropped = 0;
    }
    if (s->keep && s->state_vecs > 0) /* first participation: a zero state, as a reset optimizer has */
        for (int32_t i = 0; i < ms; i++) {
            client_opt *c = &s->cstate[s->sampled[i]];
            if (c->state || s->results[i].dropped || dpfl_sim_client_steps(s, s->sampled[i]) == 0) continue;
            if (!(c->state = dpfl_calloc((size_t)s->state_vecs * P, sizeof(float), err)))
                return dpfl_fail(err, DPFL_ENOMEM, "out of memory (fl.client_state = keep: state of client %d, "
                                                   "%zu floats)", s->sampled[i], (size_t)s->state_vecs * P);
        }
    const double S = s->S;
    if (s->cdp && s->strategy == CLIP_MEDIAN && ms > s->nslots) {
        /* median clipping needs every update of the round before it can clip any: one slot per client */
        float **more = realloc(s->slots, (size_t)ms * sizeof *more);
        if (!more) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (median clipping needs %d updates)", ms);
        s->slots = more;
        for (; s->nslots < ms; s->nslots++)
            if (!(s->slots[s->nslots] = dpfl_alloc(P * sizeof(float), err))) return DPFL_ENOMEM;
    }
    for (int32_t start = 0; start < ms; start += s->nslots) {
        s->chunk_start = start;
        s->chunk_len = ms - start < s->nslots ? ms - start : s->nslots;
        run_parallel(s, round_worker, s->chunk_len);
        for (int32_t j = 0; j < s->chunk_len; j++) {
            client_result *r = &s->results[start + j];
            loss_sum += r->loss_sum;
            m->examples += r->examples;
            clipped += r->clipped;
            if (r->dropped) continue;
            if (!s->cdp) {
                double w = !strcmp(cfg->weighting, "uniform") ? 1.0 : dpfl_partition_size(s->part, r->client);
                dpfl_vec_axpy(s->acc, (float)(w / total_weight), s->slots[j], P);
            } else if (s->strategy != CLIP_MEDIAN) {
                cdp_add(s, s->slots[j], r, S, m, &sumsq, &nclipped);
            }
        }
    }
    double S_used = S;
    if (s->cdp && s->strategy == CLIP_MEDIAN) { /* every update is in its slot: clip at the median norm */
        int32_t nr = 0;
        for (int32_t i = 0; i < ms; i++)
            if (!s->results[i].dropped) s->norms[nr++] = s->results[i].norm;
        if (nr > 0) {
            qsort(s->norms, (size_t)nr, sizeof *s->norms, cmp_double);
            S_used = nr % 2 ? s->norms[nr / 2] : 0.5 * (s->norms[nr / 2 - 1] + s->norms[nr / 2]);
        }
        for (int32_t i = 0; i < ms; i++)
            if (!s->results[i].dropped) cdp_add(s, s->slots[i], &s->results[i], S_used, m, &sumsq, &nclipped);
    }
    m->clients = ms;
    m->train_loss = m->examples ? loss_sum / (double)m->examples : NAN;
    if (s->rdp) {
        m->clip_fraction = m->examples ? (double)clipped / (double)m->examples : NAN;
        m->noise_std = s->rdp_z * (s->rdp_poisson ? 1.0 : 2.0) * s->clip.clip * (s->rdp_secure ? 1.001 : 1.0);
    }
    m->update_clip = m->update_clip_fraction = m->update_noise_std = NAN;
    m->between_client_variance = m->update_scale = NAN;
    if (s->cdp) {
        double denom = designed_clients(s, round);
        dpfl_rng nrng;
        dpfl_rng_derive(&s->root, &nrng, (uint64_t)round, UINT64_MAX, PURPOSE_SERVER_NOISE);
        double sd = s->strategy == CLIP_MEDIAN ? s->z_sum * S_used : s->z_sum * S;
        dpfl_rng_add_gaussian_chunked(&nrng, s->acc, P, sd, (float)(1.0 / denom), s->nthreads);
        dpfl_vec_axpy(s->global, (float)cfg->eta, s->acc, P);
        m->update_clip = S_used;
        m->update_noise_std = sd / denom;
        if (m->replied > 0) {
            m->update_clip_fraction = (double)nclipped / m->replied;
            double mu2 = dpfl_vec_dot(s->raw_sum, s->raw_sum, P) / ((double)m->replied * m->replied);
            m->update_scale = mu2 / (double)P;
            m->between_client_variance = fmax(0.0, sumsq / m->replied - mu2) / (double)P;
        }
        if (s->strategy == CLIP_ADAPTIVE) { /* private quantile estimate of the unclipped share, then a
                                               geometric step towards the target quantile */
            /* each participant adds b_i - 1/2 (b_i = 1 if unclipped): sensitivity 1/2, as z_Delta assumes; a raw
             * count would move by 1 when a client is added.  The server adds the 1/2 back after dividing. */
            double centred = (double)(m->replied - nclipped) - 0.5 * m->replied + s->sigma_b * dpfl_rng_gaussian(&nrng);
            double b = centred / denom + 0.5;
            s->S = S * exp(-cfg->cdp_clip_lr * (b - cfg->cdp_target_quantile));
        }
    } else if (ms > 0) {
        dpfl_vec_axpy(s->global, (float)cfg->eta, s->acc, P);
    }
    m->wall_seconds = dpfl_now() - s->t0;
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ evaluation */
struct eval_job {
    const int32_t *idx; /* test-set indices */
    int32_t n;
    double loss, acc;
};

static void *eval_worker(void *p)
{
    thread_arg *a = p;
    dpfl_sim *s = a->s;
    worker *w = &s->workers[a->id];
    for (;;) {
        int j = atomic_fetch_add(&s->next, 1);
        if (j >= s->chunk_len) break;
        eval_job *job = &s->jobs[j];
        double loss_sum = 0, correct = 0;
        for (int32_t i = 0; i < job->n; i += s->eval_batch) {
            int32_t b = job->n - i < s->eval_batch ? job->n - i : s->eval_batch;
            gather(s->test, job->idx + i, b, w->xbuf, w->ybuf);
            double l, a2;
            dpfl_nn_evaluate(s->model, s->global, w->ws, w->xbuf, w->ybuf, b, &l, &a2);
            loss_sum += l * b;
            correct += a2 * b;
        }
        job->loss = job->n ? loss_sum / job->n : NAN;
        job->acc = job->n ? correct / job->n : NAN;
    }
    return NULL;
}

void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m)
{
    const int32_t n = s->test->n;
    int32_t chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    int32_t *all = malloc((size_t)n * sizeof *all);
    int32_t nclient = s->part->test_offset ? s->part->clients : 0;
    eval_job *jobs = calloc((size_t)(chunks + nclient), sizeof *jobs);
    if (!all || !jobs) {
        free(all);
        free(jobs);
        return; /* metrics stay NAN */
    }
    for (int32_t i = 0; i < n; i++) all[i] = i;
    for (int32_t c = 0; c < chunks; c++) {
        jobs[c].idx = all + (size_t)c * EVAL_CHUNK;
        jobs[c].n = n - c * EVAL_CHUNK < EVAL_CHUNK ? n - c * EVAL_CHUNK : EVAL_CHUNK;
    }
    for (int32_t k = 0; k < nclient; k++) {
        jobs[chunks + k].idx = s->part->test_index + s->part->test_offset[k];
        jobs[chunks + k].n = s->part->test_offset[k + 1] - s->part->test_offset[k];
    }
    s->jobs = jobs;
    s->chunk_len = chunks + nclient;
    run_parallel(s, eval_worker, s->chunk_len);
    double loss = 0, acc = 0;
    for (int32_t c = 0; c < chunks; c++) {
        loss += jobs[c].loss * jobs[c].n;
        acc += jobs[c].acc * jobs[c].n;
    }
    m->test_loss = n ? loss / n : NAN;
    m->test_accuracy = n ? acc / n : NAN;
    if (nclient) {
        double sum = 0, sum2 = 0;
        int32_t cnt = 0;
        for (int32_t k = 0; k < nclient; k++) {
            if (jobs[chunks + k].n == 0) continue;
            sum += jobs[chunks + k].acc;
            sum2 += jobs[chunks + k].acc * jobs[chunks + k].acc;
            cnt++;
        }
        if (cnt) {
            m->client_acc_mean = sum / cnt;
            m->client_acc_std = sqrt(fmax(0.0, sum2 / cnt - m->client_acc_mean * m->client_acc_mean));
        }
    }
    s->jobs = NULL;
    m->wall_seconds = dpfl_now() - s->t0;
    free(all);
    free(jobs);
}
