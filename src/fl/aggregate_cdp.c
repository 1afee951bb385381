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

dpfl_mech_round fl_round_mech(const dpfl_sim *s, int32_t round)
{
    return dpfl_mech_round_make(s->sampling, s->part->clients, dpfl_round_client_rate(s->cfg, round),
                                dpfl_round_clients_per_round(s->cfg, round), s->cdp.S, s->cdp.z_sum);
}

static dpfl_status create(dpfl_sim *s, dpfl_error *err)
{
    const dpfl_model *model = s->model;
    fl_cdp_state *c = &s->cdp;
    if (!(c->raw_sum = dpfl_alloc(model->nparam * sizeof(float), err)) ||
        !(c->norms = calloc((size_t)s->part->clients, sizeof *c->norms)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client-level DP buffers for %zu parameters)", model->nparam);
    if (!s->cfg->client_dp.per_layer) return DPFL_OK;
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

static void destroy(dpfl_sim *s)
{
    free(s->cdp.norms);
    free(s->cdp.layer_off);
    free(s->cdp.layer_len);
    dpfl_free(s->cdp.raw_sum);
}

/* Andrew et al. 2021: the count noise sigma_b in force (the default, expected clients per round / 20, included)
 * must leave room for the update sum's z_Delta; checked here, before any release. */
static dpfl_status set_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err)
{
    const dpfl_config *cfg = s->cfg;
    if (s->cdp.strategy != DPFL_CLIP_ADAPTIVE || !(z > 0)) return DPFL_OK;
    int dflt = !(cfg->client_dp.quantile_noise > 0);
    double sb = dflt ? dpfl_mech_round_make(s->sampling, s->part->clients, dpfl_round_client_rate(cfg, round),
                                            dpfl_round_clients_per_round(cfg, round), s->cdp.S, z).denom / 20.0
                     : cfg->client_dp.quantile_noise;
    dpfl_error e;
    if (dpfl_mech_adaptive_split(z, sb, &s->cdp.z_sum, &e))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.quantile_noise: round %d: %s%s; set quantile_noise > %g or "
                                           "lower client_dp.noise",
                         (int)round, e.msg, dflt ? " (sigma_b is the default: expected clients per round / 20)" : "",
                         z / 2.0);
    s->cdp.sigma_b = sb;
    return DPFL_OK;
}

static dpfl_status begin(dpfl_sim *s, int32_t round, dpfl_error *err)
{
    (void)round;
    (void)err;
    dpfl_vec_zero(s->acc, s->model->nparam);
    dpfl_vec_zero(s->cdp.raw_sum, s->model->nparam);
    s->cdp.sumsq = 0;
    s->cdp.nclipped = 0;
    s->cdp.S_used = s->cdp.S;
    return DPFL_OK;
}

/* The client measures its update's norm (a diagnostic and the adaptive clip's count; the server clips anyway). */
static void client_send(dpfl_sim *s, worker *w, int32_t i, int32_t j, float *u)
{
    (void)w;
    (void)j;
    s->results[i].norm = dpfl_vec_norm2(u, s->model->nparam);
}

/* One arrived update into the clipped sum (its raw value into the V_c / U_s statistics). */
static void add_clipped(dpfl_sim *s, float *u, const client_result *r, dpfl_round_metrics *m)
{
    const size_t P = s->model->nparam;
    fl_cdp_state *c = &s->cdp;
    dpfl_vec_axpy(c->raw_sum, 1.0f, u, P);
    c->sumsq += r->norm * r->norm;
    if (r->norm > c->S_used) c->nclipped++;
    dpfl_mech_clip_update(u, P, c->S_used, c->layer_off, c->layer_len, c->nlayers_clip);
    dpfl_vec_axpy(s->acc, 1.0f, u, P);
    m->replied++;
}

static dpfl_status add(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)err;
    add_clipped(s, s->slots[j], &s->results[i], m);
    return DPFL_OK;
}

/* Noise, division by the design's denominator, the server step, the adaptive clip's update; metrics. */
static dpfl_status release(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)err;
    const dpfl_config *cfg = s->cfg;
    const size_t P = s->model->nparam;
    fl_cdp_state *c = &s->cdp;
    const double S_used = c->S_used;
    dpfl_mech_round mr = fl_round_mech(s, round);
    dpfl_rng nrng;
    dpfl_rng_derive(&s->root, &nrng, (uint64_t)round, UINT64_MAX, PURPOSE_SERVER_NOISE);
    dpfl_mech_gaussian(&nrng, s->acc, P, c->z_sum, S_used, (float)(1.0 / mr.denom), s->nthreads);
    dpfl_vec_axpy(s->global, (float)cfg->fl.eta, s->acc, P);
    m->update_clip = S_used;
    m->update_noise_std = c->z_sum * S_used / mr.denom;
    if (m->replied > 0) {
        m->update_clip_fraction = (double)c->nclipped / m->replied;
        double mu2 = dpfl_vec_dot(c->raw_sum, c->raw_sum, P) / ((double)m->replied * m->replied);
        m->update_scale = mu2 / (double)P;
        m->between_client_variance = fmax(0.0, c->sumsq / m->replied - mu2) / (double)P;
    }
    if (c->strategy == DPFL_CLIP_ADAPTIVE) { /* private quantile estimate, then a geometric step towards the target */
        double b = dpfl_mech_adaptive_quantile(&nrng, m->replied, m->replied - c->nclipped, c->sigma_b, mr.denom);
        c->S = S_used * exp(-cfg->client_dp.clip_lr * (b - cfg->client_dp.target_quantile));
    }
    return DPFL_OK;
}

/* The round's release: the Gaussian sum at the sampling design that ran (adaptive: the update sum and the quantile
 * count together). */
static dpfl_event event(const dpfl_sim *s, int32_t round)
{
    dpfl_mech_round r = fl_round_mech(s, round);
    r.z = dpfl_sim_client_release_noise(s);
    return dpfl_mech_round_event(&r);
}

const fl_aggregator fl_agg_cdp = {
    .name = "client-level DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .client_send = client_send, .add = add, .release = release, .event = event};

/* Median clipping: every update of the round is in its slot (whole_round); S = the median of their norms. */
static dpfl_status median_add(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)s, (void)i, (void)j, (void)m, (void)err; /* added at release, once the median is known */
    return DPFL_OK;
}

static dpfl_status median_release(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    int32_t nr = 0;
    for (int32_t i = 0; i < s->nsampled; i++)
        if (!s->results[i].dropped) s->cdp.norms[nr++] = s->results[i].norm;
    s->cdp.S_used = nr > 0 ? dpfl_mech_median(s->cdp.norms, nr) : s->cdp.S;
    for (int32_t i = 0; i < s->nsampled; i++)
        if (!s->results[i].dropped) add_clipped(s, s->slots[i], &s->results[i], m);
    return release(s, round, m, err);
}

static dpfl_event median_event(const dpfl_sim *s, int32_t round)
{
    (void)s, (void)round;
    return dpfl_event_not_private(1); /* the clip is data-dependent: no sensitivity bound */
}

const fl_aggregator fl_agg_cdp_median = {
    .name = "client-level DP, median clipping (not private)", .client_level = 1, .whole_round = 1, .create = create,
    .free = destroy, .set_noise = set_noise, .begin = begin, .client_send = client_send, .add = median_add,
    .release = median_release, .event = median_event};
