/* The server's side of the federated simulation (McMahan et al. 2017), the public sub-handle dpfl_server
 * (include/dpfl/fl.h): the client sampler, the aggregation mode chosen once (aggregate_*.c: the plain mean;
 * client-level DP, DP-FedAvg, McMahan et al. 2018, with adaptive clipping, Andrew et al. 2021; distributed DP,
 * Kairouz et al. 2021) with the clip and noise it shares, SCAFFOLD's server control variate (Karimireddy et al.
 * 2020), the reports it received and the auditing observer.  What it charges is sim_ledger.c. */
#include "sim_internal.h"

dpfl_server *dpfl_sim_server(dpfl_sim *s) { return &s->sv; }

fl_sampling_view fl_sampler_view(const fl_sampler *smp)
{
    return (fl_sampling_view){.cfg = smp->cfg, .clients = smp->clients, .sampling = smp->sampling,
                              .round = smp->round,
                              .design = smp->design_round > 0 && smp->design_round == smp->round ? &smp->design
                                                                                                 : NULL};
}

dpfl_status dpfl_server_set_noise(dpfl_server *sv, int32_t round, double z, dpfl_error *err)
{
    const fl_sampling_view smp = fl_sampler_view(&sv->smp);
    const dpfl_mech_clients d = fl_round_design(&smp, round);
    fl_agg_params_plain(&sv->aggp, z);
    return sv->agg->set_noise ? sv->agg->set_noise(sv->aggself, &d, round, z, err) : DPFL_OK;
}

double dpfl_server_release_noise(const dpfl_server *sv) { return sv->aggp.z_release; }
double dpfl_server_quantile_noise(const dpfl_server *sv) { return sv->aggp.sigma_b; }
double dpfl_server_update_noise(const dpfl_server *sv) { return sv->aggp.z_sum; }
const dpfl_ddp_plan *dpfl_server_ddp_plan(const dpfl_server *sv)
{
    return sv->agg == &fl_agg_ddp ? fl_ddp_plan(sv->aggself) : NULL;
}

double dpfl_server_update_clip(const dpfl_server *sv) { return sv->aggp.S; }
void dpfl_server_set_update_clip(dpfl_server *sv, double S) { sv->aggp.S = S; }

float *dpfl_server_control(dpfl_server *sv) { return sv->scaffold.on ? sv->scaffold.c : NULL; }

void dpfl_server_set_update_observer(dpfl_server *sv, dpfl_server_update_fn fn, void *ctx)
{
    sv->observer = fn;
    sv->observer_ctx = ctx;
}

int32_t dpfl_server_client_losses(const dpfl_server *sv, int32_t *clients, double *losses)
{
    int32_t n = 0;
    for (int32_t i = 0; i < sv->cohort.n; i++) {
        const client_result *r = &sv->cohort.results[i];
        if (r->dropped || r->examples == 0) continue;
        clients[n] = r->client;
        losses[n++] = r->loss_sum / (double)r->examples;
    }
    return n;
}
