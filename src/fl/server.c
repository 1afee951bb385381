/* The server's side of a round: client-level DP (DP-FedAvg) on the updates that arrived -- clip each to S, sum,
 * add the noise of the round's mechanism, divide by the design's number of clients, step the global model, and
 * with adaptive clipping release the noisy quantile estimate and move S.  Without client-level DP the updates
 * are averaged (weighted by client size, or uniformly) in round.c. */
#include "sim_internal.h"

#include <math.h>
#include <string.h>

dpfl_mech_round fl_round_mech(const dpfl_sim *s, int32_t round)
{
    return dpfl_mech_round_make(s->sampling, s->part->clients, dpfl_round_client_rate(s->cfg, round),
                                dpfl_round_clients_per_round(s->cfg, round), s->S, s->z_sum);
}

/* One arrived update into the clipped sum (its raw value into the V_c / U_s statistics). */
void fl_server_add(dpfl_sim *s, float *u, const client_result *r, double S, dpfl_round_metrics *m, server_round *sr)
{
    const size_t P = s->model->nparam;
    dpfl_vec_axpy(s->raw_sum, 1.0f, u, P);
    sr->sumsq += r->norm * r->norm;
    if (r->norm > S) sr->nclipped++;
    dpfl_mech_clip_update(u, P, S, s->layer_off, s->layer_len, s->nlayers_clip);
    dpfl_vec_axpy(s->acc, 1.0f, u, P);
    m->replied++;
}

/* Geyer's median clipping: every update of the round is in its slot; S = the median of their norms (NOT
 * private: the run accounts it as a not_private event). */
double fl_server_median_clip(dpfl_sim *s, int32_t ms, dpfl_round_metrics *m, server_round *sr)
{
    int32_t nr = 0;
    for (int32_t i = 0; i < ms; i++)
        if (!s->results[i].dropped) s->norms[nr++] = s->results[i].norm;
    double S_used = nr > 0 ? dpfl_mech_median(s->norms, nr) : s->S;
    for (int32_t i = 0; i < ms; i++)
        if (!s->results[i].dropped) fl_server_add(s, s->slots[i], &s->results[i], S_used, m, sr);
    return S_used;
}

/* Noise, division by the design's denominator, the server step, the adaptive clip's update; metrics. */
void fl_server_release(dpfl_sim *s, int32_t round, double S_used, dpfl_round_metrics *m, const server_round *sr)
{
    const dpfl_config *cfg = s->cfg;
    const size_t P = s->model->nparam;
    dpfl_mech_round mr = fl_round_mech(s, round);
    dpfl_rng nrng;
    dpfl_rng_derive(&s->root, &nrng, (uint64_t)round, UINT64_MAX, PURPOSE_SERVER_NOISE);
    dpfl_mech_gaussian(&nrng, s->acc, P, s->z_sum, S_used, (float)(1.0 / mr.denom), s->nthreads);
    dpfl_vec_axpy(s->global, (float)cfg->fl.eta, s->acc, P);
    m->update_clip = S_used;
    m->update_noise_std = s->z_sum * S_used / mr.denom;
    if (m->replied > 0) {
        m->update_clip_fraction = (double)sr->nclipped / m->replied;
        double mu2 = dpfl_vec_dot(s->raw_sum, s->raw_sum, P) / ((double)m->replied * m->replied);
        m->update_scale = mu2 / (double)P;
        m->between_client_variance = fmax(0.0, sr->sumsq / m->replied - mu2) / (double)P;
    }
    if (s->strategy == DPFL_CLIP_ADAPTIVE) { /* private quantile estimate, then a geometric step towards the target */
        double b = dpfl_mech_adaptive_quantile(&nrng, m->replied, m->replied - sr->nclipped, s->sigma_b, mr.denom);
        s->S = S_used * exp(-cfg->client_dp.clip_lr * (b - cfg->client_dp.target_quantile));
    }
}
