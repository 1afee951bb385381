/* The ledger the server owns: every round the simulation trains is charged as it ran (the sampled clients' local
 * steps, and with client-level DP the round's event at the multiplier actually drawn; Mironov 2017, Abadi et al.
 * 2016), so a library caller gets epsilon from dpfl_sim_epsilon without filling any accounting struct by hand. */
#include "sim_internal.h"

#include <math.h>
#include <string.h>

dpfl_status dpfl_server_charge(const dpfl_server *sv, dpfl_ledger *l, dpfl_error *err)
{
    for (int32_t i = 0; i < sv->cohort.n; i++)
        sv->steps[i] = fl_client_steps(sv->cfg, dpfl_partition_size(sv->part, sv->cohort.sampled[i]));
    dpfl_ledger_charge(l, sv->cohort.sampled, sv->cohort.n, sv->steps);
    if (!sv->agg->client_level) return DPFL_OK;
    const fl_sampling_view smp = fl_sampler_view(&sv->smp);
    const dpfl_mech_clients d = fl_round_design(&smp, sv->smp.round);
    dpfl_event ev = sv->agg->event(sv->aggself, &d); /* the release the aggregation mode ran */
    return dpfl_ledger_charge_round(l, &sv->smp.design, sv->smp.round, &ev, err); /* cross-device: once per pass */
}

dpfl_status dpfl_server_client_event(const dpfl_server *sv, int32_t round, double z, dpfl_event *ev, dpfl_error *err)
{
    if (!sv->agg->client_level) { /* the plain mean of the updates: no client-level bound */
        *ev = dpfl_event_not_private(1);
        return DPFL_OK;
    }
    if (!(z > 0) || isinf(z))
        return dpfl_fail(err, DPFL_EINVAL, "client-level event: noise multiplier %g (must be finite and > 0)", z);
    if (round < 1) return dpfl_fail(err, DPFL_EINVAL, "client-level event: round %d (rounds start at 1)", (int)round);
    /* the mode's event at z: the server and the noise in force are unchanged */
    const fl_sampling_view smp = fl_sampler_view(&sv->smp);
    const dpfl_mech_clients d = fl_round_design(&smp, round);
    return sv->agg->event_at(sv->aggself, &d, round, z, ev, err);
}

const dpfl_ledger *dpfl_server_ledger(const dpfl_server *sv) { return &sv->ledger; }

dpfl_status dpfl_server_restore_ledger(dpfl_server *sv, const dpfl_ledger *l, dpfl_error *err)
{
    if (l->clients != sv->part->clients)
        return dpfl_fail(err, DPFL_EINVAL, "ledger of %d clients given to a simulation of %d", l->clients,
                         sv->part->clients);
    return dpfl_ledger_copy(&sv->ledger, l, err);
}

/* On the simulation: the record-level guarantee reads record-level DP's side (the mechanism the clients run), the
 * client-level one the server's (its ledger and aggregation mode). */
dpfl_status dpfl_sim_epsilon(const dpfl_sim *s, dpfl_record_report *record, double *client_eps, int *client_private,
                             dpfl_error *err)
{
    const dpfl_server *sv = &s->sv;
    dpfl_status st;
    if (record) {
        memset(record, 0, sizeof *record);
        dpfl_record_accounting ra = dpfl_record_dp_accounting(&s->rd);
        if (s->rd.rdp.on && (st = dpfl_ledger_record_epsilon(&sv->ledger, s->part, &ra, record, NULL, err))) return st;
    }
    if (client_eps) {
        *client_eps = 0.0;
        if (client_private) *client_private = 1;
        if (sv->agg->client_level && sv->ledger.nclient_events > 0) {
            dpfl_guarantee g;
            st = dpfl_account_epsilon(sv->ledger.client_events, (size_t)sv->ledger.nclient_events,
                                      s->cfg->client_dp.delta, s->cfg->client_dp.accountant, NULL, &g, err);
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
