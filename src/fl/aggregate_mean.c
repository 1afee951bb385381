/* FedAvg's aggregation without client-level DP (McMahan et al. 2017): the updates that arrive are averaged,
 * weighted by client size (fl.weighting = size) or uniformly, and the global model steps by eta along the mean.
 * With fl.personalization = helper this is PriFedSync's w_global <- (1 - eta) w_global + eta mean(w~(i)). */
#include "sim_internal.h"

static dpfl_status create(fl_agg_state *a, const fl_round_view *v, dpfl_error *err)
{
    return dpfl_xsum_init(&a->sum, v->nparam, err);
}

static void destroy(fl_agg_state *a) { dpfl_xsum_free(&a->sum); }

static dpfl_status begin(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_error *err)
{
    (void)v, (void)round, (void)err;
    dpfl_xsum_zero(&a->sum);
    return DPFL_OK;
}

static double weight(const dpfl_partition *part, int uniform, int32_t k)
{
    return uniform ? 1.0 : dpfl_partition_size(part, k);
}

/* w_k u_k into the exact sum as it arrives; the weights' total is known at release, once the round is over (a
 * network round learns who dropped out only then) */
static dpfl_status add(fl_agg_state *a, const fl_round_view *v, int32_t i, float *u, dpfl_error *err)
{
    return dpfl_xsum_add(&a->sum, u, weight(v->part, v->uniform_weights, v->results[i].client), err);
}

static dpfl_status release(fl_agg_state *a, const fl_round_view *v, int32_t round, dpfl_round_metrics *m,
                           dpfl_error *err)
{
    (void)round, (void)err;
    if (m->replied == 0) return DPFL_OK;
    double W = 0; /* the weights of the clients that replied, in client order */
    for (int32_t c = 0; c < v->nsampled; c++)
        if (!v->results[c].dropped) W += weight(v->part, v->uniform_weights, v->sampled[c]);
    dpfl_xsum_result(&a->sum, W, v->acc);
    dpfl_vec_axpy(v->global, (float)v->cfg->fl.eta, v->acc, v->nparam);
    return DPFL_OK;
}

const fl_aggregator fl_agg_mean = {.name = "mean", .create = create, .free = destroy, .begin = begin, .add = add,
                                   .release = release};

const fl_aggregator *fl_aggregator_for(const dpfl_config *cfg)
{
    if (!cfg->client_dp.enabled) return &fl_agg_mean;
    if (cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) return &fl_agg_ddp;
    return cfg->client_dp.clip_strategy == DPFL_CLIP_MEDIAN ? &fl_agg_cdp_median : &fl_agg_cdp;
}

/* Every mode: the update sum's multiplier and the release's are z until the mode's set_noise says otherwise
 * (adaptive clipping splits z with the quantile count; distributed DP plans its encoding for z). */
dpfl_status fl_agg_set_noise(const fl_aggregator *agg, fl_agg_state *a, const fl_sampling_view *smp, int32_t round,
                             double z, dpfl_error *err)
{
    a->cdp.z_sum = z;
    a->cdp.sigma_b = 0.0;
    a->cdp.z_release = z;
    return agg->set_noise ? agg->set_noise(a, smp, round, z, err) : DPFL_OK;
}
