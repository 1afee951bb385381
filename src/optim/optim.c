/* SGD with momentum (PyTorch convention: v = mu v + g; p -= lr v), Adam and AdamW (Kingma & Ba; Loshchilov &
 * Hutter), all on flat vectors. */
#include "dpfl/optim.h"

#include <math.h>
#include <string.h>

void dpfl_optim_defaults(dpfl_optim_config *c)
{
    memset(c, 0, sizeof *c);
    c->kind = DPFL_OPT_SGD;
    c->lr = 0.01;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->sched = DPFL_SCHED_CONSTANT;
    c->gamma = 1.0;
    c->step_size = 1;
}

dpfl_status dpfl_optim_parse_kind(const char *s, dpfl_opt_kind *out, dpfl_error *err)
{
    if (!strcmp(s, "sgd")) *out = DPFL_OPT_SGD;
    else if (!strcmp(s, "adam")) *out = DPFL_OPT_ADAM;
    else if (!strcmp(s, "adamw")) *out = DPFL_OPT_ADAMW;
    else return dpfl_fail(err, DPFL_EINVAL, "unknown optimizer '%s' (valid: sgd, adam, adamw)", s);
    return DPFL_OK;
}

dpfl_status dpfl_optim_parse_sched(const char *s, dpfl_sched_kind *out, dpfl_error *err)
{
    if (!strcmp(s, "constant")) *out = DPFL_SCHED_CONSTANT;
    else if (!strcmp(s, "step")) *out = DPFL_SCHED_STEP;
    else if (!strcmp(s, "exp")) *out = DPFL_SCHED_EXP;
    else return dpfl_fail(err, DPFL_EINVAL, "unknown schedule '%s' (valid: constant, step, exp)", s);
    return DPFL_OK;
}

double dpfl_optim_lr(const dpfl_optim_config *c, int64_t unit)
{
    switch (c->sched) {
    case DPFL_SCHED_CONSTANT: return c->lr;
    case DPFL_SCHED_STEP: return c->lr * pow(c->gamma, (double)(unit / (c->step_size > 0 ? c->step_size : 1)));
    case DPFL_SCHED_EXP: return c->lr * pow(c->gamma, (double)unit);
    }
    return c->lr;
}

dpfl_status dpfl_optim_init(dpfl_optim *o, const dpfl_optim_config *cfg, size_t n, dpfl_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    int need_m = cfg->kind != DPFL_OPT_SGD || cfg->momentum != 0.0;
    int need_v = cfg->kind != DPFL_OPT_SGD;
    if (need_m && !(o->m = dpfl_calloc(n, sizeof(float), err))) return DPFL_ENOMEM;
    if (need_v && !(o->v = dpfl_calloc(n, sizeof(float), err))) {
        dpfl_free(o->m);
        o->m = NULL;
        return DPFL_ENOMEM;
    }
    return DPFL_OK;
}

void dpfl_optim_reset(dpfl_optim *o)
{
    if (o->m) dpfl_vec_zero(o->m, o->n);
    if (o->v) dpfl_vec_zero(o->v, o->n);
    o->t = 0;
}

void dpfl_optim_free(dpfl_optim *o)
{
    dpfl_free(o->m);
    dpfl_free(o->v);
    o->m = o->v = NULL;
}

int dpfl_optim_plain_sgd(const dpfl_optim *o)
{
    return o->cfg.kind == DPFL_OPT_SGD && o->cfg.momentum == 0.0 && o->cfg.weight_decay == 0.0;
}

void dpfl_optim_count(dpfl_optim *o) { o->t++; }

void dpfl_optim_step(dpfl_optim *o, float *p, const float *g, double lr_d)
{
    const size_t n = o->n;
    const float lr = (float)lr_d, wd = (float)o->cfg.weight_decay;
    o->t++;
    if (o->cfg.kind == DPFL_OPT_SGD) {
        if (!o->m) {
            for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
        } else {
            const float mu = (float)o->cfg.momentum;
            float *m = o->m;
            if (o->t == 1) /* PyTorch: the first step initialises the buffer to the gradient */
                for (size_t i = 0; i < n; i++) m[i] = g[i] + wd * p[i];
            else
                for (size_t i = 0; i < n; i++) m[i] = mu * m[i] + g[i] + wd * p[i];
            for (size_t i = 0; i < n; i++) p[i] -= lr * m[i];
        }
        return;
    }
    const float b1 = (float)o->cfg.beta1, b2 = (float)o->cfg.beta2, eps = (float)o->cfg.eps;
    const double bc1 = 1.0 - pow(o->cfg.beta1, (double)o->t), bc2 = 1.0 - pow(o->cfg.beta2, (double)o->t);
    const float step = (float)(lr_d / bc1), rs = (float)(1.0 / sqrt(bc2));
    const int decoupled = o->cfg.kind == DPFL_OPT_ADAMW;
    float *m = o->m, *v = o->v;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (decoupled) p[i] -= lr * wd * p[i];
        else gi += wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step * m[i] / (sqrtf(v[i]) * rs + eps);
    }
}
