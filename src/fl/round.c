/* One round: sample the clients (mech/), decide who drops out, train them through the transport in chunks of
 * `slots` clients, and hand each update to the server as it arrives.  The server's sums are exact and
 * order-independent (core/exact_sum.c; distributed DP's is modular), so the model's bits depend on the set of
 * updates alone -- not on the number of threads, which thread ran which client, nor the order in which a network
 * or MPI round's updates come in -- and the server holds O(model) for the updates, not a slot per client. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int32_t dpfl_sim_sample(dpfl_sim *s, int32_t round, const int32_t **clients)
{
    const double rate = dpfl_round_client_rate(s->cfg, round);
    const int32_t m = dpfl_round_clients_per_round(s->cfg, round);
    const dpfl_mech_clients d = dpfl_mech_clients_make(s->sampling, s->part->clients, rate, m);
    dpfl_rng rng; /* the round's stream (cross-device: its pass's, whose permutation every round of it shares) */
    dpfl_rng_derive(&s->root, &rng, (uint64_t)dpfl_mech_clients_stream(&d, round), UINT64_MAX, PURPOSE_SAMPLE_CLIENTS);
    s->round = round;
    /* the sampler returns the design it drew from: what the round's event charges */
    s->nsampled = dpfl_mech_sample_clients_ran(&rng, s->sampling, s->part->clients, rate, m, round, s->sampled,
                                               &s->design);
    s->design_round = round;
    if (clients) *clients = s->sampled;
    return s->nsampled;
}

dpfl_status dpfl_sim_round(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    dpfl_sim_sample(s, round, NULL);
    return dpfl_sim_train(s, round, m, err);
}

/* Who drops out is decided before anyone trains; clients get their state blocks. */
static dpfl_status prepare_clients(dpfl_sim *s, int32_t round, int32_t ms, dpfl_error *err)
{
    const size_t P = s->model->nparam;
    for (int32_t i = 0; i < ms; i++) {
        memset(&s->results[i], 0, sizeof s->results[i]);
        s->results[i].client = s->sampled[i];
        if (!s->agg->client_level) continue; /* client_dp.dropout */
        dpfl_rng drng;
        dpfl_rng_derive(&s->root, &drng, (uint64_t)round, (uint64_t)s->sampled[i], PURPOSE_DROPOUT);
        s->results[i].dropped = dpfl_rng_bernoulli(&drng, s->cfg->client_dp.dropout);
    }
    dpfl_status st;
    fl_clients_begin_round(&s->clients, round); /* blocks of earlier rounds' clients may page out */
    /* clients that are processes of their own (dpfl join, MPI workers) keep their state there, not here */
    for (int32_t i = 0; i < ms && !s->transport->clients_hold_data; i++)
        if (!s->results[i].dropped &&
            (st = fl_clients_alloc(&s->clients, s->model, s->sampled[i], dpfl_sim_client_steps(s, s->sampled[i]), err)))
            return st;
    if (s->agg->whole_round && ms > s->nslots) {
        /* median clipping needs every update of the round before it can clip any: one slot per client */
        float **more = realloc(s->slots, (size_t)ms * sizeof *more);
        if (!more) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (median clipping needs %d updates)", ms);
        s->slots = more;
        for (; s->nslots < ms; s->nslots++)
            if (!(s->slots[s->nslots] = dpfl_alloc(P * sizeof(float), err))) return DPFL_ENOMEM;
    }
    return DPFL_OK;
}

static void metrics_init(dpfl_round_metrics *m, int32_t round)
{
    memset(m, 0, sizeof *m);
    m->round = round;
    m->test_accuracy = m->test_loss = m->client_acc_mean = m->client_acc_std = NAN;
    m->personal_acc_mean = m->personal_acc_std = m->local_acc_mean = m->local_acc_std = NAN;
    m->clip_fraction = m->update_clip = m->update_clip_fraction = m->update_noise_std = NAN;
    m->between_client_variance = m->update_scale = NAN;
    m->ddp_overflow = NAN;
}

/* What the clients of the round reported: loss, examples and, with DP-SGD, the clipped fraction and noise std. */
static void client_metrics(const client_result *results, int32_t n, size_t P, const fl_record_dp *rd,
                           dpfl_round_metrics *m)
{
    double loss_sum = 0;
    int64_t clipped = 0;
    for (int32_t i = 0; i < n; i++) {
        loss_sum += results[i].loss_sum;
        m->examples += results[i].examples;
        clipped += results[i].clipped;
        m->replied += !results[i].dropped;
    }
    m->clients = n;
    m->train_loss = m->examples ? loss_sum / (double)m->examples : NAN;
    if (!rd->on) return;
    m->clip_fraction = m->examples ? (double)clipped / (double)m->examples : NAN;
    dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(rd->poisson, 1, 1, rd->clip.clip, rd->z);
    m->noise_std = rd->secure ? dpfl_mech_discrete_std(P, d.z, d.sens) : d.noise_std;
}

/* The server takes client i's update u as it arrives, in any order (the auditing observer sees it first). */
static dpfl_status server_take(dpfl_sim *s, int32_t i, float *u, dpfl_error *err)
{
    if (s->observer) s->observer(s->observer_ctx, s->round, s->results[i].client, u, s->model->nparam);
    dpfl_status st = fl_scaffold_take(&s->clients, u, s->results[i].steps, s->lr, err); /* the server's dc_i */
    if (st) return st;
    const fl_arrival a = {.i = i, .j = i - s->job.start, .r = &s->results[i], .u = u,
                          .keep = s->agg->whole_round ? s->slots[i] : NULL};
    return s->agg->add(s->aggself, &a, err);
}

/* a whole-round transport's arrivals (dpfl_round_job.arrive) */
static dpfl_status server_arrive(dpfl_round_job *job, int32_t i, float *u, dpfl_error *err)
{
    DPFL_ASSERT(i >= 0 && i < job->nsampled && !job->reports[i].dropped);
    return server_take(job->sim, i, u, err);
}

/* In process: the chunk's updates, from its slots (in client order, though any order would give the same bits). */
static dpfl_status server_add(dpfl_sim *s, dpfl_error *err)
{
    dpfl_status st;
    for (int32_t j = 0; j < s->chunk_len; j++)
        if (!s->results[s->chunk_start + j].dropped && (st = server_take(s, s->chunk_start + j, s->slots[j], err)))
            return st;
    return DPFL_OK;
}

/* The transport's view of the current chunk (include/dpfl/transport.h). */
static dpfl_round_job *round_job(dpfl_sim *s, int32_t round)
{
    const dpfl_ddp_plan *plan = dpfl_sim_ddp_plan(s);
    if (plan) fl_ddp_round_info(s->aggself, &s->ddp_round);
    s->job = (dpfl_round_job){.sim = s, .round = round, .released = s->ledger.rounds, .nsampled = s->nsampled,
                              .sampled = s->sampled, .reports = s->results, .start = s->chunk_start,
                              .count = s->chunk_len, .slots = s->transport->whole_round ? NULL : s->slots,
                              .arrive = server_arrive, .global = s->global,
                              .nparam = s->model->nparam, .lr = s->lr, .update_clip = s->aggp.S,
                              .record_z = s->rdp.on ? s->rdp.z : 0.0, .client_level = s->agg->client_level,
                              .ddp = plan ? &s->ddp_round : NULL, .control = dpfl_sim_control(s)};
    return &s->job;
}

/* The round, top to bottom: the clients train (through the transport, in chunks of slots), the aggregation mode
 * takes the updates as they arrive and releases the next global model, the helper models sync, and the
 * ledger is charged what ran. */
dpfl_status dpfl_sim_train(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    DPFL_ASSERT(s->round == round);
    metrics_init(m, round);
    s->lr = dpfl_optim_lr(&s->optcfg, round - 1);
    s->rdp.clip.clip = dpfl_round_record_clip(s->cfg, round); /* C_t: the noise std is z C_t (clip decay) */
    const int32_t ms = s->nsampled;
    dpfl_status st;
    fl_scaffold_begin(&s->clients); /* the round's dc_i (fl.scaffold) */
    if ((st = prepare_clients(s, round, ms, err))) return st;
    const fl_round_view v = fl_sim_view(s); /* after prepare_clients: the slots are final */
    if ((st = s->agg->begin(s->aggself, &v, err))) return st;
    const int32_t chunk = s->transport->whole_round ? ms : s->nslots; /* a whole-round transport: one call */
    for (int32_t start = 0; start < ms; start += chunk) {
        s->chunk_start = start;
        s->chunk_len = ms - start < chunk ? ms - start : chunk;
        s->tctx = fl_sim_train_ctx(s);
        if ((st = s->transport->run_clients(s->transport, round_job(s, round), err))) return st;
        /* a whole-round transport handed each update to the server as it arrived (server_arrive) */
        if (!s->transport->whole_round && (st = server_add(s, err))) return st;
    }
    client_metrics(s->results, ms, s->model->nparam, &s->rdp, m);
    if ((st = s->agg->release(s->aggself, &v, m, err))) return st;
    fl_scaffold_end(&s->clients); /* the server's c moves (fl.scaffold) */
    if (s->clients.helper) fl_clients_sync_helpers(&s->clients, s->results, ms, s->global);
    /* the global model's personal slices stay at their initial values (the transform's identity): nothing was sent
     * there, and the server's noise that lands there is discarded */
    if (s->clients.npers) fl_personal_reset(&s->clients, s->global);
    if (s->transport->after_round) { /* the released model to the processes that hold the helper models */
        s->chunk_start = 0;
        s->chunk_len = ms;
        s->transport->after_round(s->transport, round_job(s, round));
    }
    m->wall_seconds = dpfl_now() - s->t0;
    return dpfl_sim_charge(s, &s->ledger, err); /* the simulation owns the ledger of what it released */
}
