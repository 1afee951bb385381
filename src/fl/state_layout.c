/* What one client's state block holds, where, and what a new block starts with: its helper model (PriFedSync,
 * Zheng et al., Algorithm 1: h(i), which starts as w0), its local optimizer's vectors (fl.client_state = keep),
 * its SCAFFOLD control variate c_i (Karimireddy et al. 2020; scaffold.c) and its personal parameters (personal.c).
 * The blocks themselves are the store's (clients.c). */
#include "sim_internal.h"

#include <string.h>

size_t fl_layout_floats(const fl_state_layout *L)
{
    return ((size_t)L->helper + (size_t)L->state_vecs + (size_t)L->scaffold) * L->nparam + L->pers.npers;
}

/* one client's block over the cap on the blocks in memory: a line naming what it holds */
static dpfl_status over_cap(const fl_state_layout *L, int cap_mb, dpfl_error *err)
{
    const double block_mb = (double)fl_layout_floats(L) * sizeof(float) / 1048576.0;
    if (block_mb <= cap_mb) return DPFL_OK;
    const int h = L->helper, o = L->keep_opt, p = L->pers.npers > 0;
    return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: one client's own state (%s%s%s%s%s) takes %.3g MiB, "
                                       "over the cap of %d MiB on the state kept in memory; use client_state = "
                                       "reset, personalization = none or a larger cap",
                     h ? "helper model" : "", h && o ? " + " : "", o ? "optimizer state" : "",
                     (h || o) && p ? " + " : "", p ? "personal parameters" : L->scaffold ? "control variates" : "",
                     block_mb, cap_mb);
}

dpfl_status fl_layout_init(fl_state_layout *L, const dpfl_config *cfg, const dpfl_model *model,
                           const dpfl_optim_config *opt, const float *global, dpfl_error *err)
{
    memset(L, 0, sizeof *L);
    L->nparam = model->nparam;
    L->keep_opt = (cfg->fl.client_state == DPFL_STATE_KEEP);
    L->helper = (cfg->fl.personalization == DPFL_PERSONAL_HELPER);
    L->alpha = (float)cfg->fl.helper_alpha;
    dpfl_status st = fl_personal_init(&L->pers, cfg, model, global, err);
    if (st) return st;
    L->scaffold = cfg->fl.scaffold;
    L->keep = L->keep_opt || L->helper || L->pers.npers || L->scaffold;
    L->state_vecs = L->keep_opt ? (opt->kind != DPFL_OPT_SGD || opt->momentum != 0.0) + (opt->kind != DPFL_OPT_SGD) : 0;
    /* a cache limit: a round needs its sampled clients' blocks together; at least one must fit */
    if (!L->keep || (st = over_cap(L, cfg->fl.client_state_max_mb, err))) return st;
    if (L->helper) {
        if (!(L->w0 = dpfl_alloc(model->nparam * sizeof(float), err))) return DPFL_ENOMEM;
        dpfl_vec_copy(L->w0, global, model->nparam); /* Algorithm 1: h_i <- w0 */
    }
    return DPFL_OK;
}

void fl_layout_free(fl_state_layout *L)
{
    fl_personal_free(&L->pers);
    dpfl_free(L->w0);
    L->w0 = NULL;
}

float *fl_layout_optimizer(const fl_state_layout *L, float *block)
{
    return block && L->state_vecs ? block + (L->helper ? L->nparam : 0) : NULL;
}

float *fl_layout_variate(const fl_state_layout *L, float *block)
{
    return L->scaffold && block ? block + fl_layout_floats(L) - L->pers.npers - L->nparam : NULL;
}

float *fl_layout_personal(const fl_state_layout *L, float *block)
{
    return L->pers.npers && block ? block + fl_layout_floats(L) - L->pers.npers : NULL;
}

void fl_layout_fresh(const fl_state_layout *L, float *block)
{
    if (L->helper) dpfl_vec_copy(block, L->w0, L->nparam); /* h(i) = w0 until its first sync */
    if (L->pers.npers) dpfl_vec_copy(fl_layout_personal(L, block), L->pers.pinit, L->pers.npers);
}
