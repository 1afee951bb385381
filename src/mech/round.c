/* One client-level round (DP-FedAvg, McMahan et al. 2018; Geyer et al. 2017) as a mechanism: the sampled clients'
 * updates, each clipped to S, are summed, noise z S is added and the sum divided by the number of clients the
 * design expects (never by who replied: a dropout does not lower the noise).  The event is charged at the rate the
 * sampler really used. */
#include "dpfl/mech.h"

dpfl_mech_round dpfl_mech_round_make(dpfl_client_sampling sampling, int32_t K, double rate, int32_t m, double clip,
                                     double z)
{
    dpfl_mech_round r = {sampling, K, rate, m, clip, z, 0.0};
    r.denom = sampling == DPFL_SAMPLE_POISSON ? rate * K : sampling == DPFL_SAMPLE_FIXED ? (double)m : (double)K;
    return r;
}

dpfl_event dpfl_mech_round_event(const dpfl_mech_round *r)
{
    switch (r->sampling) {
    case DPFL_SAMPLE_POISSON: return dpfl_event_poisson(r->rate, r->z, 1);
    case DPFL_SAMPLE_FIXED: return dpfl_event_fixed(r->K, r->m, r->z / 2.0, 1);
    case DPFL_SAMPLE_ALL: break;
    }
    return dpfl_event_gaussian(r->z, 1);
}

double dpfl_mech_round_rate(const dpfl_mech_round *r)
{
    return r->sampling == DPFL_SAMPLE_POISSON ? r->rate : r->sampling == DPFL_SAMPLE_FIXED ? (double)r->m / r->K : 1.0;
}
