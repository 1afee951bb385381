/* Client-level DP on the server (DP-FedAvg, McMahan et al. 2018; adaptive clipping, Andrew et al. 2021): clip each
 * arrived update to S, sum, add the noise of the round's mechanism, divide by the design's number of clients, step
 * the global model, and with adaptive clipping release the noisy quantile estimate and move S.  Two aggregation
 * modes: fl_agg_cdp (flat, per-layer, per-step or adaptive clipping; updates added in client order as they arrive)
 * and fl_agg_cdp_median (Geyer et al.'s median clipping: S is the median of the round's norms, so every update must
 * be in first -- not private, charged as a not_private event). */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The round's client sampling design: the one the sampler returned when it drew this round, else (a round not
 * sampled yet: a trial charge, calibration) the design the sampler would draw from. */
dpfl_mech_clients fl_round_design(const fl_sampling_view *smp, int32_t round)
{
    if (smp->design && round == smp->round) return *smp->design;
    return dpfl_mech_clients_make(smp->sampling, smp->clients, dpfl_round_client_rate(smp->cfg, round),
                                  dpfl_round_clients_per_round(smp->cfg, round));
}

dpfl_mech_round fl_round_mech(const fl_cdp_state *c, const fl_sampling_view *smp, int32_t round)
{
    const dpfl_mech_clients d = fl_round_design(smp, round);
    return dpfl_mech_round_of(&d, c->S, c->z_sum);
}

static dpfl_status create(fl_agg_state *a, const fl_round_view *v, dpfl_error *err)
{
    const dpfl_model *model = v->model;
    fl_cdp_state *c = &a->cdp;
    dpfl_status st;
    if ((st = dpfl_xsum_init(&a->sum, model->nparam, err)) || (st = dpfl_xsum_init(&c->raw, model->nparam, err)))
        return st;
    if (!(c->raw_sum = dpfl_alloc(model->nparam * sizeof(float), err)) ||
        !(c->norms = calloc((size_t)v->smp.clients, sizeof *c->norms)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client-level DP buffers for %zu parameters)", model->nparam);
    if (!v->cfg->client_dp.per_layer) return DPFL_OK;
    c->nlayers_clip = model->nlayers; /* per-layer update clipping: the layers' slices */
    c->layer_off = calloc((size_t)model->nlayers, sizeof *c->layer_off);
    c->layer_len = calloc((size_t)model->nlayers, sizeof *c->layer_len);
    if (!c->layer_off || !c->layer_len) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-layer clipping)");
    for (int32_t l = 0; l < model->nlayers; l++) {
        c->layer_off[l] = model->layers[l].param_off;
        c->layer_len[l] = model->layers[l].nparam;
    }
    return DPFL_OK;
}

static void destroy(fl_agg_state *a)
{
    free(a->cdp.norms);
    free(a->cdp.layer_off);
    free(a->cdp.layer_len);
    dpfl_free(a->cdp.raw_sum);
    dpfl_xsum_free(&a->cdp.raw);
    dpfl_xsum_free(&a->sum);
}

/* Andrew et al. 2021: the count noise sigma_b in force (the default, expected clients per round / 20, included)
 * must leave room for the update sum's z_Delta; checked here, before any release.  The pair's multiplier is what
 * the mechanism (mech/clip.c) returns for the two noises it will draw. */
static dpfl_status set_noise(fl_agg_state *a, const fl_sampling_view *smp, int32_t round, double z, dpfl_error *err)
{
    fl_cdp_state *c = &a->cdp;
    if (c->strategy != DPFL_CLIP_ADAPTIVE || !(z > 0)) return DPFL_OK;
    const dpfl_mech_clients d = fl_round_design(smp, round);
    dpfl_mech_adaptive ad;
    dpfl_error e;
    if (dpfl_mech_adaptive_make(z, smp->cfg->client_dp.quantile_noise, &d, &ad, &e))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.quantile_noise: round %d: %s%s; set quantile_noise > %g or "
                                           "lower client_dp.noise",
                         (int)round, e.msg,
                         ad.default_sigma ? " (sigma_b is the default: expected clients per round / 20)" : "", z / 2.0);
    c->z_sum = ad.z_delta;
    c->sigma_b = ad.sigma_b;
    c->z_release = ad.z;
    return DPFL_OK;
}

static dpfl_status begin(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_error *err)
{
    (void)v, (void)round, (void)err;
    dpfl_xsum_zero(&a->sum);
    dpfl_xsum_zero(&a->cdp.raw);
    a->cdp.S_used = a->cdp.S;
    return DPFL_OK;
}

/* The client measures its update's norm (a diagnostic and the adaptive clip's count; the server clips anyway). */
static void client_send(fl_agg_state *a, const fl_round_view *v, worker *w, int32_t i, int32_t j, float *u)
{
    (void)a, (void)w, (void)j;
    v->results[i].norm = dpfl_vec_norm2(u, v->nparam);
}

/* One arrived update into the exact sums (its raw value into V_c / U_s's), clipped to S in place first: the
 * truncation the sum applies never increases a coordinate's magnitude, so the clipped term's norm stays <= S. */
static dpfl_status add_clipped(fl_cdp_state *c, dpfl_xsum *sum, float *u, size_t P, dpfl_error *err)
{
    dpfl_status st = dpfl_xsum_add(&c->raw, u, 1.0, err);
    if (st) return st;
    dpfl_mech_clip_update(u, P, c->S_used, c->layer_off, c->layer_len, c->nlayers_clip);
    return dpfl_xsum_add(sum, u, 1.0, err);
}

static dpfl_status add(fl_agg_state *a, const fl_round_view *v, int32_t i, float *u, dpfl_error *err)
{
    (void)i;
    return add_clipped(&a->cdp, &a->sum, u, v->nparam, err);
}

/* What the round's reports say, in client order: the updates clipped, the sum of their squared raw norms (V_c). */
static int32_t round_norms(const client_result *results, int32_t n, double S, double *sumsq)
{
    int32_t nclipped = 0;
    *sumsq = 0;
    for (int32_t i = 0; i < n; i++) {
        const client_result *r = &results[i];
        if (r->dropped) continue;
        *sumsq += r->norm * r->norm;
        nclipped += r->norm > S;
    }
    return nclipped;
}

/* Noise, division by the design's denominator, the server step, the adaptive clip's update; metrics. */
static dpfl_status release(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_round_metrics *m,
                           dpfl_error *err)
{
    (void)err;
    const dpfl_config *cfg = v->cfg;
    const size_t P = v->nparam;
    fl_cdp_state *c = &a->cdp;
    const double S_used = c->S_used;
    double sumsq;
    const int32_t nclipped = round_norms(v->results, v->nsampled, S_used, &sumsq);
    dpfl_xsum_result(&a->sum, 1.0, v->acc);
    dpfl_mech_round mr = fl_round_mech(c, &v->smp, round);
    dpfl_rng nrng;
    dpfl_rng_derive(v->root, &nrng, (uint64_t)round, UINT64_MAX, PURPOSE_SERVER_NOISE);
    dpfl_mech_gaussian(&nrng, v->acc, P, c->z_sum, S_used, (float)(1.0 / mr.denom), v->nthreads);
    dpfl_vec_axpy(v->global, (float)cfg->fl.eta, v->acc, P);
    m->update_clip = S_used;
    mr.clip = S_used;
    m->update_noise_std = dpfl_mech_round_std(&mr);
    if (m->replied > 0) {
        m->update_clip_fraction = (double)nclipped / m->replied;
        dpfl_xsum_result(&c->raw, 1.0, c->raw_sum);
        double mu2 = dpfl_vec_dot(c->raw_sum, c->raw_sum, P) / ((double)m->replied * m->replied);
        m->update_scale = mu2 / (double)P;
        m->between_client_variance = fmax(0.0, sumsq / m->replied - mu2) / (double)P;
    }
    if (c->strategy == DPFL_CLIP_ADAPTIVE) { /* private quantile estimate, then a geometric step towards the target */
        double b = dpfl_mech_adaptive_quantile(&nrng, m->replied, m->replied - nclipped, c->sigma_b, mr.denom);
        c->S = S_used * exp(-cfg->client_dp.clip_lr * (b - cfg->client_dp.target_quantile));
    }
    return DPFL_OK;
}

/* The round's release: the Gaussian sum at the sampling design that ran, at the release's multiplier (adaptive:
 * the update sum and the quantile count together, as dpfl_mech_adaptive_make returned it). */
static dpfl_event event(const fl_agg_state *a, const fl_sampling_view *smp, int32_t round)
{
    dpfl_mech_round r = fl_round_mech(&a->cdp, smp, round);
    r.z = a->cdp.z_release;
    return dpfl_mech_round_event(&r);
}

const fl_aggregator fl_agg_cdp = {
    .name = "client-level DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .client_send = client_send, .add = add, .release = release, .event = event};

/* Median clipping: every update of the round is in its slot (whole_round); S = the median of their norms. */
static dpfl_status median_add(fl_agg_state *a, const fl_round_view *v, int32_t i, float *u, dpfl_error *err)
{
    (void)a, (void)err; /* kept in client i's slot, added at release once the median is known */
    if (u != v->slots[i]) memcpy(v->slots[i], u, v->nparam * sizeof *u);
    return DPFL_OK;
}

static dpfl_status median_release(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_round_metrics *m,
                                  dpfl_error *err)
{
    fl_cdp_state *c = &a->cdp;
    int32_t nr = 0;
    for (int32_t i = 0; i < v->nsampled; i++)
        if (!v->results[i].dropped) c->norms[nr++] = v->results[i].norm;
    c->S_used = nr > 0 ? dpfl_mech_median(c->norms, nr) : c->S;
    dpfl_status st;
    for (int32_t i = 0; i < v->nsampled; i++)
        if (!v->results[i].dropped && (st = add_clipped(c, &a->sum, v->slots[i], v->nparam, err))) return st;
    return release(a, v, round, m, err);
}

static dpfl_event median_event(const fl_agg_state *a, const fl_sampling_view *smp, int32_t round)
{
    (void)a, (void)smp, (void)round;
    return dpfl_event_not_private(1); /* the clip is data-dependent: no sensitivity bound */
}

const fl_aggregator fl_agg_cdp_median = {
    .name = "client-level DP, median clipping (not private)", .client_level = 1, .whole_round = 1, .create = create,
    .free = destroy, .set_noise = set_noise, .begin = begin, .client_send = client_send, .add = median_add,
    .release = median_release, .event = median_event};
