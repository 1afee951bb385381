/* One client-level round (DP-FedAvg, McMahan et al. 2018; Geyer et al. 2017) as a mechanism: the sampled clients'
 * updates, each clipped to S, are summed, noise z S is added and the sum divided by the number of clients the
 * design expects (never by who replied: a dropout does not lower the noise).  The event is charged at the rate the
 * sampler really used. */
#include "dpfl/mech.h"

dpfl_mech_round dpfl_mech_round_make(dpfl_client_sampling sampling, int32_t K, double rate, int32_t m, double clip,
                                     double z)
{
    const dpfl_mech_clients d = dpfl_mech_clients_make(sampling, K, rate, m);
    return dpfl_mech_round_of(&d, clip, z);
}

dpfl_mech_round dpfl_mech_round_of(const dpfl_mech_clients *d, double clip, double z)
{
    return (dpfl_mech_round){d->kind, d->K, d->rate, d->m, clip, z, d->denom};
}

dpfl_event dpfl_mech_round_event(const dpfl_mech_round *r)
{
    switch (r->sampling) {
    case DPFL_SAMPLE_POISSON: return dpfl_event_poisson(dpfl_mech_round_rate(r), r->z, 1); /* the design's q */
    case DPFL_SAMPLE_FIXED: return dpfl_event_fixed(r->K, r->m, r->z / 2.0, 1);
    case DPFL_SAMPLE_CROSS_DEVICE: { /* replace-one (replacing a client's data moves its clipped update, so the sum,
                                        by 2S), unsampled: the cohorts are a shuffle, no amplification is claimed */
        dpfl_event e = dpfl_event_gaussian(r->z / 2.0, 1);
        e.adjacency = DPFL_ADJ_REPLACE_ONE;
        return e;
    }
    case DPFL_SAMPLE_ALL: break;
    }
    return dpfl_event_gaussian(r->z, 1);
}

double dpfl_mech_round_rate(const dpfl_mech_round *r)
{
    return dpfl_mech_clients_make(r->sampling, r->K, r->rate, r->m).q;
}

double dpfl_mech_round_std(const dpfl_mech_round *r) { return r->z * r->clip / r->denom; }
