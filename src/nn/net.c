/* The forward/backward driver over the workspace (workspace.c) and the built-in kinds' passes.
 *
 * Each layer reads one activation slot and writes one.  Element-wise layers (ReLU, Tanh, Sigmoid, Dropout) run
 * in place, since their backward needs only their output, and a ReLU right after a Conv2d is applied inside the
 * conv's bias pass.  Every slot keeps its own gradient buffer, so after a backward pass the output gradient of
 * every layer is still there for DP-SGD's clipped sum.  No gradient is computed for the layers before the
 * first parameterised layer (in particular never for the input). */
#include "core/rng_internal.h"
#include "layers.h"

#include <math.h>
#include <string.h>

/* im2col buffer per conv chunk, in floats: big enough for GEMMs with N in the thousands, small enough to sit in
 * the L3 cache between im2col and the GEMM that consumes it. */
#define CONV_COL_FLOATS (1u << 20)

int dpfl_nn_conv_chunk(const dpfl_layer *L, int B)
{
    size_t per = (size_t)L->in_c * L->k * L->k * L->out_h * L->out_w;
    size_t c = CONV_COL_FLOATS / (per ? per : 1);
    if (c < 1) c = 1;
    if (c > (size_t)B) c = (size_t)B;
    return (int)c;
}

/* ---------------------------------------------------------------- parallel wrappers for non-GEMM layers */
#define ELEMS_PER_TASK 16384 /* also the dropout segment: masks do not depend on the thread count */

typedef struct {
    const dpfl_layer *L;
    float *out, *mask;
    const float *in, *gout, *act;
    int32_t *idx;
    int kind, relu;
    size_t n;
    uint64_t sa, sb;
} layer_job;

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* element-wise forward (gout == NULL) or backward over tasks of ELEMS_PER_TASK elements */
static void elem_job(void *ctx, int64_t lo, int64_t hi)
{
    layer_job *j = ctx;
    size_t a = (size_t)lo * ELEMS_PER_TASK, e = (size_t)hi * ELEMS_PER_TASK;
    if (e > j->n) e = j->n;
    for (size_t s = a; s < e; s += ELEMS_PER_TASK) {
        size_t n = e - s < ELEMS_PER_TASK ? e - s : ELEMS_PER_TASK;
        float *o = j->out + s;
        switch (j->kind) {
        case DPFL_LAYER_RELU:
            if (j->gout) dpfl_nn_relu_backward(o, j->gout + s, j->act + s, n);
            else dpfl_nn_relu_forward(o, j->in + s, n);
            break;
        case DPFL_LAYER_TANH:
            if (j->gout) dpfl_nn_tanh_backward(o, j->gout + s, j->act + s, n);
            else dpfl_nn_tanh_forward(o, j->in + s, n);
            break;
        case DPFL_LAYER_SIGMOID:
            if (j->gout) dpfl_nn_sigmoid_backward(o, j->gout + s, j->act + s, n);
            else dpfl_nn_sigmoid_forward(o, j->in + s, n);
            break;
        default: /* dropout */
            if (j->gout) {
                dpfl_nn_dropout_backward(o, j->gout + s, j->mask + s, n);
            } else {
                uint64_t t = s / ELEMS_PER_TASK;
                dpfl_nn_dropout_forward(o, j->mask + s, j->in + s, n, j->L->drop, splitmix64(j->sa ^ t),
                                        splitmix64(j->sb + t));
            }
        }
    }
}

/* Waking the helper threads costs tens of microseconds: small layers (MLP activations) run in the caller. */
static void run_elem(dpfl_par *par, layer_job *j)
{
    int64_t tasks = (int64_t)((j->n + ELEMS_PER_TASK - 1) / ELEMS_PER_TASK);
    dpfl_par_for(tasks >= 8 ? par : NULL, tasks, elem_job, j);
}

static void pool_job(void *ctx, int64_t lo, int64_t hi)
{
    layer_job *j = ctx;
    const dpfl_layer *L = j->L;
    size_t is = (size_t)L->in_h * L->in_w, os = (size_t)L->out_h * L->out_w;
    if (j->gout)
        dpfl_nn_maxpool_backward(j->out + lo * is, j->gout + lo * os, j->idx + lo * os, j->act ? j->act + lo * os : NULL,
                                 (size_t)(hi - lo), L->in_h, L->in_w, L->out_h, L->out_w, L->k, L->stride, L->pad);
    else
        dpfl_nn_maxpool_forward(j->out + lo * os, j->idx + lo * os, j->in + lo * is, (size_t)(hi - lo), L->in_h,
                                L->in_w, L->out_h, L->out_w, L->k, L->stride, L->pad);
}

static void avgpool_job(void *ctx, int64_t lo, int64_t hi)
{
    layer_job *j = ctx;
    const dpfl_layer *L = j->L;
    const int kh = L->k ? L->k : L->in_h, kw = L->k ? L->k : L->in_w, st = L->k ? L->stride : 1;
    size_t is = (size_t)L->in_h * L->in_w, os = (size_t)L->out_h * L->out_w;
    if (j->gout)
        dpfl_nn_avgpool_backward(j->out + lo * is, j->gout + lo * os, (size_t)(hi - lo), L->in_h, L->in_w, L->out_h,
                                 L->out_w, kh, kw, st);
    else
        dpfl_nn_avgpool_forward(j->out + lo * os, j->in + lo * is, (size_t)(hi - lo), L->in_h, L->in_w, L->out_h,
                                L->out_w, kh, kw, st);
}


/* ---------------------------------------------------------------- the built-in kinds' forward passes */
static void linear_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    const float *w = f->w;
    dpfl_nn_linear_forward(f->out, f->in, w, L->bias ? w + (size_t)L->out_w * L->in_w : NULL, f->B, L->in_w, L->out_w,
                           f->own.fuse_relu, f->par);
}

static void conv_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    const int B = f->B;
    const float *w = f->w;
    dpfl_conv_geom g;
    dpfl_nn_conv_geom(L, B, f->own.in_cnhw, &g);
    size_t nw = (size_t)L->out_c * L->in_c * L->k * L->k;
    if (f->dir->mode[f->l]) {
        dpfl_nn_conv2d_direct_forward(f->dir, f->l, &g, f->par, f->out, f->in, w, L->bias ? w + nw : NULL,
                                      f->own.fuse_relu);
        return;
    }
    dpfl_nn_conv2d_forward(f->out, f->in, w, L->bias ? w + nw : NULL, &g, B, dpfl_nn_conv_chunk(L, B), f->col,
                           f->own.fuse_relu, f->par);
}

static void maxpool_forward(const dpfl_nn_fwd *f)
{
    dpfl_par_for(f->par, (int64_t)f->B * f->L->in_c, pool_job,
                 &(layer_job){.L = f->L, .out = f->out, .in = f->in, .idx = f->own.pool_idx});
}

static void activation_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    if (!f->own.relu_fused)
        run_elem(f->par, &(layer_job){.L = L, .out = f->out, .in = f->in, .kind = L->kind, .n = f->n});
}

static void dropout_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    *f->own.drop_on = f->train && f->rng && L->drop > 0.0f;
    if (*f->own.drop_on) {
        uint64_t sa = dpfl_rng_u64(f->rng), sb = dpfl_rng_u64(f->rng);
        run_elem(f->par, &(layer_job){.L = L, .out = f->out, .in = f->in, .mask = f->own.drop_mask, .kind = L->kind,
                                      .n = f->n, .sa = sa, .sb = sb});
    } else if (f->out != f->in) {
        memcpy(f->out, f->in, f->n * sizeof *f->out);
    }
}

static void flatten_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    if (f->out != f->in && f->own.in_cnhw)
        dpfl_nn_flatten_forward(f->out, f->in, f->B, L->in_c, L->in_h * L->in_w);
    else if (f->out != f->in)
        memcpy(f->out, f->in, f->n * sizeof *f->out);
}

static void affine_forward(const dpfl_nn_fwd *f) { dpfl_nn_affine_forward(f->out, f->in, f->w, f->L, f->B); }

static void avgpool_forward(const dpfl_nn_fwd *f)
{
    dpfl_par_for(f->par, (int64_t)f->B * f->L->in_c, avgpool_job,
                 &(layer_job){.L = f->L, .out = f->out, .in = f->in});
}

static void add_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    dpfl_nn_add_forward(f->out, f->own.out_cnhw, f->in, f->own.skip, f->own.skip_cnhw, f->B, L->out_c,
                        (size_t)L->out_h * L->out_w);
}

/* ---------------------------------------------------------------- the driver */
/* Layer l's own part of the workspace (dpfl_nn_own): read from the slots, the kept state and the blocks. */
static dpfl_nn_own layer_own(const dpfl_model *m, const dpfl_nn_slots *s, const dpfl_nn_kept *k,
                             const dpfl_nn_blocks *bk, int l)
{
    const int relu = m->layers[l].kind == DPFL_LAYER_RELU;
    const int skip = m->layers[l].kind == DPFL_LAYER_ADD ? bk->skip_slot[l] : 0;
    return (dpfl_nn_own){
        .in_cnhw = s->slot_cnhw[s->in_slot[l]], .out_cnhw = s->slot_cnhw[s->out_slot[l]],
        .fuse_relu = k->fuse_relu[l], .relu_fused = relu && l > 0 && k->fuse_relu[l - 1],
        .relu_in_pool = relu && l + 1 < m->nlayers && k->pool_relu[l + 1],
        .pool_relu = k->pool_relu[l], .pool_idx = k->pool_idx[l], .drop_mask = k->drop_mask[l],
        .drop_on = &k->drop_on[l], .state = k->state[l], .skip = s->act[skip], .skip_gout = s->grad[skip],
        .skip_cnhw = s->slot_cnhw[skip],
    };
}

const float *dpfl_nn_forward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, int32_t B,
                             int train, dpfl_rng *rng)
{
    DPFL_ASSERT(B >= 0 && B <= ws->max_batch && ws->m == m);
    const dpfl_nn_slots *s = &ws->slots;
    ws->B = B;
    ws->slots.act[0] = (float *)x; /* slot 0 is only ever read */
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        const dpfl_nn_fwd f = {.L = L, .l = l, .B = B, .train = train, .out = s->act[s->out_slot[l]],
                               .in = s->act[s->in_slot[l]], .w = params + L->param_off,
                               .n = (size_t)B * dpfl_nn_numel_in(L), .rng = rng, .par = ws->par,
                               .own = layer_own(m, s, &ws->kept, &ws->blocks, l), .col = ws->col, .dir = &ws->dir};
        dpfl_nn_layer_ops(L->kind)->forward(&f);
    }
    return s->act[s->out_slot[m->nlayers - 1]];
}

double dpfl_nn_run_loss(const dpfl_model *m, dpfl_nn_ws *ws, const int32_t *y, float scale, int32_t *correct)
{
    const int i = ws->slots.out_slot[m->nlayers - 1];
    float *g = ws->slots.grad[i];
    const float *a = ws->slots.act[i];
    if (m->loss == DPFL_LOSS_MSE) return dpfl_nn_mse(g, a, y, ws->B, m->out_dim, scale, correct);
    if (m->out_dim == 1) return dpfl_nn_sigmoid_bce(g, a, y, ws->B, scale, correct);
    return dpfl_nn_softmax_ce(g, a, y, ws->B, m->out_dim, scale, correct);
}

static int first_param_layer(const dpfl_model *m)
{
    for (int l = 0; l < m->nlayers; l++)
        if (m->layers[l].nparam) return l;
    return m->nlayers;
}

/* ---------------------------------------------------------------- the built-in kinds' backward passes */
static void linear_backward(const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int B = j->B, step = j->step;
    const dpfl_bwd_mode mode = j->mode;
    float *dw = mode == DPFL_BWD_PERSAMPLE ? NULL : j->grads + L->param_off;
    if (mode == DPFL_BWD_PERSAMPLE) dpfl_nn_linear_sqnorms(j->sq, j->gout, j->in, B, L->in_w, L->out_w, L->bias);
    dpfl_nn_linear_backward(j->gin, dw, dw && L->bias ? dw + (size_t)L->out_w * L->in_w : NULL, j->gout, j->in, j->w,
                            B, L->in_w, L->out_w, step ? j->alpha : 1.0f, step ? 1.0f : 0.0f, j->par);
    /* a STEP has been applied by the GEMM */
}

static void conv_backward(const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int B = j->B, persample = j->mode == DPFL_BWD_PERSAMPLE;
    float *gin = j->gin;
    const float *gout = j->gout, *in = j->in, *w = j->w;
    double *sq = j->sq;
    dpfl_conv_geom g;
    dpfl_nn_conv_geom(L, B, j->own.in_cnhw, &g);
    int chunk = dpfl_nn_conv_chunk(L, B);
    float *dw = j->gbuf;
    size_t nw = (size_t)L->out_c * L->in_c * L->k * L->k;
    if (j->dir->mode[j->l] && !(persample && j->ghost)) {
        dpfl_nn_conv2d_direct_backward(j->dir, j->l, &g, j->par, gin, dw, gout, in, w, persample ? j->ps : NULL, sq);
        return;
    }
    if (persample) {
        if (j->ghost) dpfl_nn_conv2d_ghost_sqnorms(sq, gout, in, &g, B, L->bias, chunk, j->col, j->gram, j->par);
        else dpfl_nn_conv2d_persample(j->ps, sq, gout, in, &g, B, L->bias, chunk, j->col, j->par);
    }
    dpfl_nn_conv2d_backward(gin, dw, dw && L->bias ? dw + nw : NULL, gout, in, w, &g, B, chunk, j->col, j->par);
}

static void affine_backward(const dpfl_nn_bwd *j)
{
    if (j->mode == DPFL_BWD_PERSAMPLE) dpfl_nn_affine_persample(j->ps, j->sq, j->gout, j->in, j->L, j->B);
    dpfl_nn_affine_backward(j->gin, j->gbuf, j->gout, j->in, j->w, j->L, j->B);
}

static void maxpool_backward(const dpfl_nn_bwd *j)
{
    if (j->gin)
        dpfl_par_for(j->par, (int64_t)j->B * j->L->in_c, pool_job,
                     &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout, .idx = j->own.pool_idx,
                                  .act = j->own.pool_relu ? j->out : NULL});
}

static void activation_backward(const dpfl_nn_bwd *j)
{
    if (j->gin && !j->own.relu_in_pool)
        run_elem(j->par, &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout, .act = j->out, .kind = j->L->kind,
                                      .n = j->n});
}

static void dropout_backward(const dpfl_nn_bwd *j)
{
    if (j->gin && *j->own.drop_on)
        run_elem(j->par, &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout, .mask = j->own.drop_mask,
                                      .kind = j->L->kind, .n = j->n});
    else if (j->gin && j->gin != j->gout)
        memcpy(j->gin, j->gout, j->n * sizeof *j->gin);
}

static void flatten_backward(const dpfl_nn_bwd *j)
{
    if (j->gin && j->gin != j->gout && j->own.in_cnhw)
        dpfl_nn_flatten_backward(j->gin, j->gout, j->B, j->L->in_c, j->L->in_h * j->L->in_w);
    else if (j->gin && j->gin != j->gout)
        memcpy(j->gin, j->gout, j->n * sizeof *j->gin);
}

static void avgpool_backward(const dpfl_nn_bwd *j)
{
    if (j->gin)
        dpfl_par_for(j->par, (int64_t)j->B * j->L->in_c, avgpool_job,
                     &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout});
}

static void add_backward(const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const size_t S = (size_t)L->out_h * L->out_w;
    if (j->gin) memcpy(j->gin, j->gout, j->n * sizeof *j->gin); /* the block's output: same layout as the sum */
    if (L->shortcut) /* the shortcut's output gradient; its first layer sends its own to skip_grad */
        dpfl_nn_planes_copy(j->own.skip_gout, j->own.skip_cnhw, j->gout, j->own.out_cnhw, j->B, L->out_c, S, 0);
}

/* the first layer of a residual block: add the shortcut's gradient to the block input's */
static void backward_block_input(const dpfl_model *m, const dpfl_nn_slots *s, const dpfl_nn_blocks *bk,
                                 const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int l = j->l, B = j->B, e = bk->res_end[l];
    float *gin = j->gin;
    if (e >= 0 && gin) {
        const int bc = s->slot_cnhw[s->in_slot[l]];
        const size_t S = (size_t)L->in_h * L->in_w;
        if (m->layers[e].shortcut) dpfl_nn_planes_copy(gin, bc, bk->skip_grad[e], bc, B, L->in_c, S, 1);
        else dpfl_nn_planes_copy(gin, bc, s->grad[s->out_slot[e]], s->slot_cnhw[s->out_slot[e]], B, L->in_c, S, 1);
    }
}

void dpfl_nn_run_backward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, float *grads, dpfl_bwd_mode mode)
{
    const int B = ws->B, first = first_param_layer(m);
    const dpfl_nn_slots *s = &ws->slots;
    const dpfl_nn_persample *p = &ws->pers;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        const dpfl_layer *L = &m->layers[l];
        const int step = mode == DPFL_BWD_STEP && L->nparam;
        const dpfl_nn_bwd j = {
            .L = L, .l = l, .B = B, .mode = mode, .step = step, .alpha = ws->step.alpha, .grads = grads,
            .gin = l <= first ? NULL
                   : L->from && L->kind != DPFL_LAYER_ADD ? ws->blocks.skip_grad[ws->blocks.res_end[L->from - 1]]
                                                          : s->grad[s->in_slot[l]],
            .gbuf = step ? ws->step.buf : mode == DPFL_BWD_GRAD ? grads + L->param_off : NULL,
            .gout = s->grad[s->out_slot[l]], .in = s->act[s->in_slot[l]], .out = s->act[s->out_slot[l]],
            .w = params + L->param_off, .n = (size_t)B * dpfl_nn_numel_in(L), .sq = p->sq + (size_t)l * ws->max_batch,
            .ps = p->ps + p->ps_off[l], .ghost = p->ghost[l], .gram = p->gram, .par = ws->par,
            .own = layer_own(m, s, &ws->kept, &ws->blocks, l), .col = ws->col, .dir = &ws->dir,
        };
        dpfl_nn_layer_ops(L->kind)->backward(&j);
        backward_block_input(m, s, &ws->blocks, &j);
        if (step && L->kind != DPFL_LAYER_LINEAR)
            dpfl_vec_axpy(grads + L->param_off, ws->step.alpha, ws->step.buf, L->nparam);
    }
}


double dpfl_nn_grad(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                    int32_t B, dpfl_rng *rng, float *grads, int32_t *correct)
{
    if (correct) *correct = 0;
    if (B == 0) {
        dpfl_vec_zero(grads, m->nparam);
        return 0.0;
    }
    dpfl_nn_forward(m, params, ws, x, B, 1, rng);
    double loss = dpfl_nn_run_loss(m, ws, y, 1.0f / (float)B, correct);
    dpfl_nn_run_backward(m, params, ws, grads, DPFL_BWD_GRAD);
    return loss / B;
}

void dpfl_nn_ws_add_gaussian(dpfl_nn_ws *ws, dpfl_rng *r, float *x, size_t n, double sigma, float scale)
{
    if (ws->par) dpfl_rng_add_gaussian_par(r, x, n, sigma, scale, ws->par);
    else dpfl_rng_add_gaussian_chunked(r, x, n, sigma, scale, 1);
}

double dpfl_nn_sgd_step(const dpfl_model *m, float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                        int32_t B, float lr, dpfl_rng *rng, int32_t *correct)
{
    if (correct) *correct = 0;
    if (B == 0) return 0.0;
    dpfl_nn_forward(m, params, ws, x, B, 1, rng);
    double loss = dpfl_nn_run_loss(m, ws, y, 1.0f / (float)B, correct);
    ws->step.alpha = -lr;
    dpfl_nn_run_backward(m, params, ws, params, DPFL_BWD_STEP);
    return loss / B;
}

void dpfl_nn_evaluate(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                      int32_t n, double *mean_loss, double *accuracy)
{
    double loss = 0.0;
    int32_t correct = 0;
    for (int32_t i = 0; i < n; i += ws->max_batch) {
        int32_t B = n - i < ws->max_batch ? n - i : ws->max_batch;
        dpfl_nn_forward(m, params, ws, x + (size_t)i * m->in_dim, B, 0, NULL);
        loss += dpfl_nn_run_loss(m, ws, y + i, 1.0f, &correct);
    }
    if (mean_loss) *mean_loss = n ? loss / n : 0.0;
    if (accuracy) *accuracy = n ? (double)correct / n : 0.0;
}

/* ---------------------------------------------------------------- the built-in kinds' rows (layer_table.c) */
/* exported parameters: PyTorch's "weight" (OC, C) or (OC, C, k, k), then "bias" (OC) */
static int weight_bias_arrays(const dpfl_layer *L, dpfl_nn_param_array *a)
{
    const int conv = L->kind == DPFL_LAYER_CONV2D;
    const int64_t in = conv ? L->in_c : (int64_t)L->in_c * L->in_h * L->in_w, oc = conv ? L->out_c : L->out_w;
    const size_t nw = (size_t)oc * (size_t)in * (conv ? (size_t)L->k * L->k : 1);
    a[0] = (dpfl_nn_param_array){.name = "weight", .off = 0, .count = nw, .ndim = conv ? 4 : 2,
                                 .shape = {oc, in, L->k, L->k}};
    DPFL_ASSERT(nw + (L->bias ? (size_t)oc : 0) == L->nparam);
    if (!L->bias) return 1;
    a[1] = (dpfl_nn_param_array){.name = "bias", .off = nw, .count = (size_t)oc, .ndim = 1, .shape = {oc}};
    return 2;
}

/* the input transform's "scale" a and "shift" b, each (C,) or (C, H, W) where present */
static int affine_arrays(const dpfl_layer *L, dpfl_nn_param_array *a)
{
    const int mode[2] = {L->k, L->pad};
    const char *what[2] = {"scale", "shift"};
    size_t off = 0;
    int n = 0;
    for (int j = 0; j < 2; j++) {
        if (mode[j] == DPFL_AFFINE_NONE) continue;
        const size_t cnt = mode[j] == DPFL_AFFINE_CHANNEL ? (size_t)L->in_c : (size_t)L->in_c * L->in_h * L->in_w;
        a[n++] = (dpfl_nn_param_array){.name = what[j], .off = off, .count = cnt,
                                       .ndim = mode[j] == DPFL_AFFINE_CHANNEL ? 1 : 3,
                                       .shape = {L->in_c, L->in_h, L->in_w}};
        off += cnt;
    }
    DPFL_ASSERT(off == L->nparam);
    return n;
}

const dpfl_layer_ops dpfl_nn_linear_ops = {
    .name = "linear", .match = dpfl_nn_match_fc, .syntax = "fc<OC>[nb]",
    .parse = dpfl_nn_parse_fc, .layout = DPFL_NN_LAYOUT_ROWS,
    .forward = linear_forward, .backward = linear_backward, .arrays = weight_bias_arrays,
};
const dpfl_layer_ops dpfl_nn_conv2d_ops = {
    .name = "conv2d", .match = dpfl_nn_match_conv, .syntax = "conv<OC>[k<k>][s<s>][p<p>][nb]",
    .parse = dpfl_nn_parse_conv_pool, .layout = DPFL_NN_LAYOUT_CNHW,
    .forward = conv_forward, .backward = conv_backward, .arrays = weight_bias_arrays,
};
const dpfl_layer_ops dpfl_nn_maxpool2d_ops = {
    .name = "maxpool2d", .match = dpfl_nn_match_pool, .syntax = "pool<k>[s<s>][p<p>]", .parse = dpfl_nn_parse_conv_pool,
    .forward = maxpool_forward, .backward = maxpool_backward,
};
const dpfl_layer_ops dpfl_nn_relu_ops = {
    .name = "relu", .match = dpfl_nn_match_relu, .syntax = "relu", .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_tanh_ops = {
    .name = "tanh", .match = dpfl_nn_match_tanh, .syntax = "tanh", .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_sigmoid_ops = {
    .name = "sigmoid", .match = dpfl_nn_match_sigmoid, .syntax = "sigmoid",
    .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_flatten_ops = {
    .name = "flatten", .match = dpfl_nn_match_flatten, .syntax = "flatten", .parse = dpfl_nn_parse_flatten,
    .layout = DPFL_NN_LAYOUT_ROWS, .forward = flatten_forward, .backward = flatten_backward,
};
const dpfl_layer_ops dpfl_nn_dropout_ops = {
    .name = "dropout", .match = dpfl_nn_match_dropout, .syntax = "drop<p>",
    .parse = dpfl_nn_parse_dropout, .inplace = 1,
    .forward = dropout_forward, .backward = dropout_backward,
};
const dpfl_layer_ops dpfl_nn_affine_ops = {
    .name = "affine", .match = dpfl_nn_match_affine, .syntax = "affine[<a><b>]",
    .parse = dpfl_nn_parse_affine, .init = dpfl_nn_affine_init,
    .keeps_persample = 1, .forward = affine_forward, .backward = affine_backward, .arrays = affine_arrays,
};
const dpfl_layer_ops dpfl_nn_avgpool2d_ops = {
    .name = "avgpool2d", .match = dpfl_nn_match_avgpool, .syntax = "avgpool<k>[s<s>], gap",
    .parse = dpfl_nn_parse_avgpool,
    .forward = avgpool_forward, .backward = avgpool_backward,
};
/* a residual block's end: made by the block syntax of model.c, no token of its own */
const dpfl_layer_ops dpfl_nn_add_ops = {
    .name = "add", .forward = add_forward, .backward = add_backward,
};
