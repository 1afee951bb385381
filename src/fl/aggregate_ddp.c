/* Distributed DP, an aggregation mode (client_dp.mechanism = ddp; Kairouz et al. 2021, Agarwal et al. 2021): the
 * server never sees an update.
 *
 *   begin    (server)  n sampled clients; threshold t = max(2, ceil((1 - f) n)); each client's Skellam variance
 *                      mu / t; the round's public rotation seed; secure aggregation rounds 0-1 (every sampled
 *                      client advertises its keys and shares its secrets -- a client that drops out later drops
 *                      after this, the case the protocol recovers from)
 *   client   (worker)  after local training: clip, scale, rotate, round, noise, wrap (dpfl_ddp_encode), then its
 *                      masked input (secure aggregation round 2)
 *   arrive   (server)  masked inputs summed in client order as they arrive
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

static void secagg_round_free(dpfl_sim *s)
{
    for (int32_t i = 0; s->ddp.sa_clients && i < s->nsampled; i++) {
        dpfl_secagg_client_free(s->ddp.sa_clients[i]);
        dpfl_secagg_msg_free(&s->ddp.sa_sf[i]);
    }
    free(s->ddp.sa_clients);
    free(s->ddp.sa_sf);
    s->ddp.sa_clients = NULL;
    s->ddp.sa_sf = NULL;
    dpfl_secagg_server_free(s->ddp.sa_server);
    s->ddp.sa_server = NULL;
    for (int32_t j = 0; s->ddp.masked && j < s->ddp.nslots; j++) dpfl_secagg_msg_free(&s->ddp.masked[j]);
}

static dpfl_status create(dpfl_sim *s, dpfl_error *err)
{
    const size_t d = pow2_at_least(s->model->nparam);
    s->ddp.nslots = s->nslots; /* the in-process slots (a network round's extra slots need none of these) */
    s->ddp.enc = calloc((size_t)s->nslots, sizeof *s->ddp.enc);
    s->ddp.masked = calloc((size_t)s->nslots, sizeof *s->ddp.masked);
    s->ddp.err = calloc((size_t)s->nslots, sizeof *s->ddp.err);
    if (!s->ddp.enc || !s->ddp.masked || !s->ddp.err || !(s->ddp.sum = dpfl_alloc(d * sizeof(uint32_t), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t j = 0; j < s->nslots; j++)
        if (!(s->ddp.enc[j] = dpfl_alloc(d * sizeof(uint32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t i = 0; i < s->nthreads; i++) {
        worker *w = &s->workers[i];
        if (!(w->ddp_work = dpfl_alloc(d * sizeof(double), err)) || !(w->ddp_iwork = dpfl_alloc(d * sizeof(int64_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    }
    return DPFL_OK;
}

static void destroy(dpfl_sim *s)
{
    secagg_round_free(s);
    for (int32_t j = 0; s->ddp.enc && j < s->ddp.nslots; j++) dpfl_free(s->ddp.enc[j]);
    free(s->ddp.enc);
    free(s->ddp.masked);
    free(s->ddp.err);
    dpfl_free(s->ddp.sum);
    dpfl_poisson_table_free(s->ddp.noise);
    for (int32_t i = 0; s->workers && i < s->nthreads; i++) {
        dpfl_free(s->workers[i].ddp_work);
        dpfl_free(s->workers[i].ddp_iwork);
    }
}

static dpfl_status set_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err)
{
    (void)round;
    const dpfl_config *cfg = s->cfg;
    if (!(z > 0)) return DPFL_OK; /* calibrated later */
    if (z == s->ddp.plan.z && s->ddp.plan.clip == s->cdp.S) return DPFL_OK;
    /* the largest cohort the modulus must hold: the full population, or the Poisson cohort's mean + 7 sd */
    double rate = 0;
    for (int32_t r = 1; r <= cfg->fl.rounds; r++) rate = fmax(rate, dpfl_round_client_rate(cfg, r));
    const double K = s->part->clients, mean = rate * K;
    int32_t cohort = s->sampling == DPFL_SAMPLE_POISSON ? (int32_t)fmin(K, ceil(mean + 7 * sqrt(mean) + 2)) : (int32_t)K;
    return dpfl_ddp_plan_make(s->model->nparam, s->cdp.S, z, cfg->client_dp.ddp_inflation, cfg->client_dp.ddp_bits, cohort,
                              cfg->client_dp.ddp_tolerated_dropout, &s->ddp.plan, err);
}

/* The clients' Poisson table for a round of n: lambda = the client variance / 2 (kept while it does not change). */
static dpfl_status noise_table(dpfl_sim *s, int32_t n, dpfl_error *err)
{
    const double lambda = dpfl_ddp_client_variance(&s->ddp.plan, n) / 2;
    if (s->ddp.noise && dpfl_poisson_table_lambda(s->ddp.noise) == lambda) return DPFL_OK;
    dpfl_poisson_table_free(s->ddp.noise);
    s->ddp.noise = NULL;
    return dpfl_poisson_table_make(lambda, &s->ddp.noise, err);
}

static dpfl_status begin(dpfl_sim *s, int32_t round, dpfl_error *err)
{
    dpfl_vec_zero(s->acc, s->model->nparam);
    secagg_round_free(s);
    const int32_t n = s->nsampled;
    const dpfl_ddp_plan *p = &s->ddp.plan;
    s->ddp.arrived = s->ddp.clipped = 0;
    s->ddp.t = 0;
    memset(s->ddp.sum, 0, p->d * sizeof(uint32_t));
    if (n < 2) return DPFL_OK; /* secure aggregation needs two clients: nothing is released */
    DPFL_ASSERT(p->z > 0);
    if (n > (int32_t)DPFL_SECAGG_MAX_CLIENTS && s->ddp.secagg)
        return dpfl_fail(err, DPFL_EINVAL, "round %d: %d clients, more than secure aggregation's %u; lower "
                                           "fl.client_rate", (int)round, n, DPFL_SECAGG_MAX_CLIENTS);
    s->ddp.t = dpfl_ddp_threshold(p, n);
    dpfl_status st;
    if (!s->ddp.remote && (st = noise_table(s, n, err))) return st; /* remote: the clients draw their own noise */
    fl_ddp_seed_bytes(&s->root, (uint64_t)round, UINT64_MAX, PURPOSE_DDP_ROTATION, s->ddp.seed);
    if (!s->ddp.secagg) return DPFL_OK;
    const dpfl_secagg_params sp = {(uint32_t)n, (uint32_t)s->ddp.t, (uint32_t)p->bits, p->d};
    if ((st = dpfl_secagg_server_create(&sp, &s->ddp.sa_server, err))) return st;
    if (s->ddp.remote) return DPFL_OK; /* rounds 0-2 over the network (run_clients) */
    s->ddp.sa_clients = calloc((size_t)n, sizeof *s->ddp.sa_clients);
    s->ddp.sa_sf = calloc((size_t)n, sizeof *s->ddp.sa_sf);
    if (!s->ddp.sa_clients || !s->ddp.sa_sf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (secure aggregation, %d clients)", n);
    dpfl_secagg_msg msg = {0}, keys = {0};
    for (int32_t i = 0; i < n; i++) {
        uint8_t seed[32];
        fl_ddp_seed_bytes(&s->root, (uint64_t)round, (uint64_t)s->sampled[i], PURPOSE_SECAGG, seed);
        if ((st = dpfl_secagg_client_create(&sp, (uint32_t)i, seed, &s->ddp.sa_clients[i], err)) ||
            (st = dpfl_secagg_client_advertise(s->ddp.sa_clients[i], &msg, err)) ||
            (st = dpfl_secagg_server_add_advert(s->ddp.sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    if ((st = dpfl_secagg_server_keys(s->ddp.sa_server, &keys, err))) goto out;
    for (int32_t i = 0; i < n; i++) {
        if ((st = dpfl_secagg_client_share_keys(s->ddp.sa_clients[i], keys.data, keys.len, &msg, err)) ||
            (st = dpfl_secagg_server_add_shares(s->ddp.sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    for (int32_t i = 0; i < n; i++)
        if ((st = dpfl_secagg_server_shares_for(s->ddp.sa_server, (uint32_t)i, &s->ddp.sa_sf[i], err))) goto out;
out:
    dpfl_secagg_msg_free(&msg);
    dpfl_secagg_msg_free(&keys);
    return st;
}

/* Client k's update u, clipped, rotated, rounded, noised and wrapped into enc, with the client's own stream. */
static dpfl_status encode(dpfl_sim *s, worker *w, int32_t k, const float *u, uint32_t *enc, double *norm,
                          dpfl_error *err)
{
    dpfl_rng rng; /* the client's own stream: its rounding and its noise */
    dpfl_rng_derive(&s->root, &rng, (uint64_t)s->round, (uint64_t)k, PURPOSE_DDP_CLIENT);
    int tries;
    return dpfl_ddp_encode(&s->ddp.plan, u, s->ddp.seed, s->ddp.noise, &rng, w->ddp_work, w->ddp_iwork, enc, norm,
                           &tries, err);
}

dpfl_status dpfl_sim_ddp_client_setup(dpfl_sim *s, int32_t round, int32_t n, int32_t t, const uint8_t seed[32],
                                dpfl_error *err)
{
    if (!(s->ddp.plan.z > 0)) return dpfl_fail(err, DPFL_EINVAL, "distributed DP: no noise multiplier set");
    if (n < 2 || t != dpfl_ddp_threshold(&s->ddp.plan, n))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP: threshold %d for a cohort of %d, this client's plan "
                                           "gives %d (the same client_dp settings are needed)", t, n,
                         n >= 2 ? dpfl_ddp_threshold(&s->ddp.plan, n) : 0);
    s->round = round;
    s->ddp.t = t;
    memcpy(s->ddp.seed, seed, 32);
    return noise_table(s, n, err);
}

dpfl_status dpfl_sim_ddp_client_encode(dpfl_sim *s, int32_t k, const float *u, uint32_t *enc, double *norm,
                                 dpfl_error *err)
{
    return encode(s, &s->workers[0], k, u, enc, norm, err);
}

static void client_send(dpfl_sim *s, worker *w, int32_t i, int32_t j, float *u)
{
    client_result *r = &s->results[i];
    r->ddp_status = DPFL_OK;
    if (!s->ddp.t) {
        r->norm = dpfl_vec_norm2(u, s->model->nparam);
        return;
    }
    dpfl_status st = encode(s, w, r->client, u, s->ddp.enc[j], &r->norm, &s->ddp.err[j]);
    if (!st && s->ddp.secagg)
        st = dpfl_secagg_client_masked_input(s->ddp.sa_clients[i], s->ddp.sa_sf[i].data, s->ddp.sa_sf[i].len, s->ddp.enc[j],
                                             &s->ddp.masked[j], &s->ddp.err[j]);
    r->ddp_status = st;
}

static dpfl_status add(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err)
{
    const client_result *r = &s->results[i];
    m->replied++;
    s->ddp.clipped += r->norm > s->cdp.S; /* a simulation diagnostic: a real server never sees the norm */
    if (!s->ddp.t) return DPFL_OK;
    if (s->ddp.remote) { /* its masked input was added as it arrived (the transport refuses a malformed one) */
        s->ddp.arrived++;
        return DPFL_OK;
    }
    if (r->ddp_status)
        return dpfl_fail(err, r->ddp_status, "client %d (distributed DP): %s", r->client, s->ddp.err[j].msg);
    dpfl_status st = DPFL_OK;
    if (s->ddp.secagg) {
        st = dpfl_secagg_server_add_masked(s->ddp.sa_server, s->ddp.masked[j].data, s->ddp.masked[j].len, err);
        dpfl_secagg_msg_free(&s->ddp.masked[j]);
    } else {
        const size_t d = s->ddp.plan.d;
        const uint32_t mask = s->ddp.plan.bits >= 32 ? 0xFFFFFFFFu : ((uint32_t)1 << s->ddp.plan.bits) - 1;
        const uint32_t *e = s->ddp.enc[j];
        for (size_t k = 0; k < d; k++) s->ddp.sum[k] = (s->ddp.sum[k] + e[k]) & mask;
    }
    if (!st) s->ddp.arrived++;
    return st;
}

static dpfl_status release(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    const dpfl_ddp_plan *p = &s->ddp.plan;
    m->ddp_threshold = s->ddp.t;
    m->ddp_released = 0;
    m->update_clip = s->cdp.S;
    if (m->replied > 0 && !s->ddp.remote) m->update_clip_fraction = (double)s->ddp.clipped / m->replied;
    dpfl_status st = DPFL_OK;
    if (s->ddp.t && s->ddp.arrived >= s->ddp.t) {
        if (s->ddp.remote) {
            dpfl_secagg_msg req = {0};
            int released = 0;
            if (!(st = dpfl_secagg_server_unmask_request(s->ddp.sa_server, &req, err)))
                st = s->transport->secagg_finish(s->transport, &s->job, req.data, req.len, s->ddp.arrived, s->ddp.sum,
                                                 &released, err);
            dpfl_secagg_msg_free(&req);
            if (st || !released) goto out; /* too few answers to unmask: nothing is released */
        } else if (s->ddp.secagg) {
            dpfl_secagg_msg req = {0}, msg = {0};
            if ((st = dpfl_secagg_server_unmask_request(s->ddp.sa_server, &req, err))) goto out;
            for (int32_t i = 0; i < s->nsampled && !st; i++) {
                if (s->results[i].dropped) continue;
                if (!(st = dpfl_secagg_client_unmask(s->ddp.sa_clients[i], req.data, req.len, &msg, err)))
                    st = dpfl_secagg_server_add_unmask(s->ddp.sa_server, msg.data, msg.len, err);
                dpfl_secagg_msg_free(&msg);
            }
            dpfl_secagg_msg_free(&req);
            uint32_t summed = 0;
            if (st || (st = dpfl_secagg_server_finish(s->ddp.sa_server, s->ddp.sum, &summed, err))) goto out;
            DPFL_ASSERT((int32_t)summed == s->ddp.arrived);
        }
        const double denom = fl_round_mech(s, round).denom;
        worker *w = &s->workers[0]; /* the workers are idle between rounds */
        if ((st = dpfl_ddp_decode(p, s->ddp.sum, s->ddp.seed, w->ddp_iwork, w->ddp_work, (float)(1.0 / denom), s->acc,
                                  err)))
            goto out;
        dpfl_vec_axpy(s->global, (float)s->cfg->fl.eta, s->acc, s->model->nparam);
        const double mu_round = s->ddp.arrived * dpfl_ddp_client_variance(p, s->nsampled);
        m->ddp_released = 1;
        m->ddp_overflow = dpfl_ddp_overflow_bound(p, s->ddp.arrived, mu_round);
        m->update_noise_std = sqrt(mu_round) * p->gamma / denom;
    }
out:
    secagg_round_free(s);
    return st;
}

/* The round's release: the Skellam sum at the client rate of the design that ran. */
static dpfl_event event(const dpfl_sim *s, int32_t round)
{
    dpfl_mech_round r = fl_round_mech(s, round);
    DPFL_ASSERT(s->ddp.plan.z > 0);
    return dpfl_ddp_event(&s->ddp.plan, dpfl_mech_round_rate(&r));
}

const fl_aggregator fl_agg_ddp = {
    .name = "distributed DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .client_send = client_send, .add = add, .release = release, .event = event};
