/* Each client's personal parameters: slices of the parameter vector that stay with the client, never sent,
 * clipped, noised or aggregated -- PrivateFL's input transform (Yang et al. 2023), fl.personal's normalization
 * layers (FedBN, Li et al. 2021; FedGN in PrivateFL's Table 5) or personal head (PP-SGD, Bietti et al. 2022).  The
 * client keeps its values in its state block (state_layout.c); here are the slices and the copies in and out of a
 * model. */
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Marks the layers fl.personal names (norm, head, positions in model.arch: read into cfg->fl.personal with the key;
 * the input transform, layer 0 when there is one, always): mark[i] = 1.  One line naming the item when it names no
 * layer with parameters. */
static dpfl_status mark_personal(const dpfl_config *cfg, const dpfl_model *m, int shift, char *mark, dpfl_error *err)
{
    if (shift) mark[0] = 1;
    for (int32_t j = 0; j < cfg->fl.personal.n; j++) {
        const dpfl_personal_layer *it = &cfg->fl.personal.item[j];
        int found = 0;
        if (it->kind == DPFL_PERSONAL_NORM) {
            for (int32_t i = 0; i < m->nlayers; i++)
                if (m->layers[i].kind == DPFL_LAYER_GROUPNORM && m->layers[i].nparam) mark[i] = 1, found = 1;
            if (!found)
                return dpfl_fail(err, DPFL_EINVAL, "fl.personal: norm names no layer (model.arch '%s' has no "
                                                   "GroupNorm; BatchNorm is refused under DP)", cfg->model.arch);
        } else if (it->kind == DPFL_PERSONAL_HEAD) {
            for (int32_t i = m->nlayers - 1; i >= shift && !found; i--)
                if (m->layers[i].nparam) mark[i] = 1, found = 1;
        } else {
            const long i = (long)it->position + shift;
            if (i >= m->nlayers || !m->layers[i].nparam)
                return dpfl_fail(err, DPFL_EINVAL, "fl.personal: layer %ld of model.arch '%s' %s", i - shift,
                                 cfg->model.arch, i >= m->nlayers ? "does not exist" : "has no parameters");
            mark[i] = 1;
            found = 1;
        }
        DPFL_ASSERT(found);
    }
    return DPFL_OK;
}

/* The personal slices (adjacent layers' merged) and their initial values: the global model's, the transform's
 * identity. */
dpfl_status fl_personal_init(fl_personal_slices *ps, const dpfl_config *cfg, const dpfl_model *m,
                             const float *global, dpfl_error *err)
{
    memset(ps, 0, sizeof *ps);
    const int shift = m->nlayers > 0 && m->layers[0].kind == DPFL_LAYER_AFFINE;
    char *mark = calloc((size_t)m->nlayers + 1, 1);
    if (!mark) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (personal layers)");
    dpfl_status st = mark_personal(cfg, m, shift, mark, err);
    for (int32_t i = 0; !st && i < m->nlayers; i++) {
        const dpfl_layer *L = &m->layers[i];
        if (!mark[i] || !L->nparam) continue;
        DPFL_ASSERT(ps->npr == 0 || L->param_off >= ps->pr_off[ps->npr - 1] + ps->pr_len[ps->npr - 1]);
        if (ps->npr && ps->pr_off[ps->npr - 1] + ps->pr_len[ps->npr - 1] == L->param_off) {
            ps->pr_len[ps->npr - 1] += L->nparam;
        } else {
            size_t *o = realloc(ps->pr_off, (size_t)(ps->npr + 1) * sizeof *o);
            if (o) ps->pr_off = o;
            size_t *l = realloc(ps->pr_len, (size_t)(ps->npr + 1) * sizeof *l);
            if (l) ps->pr_len = l;
            if (!o || !l) st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (personal layers)");
            else ps->pr_off[ps->npr] = L->param_off, ps->pr_len[ps->npr++] = L->nparam;
        }
        if (!st) ps->npers += L->nparam;
    }
    free(mark);
    if (st) return st;
    if (ps->npers >= m->nparam && ps->npers)
        return dpfl_fail(err, DPFL_EINVAL, "fl.personal: every parameter of model.arch '%s' would be personal; "
                                           "nothing is left to federate", cfg->model.arch);
    if (!ps->npers) return DPFL_OK;
    if (!(ps->pinit = dpfl_alloc(ps->npers * sizeof(float), err))) return DPFL_ENOMEM;
    fl_personal_store(ps, global, ps->pinit);
    if (shift) dpfl_model_affine_identity(&m->layers[0], ps->pinit); /* the first slice, at offset 0 */
    return DPFL_OK;
}

void fl_personal_free(fl_personal_slices *ps)
{
    free(ps->pr_off);
    free(ps->pr_len);
    dpfl_free(ps->pinit);
    ps->pr_off = ps->pr_len = NULL;
    ps->pinit = NULL;
}

void fl_personal_load(const fl_personal_slices *ps, const float *vals, float *model)
{
    for (int32_t i = 0; i < ps->npr; i++) {
        dpfl_vec_copy(model + ps->pr_off[i], vals, ps->pr_len[i]);
        vals += ps->pr_len[i];
    }
}

void fl_personal_store(const fl_personal_slices *ps, const float *model, float *vals)
{
    for (int32_t i = 0; i < ps->npr; i++) {
        dpfl_vec_copy(vals, model + ps->pr_off[i], ps->pr_len[i]);
        vals += ps->pr_len[i];
    }
}

void fl_personal_zero(const fl_personal_slices *ps, float *v)
{
    for (int32_t i = 0; i < ps->npr; i++) dpfl_vec_zero(v + ps->pr_off[i], ps->pr_len[i]);
}

void fl_personal_reset(const fl_personal_slices *ps, float *model) { fl_personal_load(ps, ps->pinit, model); }
