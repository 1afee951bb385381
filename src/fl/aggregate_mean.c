/* FedAvg's aggregation without client-level DP (McMahan et al. 2017): the updates that arrive are averaged,
 * weighted by client size (fl.weighting = size) or uniformly, and the global model steps by eta along the mean.
 * With fl.personalization = helper this is PriFedSync's w_global <- (1 - eta) w_global + eta mean(w~(i)).
 * Also what every mode shares: the choice of mode, the plain noise parameters, the server step. */
#include "sim_internal.h"

#include <stdlib.h>

/* the mean's state: the round's exact, order-independent sum of the weighted updates (core/exact_sum.c), whatever
 * order they arrive in; O(model) */
typedef struct {
    dpfl_xsum sum;
    const dpfl_partition *part;
    int uniform;
    fl_agg_model out;
} fl_mean;

static void destroy(void *self)
{
    fl_mean *a = self;
    if (!a) return;
    dpfl_xsum_free(&a->sum);
    free(a);
}

static dpfl_status create(const fl_agg_setup *su, void **self, dpfl_error *err)
{
    fl_mean *a = calloc(1, sizeof *a);
    if (!a) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (the mean's state)");
    *self = a;
    a->part = su->part;
    a->uniform = su->uniform_weights;
    a->out = su->out;
    return dpfl_xsum_init(&a->sum, su->out.nparam, err);
}

static dpfl_status begin(void *self, const fl_round_view *v, dpfl_error *err)
{
    (void)v, (void)err;
    dpfl_xsum_zero(&((fl_mean *)self)->sum);
    return DPFL_OK;
}

static double weight(const fl_mean *a, int32_t k)
{
    return a->uniform ? 1.0 : dpfl_partition_size(a->part, k);
}

/* w_k u_k into the exact sum as it arrives; the weights' total is known at release, once the round is over (a
 * network round learns who dropped out only then) */
static dpfl_status add(void *self, const fl_arrival *u, dpfl_error *err)
{
    fl_mean *a = self;
    return dpfl_xsum_add(&a->sum, u->u, weight(a, u->r->client), err);
}

static dpfl_status release(void *self, const fl_round_view *v, dpfl_round_metrics *m, dpfl_error *err)
{
    (void)err;
    fl_mean *a = self;
    if (m->replied == 0) return DPFL_OK;
    double W = 0; /* the weights of the clients that replied, in client order */
    for (int32_t c = 0; c < v->nsampled; c++)
        if (!v->results[c].dropped) W += weight(a, v->sampled[c]);
    dpfl_xsum_result(&a->sum, W, a->out.acc);
    fl_agg_step(&a->out);
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
void fl_agg_params_plain(fl_agg_params *p, double z)
{
    p->z_sum = z;
    p->sigma_b = 0.0;
    p->z_release = z;
}

void fl_agg_step(const fl_agg_model *m)
{
    dpfl_vec_axpy(m->global, (float)m->eta, m->acc, m->nparam);
}
