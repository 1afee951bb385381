/* Client-level accounting of a run: the event each round releases, and the end-to-end client guarantee implied
 * by record-level noise. */
#include "accounting/accounting.h"
#include "dpfl/mech.h"

#include <math.h>
#include <string.h>

/* The client sampling design round `round` is drawn from: the arguments fl/round.c gives the sampler
 * (dpfl_mech_sample_clients_ran returns this design), so what is charged is what the sampler runs. */
static dpfl_mech_clients client_design(const dpfl_config *cfg, int32_t K, int32_t round)
{
    return dpfl_mech_clients_make(cfg->fl.sampling, K, dpfl_round_client_rate(cfg, round),
                                  dpfl_round_clients_per_round(cfg, round));
}

/* What the summary reports as the accounted client rate.  (The event a round releases is the aggregation mode's
 * own, dpfl_server_client_event.) */
double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round)
{
    return client_design(cfg, K, round).q;
}

int64_t fl_client_releases(const dpfl_config *cfg, int32_t K, int32_t rounds)
{
    const dpfl_mech_clients d = client_design(cfg, K, 1);
    return dpfl_mech_clients_releases(&d, rounds);
}

dpfl_accountant fl_client_accountant(const dpfl_config *cfg)
{
    return cfg->client_dp.accountant == DPFL_ACC_PLD ? DPFL_ACC_PLD : DPFL_ACC_RDP;
}

dpfl_status fl_client_epsilon(const dpfl_config *cfg, const dpfl_ledger *l, double *eps, int *private,
                              dpfl_error *err)
{
    *private = 1;
    *eps = 0.0;
    if (l->nclient_events == 0) return DPFL_OK;
    dpfl_guarantee g;
    dpfl_status st = dpfl_account_epsilon(l->client_events, (size_t)l->nclient_events, cfg->client_dp.delta,
                                          fl_client_accountant(cfg), NULL, &g, err);
    if (st == DPFL_ENOTPRIVATE) {
        *private = 0;
        *eps = INFINITY;
        return DPFL_OK;
    }
    if (!st) *eps = g.epsilon;
    return st;
}

/* Client-level guarantee implied by the record-level noise (the end-to-end DP thesis, section 3.3; the mechanism
 * and its event are mech/e2e.c's): every client's local steps per round and every round's client design, at the
 * DP-SGD step's noise std (mech/dpsgd.c).  Server noise (client_dp on) can only help. */
static dpfl_event e2e_client_event(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double z,
                                   double server_z, double *client_noise)
{
    const dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(cfg->record_dp.sampler == DPFL_BATCH_POISSON, 1, 1, 1.0, z);
    dpfl_mech_e2e e = dpfl_mech_e2e_make(&d, cfg->fl.batch, server_z);
    for (int32_t k = 0; k < part->clients; k++)
        dpfl_mech_e2e_client(&e, dpfl_mech_local_steps(dpfl_partition_size(part, k), cfg->fl.batch,
                                                       cfg->fl.local_steps, cfg->fl.local_epochs));
    for (int32_t r = 1; r <= (rounds > 0 ? rounds : 1); r++) {
        const dpfl_mech_clients c = client_design(cfg, part->clients, r);
        dpfl_mech_e2e_round(&e, &c);
    }
    *client_noise = 1.0 / dpfl_mech_e2e_mu(&e);
    return dpfl_mech_e2e_event(&e, rounds);
}

dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_event *evout,
                                  dpfl_error *err)
{
    dpfl_event ev = e2e_client_event(cfg, part, rounds, z, server_z, client_noise);
    if (evout) *evout = ev;
    dpfl_guarantee g;
    dpfl_status st = dpfl_account_epsilon(&ev, 1, cfg->record_dp.delta, DPFL_ACC_GDP, NULL, &g, err);
    if (!st) *eps = g.epsilon;
    return st;
}
