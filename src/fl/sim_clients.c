/* The clients' side of the federated simulation (McMahan et al. 2017), the public sub-handle dpfl_clients
 * (include/dpfl/fl.h): every client's own state (client_state.h: helper models, optimizer states, personal
 * parameters, SCAFFOLD's variates; its layout and the store of the blocks) and record-level DP as the clients run it (DP-SGD, Abadi et al. 2016; rPDP-FL's per-record rates,
 * Liu et al.; the individual filter, Feldman & Zrnic 2021).  Nothing here reads the rest of the simulation but
 * the server's client sampler (the round's design, for the rPDP design). */
#include "sim_internal.h"

#include <sodium.h>
#include <string.h>

dpfl_clients *dpfl_sim_clients(dpfl_sim *s) { return &s->cl; }

int64_t dpfl_clients_steps(const dpfl_clients *c, int32_t k)
{
    return fl_client_steps(c->cfg, dpfl_partition_size(c->part, k));
}

dpfl_mech_rpdp dpfl_clients_rpdp_design(const dpfl_clients *c)
{
    const fl_sampling_view smp = fl_sampler_view(c->smp);
    const dpfl_mech_clients d = fl_round_design(&smp, c->smp->round > 0 ? c->smp->round : 1);
    int64_t steps = 0;
    for (int32_t k = 0; k < c->part->clients; k++) {
        const int64_t sk = dpfl_clients_steps(c, k);
        if (sk > steps) steps = sk;
    }
    return dpfl_mech_rpdp_of(&d, steps, c->rdp.z);
}

void dpfl_clients_set_record_noise(dpfl_clients *c, double z)
{
    c->rdp.z = z;
    /* the exact sampler's range is checked by the run driver before any release */
    DPFL_ASSERT(!c->rdp.secure || dpfl_mech_discrete_in_range(c->model->nparam, z));
}

void dpfl_clients_set_record_rates(dpfl_clients *c, double *p, const double *client_denom)
{
    DPFL_ASSERT(c->rdp.poisson && !c->rdp.secure && !c->rdp.e2e);
    c->rdp.p = p;
    c->rdp.denom = client_denom;
}

void dpfl_clients_set_record_filter(dpfl_clients *c, double *spent, const double *cap, double alpha)
{
    DPFL_ASSERT(c->rdp.p && !c->rdp.clip.per_layer && alpha > 1.0);
    c->rdp.spent = spent;
    c->rdp.cap = cap;
    c->rdp.filter_alpha = alpha;
}

int32_t dpfl_clients_filter_spent(const dpfl_clients *c, int32_t k, double *out)
{
    if (!c->rdp.spent) return 0;
    const int32_t *idx = c->part->index + c->part->offset[k];
    const int32_t n = dpfl_partition_size(c->part, k);
    for (int32_t i = 0; out && i < n; i++) out[i] = c->rdp.spent[idx[i]];
    return n;
}

dpfl_status dpfl_clients_set_filter_spent(dpfl_clients *c, int32_t k, const double *v, dpfl_error *err)
{
    const int32_t *idx = c->part->index + c->part->offset[k];
    const int32_t n = c->rdp.spent ? dpfl_partition_size(c->part, k) : 0;
    for (int32_t i = 0; i < n; i++) /* all checked before any is taken */
        if (!(v[i] >= 0 && v[i] <= c->rdp.cap[idx[i]]))
            return dpfl_fail(err, DPFL_EINVAL, "client %d: filter loss %g of record %d is outside [0, its cap %g]", k,
                             v[i], idx[i], c->rdp.cap[idx[i]]);
    fl_record_dp *rd = &c->rdp;
    for (int32_t i = 0; i < n; i++) {
        const int32_t r = idx[i];
        rd->spent[r] = v[i];
        if (rd->cap[r] - rd->spent[r] < DPFL_FILTER_OUT * rd->cap[r]) rd->p[r] = 0.0; /* filtered out, as client.c */
    }
    return DPFL_OK;
}

int dpfl_clients_keep_state(const dpfl_clients *c) { return c->layout.keep; }
size_t dpfl_clients_state_floats(const dpfl_clients *c) { return fl_layout_floats(&c->layout); }
const float *dpfl_clients_initial_model(const dpfl_clients *c) { return c->layout.w0; }

void dpfl_clients_set_initial_model(dpfl_clients *c, const float *w0)
{
    DPFL_ASSERT(c->layout.w0);
    dpfl_vec_copy(c->layout.w0, w0, c->layout.nparam);
    fl_store_w0_changed(&c->store); /* the helper evaluations of w0 kept are stale */
}

const float *dpfl_clients_helper_model(const dpfl_clients *c, int32_t k)
{
    DPFL_ASSERT(c->layout.helper && k >= 0 && k < c->part->clients);
    return fl_store_helper(&c->store, &c->layout, k);
}

int64_t dpfl_clients_state(const dpfl_clients *c, int32_t k, const float **state)
{
    DPFL_ASSERT(k >= 0 && k < c->part->clients);
    const int keep = c->layout.keep;
    if (state) *state = keep ? fl_store_peek(&c->store, k) : NULL; /* a paged-out block: read back */
    return keep ? c->store.cstate[k].t : 0;
}

void dpfl_clients_sync(dpfl_clients *c, int32_t k, const float *global)
{
    const client_result r = {.client = k, .steps = 1}; /* as the round syncs a client whose update arrived */
    if (c->layout.helper) fl_store_sync_helpers(&c->store, &c->layout, &r, 1, global);
}

dpfl_status dpfl_clients_set_state(dpfl_clients *c, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    return fl_store_set(&c->store, k, t, state, err);
}

/* rPDP-FL: a digest of client k's records' rates and divisor, which a deployed client compares with its own. */
void dpfl_clients_rates_digest(const dpfl_clients *c, int32_t k, uint8_t out[32])
{
    memset(out, 0, 32);
    if (!c->rdp.p) return;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    const int32_t *idx = c->part->index + c->part->offset[k];
    const int32_t n = dpfl_partition_size(c->part, k);
    for (int32_t i = 0; i < n; i++) crypto_generichash_update(&st, (const unsigned char *)&c->rdp.p[idx[i]], 8);
    crypto_generichash_update(&st, (const unsigned char *)&c->rdp.denom[k], 8);
    crypto_generichash_final(&st, out, 32);
}

double dpfl_clients_round_lr(const dpfl_clients *c, int32_t round)
{
    return dpfl_optim_lr(&c->optcfg, (int64_t)round - 1);
}

dpfl_record_accounting dpfl_clients_record_accounting(const dpfl_clients *c)
{
    const dpfl_config *cfg = c->cfg;
    return (dpfl_record_accounting){c->rdp.z, c->rdp.poisson, cfg->fl.batch, cfg->record_dp.delta,
                                    cfg->record_dp.accountant == DPFL_ACC_PLD, c->rdp.secure};
}
