/* A client's side of a round (SCAFFOLD's control variates, fl.scaffold: scaffold.c): local training from the global model (or, with fl.personalization = helper, from
 * its own helper model), plain or with record-level DP-SGD, with its optimizer state reset or kept across rounds
 * (fl.client_state).  The update Delta = local - global goes to the server through the transport; nothing else
 * leaves the client except what client_result reports.
 *
 * PriFedSync (Zheng et al., Algorithm 1 and eq. 2.1), line by line:
 *   Initialization w(i), h(i) <- w0          state_layout.c keeps w0; fl_store_helper returns it until the first sync
 *   w~(i) <- LocalPrivateTraining(S, h(i), K) train_client_from starts from h(i) (Algorithm 2: w(j) <- h(j)),
 *                                            K DP-SGD steps on fixed batches; w~(i) is kept in the client's block
 *   send w~(i); w_global <- (1 - eta) w_global + eta mean(w~(i))
 *                                            the update w~(i) - w_global, averaged uniformly, stepped by eta
 *                                            (round.c, or server.c with client-level DP)
 *   h(i) <- (1 - alpha) w(i) + alpha w_global, i in Omega
 *                                            fl_store_sync_helpers, with w(i) = w~(i), the client's model just
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

/* Client-level per-step clipping (McMahan et al. 2018): keep the local model within distance S of the global
 * model after every step, so the final update is bounded by construction.  A client's personal parameters (its
 * input transform, fl.personal's layers) are not part of the update and are left alone. */
static void project_to_global(const fl_train_ctx *t, const fl_personal_slices *ps, float *local, float *tmp)
{
    const size_t P = t->model->nparam;
    if (ps->npr == 0 || (ps->npr == 1 && ps->pr_off[0] == 0)) { /* none, or a prefix (the input transform) */
        const size_t T = ps->npers, n = P - T;
        dpfl_vec_sub(tmp, local + T, t->global + T, n);
        double norm = dpfl_vec_norm2(tmp, n);
        if (norm > t->S) {
            dpfl_vec_clip(tmp, n, t->S);
            for (size_t i = 0; i < n; i++) local[T + i] = t->global[T + i] + tmp[i];
        }
        return;
    }
    dpfl_vec_sub(tmp, local, t->global, P);
    fl_personal_zero(ps, tmp);
    if (!(dpfl_vec_norm2(tmp, P) > t->S)) return;
    dpfl_vec_clip(tmp, P, t->S);
    size_t pos = 0; /* the shared segments between the personal slices */
    for (int32_t r = 0; r <= ps->npr; r++) {
        const size_t end = r < ps->npr ? ps->pr_off[r] : P;
        for (size_t i = pos; i < end; i++) local[i] = t->global[i] + tmp[i];
        if (r < ps->npr) pos = ps->pr_off[r] + ps->pr_len[r];
    }
}

/* Individual Renyi filter (Feldman and Zrnic 2021, mech/filter.c), one step: before it each record is clipped to
 * the norm what it has left allows; after it, the loss of its actual contribution is charged, and a record within
 * DPFL_FILTER_OUT of its cap (a binding bound leaves 4e-5) leaves the sampler. */
static void filter_bounds(const fl_record_dp *rd, const int32_t *idx, int32_t mb, double sigma, float *radius)
{
    for (int32_t i = 0; i < mb; i++)
        radius[i] = (float)dpfl_mech_filter_radius(rd->cap[idx[i]] - rd->spent[idx[i]], sigma, rd->filter_alpha);
}

static void filter_charge(fl_record_dp *rd, const int32_t *idx, int32_t mb, double sigma, const float *radius,
                          const float *norms)
{
    for (int32_t i = 0; i < mb; i++) {
        const int32_t r = idx[i];
        rd->spent[r] += dpfl_mech_filter_loss((double)norms[i], (double)radius[i], rd->clip.clip, sigma,
                                              rd->filter_alpha);
        if (rd->cap[r] - rd->spent[r] < DPFL_FILTER_OUT * rd->cap[r]) rd->p[r] = 0.0; /* filtered out */
    }
}

/* The clipped sum of one sampled batch (micro-batches when a Poisson batch exceeds the workspace); sigma is the
 * noise std the sum will get (the filter's per-record bounds depend on it). */
/* The step's clipped sum into w->grad, or with alpha != 0 (fused: plain SGD, one micro-batch) added times alpha
 * to the local model itself. */
static void clipped_sum(const fl_train_ctx *t, worker *w, int32_t b, double sigma, dpfl_rng *rng, client_result *res,
                        float alpha)
{
    fl_record_dp *rd = t->rdp;
    const size_t P = t->model->nparam;
    const int32_t cap = t->eval_batch; /* workspace capacity: a Poisson batch may be larger than B */
    dpfl_clip_spec clip = rd->clip;
    if (rd->spent) clip.radius = w->radius;
    if (b == 0 && alpha == 0.0f) dpfl_vec_zero(w->grad, P); /* an empty Poisson batch: the step is pure noise */
    for (int32_t off = 0; off < b; off += cap) {
        int32_t mb = b - off < cap ? b - off : cap;
        fl_gather(t->train, w->order + off, mb, w->xbuf, w->ybuf);
        if (rd->spent) filter_bounds(rd, w->order + off, mb, sigma, w->radius);
        /* the first micro-batch writes the sum directly; only oversized Poisson batches accumulate */
        float *dst = off == 0 ? w->grad : w->part;
        DPFL_ASSERT(alpha == 0.0f || mb == b); /* fused: the model must not move before the whole batch is in */
        double loss = alpha != 0.0f ? dpfl_nn_clipped_grad_sum_axpy(t->model, w->local, w->ws, w->xbuf, w->ybuf,
                                                                    mb, &clip, rng, alpha, w->norms)
                                    : dpfl_nn_clipped_grad_sum(t->model, w->local, w->ws, w->xbuf, w->ybuf, mb,
                                                               &clip, rng, dst, w->norms);
        if (off > 0) dpfl_vec_axpy(w->grad, 1.0f, w->part, P);
        if (rd->spent) filter_charge(rd, w->order + off, mb, sigma, w->radius, w->norms);
        res->loss_sum += loss * mb;
        for (int32_t i = 0; i < mb; i++) res->clipped += w->norms[i] > rd->clip.clip;
    }
}

/* One DP-SGD step's noise on the clipped sum and the optimizer step (not fused). */
static void noisy_step(const fl_train_ctx *t, worker *w, const dpfl_mech_dpsgd *d, double denom, dpfl_rng *rng)
{
    const fl_record_dp *rd = t->rdp;
    const size_t P = t->model->nparam;
    /* e2e: project the step's sum onto the ball of radius B*C.  Projection is non-expansive, so one record still
     * moves it by at most C (record level unchanged), and the whole client by at most B*C. */
    if (rd->e2e) dpfl_vec_clip(w->grad, P, (double)d->batch * d->clip);
    if (rd->secure) dpfl_mech_discrete_gaussian(rng, w->grad, P, d->z, d->sens, (float)(1.0 / denom));
    else /* noise and the division in one pass; idle threads of the chunk help (same bits for any count) */
        dpfl_mech_gaussian(rng, w->grad, P, d->z, d->sens, (float)(1.0 / denom), t->threads);
    dpfl_optim_step(&w->opt, w->local, w->grad, t->lr);
}

/* Local steps of one client with record-level DP-SGD: the mechanism of each step (sampler, sensitivity, noise
 * std, denominator) is dpfl_mech_dpsgd, the same struct the ledger charges (ledger.c). */
static void train_client_dp(const fl_train_ctx *t, worker *w, int32_t k, const float *ci, int64_t steps, dpfl_rng *rng,
                            client_result *res)
{
    const fl_record_dp *rd = t->rdp;
    const size_t P = t->model->nparam;
    const int32_t n = dpfl_partition_size(t->part, k);
    const int32_t *mine = t->part->index + t->part->offset[k];
    const dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(rd->poisson, n, t->cfg->fl.batch, rd->clip.clip, rd->z);
    /* rPDP-FL: record i in with its own p_i, the sum divided by the plan's expected batch sum_i p_i */
    const double denom = rd->p ? rd->denom[k] : d.denom;
    if (rd->p && !(denom > 0)) return; /* no record of this client may be sampled: no step, a zero update */
    const int plain = dpfl_optim_plain_sgd(&w->opt) && !rd->e2e && !rd->secure;
    for (int64_t s = 0; s < steps; s++) {
        int32_t b = rd->p      ? dpfl_mech_poisson_batch_rates(rng, mine, n, rd->p, w->order)
                    : d.poisson ? dpfl_mech_poisson_batch(rng, mine, n, d.q, w->order)
                                : dpfl_mech_fixed_batch(rng, mine, n, d.batch, w->order);
        /* Plain SGD on a batch that fits the workspace: local -= lr / denom * sum inside the backward pass, then
         * noise of std lr / denom * z * sens straight onto the model -- the same release as noising the sum and
         * stepping (Gaussian noise is symmetric), one pass over the parameters fewer.  Otherwise the sum is formed,
         * noised and handed to the optimizer. */
        const int fused = plain && b <= t->eval_batch;
        clipped_sum(t, w, b, d.noise_std, rng, res, fused ? (float)(-t->lr / denom) : 0.0f);
        if (fused) {
            dpfl_mech_gaussian_ws(w->ws, rng, w->local, P, d.z, d.sens * t->lr / denom, 1.0f);
            dpfl_optim_count(&w->opt);
        } else {
            noisy_step(t, w, &d, denom, rng);
        }
        if (ci) fl_scaffold_correct(t->control, ci, w->local, P, t->lr); /* after the release: post-processing */
        if (t->per_step) project_to_global(t, t->pers, w->local, w->grad);
        res->examples += b;
        res->steps++;
    }
}

/* Local steps without record-level DP: shuffled passes over the client's data. */
static void train_client_plain(const fl_train_ctx *t, worker *w, int32_t k, const float *ci, int64_t steps,
                               dpfl_rng *rng, client_result *res)
{
    const size_t P = t->model->nparam;
    const int32_t n = dpfl_partition_size(t->part, k);
    const int32_t B = t->cfg->fl.batch;
    memcpy(w->order, t->part->index + t->part->offset[k], (size_t)n * sizeof(int32_t));
    int32_t pos = n; /* reshuffle at the start and whenever the client's data is exhausted */
    for (int64_t s = 0; s < steps; s++) {
        if (pos >= n) {
            dpfl_rng_shuffle(rng, w->order, (size_t)n);
            pos = 0;
        }
        int32_t b = n - pos < B ? n - pos : B;
        fl_gather(t->train, w->order + pos, b, w->xbuf, w->ybuf);
        pos += b;
        double loss;
        if (dpfl_optim_plain_sgd(&w->opt)) { /* the update inside the backward pass: no gradient vector */
            loss = dpfl_nn_sgd_step(t->model, w->local, w->ws, w->xbuf, w->ybuf, b, (float)t->lr, rng, NULL);
            dpfl_optim_count(&w->opt);
        } else {
            loss = dpfl_nn_grad(t->model, w->local, w->ws, w->xbuf, w->ybuf, b, rng, w->grad, NULL);
            dpfl_optim_step(&w->opt, w->local, w->grad, t->lr);
        }
        if (ci) fl_scaffold_correct(t->control, ci, w->local, P, t->lr);
        if (t->per_step) project_to_global(t, t->pers, w->local, w->grad);
        res->loss_sum += loss * b;
        res->examples += b;
        res->steps++;
    }
}

/* Local training of one client from the model in w->local (the global model, or its helper model, with its own
 * personal parameters: its input transform, fl.personal's layers), with SCAFFOLD's correction by its variate ci
 * (NULL: none); writes Delta = local - global into out, with the personal slices zero: they never leave the client
 * (the caller keeps the trained ones from w->local). */
static void train_client_from(const fl_train_ctx *t, worker *w, int32_t k, const float *ci, float *out,
                              client_result *res)
{
    const size_t P = t->model->nparam;
    const int32_t n = dpfl_partition_size(t->part, k);
    dpfl_rng rng;
    dpfl_rng_derive(t->root, &rng, (uint64_t)t->round, (uint64_t)k, PURPOSE_LOCAL);
    memset(res, 0, sizeof *res);
    res->client = k;
    if (n == 0) {
        dpfl_vec_zero(out, P);
        return;
    }
    const int64_t steps = fl_client_steps(t->cfg, n);
    if (t->rdp->on) train_client_dp(t, w, k, ci, steps, &rng, res);
    else train_client_plain(t, w, k, ci, steps, &rng, res);
    dpfl_vec_sub(out, w->local, t->global, P);
    fl_personal_zero(t->pers, out); /* what is sent: the shared parameters' update only */
}

/* Accuracy of the worker's freshly trained local model on client k's own test split (NAN without one). */
static double local_accuracy(const fl_train_ctx *t, worker *w, int32_t k)
{
    const dpfl_partition *part = t->part;
    if (!part->test_offset) return NAN;
    const int32_t *idx = part->test_index + part->test_offset[k];
    const int32_t n = part->test_offset[k + 1] - part->test_offset[k];
    double correct = 0;
    for (int32_t i = 0; i < n; i += t->eval_batch) {
        int32_t b = n - i < t->eval_batch ? n - i : t->eval_batch;
        fl_gather(t->test, idx + i, b, w->xbuf, w->ybuf);
        double l, a;
        dpfl_nn_evaluate(t->model, w->local, w->ws, w->xbuf, w->ybuf, b, &l, &a);
        correct += a * b;
    }
    return n ? correct / n : NAN;
}

/* The optimizer starts fresh (reset) or from the client's own state (keep: the worker borrows the client's block);
 * training starts from the global model, or from the client's helper model. */
void fl_client_train(const fl_train_ctx *t, const fl_state_layout *L, fl_state_store *S, worker *w, int32_t k,
                     float *out, client_result *res)
{
    const size_t P = L->nparam;
    if (!L->keep) {
        dpfl_optim_reset(&w->opt);
        dpfl_vec_copy(w->local, t->global, P);
        train_client_from(t, w, k, NULL, out, res);
        return;
    }
    client_opt *o = &S->cstate[k];
    float *own_m = w->opt.m, *own_v = w->opt.v;
    DPFL_ASSERT(o->state || S->floats == 0 || fl_client_steps(t->cfg, dpfl_partition_size(t->part, k)) == 0);
    if (L->keep_opt) {
        float *opt = fl_layout_optimizer(L, o->state);
        if (opt) {
            w->opt.m = opt;
            w->opt.v = L->state_vecs == 2 ? opt + P : NULL;
        }
        w->opt.t = o->t;
    } else {
        dpfl_optim_reset(&w->opt);
    }
    float *pv = fl_layout_personal(L, o->state), *ci = fl_layout_variate(L, o->state);
    dpfl_vec_copy(w->local, L->helper ? fl_store_helper(S, L, k) : t->global, P);
    if (pv) fl_personal_load(&L->pers, pv, w->local);
    train_client_from(t, w, k, ci, out, res);
    if (pv) fl_personal_store(&L->pers, w->local, pv); /* the trained personal parameters stay with the client */
    if (ci) fl_scaffold_update(t->control, ci, out, P, res->steps, t->lr); /* from what it sent */
    if ((L->helper || L->pers.npers) && o->state) {
        if (L->helper) dpfl_vec_copy(o->state, w->local, P); /* w~(i), until the sync mixes it */
        o->local_acc = local_accuracy(t, w, k);
    }
    o->t = L->keep_opt ? w->opt.t : o->t + res->steps;
    w->opt.m = own_m;
    w->opt.v = own_v;
}

dpfl_status dpfl_sim_client_round(dpfl_sim *s, int32_t round, double S, int32_t k, float *out, client_result *res,
                            dpfl_error *err)
{
    if (k < 0 || k >= s->part->clients)
        return dpfl_fail(err, DPFL_EINVAL, "client %d: the partition has clients 0 to %d", k, s->part->clients - 1);
    dpfl_status st = fl_store_alloc(&s->cl.store, &s->cl.layout, k, dpfl_clients_steps(&s->cl, k), err);
    if (st) return st;
    s->sv.smp.round = round;
    s->lr = dpfl_optim_lr(&s->cl.optcfg, round - 1);
    s->rd.rdp.clip.clip = dpfl_round_record_clip(s->cfg, round); /* C_t, as dpfl_sim_train sets it */
    dpfl_server_set_update_clip(&s->sv, S);
    s->chunk_start = 0;
    s->chunk_len = 1; /* one client: it gets every thread (the same bits whatever their number) */
    const fl_train_ctx t = fl_sim_train_ctx(s);
    worker *w = &s->wk.workers[0];
    if (w->ws_threads != s->wk.nthreads)
        w->ws_threads = dpfl_nn_ws_set_threads(w->ws, s->wk.nthreads, NULL) ? 0 : s->wk.nthreads;
    fl_client_train(&t, &s->cl.layout, &s->cl.store, w, k, out, res);
    if (s->sv.agg->client_level) res->norm = dpfl_vec_norm2(out, s->model->nparam);
    return DPFL_OK;
}
