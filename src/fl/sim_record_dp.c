/* Record-level DP as the clients of the federated simulation run it, the public sub-handle dpfl_record_dp
 * (include/dpfl/fl.h): DP-SGD's noise (Abadi et al. 2016), rPDP-FL's per-record rates and the round they make
 * (Liu et al.), and the individual filter's spend (Feldman & Zrnic 2021).  Local training (client.c) reads the
 * same fl_record_dp.  Nothing here reads the rest of the simulation but the server's client sampler (the round's
 * design, for the rPDP design). */
#include "sim_internal.h"

#include <sodium.h>
#include <string.h>

dpfl_record_dp *dpfl_sim_record_dp(dpfl_sim *s) { return &s->rd; }

dpfl_mech_rpdp dpfl_record_dp_design(const dpfl_record_dp *r)
{
    const fl_sampling_view smp = fl_sampler_view(r->smp);
    const dpfl_mech_clients d = fl_round_design(&smp, r->smp->round > 0 ? r->smp->round : 1);
    int64_t steps = 0; /* the most local steps of any client (dpfl_clients_steps) */
    for (int32_t k = 0; k < r->part->clients; k++) {
        const int64_t sk = fl_client_steps(r->cfg, dpfl_partition_size(r->part, k));
        if (sk > steps) steps = sk;
    }
    return dpfl_mech_rpdp_of(&d, steps, r->rdp.z);
}

void dpfl_record_dp_set_noise(dpfl_record_dp *r, double z)
{
    r->rdp.z = z;
    /* the exact sampler's range is checked by the run driver before any release */
    DPFL_ASSERT(!r->rdp.secure || dpfl_mech_discrete_in_range(r->nparam, z));
}

void dpfl_record_dp_set_rates(dpfl_record_dp *r, double *p, const double *client_denom)
{
    DPFL_ASSERT(r->rdp.poisson && !r->rdp.secure && !r->rdp.e2e);
    r->rdp.p = p;
    r->rdp.denom = client_denom;
}

void dpfl_record_dp_set_filter(dpfl_record_dp *r, double *spent, const double *cap, double alpha)
{
    DPFL_ASSERT(r->rdp.p && !r->rdp.clip.per_layer && alpha > 1.0);
    r->rdp.spent = spent;
    r->rdp.cap = cap;
    r->rdp.filter_alpha = alpha;
}

int32_t dpfl_record_dp_filter_spent(const dpfl_record_dp *r, int32_t k, double *out)
{
    if (!r->rdp.spent) return 0;
    const int32_t *idx = r->part->index + r->part->offset[k];
    const int32_t n = dpfl_partition_size(r->part, k);
    for (int32_t i = 0; out && i < n; i++) out[i] = r->rdp.spent[idx[i]];
    return n;
}

dpfl_status dpfl_record_dp_set_filter_spent(dpfl_record_dp *r, int32_t k, const double *v, dpfl_error *err)
{
    const int32_t *idx = r->part->index + r->part->offset[k];
    const int32_t n = r->rdp.spent ? dpfl_partition_size(r->part, k) : 0;
    for (int32_t i = 0; i < n; i++) /* all checked before any is taken */
        if (!(v[i] >= 0 && v[i] <= r->rdp.cap[idx[i]]))
            return dpfl_fail(err, DPFL_EINVAL, "client %d: filter loss %g of record %d is outside [0, its cap %g]", k,
                             v[i], idx[i], r->rdp.cap[idx[i]]);
    fl_record_dp *rd = &r->rdp;
    for (int32_t i = 0; i < n; i++) {
        const int32_t j = idx[i];
        rd->spent[j] = v[i];
        if (rd->cap[j] - rd->spent[j] < DPFL_FILTER_OUT * rd->cap[j]) rd->p[j] = 0.0; /* filtered out, as client.c */
    }
    return DPFL_OK;
}

/* rPDP-FL: a digest of client k's records' rates and divisor, which a deployed client compares with its own. */
void dpfl_record_dp_rates_digest(const dpfl_record_dp *r, int32_t k, uint8_t out[32])
{
    memset(out, 0, 32);
    if (!r->rdp.p) return;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    const int32_t *idx = r->part->index + r->part->offset[k];
    const int32_t n = dpfl_partition_size(r->part, k);
    for (int32_t i = 0; i < n; i++) crypto_generichash_update(&st, (const unsigned char *)&r->rdp.p[idx[i]], 8);
    crypto_generichash_update(&st, (const unsigned char *)&r->rdp.denom[k], 8);
    crypto_generichash_final(&st, out, 32);
}

dpfl_record_accounting dpfl_record_dp_accounting(const dpfl_record_dp *r)
{
    const dpfl_config *cfg = r->cfg;
    return (dpfl_record_accounting){r->rdp.z, r->rdp.poisson, cfg->fl.batch, cfg->record_dp.delta,
                                    cfg->record_dp.accountant == DPFL_ACC_PLD, r->rdp.secure};
}
