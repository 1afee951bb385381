/* The ledger the simulation owns: every round it trains is charged as it ran (the sampled clients' local steps, and
 * with client-level DP the round's event at the multiplier actually drawn), so a library caller gets epsilon from
 * dpfl_sim_epsilon without filling any accounting struct by hand. */
#include "sim_internal.h"

#include <math.h>
#include <string.h>

dpfl_status dpfl_sim_charge(const dpfl_sim *s, dpfl_ledger *l, dpfl_error *err)
{
    for (int32_t i = 0; i < s->nsampled; i++) s->steps[i] = dpfl_sim_client_steps(s, s->sampled[i]);
    dpfl_ledger_charge(l, s->sampled, s->nsampled, s->steps);
    if (!s->agg->client_level) return DPFL_OK;
    const fl_sampling_view smp = fl_sim_sampling(s);
    const dpfl_mech_clients d = fl_round_design(&smp, s->round);
    dpfl_event ev = s->agg->event(s->aggself, &d); /* the release the aggregation mode ran */
    return dpfl_ledger_charge_round(l, &s->design, s->round, &ev, err); /* cross-device: once per pass */
}

dpfl_status dpfl_sim_client_event(const dpfl_sim *s, int32_t round, double z, dpfl_event *ev, dpfl_error *err)
{
    if (!s->agg->client_level) { /* the plain mean of the updates: no client-level bound */
        *ev = dpfl_event_not_private(1);
        return DPFL_OK;
    }
    if (!(z > 0) || isinf(z))
        return dpfl_fail(err, DPFL_EINVAL, "client-level event: noise multiplier %g (must be finite and > 0)", z);
    if (round < 1) return dpfl_fail(err, DPFL_EINVAL, "client-level event: round %d (rounds start at 1)", (int)round);
    /* the mode's event at z: the simulation and the noise in force are unchanged */
    const fl_sampling_view smp = fl_sim_sampling(s);
    const dpfl_mech_clients d = fl_round_design(&smp, round);
    return s->agg->event_at(s->aggself, &d, round, z, ev, err);
}

const dpfl_ledger *dpfl_sim_ledger(const dpfl_sim *s) { return &s->ledger; }

dpfl_status dpfl_sim_restore_ledger(dpfl_sim *s, const dpfl_ledger *l, dpfl_error *err)
{
    if (l->clients != s->part->clients)
        return dpfl_fail(err, DPFL_EINVAL, "ledger of %d clients given to a simulation of %d", l->clients,
                         s->part->clients);
    return dpfl_ledger_copy(&s->ledger, l, err);
}

dpfl_record_accounting dpfl_sim_record_accounting(const dpfl_sim *s)
{
    const dpfl_config *cfg = s->cfg;
    return (dpfl_record_accounting){s->rdp.z, s->rdp.poisson, cfg->fl.batch, cfg->record_dp.delta,
                                    cfg->record_dp.accountant == DPFL_ACC_PLD, s->rdp.secure};
}

dpfl_status dpfl_sim_epsilon(const dpfl_sim *s, dpfl_record_report *record, double *client_eps, int *client_private,
                             dpfl_error *err)
{
    dpfl_status st;
    if (record) {
        memset(record, 0, sizeof *record);
        dpfl_record_accounting ra = dpfl_sim_record_accounting(s);
        if (s->rdp.on && (st = dpfl_ledger_record_epsilon(&s->ledger, s->part, &ra, record, NULL, err))) return st;
    }
    if (client_eps) {
        *client_eps = 0.0;
        if (client_private) *client_private = 1;
        if (s->agg->client_level && s->ledger.nclient_events > 0) {
            dpfl_guarantee g;
            st = dpfl_account_epsilon(s->ledger.client_events, (size_t)s->ledger.nclient_events, s->cfg->client_dp.delta,
                                      s->cfg->client_dp.accountant, NULL, &g, err);
            if (st == DPFL_ENOTPRIVATE) {
                *client_eps = INFINITY;
                if (client_private) *client_private = 0;
            } else if (st) {
                return st;
            } else {
                *client_eps = g.epsilon;
            }
        }
    }
    return DPFL_OK;
}
