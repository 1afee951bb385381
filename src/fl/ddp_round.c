/* Distributed DP in a round of the simulation (client_dp.mechanism = ddp): the server never sees an update.
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
    for (int32_t i = 0; s->sa_clients && i < s->nsampled; i++) {
        dpfl_secagg_client_free(s->sa_clients[i]);
        dpfl_secagg_msg_free(&s->sa_sf[i]);
    }
    free(s->sa_clients);
    free(s->sa_sf);
    s->sa_clients = NULL;
    s->sa_sf = NULL;
    dpfl_secagg_server_free(s->sa_server);
    s->sa_server = NULL;
    for (int32_t j = 0; s->ddp_masked && j < s->ddp_nslots; j++) dpfl_secagg_msg_free(&s->ddp_masked[j]);
}

dpfl_status fl_ddp_create(dpfl_sim *s, dpfl_error *err)
{
    const size_t d = pow2_at_least(s->model->nparam);
    s->ddp_nslots = s->nslots; /* the in-process slots (a network round's extra slots need none of these) */
    s->ddp_enc = calloc((size_t)s->nslots, sizeof *s->ddp_enc);
    s->ddp_masked = calloc((size_t)s->nslots, sizeof *s->ddp_masked);
    s->ddp_err = calloc((size_t)s->nslots, sizeof *s->ddp_err);
    if (!s->ddp_enc || !s->ddp_masked || !s->ddp_err || !(s->ddp_sum = dpfl_alloc(d * sizeof(uint32_t), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t j = 0; j < s->nslots; j++)
        if (!(s->ddp_enc[j] = dpfl_alloc(d * sizeof(uint32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t i = 0; i < s->nthreads; i++) {
        worker *w = &s->workers[i];
        if (!(w->ddp_work = dpfl_alloc(d * sizeof(double), err)) || !(w->ddp_iwork = dpfl_alloc(d * sizeof(int64_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    }
    return DPFL_OK;
}

void fl_ddp_free(dpfl_sim *s)
{
    secagg_round_free(s);
    for (int32_t j = 0; s->ddp_enc && j < s->ddp_nslots; j++) dpfl_free(s->ddp_enc[j]);
    free(s->ddp_enc);
    free(s->ddp_masked);
    free(s->ddp_err);
    dpfl_free(s->ddp_sum);
    dpfl_poisson_table_free(s->ddp_noise);
    for (int32_t i = 0; s->workers && i < s->nthreads; i++) {
        dpfl_free(s->workers[i].ddp_work);
        dpfl_free(s->workers[i].ddp_iwork);
    }
}

dpfl_status fl_ddp_set_noise(dpfl_sim *s, double z, dpfl_error *err)
{
    const dpfl_config *cfg = s->cfg;
    if (!(z > 0)) return DPFL_OK; /* calibrated later */
    if (z == s->ddp_plan.z && s->ddp_plan.clip == s->S) return DPFL_OK;
    /* the largest cohort the modulus must hold: the full population, or the Poisson cohort's mean + 7 sd */
    double rate = 0;
    for (int32_t r = 1; r <= cfg->fl.rounds; r++) rate = fmax(rate, dpfl_round_client_rate(cfg, r));
    const double K = s->part->clients, mean = rate * K;
    int32_t cohort = s->sampling == DPFL_SAMPLE_POISSON ? (int32_t)fmin(K, ceil(mean + 7 * sqrt(mean) + 2)) : (int32_t)K;
    return dpfl_ddp_plan_make(s->model->nparam, s->S, z, cfg->client_dp.ddp_inflation, cfg->client_dp.ddp_bits, cohort,
                              cfg->client_dp.ddp_tolerated_dropout, &s->ddp_plan, err);
}

/* The clients' Poisson table for a round of n: lambda = the client variance / 2 (kept while it does not change). */
static dpfl_status noise_table(dpfl_sim *s, int32_t n, dpfl_error *err)
{
    const double lambda = dpfl_ddp_client_variance(&s->ddp_plan, n) / 2;
    if (s->ddp_noise && dpfl_poisson_table_lambda(s->ddp_noise) == lambda) return DPFL_OK;
    dpfl_poisson_table_free(s->ddp_noise);
    s->ddp_noise = NULL;
    return dpfl_poisson_table_make(lambda, &s->ddp_noise, err);
}

dpfl_status fl_ddp_begin(dpfl_sim *s, int32_t round, dpfl_error *err)
{
    secagg_round_free(s);
    const int32_t n = s->nsampled;
    const dpfl_ddp_plan *p = &s->ddp_plan;
    s->ddp_arrived = s->ddp_clipped = 0;
    s->ddp_t = 0;
    memset(s->ddp_sum, 0, p->d * sizeof(uint32_t));
    if (n < 2) return DPFL_OK; /* secure aggregation needs two clients: nothing is released */
    DPFL_ASSERT(p->z > 0);
    if (n > (int32_t)DPFL_SECAGG_MAX_CLIENTS && s->ddp_secagg)
        return dpfl_fail(err, DPFL_EINVAL, "round %d: %d clients, more than secure aggregation's %u; lower "
                                           "fl.client_rate", (int)round, n, DPFL_SECAGG_MAX_CLIENTS);
    s->ddp_t = dpfl_ddp_threshold(p, n);
    dpfl_status st;
    if (!s->ddp_remote && (st = noise_table(s, n, err))) return st; /* remote: the clients draw their own noise */
    fl_ddp_seed_bytes(&s->root, (uint64_t)round, UINT64_MAX, PURPOSE_DDP_ROTATION, s->ddp_seed);
    if (!s->ddp_secagg) return DPFL_OK;
    const dpfl_secagg_params sp = {(uint32_t)n, (uint32_t)s->ddp_t, (uint32_t)p->bits, p->d};
    if ((st = dpfl_secagg_server_create(&sp, &s->sa_server, err))) return st;
    if (s->ddp_remote) return DPFL_OK; /* rounds 0-2 over the network (run_clients) */
    s->sa_clients = calloc((size_t)n, sizeof *s->sa_clients);
    s->sa_sf = calloc((size_t)n, sizeof *s->sa_sf);
    if (!s->sa_clients || !s->sa_sf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (secure aggregation, %d clients)", n);
    dpfl_secagg_msg msg = {0}, keys = {0};
    for (int32_t i = 0; i < n; i++) {
        uint8_t seed[32];
        fl_ddp_seed_bytes(&s->root, (uint64_t)round, (uint64_t)s->sampled[i], PURPOSE_SECAGG, seed);
        if ((st = dpfl_secagg_client_create(&sp, (uint32_t)i, seed, &s->sa_clients[i], err)) ||
            (st = dpfl_secagg_client_advertise(s->sa_clients[i], &msg, err)) ||
            (st = dpfl_secagg_server_add_advert(s->sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    if ((st = dpfl_secagg_server_keys(s->sa_server, &keys, err))) goto out;
    for (int32_t i = 0; i < n; i++) {
        if ((st = dpfl_secagg_client_share_keys(s->sa_clients[i], keys.data, keys.len, &msg, err)) ||
            (st = dpfl_secagg_server_add_shares(s->sa_server, msg.data, msg.len, err)))
            goto out;
        dpfl_secagg_msg_free(&msg);
    }
    for (int32_t i = 0; i < n; i++)
        if ((st = dpfl_secagg_server_shares_for(s->sa_server, (uint32_t)i, &s->sa_sf[i], err))) goto out;
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
    return dpfl_ddp_encode(&s->ddp_plan, u, s->ddp_seed, s->ddp_noise, &rng, w->ddp_work, w->ddp_iwork, enc, norm,
                           &tries, err);
}

dpfl_status fl_ddp_client_setup(dpfl_sim *s, int32_t round, int32_t n, int32_t t, const uint8_t seed[32],
                                dpfl_error *err)
{
    if (!(s->ddp_plan.z > 0)) return dpfl_fail(err, DPFL_EINVAL, "distributed DP: no noise multiplier set");
    if (n < 2 || t != dpfl_ddp_threshold(&s->ddp_plan, n))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP: threshold %d for a cohort of %d, this client's plan "
                                           "gives %d (the same client_dp settings are needed)", t, n,
                         n >= 2 ? dpfl_ddp_threshold(&s->ddp_plan, n) : 0);
    s->round = round;
    s->ddp_t = t;
    memcpy(s->ddp_seed, seed, 32);
    return noise_table(s, n, err);
}

dpfl_status fl_ddp_client_encode(dpfl_sim *s, int32_t k, const float *u, uint32_t *enc, double *norm,
                                 dpfl_error *err)
{
    return encode(s, &s->workers[0], k, u, enc, norm, err);
}

void fl_ddp_client(dpfl_sim *s, worker *w, int32_t i, int32_t j, const float *u)
{
    client_result *r = &s->results[i];
    r->ddp_status = DPFL_OK;
    if (!s->ddp_t) {
        r->norm = dpfl_vec_norm2(u, s->model->nparam);
        return;
    }
    dpfl_status st = encode(s, w, r->client, u, s->ddp_enc[j], &r->norm, &s->ddp_err[j]);
    if (!st && s->ddp_secagg)
        st = dpfl_secagg_client_masked_input(s->sa_clients[i], s->sa_sf[i].data, s->sa_sf[i].len, s->ddp_enc[j],
                                             &s->ddp_masked[j], &s->ddp_err[j]);
    r->ddp_status = st;
}

dpfl_status fl_ddp_arrive(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err)
{
    const client_result *r = &s->results[i];
    m->replied++;
    s->ddp_clipped += r->norm > s->S; /* a simulation diagnostic: a real server never sees the norm */
    if (!s->ddp_t) return DPFL_OK;
    if (s->ddp_remote) { /* its masked input was added as it arrived (the transport refuses a malformed one) */
        s->ddp_arrived++;
        return DPFL_OK;
    }
    if (r->ddp_status)
        return dpfl_fail(err, r->ddp_status, "client %d (distributed DP): %s", r->client, s->ddp_err[j].msg);
    dpfl_status st = DPFL_OK;
    if (s->ddp_secagg) {
        st = dpfl_secagg_server_add_masked(s->sa_server, s->ddp_masked[j].data, s->ddp_masked[j].len, err);
        dpfl_secagg_msg_free(&s->ddp_masked[j]);
    } else {
        const size_t d = s->ddp_plan.d;
        const uint32_t mask = s->ddp_plan.bits >= 32 ? 0xFFFFFFFFu : ((uint32_t)1 << s->ddp_plan.bits) - 1;
        const uint32_t *e = s->ddp_enc[j];
        for (size_t k = 0; k < d; k++) s->ddp_sum[k] = (s->ddp_sum[k] + e[k]) & mask;
    }
    if (!st) s->ddp_arrived++;
    return st;
}

dpfl_status fl_ddp_release(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    const dpfl_ddp_plan *p = &s->ddp_plan;
    m->ddp_threshold = s->ddp_t;
    m->ddp_released = 0;
    m->update_clip = s->S;
    if (m->replied > 0 && !s->ddp_remote) m->update_clip_fraction = (double)s->ddp_clipped / m->replied;
    dpfl_status st = DPFL_OK;
    if (s->ddp_t && s->ddp_arrived >= s->ddp_t) {
        if (s->ddp_remote) {
            dpfl_secagg_msg req = {0};
            int released = 0;
            if (!(st = dpfl_secagg_server_unmask_request(s->sa_server, &req, err)))
                st = s->transport->secagg_finish(s, req.data, req.len, &released, err);
            dpfl_secagg_msg_free(&req);
            if (st || !released) goto out; /* too few answers to unmask: nothing is released */
        } else if (s->ddp_secagg) {
            dpfl_secagg_msg req = {0}, msg = {0};
            if ((st = dpfl_secagg_server_unmask_request(s->sa_server, &req, err))) goto out;
            for (int32_t i = 0; i < s->nsampled && !st; i++) {
                if (s->results[i].dropped) continue;
                if (!(st = dpfl_secagg_client_unmask(s->sa_clients[i], req.data, req.len, &msg, err)))
                    st = dpfl_secagg_server_add_unmask(s->sa_server, msg.data, msg.len, err);
                dpfl_secagg_msg_free(&msg);
            }
            dpfl_secagg_msg_free(&req);
            uint32_t summed = 0;
            if (st || (st = dpfl_secagg_server_finish(s->sa_server, s->ddp_sum, &summed, err))) goto out;
            DPFL_ASSERT((int32_t)summed == s->ddp_arrived);
        }
        const double denom = fl_round_mech(s, round).denom;
        worker *w = &s->workers[0]; /* the workers are idle between rounds */
        if ((st = dpfl_ddp_decode(p, s->ddp_sum, s->ddp_seed, w->ddp_iwork, w->ddp_work, (float)(1.0 / denom), s->acc,
                                  err)))
            goto out;
        dpfl_vec_axpy(s->global, (float)s->cfg->fl.eta, s->acc, s->model->nparam);
        const double mu_round = s->ddp_arrived * dpfl_ddp_client_variance(p, s->nsampled);
        m->ddp_released = 1;
        m->ddp_overflow = dpfl_ddp_overflow_bound(p, s->ddp_arrived, mu_round);
        m->update_noise_std = sqrt(mu_round) * p->gamma / denom;
    }
out:
    secagg_round_free(s);
    return st;
}
