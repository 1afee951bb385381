/* PriFedSync's federated f-DP of a run (Zheng et al., Theorems 1-2; docs/privacy.md, "PriFedSync"): the paper's
 * weak and strong Gaussian-DP mu (CLT, asymptotic) and dpfl's non-asymptotic RDP bound that keeps the sync
 * probability p, for the worst client, after the rounds released so far -- the numbers `dpfl fdp` prints for the
 * same parameters (one function computes both). */
#include "run_internal.h"

#include <math.h>
#include <stdio.h>

/* The report applies to DP-SGD on fixed batches (replace-one), a fixed number of local steps and noise > 0. */
const char *fl_fdp_not_applicable(const dpfl_config *cfg, double z)
{
    if (!cfg->record_dp.enabled) return "record_dp is off";
    if (cfg->record_dp.sampler != DPFL_BATCH_FIXED) return "it needs record_dp.sampler = fixed (the paper's analysis)";
    if (cfg->fl.local_steps <= 0) return "it needs fl.local_steps > 0 (K steps per sync)";
    if (!(z > 0)) return "the record-level noise is 0";
    return NULL;
}

dpfl_status fl_fdp_of_run(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double z,
                          dpfl_fdp_params *pp, dpfl_fdp_result *r, dpfl_error *err)
{
    DPFL_ASSERT(!fl_fdp_not_applicable(cfg, z) && rounds > 0);
    int32_t nmin = 0; /* the worst client: fewest records, so the largest B_j / n_j */
    for (int32_t k = 0; k < part->clients; k++) {
        int32_t n = dpfl_partition_size(part, k);
        if (n > 0 && (nmin == 0 || n < nmin)) nmin = n;
    }
    if (nmin == 0) return dpfl_fail(err, DPFL_EINVAL, "federated f-DP: no client has records");
    int32_t copies = 1; /* the most clients any record is in: each releases it (the worst client's rate for all) */
    dpfl_status st = dpfl_record_copies(part, &copies, err);
    if (st) return st;
    double p = 0; /* the largest probability with which a client syncs in any round so far (conservative) */
    for (int32_t t = 1; t <= rounds; t++) {
        double pt = fl_client_rate_accounted(cfg, part->clients, t); /* the sampler's design (mech/sampler.c) */
        if (pt > p) p = pt;
    }
    pp->clients = part->clients;
    pp->p = p > 1 ? 1 : p;
    pp->z = z;
    pp->n = nmin;
    /* the worst client's DP-SGD step (B_k = min(B, n_k), mech/dpsgd.c) and its local steps */
    pp->batch = dpfl_mech_dpsgd_make(0, nmin, cfg->fl.batch, 1.0, z).batch;
    pp->local_steps = dpfl_mech_local_steps(nmin, cfg->fl.batch, cfg->fl.local_steps, cfg->fl.local_epochs);
    pp->rounds = rounds;
    pp->copies = copies;
    return dpfl_fdp_prifedsync(pp, cfg->record_dp.delta, r, err);
}

/* Both numbers are upper bounds against the same observer (anyone who sees every release).  The ledger's holds given
 * the participations that happened (public and independent of the data); the federated f-DP bound holds over the
 * random syncs for a number of rounds fixed in advance.  The stop rule checks the smaller: fdp(r) does not depend on
 * the data or on who synced, so until the first round r_f where fdp(r_f + 1) passes the target the run cannot stop
 * (its length is fixed), and past it the run goes on only while the ledger's epsilon, then the smaller, stays
 * within the target.  Either way the number reported holds for the rounds released (docs/privacy.md, PriFedSync). */
dpfl_status fl_record_guarantee(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_record_accounting *ra,
                                double record_z, const dpfl_ledger *l, dpfl_record_report *rep, double *per_client,
                                double *ledger_eps, dpfl_error *err)
{
    *ledger_eps = NAN;
    dpfl_status st = dpfl_ledger_record_epsilon(l, part, ra, rep, per_client, err);
    if (st || l->rounds < 1 || fl_fdp_not_applicable(cfg, record_z)) return st;
    dpfl_fdp_params pp;
    dpfl_fdp_result r;
    if ((st = fl_fdp_of_run(cfg, part, l->rounds, record_z, &pp, &r, err))) return st;
    if (r.eps_exact < rep->epsilon) {
        *ledger_eps = rep->epsilon;
        rep->epsilon = r.eps_exact;
    }
    return DPFL_OK;
}
