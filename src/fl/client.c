/* A client's side of a round: local training from the global model (or, with fl.personalization = helper, from
 * its own helper model), plain or with record-level DP-SGD, with its optimizer state reset or kept across rounds
 * (fl.client_state).  The update Delta = local - global goes to the server through the transport; nothing else
 * leaves the client except what client_result reports.
 *
 * PriFedSync (Zheng et al., Algorithm 1 and eq. 2.1), line by line:
 *   Initialization w(i), h(i) <- w0          sim.c keeps w0; fl_client_model returns it until the first sync
 *   w~(i) <- LocalPrivateTraining(S, h(i), K) train_client_from starts from h(i) (Algorithm 2: w(j) <- h(j)),
 *                                            K DP-SGD steps on fixed batches; w~(i) is kept in the client's block
 *   send w~(i); w_global <- (1 - eta) w_global + eta mean(w~(i))
 *                                            the update w~(i) - w_global, averaged uniformly, stepped by eta
 *                                            (round.c, or server.c with client-level DP)
 *   h(i) <- (1 - alpha) w(i) + alpha w_global, i in Omega
 *                                            fl_client_sync_helpers, with w(i) = w~(i), the client's model just
 *                                            trained; computed by the client from the global model it receives
 *                                            (the same value the paper's server pushes) */
#include "sim_internal.h"

#include <math.h>
#include <string.h>

void fl_gather(const dpfl_dataset *d, const int32_t *idx, int32_t n, float *x, int32_t *y)
{
    const size_t dim = (size_t)d->dim;
    for (int32_t i = 0; i < n; i++) {
        memcpy(x + (size_t)i * dim, d->x + (size_t)idx[i] * dim, dim * sizeof(float));
        y[i] = d->y[idx[i]];
    }
}

/* Local steps a client takes in one round: local_steps, or local_epochs passes of ceil(n / B) batches. */
int64_t fl_client_steps(const dpfl_config *cfg, int32_t n)
{
    return dpfl_mech_local_steps(n, cfg->fl.batch, cfg->fl.local_steps, cfg->fl.local_epochs);
}

/* Threads each client of the current chunk may use for itself: more than 1 when fewer clients than threads train
 * (nn and the chunked noise give the same bits for any thread count). */
static int threads_per_client(const dpfl_sim *s)
{
    return s->chunk_len < s->nthreads ? s->nthreads / s->chunk_len : 1;
}

/* Client-level per-step clipping (McMahan et al. 2018): keep the local model within distance S of the global
 * model after every step, so the final update is bounded by construction.  A client's own input transform (the
 * first s->tr parameters) is not part of the update and is left alone. */
static void project_to_global(const dpfl_sim *s, float *local, float *tmp)
{
    const size_t T = s->tr, P = s->model->nparam - T;
    dpfl_vec_sub(tmp, local + T, s->global + T, P);
    double norm = dpfl_vec_norm2(tmp, P);
    if (norm > s->cdp.S) {
        dpfl_vec_clip(tmp, P, s->cdp.S);
        for (size_t i = 0; i < P; i++) local[T + i] = s->global[T + i] + tmp[i];
    }
}

/* Individual Renyi filter (Feldman and Zrnic 2021), one step: a record whose contribution to a sum noised with
 * std sigma has norm r loses alpha r^2 / (2 sigma^2) at order alpha.  Before the step each record is clipped to
 * the r that what it has left allows; after it, the loss of its actual contribution (its clipped norm, padded
 * by FILTER_PAD against float rounding in the norm) is charged.  The bound is shrunk by FILTER_PAD^2, so the
 * charge never exceeds what was left; a record within DPFL_FILTER_OUT of its cap (a binding bound leaves 4e-5) leaves
 * the sampler. */
#define FILTER_PAD (1.0 + 1e-5)
static void filter_bounds(const dpfl_sim *s, const int32_t *idx, int32_t mb, double sigma, float *radius)
{
    for (int32_t i = 0; i < mb; i++) {
        double left = s->rec_cap[idx[i]] - s->rec_spent[idx[i]];
        radius[i] = left > 0 ? (float)(sqrt(2.0 * sigma * sigma * left / s->filter_alpha) /
                                       (FILTER_PAD * FILTER_PAD)) : 0.0f;
    }
}

static void filter_charge(dpfl_sim *s, const int32_t *idx, int32_t mb, double sigma, const float *radius,
                          const float *norms)
{
    for (int32_t i = 0; i < mb; i++) {
        const int32_t r = idx[i];
        double used = fmin(fmin((double)norms[i], (double)radius[i]), s->clip.clip) * FILTER_PAD;
        s->rec_spent[r] += s->filter_alpha * used * used / (2.0 * sigma * sigma);
        if (s->rec_cap[r] - s->rec_spent[r] < DPFL_FILTER_OUT * s->rec_cap[r]) s->rec_p[r] = 0.0; /* filtered out */
    }
}

/* The clipped sum of one sampled batch (micro-batches when a Poisson batch exceeds the workspace); sigma is the
 * noise std the sum will get (the filter's per-record bounds depend on it). */
/* The step's clipped sum into w->grad, or with alpha != 0 (fused: plain SGD, one micro-batch) added times alpha
 * to the local model itself. */
static void clipped_sum(dpfl_sim *s, worker *w, int32_t b, double sigma, dpfl_rng *rng, client_result *res,
                        float alpha)
{
    const size_t P = s->model->nparam;
    const int32_t cap = s->eval_batch; /* workspace capacity: a Poisson batch may be larger than B */
    dpfl_clip_spec clip = s->clip;
    if (s->rec_spent) clip.radius = w->radius;
    if (b == 0 && alpha == 0.0f) dpfl_vec_zero(w->grad, P); /* an empty Poisson batch: the step is pure noise */
    for (int32_t off = 0; off < b; off += cap) {
        int32_t mb = b - off < cap ? b - off : cap;
        fl_gather(s->train, w->order + off, mb, w->xbuf, w->ybuf);
        if (s->rec_spent) filter_bounds(s, w->order + off, mb, sigma, w->radius);
        /* the first micro-batch writes the sum directly; only oversized Poisson batches accumulate */
        float *dst = off == 0 ? w->grad : w->part;
        DPFL_ASSERT(alpha == 0.0f || mb == b); /* fused: the model must not move before the whole batch is in */
        double loss = alpha != 0.0f ? dpfl_nn_clipped_grad_sum_axpy(s->model, w->local, w->ws, w->xbuf, w->ybuf,
                                                                    mb, &clip, rng, alpha, w->norms)
                                    : dpfl_nn_clipped_grad_sum(s->model, w->local, w->ws, w->xbuf, w->ybuf, mb,
                                                               &clip, rng, dst, w->norms);
        if (off > 0) dpfl_vec_axpy(w->grad, 1.0f, w->part, P);
        if (s->rec_spent) filter_charge(s, w->order + off, mb, sigma, w->radius, w->norms);
        res->loss_sum += loss * mb;
        for (int32_t i = 0; i < mb; i++) res->clipped += w->norms[i] > s->clip.clip;
    }
}

/* Local steps of one client with record-level DP-SGD: the mechanism of each step (sampler, sensitivity, noise
 * std, denominator) is dpfl_mech_dpsgd, the same struct the ledger charges (ledger.c). */
static void train_client_dp(dpfl_sim *s, worker *w, int32_t k, int64_t steps, dpfl_rng *rng, client_result *res)
{
    const size_t P = s->model->nparam;
    const int32_t n = dpfl_partition_size(s->part, k);
    const int32_t *mine = s->part->index + s->part->offset[k];
    const dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(s->rdp_poisson, n, s->cfg->fl.batch, s->clip.clip, s->rdp_z);
    /* rPDP-FL: record i in with its own p_i, the sum divided by the plan's expected batch sum_i p_i */
    const double denom = s->rec_p ? s->rec_denom[k] : d.denom;
    if (s->rec_p && !(denom > 0)) return; /* no record of this client may be sampled: no step, a zero update */
    const int plain = dpfl_optim_plain_sgd(&w->opt) && !s->rdp_e2e && !s->rdp_secure;
    for (int64_t t = 0; t < steps; t++) {
        int32_t b = s->rec_p    ? dpfl_mech_poisson_batch_rates(rng, mine, n, s->rec_p, w->order)
                    : d.poisson ? dpfl_mech_poisson_batch(rng, mine, n, d.q, w->order)
                                : dpfl_mech_fixed_batch(rng, mine, n, d.batch, w->order);
        /* Plain SGD on a batch that fits the workspace: local -= lr / denom * sum inside the backward pass, then
         * noise of std lr / denom * z * sens straight onto the model -- the same release as noising the sum and
         * stepping (Gaussian noise is symmetric), one pass over the parameters fewer.  Otherwise the sum is formed,
         * noised and handed to the optimizer. */
        const int fused = plain && b <= s->eval_batch;
        clipped_sum(s, w, b, d.noise_std, rng, res, fused ? (float)(-s->lr / denom) : 0.0f);
        if (fused) {
            dpfl_mech_gaussian_ws(w->ws, rng, w->local, P, d.z, d.sens * s->lr / denom, 1.0f);
            dpfl_optim_count(&w->opt);
        } else {
            /* e2e: project the step's sum onto the ball of radius B*C.  Projection is non-expansive, so one record
             * still moves it by at most C (record level unchanged), and the whole client by at most B*C. */
            if (s->rdp_e2e) dpfl_vec_clip(w->grad, P, (double)d.batch * d.clip);
            if (s->rdp_secure) dpfl_mech_discrete_gaussian(rng, w->grad, P, d.z, d.sens, (float)(1.0 / denom));
            else /* noise and the division in one pass; idle threads of the chunk help (same bits for any count) */
                dpfl_mech_gaussian(rng, w->grad, P, d.z, d.sens, (float)(1.0 / denom), threads_per_client(s));
            dpfl_optim_step(&w->opt, w->local, w->grad, s->lr);
        }
        if (s->agg->client_level && s->cdp.strategy == DPFL_CLIP_PER_STEP) project_to_global(s, w->local, w->grad);
        res->examples += b;
        res->steps++;
    }
}

/* Local steps without record-level DP: shuffled passes over the client's data. */
static void train_client_plain(dpfl_sim *s, worker *w, int32_t k, int64_t steps, dpfl_rng *rng, client_result *res)
{
    const int32_t n = dpfl_partition_size(s->part, k);
    const int32_t B = s->cfg->fl.batch;
    memcpy(w->order, s->part->index + s->part->offset[k], (size_t)n * sizeof(int32_t));
    int32_t pos = n; /* reshuffle at the start and whenever the client's data is exhausted */
    for (int64_t t = 0; t < steps; t++) {
        if (pos >= n) {
            dpfl_rng_shuffle(rng, w->order, (size_t)n);
            pos = 0;
        }
        int32_t b = n - pos < B ? n - pos : B;
        fl_gather(s->train, w->order + pos, b, w->xbuf, w->ybuf);
        pos += b;
        double loss;
        if (dpfl_optim_plain_sgd(&w->opt)) { /* the update inside the backward pass: no gradient vector */
            loss = dpfl_nn_sgd_step(s->model, w->local, w->ws, w->xbuf, w->ybuf, b, (float)s->lr, rng, NULL);
            dpfl_optim_count(&w->opt);
        } else {
            loss = dpfl_nn_grad(s->model, w->local, w->ws, w->xbuf, w->ybuf, b, rng, w->grad, NULL);
            dpfl_optim_step(&w->opt, w->local, w->grad, s->lr);
        }
        if (s->agg->client_level && s->cdp.strategy == DPFL_CLIP_PER_STEP) project_to_global(s, w->local, w->grad);
        res->loss_sum += loss * b;
        res->examples += b;
        res->steps++;
    }
}

/* Local training of one client from start (the global model, or its helper model) behind its own input transform
 * tr (NULL: none, or the identity it starts with); writes Delta = local - global into out, with the transform's
 * slice zero: the transform never leaves the client (the caller keeps the trained one from w->local). */
static void train_client_from(dpfl_sim *s, worker *w, int32_t k, const float *start, const float *tr, float *out,
                              client_result *res)
{
    const size_t P = s->model->nparam;
    const int32_t n = dpfl_partition_size(s->part, k);
    dpfl_rng rng;
    dpfl_rng_derive(&s->root, &rng, (uint64_t)s->round, (uint64_t)k, PURPOSE_LOCAL);
    dpfl_vec_copy(w->local, start, P);
    if (tr) dpfl_vec_copy(w->local, tr, s->tr);
    memset(res, 0, sizeof *res);
    res->client = k;
    if (n == 0) {
        dpfl_vec_zero(out, P);
        return;
    }
    const int64_t steps = fl_client_steps(s->cfg, n);
    if (s->rdp) train_client_dp(s, w, k, steps, &rng, res);
    else train_client_plain(s, w, k, steps, &rng, res);
    dpfl_vec_sub(out, w->local, s->global, P);
    if (s->tr) dpfl_vec_zero(out, s->tr);
}

float *fl_client_transform(const dpfl_sim *s, int32_t k)
{
    const client_opt *c = &s->cstate[k];
    return s->tr && c->state ? c->state + dpfl_sim_client_state_floats(s) - s->tr : NULL;
}

/* Accuracy of the worker's freshly trained local model on client k's own test split (NAN without one). */
static double local_accuracy(dpfl_sim *s, worker *w, int32_t k)
{
    if (!s->part->test_offset) return NAN;
    const int32_t *idx = s->part->test_index + s->part->test_offset[k];
    const int32_t n = s->part->test_offset[k + 1] - s->part->test_offset[k];
    double correct = 0;
    for (int32_t i = 0; i < n; i += s->eval_batch) {
        int32_t b = n - i < s->eval_batch ? n - i : s->eval_batch;
        fl_gather(s->test, idx + i, b, w->xbuf, w->ybuf);
        double l, a;
        dpfl_nn_evaluate(s->model, w->local, w->ws, w->xbuf, w->ybuf, b, &l, &a);
        correct += a * b;
    }
    return n ? correct / n : NAN;
}

const float *fl_client_model(const dpfl_sim *s, int32_t k)
{
    return s->cstate[k].state ? s->cstate[k].state : s->w0;
}

/* The optimizer starts fresh (reset) or from the client's own state (keep: the worker borrows the client's block);
 * training starts from the global model, or from the client's helper model. */
void fl_client_train(dpfl_sim *s, worker *w, int32_t k, float *out, client_result *res)
{
    if (!s->keep) {
        dpfl_optim_reset(&w->opt);
        train_client_from(s, w, k, s->global, NULL, out, res);
        return;
    }
    client_opt *c = &s->cstate[k];
    float *own_m = w->opt.m, *own_v = w->opt.v;
    const size_t P = s->model->nparam;
    DPFL_ASSERT(c->state || dpfl_sim_client_state_floats(s) == 0 ||
                fl_client_steps(s->cfg, dpfl_partition_size(s->part, k)) == 0);
    if (s->keep_opt) {
        if (c->state && s->state_vecs > 0) {
            float *opt = c->state + (s->helper ? P : 0);
            w->opt.m = opt;
            w->opt.v = s->state_vecs == 2 ? opt + P : NULL;
        }
        w->opt.t = c->t;
    } else {
        dpfl_optim_reset(&w->opt);
    }
    float *tr = fl_client_transform(s, k);
    train_client_from(s, w, k, s->helper ? fl_client_model(s, k) : s->global, tr, out, res);
    if (tr) dpfl_vec_copy(tr, w->local, s->tr); /* the trained transform stays with the client */
    if ((s->helper || s->tr) && c->state) {
        if (s->helper) dpfl_vec_copy(c->state, w->local, P); /* w~(i), until the sync mixes it */
        c->local_acc = local_accuracy(s, w, k);
    }
    c->t = s->keep_opt ? w->opt.t : c->t + res->steps;
    w->opt.m = own_m;
    w->opt.v = own_v;
}

void fl_client_sync_helpers(dpfl_sim *s)
{
    const size_t P = s->model->nparam;
    const float a = s->alpha, b = 1.0f - s->alpha;
    for (int32_t i = 0; i < s->nsampled; i++) {
        const client_result *r = &s->results[i];
        float *h = s->cstate[r->client].state;
        if (r->dropped || r->steps == 0 || !h) continue; /* did not sync: keeps its helper */
        for (size_t j = 0; j < P; j++) h[j] = b * h[j] + a * s->global[j];
    }
}
dpfl_status dpfl_sim_client_round(dpfl_sim *s, int32_t round, double S, int32_t k, float *out, client_result *res,
                            dpfl_error *err)
{
    if (k < 0 || k >= s->part->clients)
        return dpfl_fail(err, DPFL_EINVAL, "client %d: the partition has clients 0 to %d", k, s->part->clients - 1);
    dpfl_status st = fl_client_state_alloc(s, k, err);
    if (st) return st;
    s->round = round;
    s->lr = dpfl_optim_lr(&s->optcfg, round - 1);
    s->cdp.S = S;
    s->chunk_start = 0;
    s->chunk_len = 1; /* one client: it gets every thread (the same bits whatever their number) */
    worker *w = &s->workers[0];
    if (w->ws_threads != s->nthreads)
        w->ws_threads = dpfl_nn_ws_set_threads(w->ws, s->nthreads, NULL) ? 0 : s->nthreads;
    fl_client_train(s, w, k, out, res);
    if (s->agg->client_level) res->norm = dpfl_vec_norm2(out, s->model->nparam);
    return DPFL_OK;
}
