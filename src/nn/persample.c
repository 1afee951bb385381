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
    for (int l = 0; l < nl; l++)
        ws->ghost[l] = m->layers[l].kind == DPFL_LAYER_CONV2D && dpfl_nn_conv_uses_ghost(ws->conv_mode, &m->layers[l]);
    memset(ws->sq, 0, (size_t)nl * mb * sizeof *ws->sq);

    dpfl_nn_run_forward(m, params, ws, x, B, 1, rng);
    double loss = dpfl_nn_run_loss(m, ws, y, 1.0f, NULL);
    dpfl_nn_run_backward(m, params, ws, NULL, DPFL_BWD_PERSAMPLE);

    for (int b = 0; b < B; b++) {
        double tot = 0.0;
        for (int l = 0; l < nl; l++) tot += ws->sq[(size_t)l * mb + b];
        double norm = sqrt(tot);
        if (norms) norms[b] = (float)norm;
        for (int l = 0; l < nl; l++) {
            const dpfl_layer *L = &m->layers[l];
            if (!L->nparam) continue;
            float s;
            if (clip->per_layer) {
                double cl = clip->clip * sqrt((double)L->nparam / (double)m->nparam);
                s = clip_factor(sqrt(ws->sq[(size_t)l * mb + b]), cl);
            } else {
                s = clip_factor(norm, clip->radius ? fmin(clip->clip, (double)clip->radius[b]) : clip->clip);
            }
            ws->scale[(size_t)l * mb + b] = s;
        }
    }

    for (int l = 0; l < nl; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (!L->nparam) continue;
        const float *s = ws->scale + (size_t)l * mb;
        const float *gout = ws->grad[ws->out_slot[l]], *in = ws->act[ws->in_slot[l]];
        /* beta = 1: every branch but Linear's writes the layer's sum to step_buf, added below */
        float *const dst = out + L->param_off, *dw = beta == 0.0f || L->kind == DPFL_LAYER_LINEAR ? dst : ws->step_buf;
        if (L->kind == DPFL_LAYER_LINEAR) {
            const int OC = L->out_w;
            for (int b = 0; b < B; b++)
                for (int o = 0; o < OC; o++) ws->dscaled[(size_t)b * OC + o] = s[b] * gout[(size_t)b * OC + o];
            dpfl_nn_linear_backward(NULL, dw, L->bias ? dw + (size_t)OC * L->in_w : NULL, ws->dscaled, in, NULL, B,
                                    L->in_w, OC, alpha, beta, ws->par);
            continue;
        } else if (ws->ghost[l]) {
            dpfl_conv_geom g;
            dpfl_nn_conv_geom(ws, l, &g);
            const size_t T = (size_t)L->out_h * L->out_w, nw = (size_t)L->out_c * L->in_c * L->k * L->k;
            for (int oc = 0; oc < L->out_c; oc++)
                for (int b = 0; b < B; b++) {
                    const float *src = gout + ((size_t)oc * B + b) * T;
                    float *dst = ws->dscaled + ((size_t)oc * B + b) * T;
                    for (size_t t = 0; t < T; t++) dst[t] = s[b] * src[t];
                }
            dpfl_nn_conv2d_backward(NULL, dw, L->bias ? dw + nw : NULL, ws->dscaled, in, NULL, &g, B,
                                    dpfl_nn_conv_chunk(L, B), ws->col, ws->par);
        } else {
            const float *ps = ws->ps + ws->ps_off[l];
            dpfl_vec_zero(dw, L->nparam); /* the other branches overwrite their layer's slice */
            for (int b = 0; b < B; b++) dpfl_vec_axpy(dw, s[b], ps + (size_t)b * L->nparam, L->nparam);
        }
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
