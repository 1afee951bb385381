/* Client-level accounting of a run: the event each round releases, and the end-to-end client guarantee implied
 * by record-level noise. */
#include "accounting/accounting.h"
#include "dpfl/mech.h"

#include <math.h>
#include <string.h>

/* The round's client-level mechanism (mech/round.c) at the sampling design the configuration names: what the
 * summary reports as the accounted client rate.  (The event a round releases is the aggregation mode's own,
 * dpfl_sim_client_event.) */
static dpfl_mech_round round_mech(const dpfl_config *cfg, int32_t K, double z, int32_t round)
{
    dpfl_client_sampling k = (cfg->fl.sampling == DPFL_SAMPLE_POISSON) ? DPFL_SAMPLE_POISSON
                             : (cfg->fl.sampling == DPFL_SAMPLE_FIXED) ? DPFL_SAMPLE_FIXED
                                                               : DPFL_SAMPLE_ALL;
    return dpfl_mech_round_make(k, K, dpfl_round_client_rate(cfg, round), dpfl_round_clients_per_round(cfg, round),
                                cfg->client_dp.clip, z);
}

double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round)
{
    dpfl_mech_round r = round_mech(cfg, K, 1.0, round);
    return dpfl_mech_round_rate(&r);
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

/* Client-level guarantee implied by the record-level noise (the end-to-end DP thesis, section 3.3, src/privacy/e2e.c): each
 * step's clipped sum is projected to norm <= B*C, so zeroing out one client moves it by at most B*C while the
 * noise has std z * sens (the DP-SGD mechanism's own sensitivity, mech/dpsgd.c): a round of s steps (the largest s
 * of any client) is mu = sqrt(s) B C / (z sens), halved multiplier under replace-one (fixed client sampling).  The
 * noise is the client's own, so participation is visible: the rounds are one two-stage event at the largest rate any
 * round used (a larger rate only adds loss), each participation a Gaussian of multiplier 1 / mu, which the GDP
 * accountant answers exactly (binomial mixture).  Server noise (client_dp on) can only help: mu = min(that,
 * 2 / server_z). */
static dpfl_event e2e_client_event(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_ledger *l, double z,
                                   double server_z, double *client_noise)
{
    int64_t smax = 0;
    for (int32_t k = 0; k < part->clients; k++) {
        int64_t sk = dpfl_mech_local_steps(dpfl_partition_size(part, k), cfg->fl.batch, cfg->fl.local_steps,
                                           cfg->fl.local_epochs);
        if (sk > smax) smax = sk;
    }
    const int fixed = (cfg->fl.sampling == DPFL_SAMPLE_FIXED);
    dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(cfg->record_dp.sampler == DPFL_BATCH_POISSON, 1, 1, 1.0, z);
    double mu = dpfl_e2e_client_mu(d.noise_std, cfg->fl.batch, smax > 0 ? smax : 1,
                                   fixed ? DPFL_ADJ_REPLACE_ONE : DPFL_ADJ_ZERO_OUT, server_z);
    *client_noise = 1.0 / mu;
    double rate = 0;
    for (int32_t r = 1; r <= (l->rounds > 0 ? l->rounds : 1); r++) {
        double q = fl_client_rate_accounted(cfg, part->clients, r);
        if (q > rate) rate = q;
    }
    dpfl_event ev = dpfl_event_two_stage(rate, 1.0, 1.0 / mu, 1, l->rounds, DPFL_BOUND_RPDP);
    ev.adjacency = fixed ? DPFL_ADJ_REPLACE_ONE : DPFL_ADJ_ZERO_OUT;
    return ev;
}

dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_ledger *l,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_event *evout,
                                  dpfl_error *err)
{
    dpfl_event ev = e2e_client_event(cfg, part, l, z, server_z, client_noise);
    if (evout) *evout = ev;
    dpfl_guarantee g;
    dpfl_status st = dpfl_account_epsilon(&ev, 1, cfg->record_dp.delta, DPFL_ACC_GDP, NULL, &g, err);
    if (!st) *eps = g.epsilon;
    return st;
}
