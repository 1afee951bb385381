/* FedAvg's aggregation without client-level DP (McMahan et al. 2017): the updates that arrive are averaged,
 * weighted by client size (fl.weighting = size) or uniformly, and the global model steps by eta along the mean.
 * With fl.personalization = helper this is PriFedSync's w_global <- (1 - eta) w_global + eta mean(w~(i)). */
#include "sim_internal.h"

static dpfl_status begin(dpfl_sim *s, int32_t round, dpfl_error *err)
{
    (void)round;
    (void)err;
    dpfl_vec_zero(s->acc, s->model->nparam);
    s->mean_weight = 0;
    return DPFL_OK;
}

static double weight(const dpfl_sim *s, int32_t k)
{
    return s->uniform_weights ? 1.0 : dpfl_partition_size(s->part, k);
}

static dpfl_status add(dpfl_sim *s, int32_t i, int32_t j, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)err;
    /* the weights are over the clients that reply, all known once the first chunk has run (dropouts are drawn up
     * front in process; a network round is one chunk) */
    if (s->mean_weight == 0)
        for (int32_t c = 0; c < s->nsampled; c++)
            if (!s->results[c].dropped) s->mean_weight += weight(s, s->sampled[c]);
    dpfl_vec_axpy(s->acc, (float)(weight(s, s->results[i].client) / s->mean_weight), s->slots[j], s->model->nparam);
    m->replied++;
    return DPFL_OK;
}

static dpfl_status release(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)round, (void)m, (void)err;
    if (s->nsampled > 0) dpfl_vec_axpy(s->global, (float)s->cfg->fl.eta, s->acc, s->model->nparam);
    return DPFL_OK;
}

const fl_aggregator fl_agg_mean = {.name = "mean", .begin = begin, .add = add, .release = release};

const fl_aggregator *fl_aggregator_for(const dpfl_config *cfg)
{
    if (!cfg->client_dp.enabled) return &fl_agg_mean;
    if (cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) return &fl_agg_ddp;
    return cfg->client_dp.clip_strategy == DPFL_CLIP_MEDIAN ? &fl_agg_cdp_median : &fl_agg_cdp;
}
