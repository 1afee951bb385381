/* Finite-difference gradient check.  The model runs in float32, so the loss has rounding noise of ~1e-7
 * relative; central differences with a step of ~1e-3 keep that noise near 1e-4 of the gradient while the
 * O(h^2) truncation error stays smaller.  ReLU and max pooling are only piecewise smooth: a step that crosses a
 * kink (an argmax switch) gives a wrong difference for a correct gradient, so a probe that fails at 1e-3 is
 * retried at 3e-4 and 1e-4 (fewer kinks in reach, more rounding noise) and the better of the two counts.  The actual step is taken from the float values really used
 * ((float)(p + h) - p, in double), which is what "differences in double around float params" means. */
#include "layers.h"

#include <math.h>
#include <string.h>

static double loss_at(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                      int32_t B, const dpfl_rng *drop)
{
    dpfl_rng r = *drop; /* the same dropout masks at every evaluation */
    dpfl_nn_forward(m, params, ws, x, B, 1, &r);
    return dpfl_nn_run_loss(m, ws, y, 1.0f, NULL) / B;
}

/* Relative error of central differences with step ~h for parameter i. */
static double probe(const dpfl_model *m, float *p, dpfl_nn_ws *ws, const float *x, const int32_t *y, int32_t B,
                    const dpfl_rng *drop, size_t i, double h, double ana)
{
    float orig = p[i];
    h *= fmax(1.0, fabs(orig));
    p[i] = (float)(orig + h);
    double hp = (double)p[i] - orig, lp = loss_at(m, p, ws, x, y, B, drop);
    p[i] = (float)(orig - h);
    double hm = orig - (double)p[i], lm = loss_at(m, p, ws, x, y, B, drop);
    p[i] = orig;
    double num = (lp - lm) / (hp + hm);
    return fabs(num - ana) / fmax(fmax(fabs(num), fabs(ana)), 1e-3);
}

double dpfl_nn_gradcheck(const dpfl_model *m, const float *params, const float *x, const int32_t *y, int32_t B,
                         int probes, dpfl_rng *rng, dpfl_error *err)
{
    dpfl_nn_ws *ws = dpfl_nn_ws_create(m, B, err);
    float *p = dpfl_alloc(m->nparam * sizeof *p, err), *g = dpfl_alloc(m->nparam * sizeof *g, err);
    if (!ws || !p || !g) {
        dpfl_nn_ws_free(ws), dpfl_free(p), dpfl_free(g);
        return INFINITY;
    }
    memcpy(p, params, m->nparam * sizeof *p);
    dpfl_rng drop;
    dpfl_rng_derive(rng, &drop, 0x67726164u, 0, 0);
    dpfl_rng r = drop;
    dpfl_nn_grad(m, p, ws, x, y, B, &r, g, NULL);
    double worst = 0.0;
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (!L->nparam) continue;
        float gmax = 0.0f;
        for (size_t i = 0; i < L->nparam; i++) gmax = fmaxf(gmax, fabsf(g[L->param_off + i]));
        for (int t = 0; t < probes; t++) {
            /* prefer parameters whose gradient is not negligible: a zero gradient checks little */
            size_t i = L->param_off + dpfl_rng_below(rng, L->nparam);
            for (int tries = 0; tries < 20 && fabsf(g[i]) < 1e-2f * gmax; tries++)
                i = L->param_off + dpfl_rng_below(rng, L->nparam);
            double rel = INFINITY;
            for (double h = 1e-3; h > 5e-5 && rel > 1e-3; h /= 3.1623) {
                double r = probe(m, p, ws, x, y, B, &drop, i, h, g[i]);
                if (r < rel) rel = r;
            }
            if (rel > worst) worst = rel;
        }
    }
    dpfl_nn_ws_free(ws), dpfl_free(p), dpfl_free(g);
    return worst;
}
