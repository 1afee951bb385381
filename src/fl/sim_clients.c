/* The clients' side of the federated simulation (McMahan et al. 2017), the public sub-handle dpfl_clients
 * (include/dpfl/fl.h): every client's own state, kept across rounds (client_state.h: helper models, optimizer
 * states, personal parameters, SCAFFOLD's variates; its layout and the store of the blocks), and the local steps
 * and learning rate it trains with.  Record-level DP on the clients is sim_record_dp.c's.  Nothing here reads the
 * rest of the simulation. */
#include "sim_internal.h"

dpfl_clients *dpfl_sim_clients(dpfl_sim *s) { return &s->cl; }

int64_t dpfl_clients_steps(const dpfl_clients *c, int32_t k)
{
    return fl_client_steps(c->cfg, dpfl_partition_size(c->part, k));
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
    fl_store_sync_helpers(&c->store, &c->layout, &r, 1, global);
}

dpfl_status dpfl_clients_set_state(dpfl_clients *c, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    return fl_store_set(&c->store, k, t, state, err);
}

double dpfl_clients_round_lr(const dpfl_clients *c, int32_t round)
{
    return dpfl_optim_lr(&c->optcfg, (int64_t)round - 1);
}
