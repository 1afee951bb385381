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
    const dpfl_mech_clients d = dpfl_mech_clients_make(s->sv.smp.sampling, s->part->clients, rate, m);
    dpfl_rng rng; /* the round's stream (cross-device: its pass's, whose permutation every round of it shares) */
    dpfl_rng_derive(&s->root, &rng, (uint64_t)dpfl_mech_clients_stream(&d, round), UINT64_MAX, PURPOSE_SAMPLE_CLIENTS);
    s->sv.smp.round = round;
    /* the sampler returns the design it drew from: what the round's event charges */
    s->sv.cohort.n = dpfl_mech_sample_clients_ran(&rng, s->sv.smp.sampling, s->part->clients, rate, m, round,
                                                  s->sv.cohort.sampled, &s->sv.smp.design);
    s->sv.smp.design_round = round;
    if (clients) *clients = s->sv.cohort.sampled;
    return s->sv.cohort.n;
}

dpfl_status dpfl_sim_round(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    dpfl_sim_sample(s, round, NULL);
    return dpfl_sim_train(s, round, m, err);
}

/* The cohort's reports, and who drops out: decided before anyone trains (client-level DP's client_dp.dropout, from
 * the round's own stream; dropout 0: nobody, as in a mode without client-level DP). */
static void cohort_begin_round(fl_cohort *co, const dpfl_rng *root, int32_t round, double dropout)
{
    for (int32_t i = 0; i < co->n; i++) {
        memset(&co->results[i], 0, sizeof co->results[i]);
        co->results[i].client = co->sampled[i];
        if (!(dropout > 0)) continue; /* client_dp.dropout */
        dpfl_rng drng;
        dpfl_rng_derive(root, &drng, (uint64_t)round, (uint64_t)co->sampled[i], PURPOSE_DROPOUT);
        co->results[i].dropped = dpfl_rng_bernoulli(&drng, dropout);
    }
}

/* A round its mode can release nothing from (too few clients for secure aggregation): nobody is asked to train, in
 * one process as with dpfl serve and under mpirun, so a client's kept state and its records' spend do not move;
 * its clients count as dropped out, and the round is charged all the same. */
static void cohort_skip_round(fl_cohort *co)
{
    for (int32_t i = 0; i < co->n; i++) co->results[i].dropped = 1;
}

/* The clients of the round that do not drop out get their state blocks (blocks of earlier rounds' clients may page
 * out). */
static dpfl_status clients_begin_round(dpfl_clients *cl, const fl_cohort *co, int32_t round, dpfl_error *err)
{
    dpfl_status st;
    fl_store_begin_round(&cl->store, round);
    for (int32_t i = 0; i < co->n; i++)
        if (!co->results[i].dropped && (st = fl_store_alloc(&cl->store, &cl->layout, co->sampled[i],
                                                             dpfl_clients_steps(cl, co->sampled[i]), err)))
            return st;
    return DPFL_OK;
}

/* median clipping needs every update of the round before it can clip any: one slot per client */
static dpfl_status slots_reserve(fl_workers *wk, int32_t ms, size_t P, dpfl_error *err)
{
    if (ms <= wk->nslots) return DPFL_OK;
    float **more = realloc(wk->slots, (size_t)ms * sizeof *more);
    if (!more) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (median clipping needs %d updates)", ms);
    wk->slots = more;
    for (; wk->nslots < ms; wk->nslots++)
        if (!(wk->slots[wk->nslots] = dpfl_alloc(P * sizeof(float), err))) return DPFL_ENOMEM;
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

/* The server takes client i's update u of the transport's call job as it arrives, in any order (the auditing
 * observer sees it first); keep: where a whole-round mode keeps it until release (else NULL). */
static dpfl_status server_take(dpfl_server *sv, const dpfl_round_job *job, int32_t i, float *u, float *keep,
                               dpfl_error *err)
{
    if (sv->observer) sv->observer(sv->observer_ctx, sv->smp.round, sv->cohort.results[i].client, u, sv->model->nparam);
    dpfl_status st;
    if ((st = fl_scaffold_take(&sv->scaffold, u, sv->cohort.results[i].steps, job->lr, err)))
        return st; /* the server's dc_i */
    const fl_arrival a = {.i = i, .j = i - job->start, .r = &sv->cohort.results[i], .u = u, .keep = keep};
    return sv->agg->add(sv->aggself, &a, err);
}

/* a whole-round transport's arrivals (dpfl_round_job.arrive) */
static dpfl_status server_arrive(dpfl_round_job *job, int32_t i, float *u, dpfl_error *err)
{
    DPFL_ASSERT(i >= 0 && i < job->nsampled && !job->reports[i].dropped);
    dpfl_sim *s = job->sim;
    return server_take(&s->sv, job, i, u, s->sv.agg->whole_round ? s->wk.slots[i] : NULL, err);
}

/* In process: the call's updates, from its slots (in client order, though any order would give the same bits). */
static dpfl_status server_add(dpfl_server *sv, const dpfl_round_job *job, float *const *slots, dpfl_error *err)
{
    dpfl_status st;
    for (int32_t j = 0; j < job->count; j++) {
        const int32_t i = job->start + j;
        if (!sv->cohort.results[i].dropped &&
            (st = server_take(sv, job, i, slots[j], sv->agg->whole_round ? slots[i] : NULL, err)))
            return st;
    }
    return DPFL_OK;
}

/* The transport's view of the current chunk (include/dpfl/transport.h). */
static dpfl_round_job *round_job(dpfl_sim *s, int32_t round)
{
    const dpfl_ddp_plan *plan = dpfl_server_ddp_plan(&s->sv);
    if (plan) fl_ddp_round_info(s->sv.aggself, &s->ddp_round);
    s->job = (dpfl_round_job){.sim = s, .round = round, .released = s->sv.ledger.rounds, .nsampled = s->sv.cohort.n,
                              .sampled = s->sv.cohort.sampled, .reports = s->sv.cohort.results, .start = s->chunk_start,
                              .count = s->chunk_len, .slots = s->transport->whole_round ? NULL : s->wk.slots,
                              .arrive = server_arrive, .global = s->global,
                              .nparam = s->model->nparam, .lr = s->lr, .update_clip = s->sv.aggp.S,
                              .record_z = s->rd.rdp.on ? s->rd.rdp.z : 0.0, .client_level = s->sv.agg->client_level,
                              .ddp = plan ? &s->ddp_round : NULL, .control = dpfl_server_control(&s->sv)};
    return &s->job;
}

/* The round, top to bottom: the clients train (through the transport, in chunks of slots), the aggregation mode
 * takes the updates as they arrive and releases the next global model, the helper models sync, and the
 * ledger is charged what ran. */
dpfl_status dpfl_sim_train(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    DPFL_ASSERT(s->sv.smp.round == round);
    metrics_init(m, round);
    s->lr = dpfl_optim_lr(&s->cl.optcfg, round - 1);
    s->rd.rdp.clip.clip = dpfl_round_record_clip(s->cfg, round); /* C_t: the noise std is z C_t (clip decay) */
    const int32_t ms = s->sv.cohort.n;
    dpfl_status st;
    fl_scaffold_begin(&s->sv.scaffold); /* the round's dc_i (fl.scaffold) */
    cohort_begin_round(&s->sv.cohort, &s->root, round, s->sv.agg->client_level ? s->cfg->client_dp.dropout : 0.0);
    if (s->sv.agg->whole_round && (st = slots_reserve(&s->wk, ms, s->model->nparam, err))) return st;
    const fl_sampling_view smp = fl_sampler_view(&s->sv.smp); /* what begin and release see of the round */
    const fl_round_view v = {.round = round, .design = fl_round_design(&smp, round), .nsampled = ms,
                             .sampled = s->sv.cohort.sampled, .results = s->sv.cohort.results, .slots = s->wk.slots,
                             .transport = s->transport, .job = &s->job}; /* the slots are final */
    if ((st = s->sv.agg->begin(s->sv.aggself, &v, err))) return st;
    if (s->sv.agg->can_release && !s->sv.agg->can_release(s->sv.aggself)) cohort_skip_round(&s->sv.cohort);
    /* the clients that train get their state blocks; clients that are processes of their own (dpfl join, MPI
     * workers) keep their state there, not here */
    if (!s->transport->clients_hold_data && (st = clients_begin_round(&s->cl, &s->sv.cohort, round, err))) return st;
    const int32_t chunk = s->transport->whole_round ? ms : s->wk.nslots; /* a whole-round transport: one call */
    for (int32_t start = 0; start < ms; start += chunk) {
        s->chunk_start = start;
        s->chunk_len = ms - start < chunk ? ms - start : chunk;
        s->tctx = fl_sim_train_ctx(s);
        dpfl_round_job *job = round_job(s, round);
        if ((st = s->transport->run_clients(s->transport, job, err))) return st;
        /* a whole-round transport handed each update to the server as it arrived (server_arrive) */
        if (!s->transport->whole_round && (st = server_add(&s->sv, job, s->wk.slots, err))) return st;
    }
    client_metrics(s->sv.cohort.results, ms, s->model->nparam, &s->rd.rdp, m);
    if ((st = s->sv.agg->release(s->sv.aggself, &v, m, err))) return st;
    /* after the release, each feature that has a step there takes it, and is a no-op where it is off: */
    fl_scaffold_end(&s->sv.scaffold); /* the server's c moves (fl.scaffold) */
    fl_store_sync_helpers(&s->cl.store, &s->cl.layout, s->sv.cohort.results, ms, s->global); /* helper models */
    /* the global model's personal slices stay at their initial values (the transform's identity): nothing was sent
     * there, and the server's noise that lands there is discarded */
    fl_personal_reset(&s->cl.layout.pers, s->global);
    if (s->transport->after_round) { /* the released model to the processes that hold the helper models */
        s->chunk_start = 0;
        s->chunk_len = ms;
        s->transport->after_round(s->transport, round_job(s, round));
    }
    m->wall_seconds = dpfl_now() - s->t0;
    return dpfl_server_charge(&s->sv, &s->sv.ledger, err); /* the server owns the ledger of what it released */
}
