/* DP-SGD's clipped gradient sum, book-keeping style (Bu et al. 2022):
 *   1. one forward and one backward pass computing every layer's output gradient for all examples, and along
 *      the way each example's squared gradient norm per layer:
 *        Linear  ghost norm ||d_b||^2 (||a_b||^2 + 1): no per-example gradient is formed;
 *        Conv2d  ghost norm from T x T Gram matrices when T^2 (K + OC) < T K OC, otherwise the per-example
 *                weight gradients are materialized (one small GEMM each) and kept;
 *   2. per-example (per-layer) clipping factors s_b;
 *   3. the clipped sum: Linear and ghost Conv2d as the usual weight-gradient GEMM on s_b-scaled output
 *      gradients, materialized Conv2d as sum_b s_b g_b.
 * So a linear layer costs about what its non-private backward costs. */
#include "layers.h"

#include <math.h>
#include <string.h>

/* Scale factor taking a gradient of norm `norm` to norm <= c.  Shrinking c/norm by 1e-7 and rounding down to a
 * float absorbs the rounding in the norm (ghost norms come from float GEMMs) and in the scaled sum, so that a
 * clipped example's norm stays <= c (1 + 1e-6) as the tests demand. */
static float clip_factor(double norm, double c)
{
    if (!(norm > c)) return 1.0f;
    return nextafterf((float)(c / norm * (1.0 - 1e-7)), 0.0f);
}

/* Every example's clipping factors p->scale (per layer) from the squared norms p->sq of the per-example pass;
 * norms[b] (if not NULL) = example b's gradient norm before clipping. */
static void clip_scales(dpfl_nn_persample *p, const dpfl_model *m, size_t mb, int32_t B, const dpfl_clip_spec *clip,
                        float *norms)
{
    const int nl = m->nlayers;
    for (int b = 0; b < B; b++) {
        double tot = 0.0;
        for (int l = 0; l < nl; l++) tot += p->sq[(size_t)l * mb + b];
        double norm = sqrt(tot);
        if (norms) norms[b] = (float)norm;
        for (int l = 0; l < nl; l++) {
            const dpfl_layer *L = &m->layers[l];
            if (!L->nparam) continue;
            float s;
            if (clip->per_layer) {
                double cl = clip->clip * sqrt((double)L->nparam / (double)m->nparam);
                s = clip_factor(sqrt(p->sq[(size_t)l * mb + b]), cl);
            } else {
                s = clip_factor(norm, clip->radius ? fmin(clip->clip, (double)clip->radius[b]) : clip->clip);
            }
            p->scale[(size_t)l * mb + b] = s;
        }
    }
}

/* One layer's share of the clipped sum: what its backward pass left, and where the sum goes. */
typedef struct {
    const dpfl_layer *L;
    int l, B, in_cnhw;
    const float *gout, *in; /* its output gradient (every example's) and its input */
    float *dw;              /* its slice of the sum: overwritten, or (Linear) dw = beta dw + alpha sum */
    float alpha, beta;
    float *col;             /* im2col scratch */
    dpfl_par *par;
} clip_layer;

/* dw = sum_b s_b g_b for layer c->L, s_b its clipping factors in p->scale (max_batch mb per layer) */
static void clipped_layer_sum(dpfl_nn_persample *p, size_t mb, const clip_layer *c)
{
    const dpfl_layer *L = c->L;
    const int B = c->B;
    const float *s = p->scale + (size_t)c->l * mb, *gout = c->gout;
    float *dw = c->dw;
    if (L->kind == DPFL_LAYER_LINEAR) {
        const int OC = L->out_w;
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++) p->dscaled[(size_t)b * OC + o] = s[b] * gout[(size_t)b * OC + o];
        dpfl_nn_linear_backward(NULL, dw, L->bias ? dw + (size_t)OC * L->in_w : NULL, p->dscaled, c->in, NULL, B,
                                L->in_w, OC, c->alpha, c->beta, c->par);
    } else if (p->ghost[c->l]) {
        dpfl_conv_geom g;
        dpfl_nn_conv_geom(L, B, c->in_cnhw, &g);
        const size_t T = (size_t)L->out_h * L->out_w, nw = (size_t)L->out_c * L->in_c * L->k * L->k;
        for (int oc = 0; oc < L->out_c; oc++)
            for (int b = 0; b < B; b++) {
                const float *src = gout + ((size_t)oc * B + b) * T;
                float *dst = p->dscaled + ((size_t)oc * B + b) * T;
                for (size_t t = 0; t < T; t++) dst[t] = s[b] * src[t];
            }
        dpfl_nn_conv2d_backward(NULL, dw, L->bias ? dw + nw : NULL, p->dscaled, c->in, NULL, &g, B,
                                dpfl_nn_conv_chunk(L, B), c->col, c->par);
    } else {
        const float *ps = p->ps + p->ps_off[c->l];
        dpfl_vec_zero(dw, L->nparam); /* the other branches overwrite their layer's slice */
        for (int b = 0; b < B; b++) dpfl_vec_axpy(dw, s[b], ps + (size_t)b * L->nparam, L->nparam);
    }
}

/* out = the clipped sum (beta = 0, alpha = 1), or out += alpha * the clipped sum (beta = 1; out may be params:
 * the forward and backward passes are done before the first write). */
static double clipped_sum(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                          int32_t B, const dpfl_clip_spec *clip, dpfl_rng *rng, float *out, float alpha, float beta,
                          float *norms)
{
    DPFL_ASSERT(clip->clip >= 0.0); /* callers validate configuration; NaN or negative is a bug */
    DPFL_ASSERT(!clip->radius || !clip->per_layer);
    if (B == 0) {
        if (beta == 0.0f) dpfl_vec_zero(out, m->nparam);
        return 0.0;
    }
    const int nl = m->nlayers;
    const size_t mb = (size_t)ws->max_batch;
    dpfl_nn_persample *p = &ws->pers;
    const dpfl_nn_slots *sl = &ws->slots;
    for (int l = 0; l < nl; l++)
        p->ghost[l] = m->layers[l].kind == DPFL_LAYER_CONV2D && dpfl_nn_conv_uses_ghost(p->conv_mode, &m->layers[l]);
    memset(p->sq, 0, (size_t)nl * mb * sizeof *p->sq);

    dpfl_nn_forward(m, params, ws, x, B, 1, rng);
    double loss = dpfl_nn_run_loss(m, ws, y, 1.0f, NULL);
    dpfl_nn_run_backward(m, params, ws, NULL, DPFL_BWD_PERSAMPLE);
    clip_scales(p, m, mb, B, clip, norms);

    for (int l = 0; l < nl; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (!L->nparam) continue;
        /* beta = 1: every branch but Linear's writes the layer's sum to the step buffer, added below */
        float *const dst = out + L->param_off, *dw = beta == 0.0f || L->kind == DPFL_LAYER_LINEAR ? dst : ws->step.buf;
        const clip_layer c = {.L = L, .l = l, .B = B, .in_cnhw = sl->slot_cnhw[sl->in_slot[l]],
                              .gout = sl->grad[sl->out_slot[l]], .in = sl->act[sl->in_slot[l]], .dw = dw,
                              .alpha = alpha, .beta = beta, .col = ws->col, .par = ws->par};
        clipped_layer_sum(p, mb, &c);
        if (dw != dst) dpfl_vec_axpy(dst, alpha, dw, L->nparam);
    }
    return loss / B;
}

double dpfl_nn_clipped_grad_sum(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x,
                                const int32_t *y, int32_t B, const dpfl_clip_spec *clip, dpfl_rng *rng,
                                float *grads, float *norms)
{
    return clipped_sum(m, params, ws, x, y, B, clip, rng, grads, 1.0f, 0.0f, norms);
}

double dpfl_nn_clipped_grad_sum_axpy(const dpfl_model *m, float *params, dpfl_nn_ws *ws, const float *x,
                                     const int32_t *y, int32_t B, const dpfl_clip_spec *clip, dpfl_rng *rng,
                                     float alpha, float *norms)
{
    return clipped_sum(m, params, ws, x, y, B, clip, rng, params, alpha, 1.0f, norms);
}
