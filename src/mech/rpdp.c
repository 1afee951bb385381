/* rPDP-FL's per-record sampling round (Liu et al., "Cross-silo Federated Learning with Record-level Personalized
 * Differential Privacy", Theorem 1): the client sampler's design, then tau local DP-SGD steps on each sampled
 * client, record i in each step's Poisson batch at its own rate p_i (dpfl_mech_poisson_batch_rates), noise z C on
 * the clipped sum.  A record's event is the two-stage round of that design at its p: the client rate lambda is the
 * one the sampler's design charges and tau the steps the simulation runs, never numbers read again from the
 * configuration. */
#include "dpfl/mech.h"

#include <string.h>

dpfl_mech_rpdp dpfl_mech_rpdp_of(const dpfl_mech_clients *clients, int64_t steps, double z)
{
    return (dpfl_mech_rpdp){*clients, steps, z};
}

dpfl_rpdp_params dpfl_mech_rpdp_params(const dpfl_mech_rpdp *m, int64_t rounds, double delta)
{
    dpfl_rpdp_params pp;
    memset(&pp, 0, sizeof pp);
    pp.z = m->z;
    pp.lambda = m->clients.q; /* every client (sampling = all): q = 1 */
    pp.inner = m->steps;
    pp.rounds = rounds;
    pp.delta = delta;
    pp.bound = DPFL_BOUND_RPDP;
    return pp;
}

dpfl_event dpfl_mech_rpdp_event(const dpfl_mech_rpdp *m, double p, int64_t rounds)
{
    return dpfl_event_two_stage(m->clients.q, p, m->z, m->steps, p > 0 ? rounds : 0, DPFL_BOUND_RPDP);
}

double dpfl_mech_rpdp_denom(const double *level_p, const int32_t *level, const int32_t *idx, int32_t n)
{
    double d = 0;
    for (int32_t j = 0; j < n; j++) {
        const int32_t l = level[idx[j]];
        d += l >= 0 ? level_p[l] : 0.0;
    }
    return d;
}
