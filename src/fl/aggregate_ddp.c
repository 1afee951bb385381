/* Distributed DP, an aggregation mode (client_dp.mechanism = ddp; Kairouz et al. 2021, Agarwal et al. 2021): the
 * server never sees an update.
 *
 *   begin    (server)  n sampled clients; threshold t = max(2, ceil((1 - f) n)); each client's Skellam variance
 *                      mu / t; the round's public rotation seed; secure aggregation rounds 0-1 (every sampled
 *                      client advertises its keys and shares its secrets -- a client that drops out later drops
 *                      after this, the case the protocol recovers from)
 *   client   (worker)  after local training: clip, scale, rotate, round, noise, wrap (dpfl_ddp_encode), then its
 *                      masked input (secure aggregation round 2)
 *   add      (server)  masked inputs summed as they arrive (a modular sum: any order gives the same bits)
 *   release  (server)  with >= t survivors: unmasking (round 3), the modular sum, decoding, the server step; with
 *                      fewer: nothing is released (the round is still charged: the ledger never under-counts)
 * Every released sum carries Skellam noise of variance >= mu (t or more clients each adding mu / t), which is what
 * the round's dpfl_event_skellam charges. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t pow2_at_least(size_t P)
{
    size_t d = 1;
    while (d < P) d <<= 1;
    return d;
}

void dpfl_sim_secagg_seed(const dpfl_rng *root, int32_t round, int32_t k, uint8_t out[32])
{
    fl_ddp_seed_bytes(root, (uint64_t)round, (uint64_t)k, PURPOSE_SECAGG, out);
}

void fl_ddp_seed_bytes(const dpfl_rng *root, uint64_t a, uint64_t b, uint64_t c, uint8_t out[32])
{
    dpfl_rng r;
    dpfl_rng_derive(root, &r, a, b, c);
    for (int i = 0; i < 4; i++) {
        uint64_t v = dpfl_rng_u64(&r);
        memcpy(out + 8 * i, &v, 8);
    }
}

static void secagg_round_free(fl_ddp_state *d)
{
    for (int32_t i = 0; d->sa_clients && i < d->nsa; i++) {
        dpfl_secagg_client_free(d->sa_clients[i]);
        dpfl_secagg_msg_free(&d->sa_sf[i]);
    }
    free(d->sa_clients);
    free(d->sa_sf);
    d->sa_clients = NULL;
    d->sa_sf = NULL;
    d->nsa = 0;
    dpfl_secagg_server_free(d->sa_server);
    d->sa_server = NULL;
    for (int32_t j = 0; d->masked && j < d->nslots; j++) dpfl_secagg_msg_free(&d->masked[j]);
}

static dpfl_status create(fl_agg_state *a, const fl_round_view *v, dpfl_error *err)
{
    fl_ddp_state *dd = &a->ddp;
    const size_t d = pow2_at_least(v->nparam);
    dd->nslots = v->nslots; /* the in-process slots */
    dd->nparam = v->nparam;
    dd->enc = calloc((size_t)v->nslots, sizeof *dd->enc);
    dd->masked = calloc((size_t)v->nslots, sizeof *dd->masked);
    dd->err = calloc((size_t)v->nslots, sizeof *dd->err);
    if (!dd->enc || !dd->masked || !dd->err || !(dd->sum = dpfl_alloc(d * sizeof(uint32_t), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t j = 0; j < v->nslots; j++)
        if (!(dd->enc[j] = dpfl_alloc(d * sizeof(uint32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t i = 0; i < v->nthreads; i++) {
        worker *w = &v->workers[i];
        if (!(w->ddp_work = dpfl_alloc(d * sizeof(double), err)) || !(w->ddp_iwork = dpfl_alloc(d * sizeof(int64_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    }
    return DPFL_OK;
}

static void destroy(fl_agg_state *a)
{
    fl_ddp_state *d = &a->ddp;
    secagg_round_free(d);
    for (int32_t j = 0; d->enc && j < d->nslots; j++) dpfl_free(d->enc[j]);
    free(d->enc);
    free(d->masked);
    free(d->err);
    dpfl_free(d->sum);
    dpfl_poisson_table_free(d->noise); /* the workers' encoding buffers go with the workers (sim.c) */
}

static dpfl_status set_noise(fl_agg_state *a, const fl_sampling_view *smp, int32_t round, double z, dpfl_error *err)
{
    fl_ddp_state *d = &a->ddp;
    (void)round;
    const dpfl_config *cfg = smp->cfg;
    if (!(z > 0)) return DPFL_OK; /* calibrated later */
    if (z == d->plan.z && d->plan.clip == a->cdp.S) return DPFL_OK;
    /* the largest cohort the modulus must hold: the full population, or the Poisson cohort's mean + 7 sd */
    double rate = 0;
    for (int32_t r = 1; r <= cfg->fl.rounds; r++) rate = fmax(rate, dpfl_round_client_rate(cfg, r));
    const int32_t cohort = dpfl_mech_clients_max_cohort(smp->sampling, smp->clients, rate);
    return dpfl_ddp_plan_make(d->nparam, a->cdp.S, z, cfg->client_dp.ddp_inflation, cfg->client_dp.ddp_bits, cohort,
                              cfg->client_dp.ddp_tolerated_dropout, &d->plan, err);
}

/* The clients' Poisson table for a round of n (the mechanism's, mech/ddp.c; kept while it does not change). */
static dpfl_status noise_table(fl_ddp_state *d, int32_t n, dpfl_error *err)
{
    return dpfl_ddp_noise_table(&d->plan, n, &d->noise, err);
}

static dpfl_status begin(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_error *err)
{
    fl_ddp_state *d = &a->ddp;
    secagg_round_free(d);
    const int32_t n = v->nsampled;
    const dpfl_ddp_plan *p = &d->plan;
    d->t = 0;
    memset(d->sum, 0, p->d * sizeof(uint32_t));
    if (n < 2) return DPFL_OK; /* secure aggregation needs two clients: nothing is released */
    DPFL_ASSERT(p->z > 0);
    if (n > (int32_t)DPFL_SECAGG_MAX_CLIENTS && d->secagg)
        return dpfl_fail(err, DPFL_EINVAL, "round %d: %d clients, more than secure aggregation's %u; lower "
                                           "fl.client_rate", (int)round, n, DPFL_SECAGG_MAX_CLIENTS);
    d->t = dpfl_ddp_threshold(p, n);
    dpfl_status st;
    if (!d->remote && (st = noise_table(d, n, err))) return st; /* remote: the clients draw their own noise */
    fl_ddp_seed_bytes(v->root, (uint64_t)round, UINT64_MAX, PURPOSE_DDP_ROTATION, d->seed);
    if (!d->secagg) return DPFL_OK;
    const dpfl_secagg_params sp = {(uint32_t)n, (uint32_t)d->t, (uint32_t)p->bits, p->d};
    if ((st = dpfl_secagg_server_create(&sp, &d->sa_server, err))) return st;
    if (d->remote) return DPFL_OK; /* rounds 0-2 over the network (run_clients) */
    d->nsa = n;
    d->sa_clients = calloc((size_t)n, sizeof *d->sa_clients);
    d->sa_sf = calloc((size_t)n, sizeof *d->sa_sf);
    if (!d->sa_clients || !d->sa_sf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (secure aggregation, %d clients)", n);
    dpfl_secagg_msg msg = {0}, keys = {0};
    for (int32_t i = 0; i < n; i++) {
        uint8_t seed[32];
        fl_ddp_seed_bytes(v->root, (uint64_t)round, (uint64_t)v->sampled[i], PURPOSE_SECAGG, seed);
        if ((st = dpfl_secagg_client_create(&sp, (uint32_t)i, seed, &d->sa_clients[i], err)) ||
            (st = dpfl_secagg_client_advertise(d->sa_clients[i], &msg, err)) ||
            (st = dpfl_secagg_server_add_advert(d->sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    if ((st = dpfl_secagg_server_keys(d->sa_server, &keys, err))) goto out;
    for (int32_t i = 0; i < n; i++) {
        if ((st = dpfl_secagg_client_share_keys(d->sa_clients[i], keys.data, keys.len, &msg, err)) ||
            (st = dpfl_secagg_server_add_shares(d->sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    for (int32_t i = 0; i < n; i++)
        if ((st = dpfl_secagg_server_shares_for(d->sa_server, (uint32_t)i, &d->sa_sf[i], err))) goto out;
out:
    dpfl_secagg_msg_free(&msg);
    dpfl_secagg_msg_free(&keys);
    return st;
}

/* Client k's update u, clipped, rotated, rounded, noised and wrapped into enc, with the client's own stream. */
static dpfl_status encode(fl_ddp_state *d, const dpfl_rng *root, int32_t round, worker *w, int32_t k, const float *u,
                          uint32_t *enc, double *norm, dpfl_error *err)
{
    dpfl_rng rng; /* the client's own stream: its rounding and its noise */
    dpfl_rng_derive(root, &rng, (uint64_t)round, (uint64_t)k, PURPOSE_DDP_CLIENT);
    int tries;
    return dpfl_ddp_encode(&d->plan, u, d->seed, d->noise, &rng, w->ddp_work, w->ddp_iwork, enc, norm,
                           &tries, err);
}

dpfl_status dpfl_sim_ddp_client_setup(dpfl_sim *s, int32_t round, int32_t n, int32_t t, const uint8_t seed[32],
                                dpfl_error *err)
{
    fl_ddp_state *d = &s->aggst.ddp;
    if (!(d->plan.z > 0)) return dpfl_fail(err, DPFL_EINVAL, "distributed DP: no noise multiplier set");
    if (n < 2 || t != dpfl_ddp_threshold(&d->plan, n))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP: threshold %d for a cohort of %d, this client's plan "
                                           "gives %d (the same client_dp settings are needed)", t, n,
                         n >= 2 ? dpfl_ddp_threshold(&d->plan, n) : 0);
    s->round = round;
    d->t = t;
    memcpy(d->seed, seed, 32);
    return noise_table(d, n, err);
}

dpfl_status dpfl_sim_ddp_client_encode(dpfl_sim *s, int32_t k, const float *u, uint32_t *enc, double *norm,
                                 dpfl_error *err)
{
    return encode(&s->aggst.ddp, &s->root, s->round, &s->workers[0], k, u, enc, norm, err);
}

static void client_send(fl_agg_state *a, const fl_round_view *v, worker *w, int32_t i, int32_t j, float *u)
{
    fl_ddp_state *d = &a->ddp;
    client_result *r = &v->results[i];
    r->ddp_status = DPFL_OK;
    if (!d->t) {
        r->norm = dpfl_vec_norm2(u, v->nparam);
        return;
    }
    dpfl_status st = encode(d, v->root, v->smp.round, w, r->client, u, d->enc[j], &r->norm, &d->err[j]);
    if (!st && d->secagg)
        st = dpfl_secagg_client_masked_input(d->sa_clients[i], d->sa_sf[i].data, d->sa_sf[i].len, d->enc[j],
                                             &d->masked[j], &d->err[j]);
    r->ddp_status = st;
}

/* In process, client i's encoded (and masked) input, made by the worker in the slot of the transport's call, into
 * the modular sum (which is order-independent: integers mod 2^bits).  Remote clients' masked inputs never come here:
 * the transport adds them to the secure-aggregation server as they arrive. */
static dpfl_status add(fl_agg_state *a, const fl_round_view *v, int32_t i, float *u, dpfl_error *err)
{
    (void)u;
    fl_ddp_state *d = &a->ddp;
    const client_result *r = &v->results[i];
    const int32_t j = i - v->job->start;
    if (!d->t || d->remote) return DPFL_OK;
    if (r->ddp_status)
        return dpfl_fail(err, r->ddp_status, "client %d (distributed DP): %s", r->client, d->err[j].msg);
    dpfl_status st = DPFL_OK;
    if (d->secagg) {
        st = dpfl_secagg_server_add_masked(d->sa_server, d->masked[j].data, d->masked[j].len, err);
        dpfl_secagg_msg_free(&d->masked[j]);
    } else {
        const size_t dim = d->plan.d;
        const uint32_t mask = d->plan.bits >= 32 ? 0xFFFFFFFFu : ((uint32_t)1 << d->plan.bits) - 1;
        const uint32_t *e = d->enc[j];
        for (size_t k = 0; k < dim; k++) d->sum[k] = (d->sum[k] + e[k]) & mask;
    }
    return st;
}

/* The round's clients whose norm exceeded S (a simulation diagnostic: a real server never sees the norm). */
static int32_t count_clipped(const client_result *r, int32_t n, double S)
{
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++) c += !r[i].dropped && r[i].norm > S;
    return c;
}

static dpfl_status release(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_round_metrics *m,
                           dpfl_error *err)
{
    fl_ddp_state *d = &a->ddp;
    const dpfl_ddp_plan *p = &d->plan;
    m->ddp_threshold = d->t;
    m->ddp_released = 0;
    m->update_clip = a->cdp.S;
    if (m->replied > 0 && !d->remote) m->update_clip_fraction = (double)count_clipped(v->results, v->nsampled, a->cdp.S) / m->replied;
    const int32_t arrived = m->replied; /* every input that was not dropped was added (or the round failed) */
    dpfl_status st = DPFL_OK;
    if (d->t && arrived >= d->t) {
        if (d->remote) {
            dpfl_secagg_msg req = {0};
            int released = 0;
            if (!(st = dpfl_secagg_server_unmask_request(d->sa_server, &req, err)))
                st = v->transport->secagg_finish(v->transport, v->job, req.data, req.len, arrived, d->sum,
                                                 &released, err);
            dpfl_secagg_msg_free(&req);
            if (st || !released) goto out; /* too few answers to unmask: nothing is released */
        } else if (d->secagg) {
            dpfl_secagg_msg req = {0}, msg = {0};
            if ((st = dpfl_secagg_server_unmask_request(d->sa_server, &req, err))) goto out;
            for (int32_t i = 0; i < v->nsampled && !st; i++) {
                if (v->results[i].dropped) continue;
                if (!(st = dpfl_secagg_client_unmask(d->sa_clients[i], req.data, req.len, &msg, err)))
                    st = dpfl_secagg_server_add_unmask(d->sa_server, msg.data, msg.len, err);
                dpfl_secagg_msg_free(&msg);
            }
            dpfl_secagg_msg_free(&req);
            uint32_t summed = 0;
            if (st || (st = dpfl_secagg_server_finish(d->sa_server, d->sum, &summed, err))) goto out;
            DPFL_ASSERT((int32_t)summed == arrived);
        }
        const double denom = fl_round_design(&v->smp, round).denom;
        worker *w = &v->workers[0]; /* the workers are idle between rounds */
        if ((st = dpfl_ddp_decode(p, d->sum, d->seed, w->ddp_iwork, w->ddp_work, (float)(1.0 / denom), v->acc,
                                  err)))
            goto out;
        dpfl_vec_axpy(v->global, (float)v->cfg->fl.eta, v->acc, v->nparam);
        const double mu_round = arrived * dpfl_ddp_client_variance(p, v->nsampled);
        m->ddp_released = 1;
        m->ddp_overflow = dpfl_ddp_overflow_bound(p, arrived, mu_round);
        m->update_noise_std = sqrt(mu_round) * p->gamma / denom;
    }
out:
    secagg_round_free(d);
    return st;
}

/* The round's release: the Skellam sum at the client rate of the design that ran. */
static dpfl_event event(const fl_agg_state *a, const fl_sampling_view *smp, int32_t round)
{
    const dpfl_mech_clients design = fl_round_design(smp, round);
    DPFL_ASSERT(a->ddp.plan.z > 0);
    return dpfl_ddp_event(&a->ddp.plan, design.q);
}

const fl_aggregator fl_agg_ddp = {
    .name = "distributed DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .client_send = client_send, .add = add, .release = release, .event = event};
