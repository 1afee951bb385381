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

/* Client-level DP's server-side state (both modes of this file). */
typedef struct {
    fl_agg_params *par;  /* the update clip S and the noise multipliers in force (the simulation's) */
    fl_agg_model out;
    dpfl_clip_strategy strategy;
    double quantile_noise, clip_lr, target_quantile; /* adaptive clipping's settings (client_dp) */
    size_t *layer_off, *layer_len; /* per-layer update clipping: the layers' slices; NULL when flat */
    int32_t nlayers_clip;
    int nthreads;        /* the server noise's threads */
    const dpfl_rng *root;
    /* the round's exact, order-independent sum (core/exact_sum.c) of the clipped updates, whatever order they
     * arrive in; O(model) */
    dpfl_xsum sum;
    dpfl_xsum raw;    /* the round's exact sum of the raw (unclipped) updates, for V_c / U_s */
    float *raw_sum;   /* and that sum rounded, at release */
    double *norms;    /* per sampled client */
    double S_used;    /* the clip the round applies (median clipping: the median of its norms; set by begin) */
} fl_cdp;

static void destroy(void *self)
{
    fl_cdp *c = self;
    if (!c) return;
    free(c->norms);
    free(c->layer_off);
    free(c->layer_len);
    dpfl_free(c->raw_sum);
    dpfl_xsum_free(&c->raw);
    dpfl_xsum_free(&c->sum);
    free(c);
}

/* per-layer update clipping: the layers' slices */
static dpfl_status layer_slices(fl_cdp *c, const dpfl_model *model, dpfl_error *err)
{
    c->nlayers_clip = model->nlayers;
    c->layer_off = calloc((size_t)model->nlayers, sizeof *c->layer_off);
    c->layer_len = calloc((size_t)model->nlayers, sizeof *c->layer_len);
    if (!c->layer_off || !c->layer_len) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-layer clipping)");
    for (int32_t l = 0; l < model->nlayers; l++) {
        c->layer_off[l] = model->layers[l].param_off;
        c->layer_len[l] = model->layers[l].nparam;
    }
    return DPFL_OK;
}

static dpfl_status create(const fl_agg_setup *su, void **self, dpfl_error *err)
{
    const size_t P = su->out.nparam;
    const dpfl_config *cfg = su->cfg;
    fl_cdp *c = calloc(1, sizeof *c);
    if (!c) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client-level DP's state)");
    *self = c;
    c->par = su->par;
    c->out = su->out;
    c->strategy = cfg->client_dp.clip_strategy;
    c->quantile_noise = cfg->client_dp.quantile_noise;
    c->clip_lr = cfg->client_dp.clip_lr;
    c->target_quantile = cfg->client_dp.target_quantile;
    c->nthreads = su->nthreads;
    c->root = su->root;
    dpfl_status st;
    if ((st = dpfl_xsum_init(&c->sum, P, err)) || (st = dpfl_xsum_init(&c->raw, P, err))) return st;
    if (!(c->raw_sum = dpfl_alloc(P * sizeof(float), err)) ||
        !(c->norms = calloc((size_t)su->part->clients, sizeof *c->norms)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client-level DP buffers for %zu parameters)", P);
    return cfg->client_dp.per_layer ? layer_slices(c, su->model, err) : DPFL_OK;
}

/* Andrew et al. 2021: the count noise sigma_b in force (the default, expected clients per round / 20, included)
 * must leave room for the update sum's z_Delta; checked here, before any release.  The pair's multiplier is what
 * the mechanism (mech/clip.c) returns for the two noises it will draw.  Into p, which holds z's plain values. */
static dpfl_status noise_at(const fl_cdp *c, const dpfl_mech_clients *d, int32_t round, double z, fl_agg_params *p,
                            dpfl_error *err)
{
    if (c->strategy != DPFL_CLIP_ADAPTIVE || !(z > 0)) return DPFL_OK;
    dpfl_mech_adaptive ad;
    dpfl_error e;
    if (dpfl_mech_adaptive_make(z, c->quantile_noise, d, &ad, &e))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.quantile_noise: round %d: %s%s; set quantile_noise > %g or "
                                           "lower client_dp.noise",
                         (int)round, e.msg,
                         ad.default_sigma ? " (sigma_b is the default: expected clients per round / 20)" : "", z / 2.0);
    p->z_sum = ad.z_delta;
    p->sigma_b = ad.sigma_b;
    p->z_release = ad.z;
    return DPFL_OK;
}

static dpfl_status set_noise(void *self, const dpfl_mech_clients *d, int32_t round, double z, dpfl_error *err)
{
    fl_cdp *c = self;
    return noise_at(c, d, round, z, c->par, err);
}

static dpfl_status begin(void *self, const fl_round_view *v, dpfl_error *err)
{
    (void)v, (void)err;
    fl_cdp *c = self;
    dpfl_xsum_zero(&c->sum);
    dpfl_xsum_zero(&c->raw);
    c->S_used = c->par->S;
    return DPFL_OK;
}

/* The client measures its update's norm (a diagnostic and the adaptive clip's count; the server clips anyway). */
static void client_send(void *self, worker *w, int32_t i, int32_t j, client_result *r, float *u)
{
    (void)w, (void)i, (void)j;
    r->norm = dpfl_vec_norm2(u, ((const fl_cdp *)self)->out.nparam);
}

/* One arrived update into the exact sums (its raw value into V_c / U_s's), clipped to S in place first: the
 * truncation the sum applies never increases a coordinate's magnitude, so the clipped term's norm stays <= S. */
static dpfl_status add_clipped(fl_cdp *c, dpfl_xsum *sum, float *u, size_t P, dpfl_error *err)
{
    dpfl_status st = dpfl_xsum_add(&c->raw, u, 1.0, err);
    if (st) return st;
    dpfl_mech_clip_update(u, P, c->S_used, c->layer_off, c->layer_len, c->nlayers_clip);
    return dpfl_xsum_add(sum, u, 1.0, err);
}

static dpfl_status add(void *self, const fl_arrival *a, dpfl_error *err)
{
    fl_cdp *c = self;
    return add_clipped(c, &c->sum, a->u, c->out.nparam, err);
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

/* The spread of the round's raw updates (metrics): their mean's scale and the between-client variance. */
static void raw_spread(fl_cdp *c, double sumsq, dpfl_round_metrics *m)
{
    const size_t P = c->out.nparam;
    dpfl_xsum_result(&c->raw, 1.0, c->raw_sum);
    double mu2 = dpfl_vec_dot(c->raw_sum, c->raw_sum, P) / ((double)m->replied * m->replied);
    m->update_scale = mu2 / (double)P;
    m->between_client_variance = fmax(0.0, sumsq / m->replied - mu2) / (double)P;
}

/* Noise, division by the design's denominator, the server step, the adaptive clip's update; metrics. */
static dpfl_status release(void *self, const fl_round_view *v, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)err;
    fl_cdp *c = self;
    const size_t P = c->out.nparam;
    const double S_used = c->S_used;
    double sumsq;
    const int32_t nclipped = round_norms(v->results, v->nsampled, S_used, &sumsq);
    float *acc = c->out.acc;
    dpfl_xsum_result(&c->sum, 1.0, acc);
    dpfl_mech_round mr = dpfl_mech_round_of(&v->design, c->par->S, c->par->z_sum);
    dpfl_rng nrng;
    dpfl_rng_derive(c->root, &nrng, (uint64_t)v->round, UINT64_MAX, PURPOSE_SERVER_NOISE);
    dpfl_mech_gaussian(&nrng, acc, P, c->par->z_sum, S_used, (float)(1.0 / mr.denom), c->nthreads);
    fl_agg_step(&c->out);
    m->update_clip = S_used;
    mr.clip = S_used;
    m->update_noise_std = dpfl_mech_round_std(&mr);
    if (m->replied > 0) {
        m->update_clip_fraction = (double)nclipped / m->replied;
        raw_spread(c, sumsq, m);
    }
    if (c->strategy == DPFL_CLIP_ADAPTIVE) { /* private quantile estimate, then a geometric step towards the target */
        double b = dpfl_mech_adaptive_quantile(&nrng, m->replied, m->replied - nclipped, c->par->sigma_b, mr.denom);
        c->par->S = S_used * exp(-c->clip_lr * (b - c->target_quantile));
    }
    return DPFL_OK;
}

/* The round's release: the Gaussian sum at the sampling design that ran, at the release's multiplier (adaptive:
 * the update sum and the quantile count together, as dpfl_mech_adaptive_make returned it). */
static dpfl_event event_of(const fl_agg_params *p, const dpfl_mech_clients *d)
{
    dpfl_mech_round r = dpfl_mech_round_of(d, p->S, p->z_sum);
    r.z = p->z_release;
    return dpfl_mech_round_event(&r);
}

static dpfl_event event(const void *self, const dpfl_mech_clients *d)
{
    return event_of(((const fl_cdp *)self)->par, d);
}

static dpfl_status event_at(const void *self, const dpfl_mech_clients *d, int32_t round, double z, dpfl_event *ev,
                            dpfl_error *err)
{
    const fl_cdp *c = self;
    fl_agg_params p = *c->par; /* the clip in force, the noise at z */
    fl_agg_params_plain(&p, z);
    dpfl_status st = noise_at(c, d, round, z, &p, err);
    if (!st) *ev = event_of(&p, d);
    return st;
}

const fl_aggregator fl_agg_cdp = {
    .name = "client-level DP", .client_level = 1, .create = create, .free = destroy, .set_noise = set_noise,
    .begin = begin, .client_send = client_send, .add = add, .release = release, .event = event, .event_at = event_at};

/* Median clipping: every update of the round is in its slot (whole_round); S = the median of their norms. */
static dpfl_status median_add(void *self, const fl_arrival *a, dpfl_error *err)
{
    (void)err; /* kept in client i's slot, added at release once the median is known */
    if (a->u != a->keep) memcpy(a->keep, a->u, ((const fl_cdp *)self)->out.nparam * sizeof *a->u);
    return DPFL_OK;
}

static dpfl_status median_release(void *self, const fl_round_view *v, dpfl_round_metrics *m, dpfl_error *err)
{
    fl_cdp *c = self;
    int32_t nr = 0;
    for (int32_t i = 0; i < v->nsampled; i++)
        if (!v->results[i].dropped) c->norms[nr++] = v->results[i].norm;
    c->S_used = nr > 0 ? dpfl_mech_median(c->norms, nr) : c->par->S;
    dpfl_status st;
    for (int32_t i = 0; i < v->nsampled; i++)
        if (!v->results[i].dropped && (st = add_clipped(c, &c->sum, v->slots[i], c->out.nparam, err))) return st;
    return release(c, v, m, err);
}

static dpfl_event median_event(const void *self, const dpfl_mech_clients *d)
{
    (void)self, (void)d;
    return dpfl_event_not_private(1); /* the clip is data-dependent: no sensitivity bound */
}

static dpfl_status median_event_at(const void *self, const dpfl_mech_clients *d, int32_t round, double z,
                                   dpfl_event *ev, dpfl_error *err)
{
    (void)self, (void)round, (void)z, (void)err;
    *ev = median_event(self, d);
    return DPFL_OK;
}

const fl_aggregator fl_agg_cdp_median = {
    .name = "client-level DP, median clipping (not private)", .client_level = 1, .whole_round = 1, .create = create,
    .free = destroy, .set_noise = set_noise, .begin = begin, .client_send = client_send, .add = median_add,
    .release = median_release, .event = median_event, .event_at = median_event_at};
