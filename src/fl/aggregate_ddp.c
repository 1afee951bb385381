/* Distributed DP, an aggregation mode (client_dp.mechanism = ddp; Kairouz et al. 2021, Agarwal et al. 2021): the
 * server never sees an update.
 *
 *   begin    (server)  n sampled clients; threshold t = max(2, ceil((1 - f) n)); each client's Skellam variance
 *                      mu / t; the round's public rotation seed; secure aggregation rounds 0-1 (every sampled
 *                      client advertises its keys and shares its secrets -- a client that drops out later drops
 *                      after this, the case the protocol recovers from); with n < 2, t = 0: the round can release
 *                      nothing (can_release), and nobody is asked to train
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

/* Distributed DP's state (client_dp.mechanism = ddp). */
typedef struct {
    fl_agg_params *par;              /* S: the clip the plan is for (the simulation's, shared with the modes) */
    fl_agg_model out;
    const dpfl_config *cfg;          /* client_dp's encoding settings; fl's rounds and rates (the modulus) */
    dpfl_client_sampling sampling;
    int32_t clients;                 /* K */
    const dpfl_rng *root;
    worker *workers;                 /* the workers' encoding buffers (idle between rounds: the decoder's too) */
    int secagg;
    int remote;                      /* the round's clients are other processes (transport->secagg_finish) */
    int32_t round;                   /* the round begun last */
    dpfl_ddp_plan plan;              /* for the noise multiplier in force (plan.z == 0: none yet) */
    dpfl_poisson_table *noise;       /* the clients' Poisson table (lambda = client variance / 2) */
    uint8_t seed[32];                /* the round's public rotation seed */
    int32_t t;                       /* the round's threshold; 0: the round can release nothing */
    int32_t nslots;                  /* slots the next three have (client i of a round: slot i mod nslots) */
    uint32_t **enc;                  /* per slot: the client's wrapped vector (d values) */
    dpfl_secagg_msg *masked;         /* per slot: its masked input */
    dpfl_error *err;                 /* per slot */
    uint32_t *sum;                   /* the modular sum (d values) */
    dpfl_secagg_server *sa_server;
    int32_t nsa;                     /* entries of the next two (the round's sampled clients) */
    dpfl_secagg_client **sa_clients; /* per sampled index, the round's secure aggregation clients */
    dpfl_secagg_msg *sa_sf;          /* per sampled index, the SHARES_FOR message addressed to it */
} fl_ddp;

const dpfl_ddp_plan *fl_ddp_plan(const void *self)
{
    const fl_ddp *d = self;
    return d->plan.z > 0 ? &d->plan : NULL;
}

void fl_ddp_round_info(const void *self, dpfl_ddp_round_info *info)
{
    const fl_ddp *d = self;
    info->threshold = d->t;
    info->client_z = d->plan.z;
    memcpy(info->seed, d->seed, 32);
    info->secagg = d->sa_server;
}

static void secagg_round_free(fl_ddp *d)
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

static void destroy(void *self)
{
    fl_ddp *d = self;
    if (!d) return;
    secagg_round_free(d);
    for (int32_t j = 0; d->enc && j < d->nslots; j++) dpfl_free(d->enc[j]);
    free(d->enc);
    free(d->masked);
    free(d->err);
    dpfl_free(d->sum);
    dpfl_poisson_table_free(d->noise); /* the workers' encoding buffers go with the workers (sim.c) */
    free(d);
}

static dpfl_status create(const fl_agg_setup *su, void **self, dpfl_error *err)
{
    fl_ddp *dd = calloc(1, sizeof *dd);
    if (!dd) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP's state)");
    *self = dd;
    dd->par = su->par;
    dd->out = su->out;
    dd->cfg = su->cfg;
    dd->sampling = su->sampling;
    dd->clients = su->part->clients;
    dd->root = su->root;
    dd->workers = su->workers;
    dd->secagg = su->cfg->client_dp.ddp_secagg;
    const size_t d = pow2_at_least(su->out.nparam);
    dd->nslots = su->nslots; /* the in-process slots */
    dd->enc = calloc((size_t)su->nslots, sizeof *dd->enc);
    dd->masked = calloc((size_t)su->nslots, sizeof *dd->masked);
    dd->err = calloc((size_t)su->nslots, sizeof *dd->err);
    if (!dd->enc || !dd->masked || !dd->err || !(dd->sum = dpfl_alloc(d * sizeof(uint32_t), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t j = 0; j < su->nslots; j++)
        if (!(dd->enc[j] = dpfl_alloc(d * sizeof(uint32_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    for (int32_t i = 0; i < su->nthreads; i++) {
        worker *w = &su->workers[i];
        if (!(w->ddp_work = dpfl_alloc(d * sizeof(double), err)) || !(w->ddp_iwork = dpfl_alloc(d * sizeof(int64_t), err)))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (distributed DP buffers, %zu values)", d);
    }
    return DPFL_OK;
}

/* The encoding's plan for multiplier z at clip S into plan (unchanged if it is already for them; z = 0: calibrated
 * later). */
static dpfl_status plan_at(const fl_ddp *d, double S, double z, dpfl_ddp_plan *plan, dpfl_error *err)
{
    const dpfl_config *cfg = d->cfg;
    if (!(z > 0)) return DPFL_OK; /* calibrated later */
    if (z == plan->z && plan->clip == S) return DPFL_OK;
    /* the largest cohort the modulus must hold: the full population, or the Poisson cohort's mean + 7 sd */
    double rate = 0;
    for (int32_t r = 1; r <= cfg->fl.rounds; r++) rate = fmax(rate, dpfl_round_client_rate(cfg, r));
    const int32_t cohort = dpfl_mech_clients_max_cohort(d->sampling, d->clients, rate);
    return dpfl_ddp_plan_make(d->out.nparam, S, z, cfg->client_dp.ddp_inflation, cfg->client_dp.ddp_bits, cohort,
                              cfg->client_dp.ddp_tolerated_dropout, plan, err);
}

static dpfl_status set_noise(void *self, const dpfl_mech_clients *design, int32_t round, double z, dpfl_error *err)
{
    (void)design, (void)round;
    fl_ddp *d = self;
    return plan_at(d, d->par->S, z, &d->plan, err);
}

/* The clients' Poisson table for a round of n (the mechanism's, mech/ddp.c; kept while it does not change). */
static dpfl_status noise_table(fl_ddp *d, int32_t n, dpfl_error *err)
{
    return dpfl_ddp_noise_table(&d->plan, n, &d->noise, err);
}

/* In process, secure aggregation's rounds 0-1 for the round's n clients: each advertises its keys and shares its
 * secrets, and gets the SHARES_FOR message addressed to it. */
static dpfl_status secagg_setup(fl_ddp *d, const dpfl_secagg_params *sp, int32_t n, const int32_t *sampled,
                                dpfl_error *err)
{
    d->nsa = n;
    d->sa_clients = calloc((size_t)n, sizeof *d->sa_clients);
    d->sa_sf = calloc((size_t)n, sizeof *d->sa_sf);
    if (!d->sa_clients || !d->sa_sf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (secure aggregation, %d clients)", n);
    dpfl_secagg_msg msg = {0}, keys = {0};
    dpfl_status st = DPFL_OK;
    for (int32_t i = 0; i < n; i++) {
        uint8_t seed[32];
        fl_ddp_seed_bytes(d->root, (uint64_t)d->round, (uint64_t)sampled[i], PURPOSE_SECAGG, seed);
        if ((st = dpfl_secagg_client_create(sp, (uint32_t)i, seed, &d->sa_clients[i], err)) ||
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

static dpfl_status begin(void *self, const fl_round_view *v, dpfl_error *err)
{
    fl_ddp *d = self;
    secagg_round_free(d);
    const int32_t n = v->nsampled, round = v->round;
    const dpfl_ddp_plan *p = &d->plan;
    d->round = round;
    d->remote = v->transport->secagg_finish != NULL;
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
    fl_ddp_seed_bytes(d->root, (uint64_t)round, UINT64_MAX, PURPOSE_DDP_ROTATION, d->seed);
    if (!d->secagg) return DPFL_OK;
    const dpfl_secagg_params sp = {(uint32_t)n, (uint32_t)d->t, (uint32_t)p->bits, p->d};
    if ((st = dpfl_secagg_server_create(&sp, &d->sa_server, err))) return st;
    if (d->remote) return DPFL_OK; /* rounds 0-2 over the network (run_clients) */
    return secagg_setup(d, &sp, n, v->sampled, err);
}

static int can_release(const void *self) { return ((const fl_ddp *)self)->t > 0; }

/* Client k's update u, clipped, rotated, rounded, noised and wrapped into enc, with the client's own stream. */
static dpfl_status encode(fl_ddp *d, worker *w, int32_t k, const float *u, uint32_t *enc, double *norm,
                          dpfl_error *err)
{
    dpfl_rng rng; /* the client's own stream: its rounding and its noise */
    dpfl_rng_derive(d->root, &rng, (uint64_t)d->round, (uint64_t)k, PURPOSE_DDP_CLIENT);
    int tries;
    return dpfl_ddp_encode(&d->plan, u, d->seed, d->noise, &rng, w->ddp_work, w->ddp_iwork, enc, norm,
                           &tries, err);
}

dpfl_status dpfl_sim_ddp_client_setup(dpfl_sim *s, int32_t round, int32_t n, int32_t t, const uint8_t seed[32],
                                      dpfl_error *err)
{
    DPFL_ASSERT(s->sv.agg == &fl_agg_ddp);
    fl_ddp *d = s->sv.aggself;
    if (!(d->plan.z > 0)) return dpfl_fail(err, DPFL_EINVAL, "distributed DP: no noise multiplier set");
    if (n < 2 || t != dpfl_ddp_threshold(&d->plan, n))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP: threshold %d for a cohort of %d, this client's plan "
                                           "gives %d (the same client_dp settings are needed)", t, n,
                         n >= 2 ? dpfl_ddp_threshold(&d->plan, n) : 0);
    s->sv.smp.round = round;
    d->round = round;
    d->t = t;
    memcpy(d->seed, seed, 32);
    return noise_table(d, n, err);
}

dpfl_status dpfl_sim_ddp_client_encode(dpfl_sim *s, int32_t k, const float *u, uint32_t *enc, double *norm,
                                       dpfl_error *err)
{
    DPFL_ASSERT(s->sv.agg == &fl_agg_ddp);
    fl_ddp *d = s->sv.aggself;
    d->round = s->sv.smp.round;
    return encode(d, &s->wk.workers[0], k, u, enc, norm, err);
}

static void client_send(void *self, worker *w, int32_t i, int32_t j, client_result *r, float *u)
{
    fl_ddp *d = self;
    r->ddp_status = DPFL_OK;
    DPFL_ASSERT(d->t > 0); /* a round that can release nothing trains nobody (can_release) */
    dpfl_status st = encode(d, w, r->client, u, d->enc[j], &r->norm, &d->err[j]);
    if (!st && d->secagg)
        st = dpfl_secagg_client_masked_input(d->sa_clients[i], d->sa_sf[i].data, d->sa_sf[i].len, d->enc[j],
                                             &d->masked[j], &d->err[j]);
    r->ddp_status = st;
}

/* In process, client i's encoded (and masked) input, made by the worker in the slot of the transport's call, into
 * the modular sum (which is order-independent: integers mod 2^bits).  Remote clients' masked inputs never come here:
 * the transport adds them to the secure-aggregation server as they arrive. */
static dpfl_status add(void *self, const fl_arrival *a, dpfl_error *err)
{
    fl_ddp *d = self;
    const client_result *r = a->r;
    const int32_t j = a->j;
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

/* Remote clients: the unmasking round goes through the transport, which fills the sum (released: enough
 * answered). */
static dpfl_status unmask_remote(fl_ddp *d, const fl_transport *t, const dpfl_round_job *job, int32_t arrived,
                                 int *released, dpfl_error *err)
{
    dpfl_secagg_msg req = {0};
    dpfl_status st = dpfl_secagg_server_unmask_request(d->sa_server, &req, err);
    if (!st) st = t->secagg_finish(t, job, req.data, req.len, arrived, d->sum, released, err);
    dpfl_secagg_msg_free(&req);
    return st;
}

/* In process: secure aggregation's round 3, every survivor answers the unmask request; the server's sum. */
static dpfl_status unmask_local(fl_ddp *d, const client_result *results, int32_t n, int32_t arrived,
                                dpfl_error *err)
{
    dpfl_secagg_msg req = {0}, msg = {0};
    dpfl_status st;
    if ((st = dpfl_secagg_server_unmask_request(d->sa_server, &req, err))) return st;
    for (int32_t i = 0; i < n && !st; i++) {
        if (results[i].dropped) continue;
        if (!(st = dpfl_secagg_client_unmask(d->sa_clients[i], req.data, req.len, &msg, err)))
            st = dpfl_secagg_server_add_unmask(d->sa_server, msg.data, msg.len, err);
        dpfl_secagg_msg_free(&msg);
    }
    dpfl_secagg_msg_free(&req);
    uint32_t summed = 0;
    if (st || (st = dpfl_secagg_server_finish(d->sa_server, d->sum, &summed, err))) return st;
    DPFL_ASSERT((int32_t)summed == arrived);
    return DPFL_OK;
}

/* The modular sum decoded, divided by the design's denominator; the server step; the release's metrics (n clients
 * sampled, `arrived` of them added). */
static dpfl_status decode_step(fl_ddp *d, double denom, int32_t n, int32_t arrived, dpfl_round_metrics *m,
                               dpfl_error *err)
{
    const dpfl_ddp_plan *p = &d->plan;
    worker *w = &d->workers[0]; /* the workers are idle between rounds */
    dpfl_status st = dpfl_ddp_decode(p, d->sum, d->seed, w->ddp_iwork, w->ddp_work, (float)(1.0 / denom),
                                     d->out.acc, err);
    if (st) return st;
    fl_agg_step(&d->out);
    const double mu_round = arrived * dpfl_ddp_client_variance(p, n);
    m->ddp_released = 1;
    m->ddp_overflow = dpfl_ddp_overflow_bound(p, arrived, mu_round);
    m->update_noise_std = sqrt(mu_round) * p->gamma / denom;
    return DPFL_OK;
}

static dpfl_status release(void *self, const fl_round_view *v, dpfl_round_metrics *m, dpfl_error *err)
{
    fl_ddp *d = self;
    const double S = d->par->S;
    m->ddp_threshold = d->t;
    m->ddp_released = 0;
    m->update_clip = S;
    if (m->replied > 0 && !d->remote) m->update_clip_fraction = (double)count_clipped(v->results, v->nsampled, S) / m->replied;
    const int32_t arrived = m->replied; /* every input that was not dropped was added (or the round failed) */
    dpfl_status st = DPFL_OK;
    if (d->t && arrived >= d->t) {
        int released = 1;
        if (d->remote) st = unmask_remote(d, v->transport, v->job, arrived, &released, err);
        else if (d->secagg) st = unmask_local(d, v->results, v->nsampled, arrived, err);
        /* too few answers to unmask: nothing is released */
        if (!st && released) st = decode_step(d, v->design.denom, v->nsampled, arrived, m, err);
    }
    secagg_round_free(d);
    return st;
}

/* The round's release: the Skellam sum at the client rate of the design that ran. */
static dpfl_event event_of(const dpfl_ddp_plan *plan, const dpfl_mech_clients *design)
{
    DPFL_ASSERT(plan->z > 0);
    return dpfl_ddp_event(plan, design->q);
}

static dpfl_event event(const void *self, const dpfl_mech_clients *design)
{
    return event_of(&((const fl_ddp *)self)->plan, design);
}

static dpfl_status event_at(const void *self, const dpfl_mech_clients *design, int32_t round, double z,
                            dpfl_event *ev, dpfl_error *err)
{
    (void)round;
    const fl_ddp *d = self;
    dpfl_ddp_plan plan = d->plan; /* the plan for z, the one in force unchanged */
    dpfl_status st = plan_at(d, d->par->S, z, &plan, err);
    if (!st) *ev = event_of(&plan, design);
    return st;
}

const fl_aggregator fl_agg_ddp = {
    .name = "distributed DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .can_release = can_release, .client_send = client_send, .add = add, .release = release, .event = event, .event_at = event_at};
