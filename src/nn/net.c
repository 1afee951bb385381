/* Workspace layout and the forward/backward driver.
 *
 * Each layer reads one activation slot and writes one.  Element-wise layers (ReLU, Tanh, Sigmoid, Dropout) run
 * in place, since their backward needs only their output, and a ReLU right after a Conv2d is applied inside the
 * conv's bias pass.  Every slot keeps its own gradient buffer, so after a backward pass the output gradient of
 * every layer is still there for DP-SGD's clipped sum.  No gradient is computed for the layers before the
 * first parameterised layer (in particular never for the input). */
#include "core/rng_internal.h"
#include "layers.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
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

static size_t numel_in(const dpfl_layer *L) { return (size_t)L->in_c * L->in_h * L->in_w; }
static size_t numel_out(const dpfl_layer *L) { return (size_t)L->out_c * L->out_h * L->out_w; }
static int inplace_kind(dpfl_layer_kind k) { return dpfl_nn_layer_ops(k)->inplace; }

void dpfl_nn_conv_geom(const dpfl_nn_ws *ws, int l, dpfl_conv_geom *g)
{
    const dpfl_layer *L = &ws->m->layers[l];
    size_t hw = (size_t)L->in_h * L->in_w;
    g->C = L->in_c, g->H = L->in_h, g->W = L->in_w;
    g->OC = L->out_c, g->OH = L->out_h, g->OW = L->out_w;
    g->k = L->k, g->stride = L->stride, g->pad = L->pad;
    if (ws->slot_cnhw[ws->in_slot[l]])
        g->cs = (size_t)ws->B * hw, g->bs = hw;
    else
        g->cs = hw, g->bs = (size_t)L->in_c * hw;
}

void dpfl_nn_ws_free(dpfl_nn_ws *ws)
{
    if (!ws) return;
    const dpfl_model *m = ws->m;
    for (int s = 1; s < ws->nslots; s++) dpfl_free(ws->act[s]), dpfl_free(ws->grad[s]);
    for (int l = 0; l < m->nlayers; l++) {
        dpfl_free(ws->pool_idx[l]), dpfl_free(ws->drop_mask[l]);
        if (ws->state) dpfl_free(ws->state[l]);
        if (ws->skip_grad) dpfl_free(ws->skip_grad[l]);
    }
    dpfl_free(ws->state), dpfl_free(ws->skip_grad), dpfl_free(ws->skip_slot), dpfl_free(ws->res_end);
    dpfl_free(ws->in_slot), dpfl_free(ws->out_slot), dpfl_free(ws->slot_numel), dpfl_free(ws->slot_cnhw);
    dpfl_free(ws->act), dpfl_free(ws->grad), dpfl_free(ws->pool_idx), dpfl_free(ws->drop_mask);
    dpfl_free(ws->drop_on), dpfl_free(ws->fuse_relu), dpfl_free(ws->pool_relu), dpfl_free(ws->col), dpfl_free(ws->ghost);
    dpfl_free(ws->sq), dpfl_free(ws->scale), dpfl_free(ws->ps), dpfl_free(ws->ps_off), dpfl_free(ws->dw_part);
    dpfl_free(ws->dscaled), dpfl_free(ws->gram), dpfl_free(ws->step_buf);
    if (ws->xpad)
        for (int l = 0; l < m->nlayers; l++) dpfl_free(ws->xpad[l]);
    dpfl_free(ws->xpad), dpfl_free(ws->direct), dpfl_free(ws->cdir), dpfl_free(ws->cdir_scratch);
    dpfl_free(ws->cdir_w);
    dpfl_par_free(ws->par);
    dpfl_free(ws);
}

/* The pool's default size is the number of threads OpenBLAS would have used (OPENBLAS_NUM_THREADS or the
 * cores), at most 16; OpenBLAS itself is then kept single-threaded (linear.c says why). */
static int initial_threads;
static void init_threads(void)
{
    int nt = openblas_get_num_threads();
    initial_threads = nt > 16 ? 16 : nt < 1 ? 1 : nt;
}

static int default_threads(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_threads);
    openblas_set_num_threads(1); /* every time: a caller may have raised it since */
    return initial_threads;
}

/* Room for every example's own gradient, ws->ps: the kinds that keep them (GroupNorm, input transform); a Conv2d
 * only when `mode` materializes them there (dpfl_nn_conv_uses_ghost says no).  Ghost-norm convs need none, which
 * keeps a ResNet-18's workspace from holding max_batch copies of its 11 million weights. */
static dpfl_status plan_persample(dpfl_nn_ws *ws, dpfl_conv_norms mode, dpfl_error *err)
{
    const dpfl_model *m = ws->m;
    size_t ps = 0, mb = (size_t)ws->max_batch;
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        int keep = dpfl_nn_layer_ops(L->kind)->keeps_persample ||
                   (L->kind == DPFL_LAYER_CONV2D && !dpfl_nn_conv_uses_ghost(mode, L));
        /* a kind with parameters whose row does not keep per-example gradients would leave its parameters out of
         * every example's norm and out of the clipped sum: only Linear and Conv2d have their own paths */
        DPFL_ASSERT(!L->nparam || dpfl_nn_layer_ops(L->kind)->keeps_persample || L->kind == DPFL_LAYER_LINEAR ||
                    L->kind == DPFL_LAYER_CONV2D);
        ws->ps_off[l] = ps;
        if (keep) ps += mb * L->nparam;
    }
    float *buf = dpfl_calloc(ps ? ps : 1, sizeof *buf, err);
    if (!buf) return DPFL_ENOMEM;
    dpfl_free(ws->ps);
    ws->ps = buf;
    ws->conv_mode = mode;
    return DPFL_OK;
}

/* calloc into p, unless an earlier one failed (ok = 0: the caller frees what was allocated) */
#define ALLOC(p, n) ok = ok && ((p) = dpfl_calloc((n), sizeof *(p), err)) != NULL

/* the per-layer and per-slot tables; 0 when out of memory */
static int ws_alloc_tables(dpfl_nn_ws *ws, int nl, size_t mb, dpfl_error *err)
{
    int ok = 1;
    ALLOC(ws->in_slot, nl);
    ALLOC(ws->out_slot, nl);
    ALLOC(ws->slot_numel, nl + 1);
    ALLOC(ws->slot_cnhw, nl + 1);
    ALLOC(ws->act, nl + 1);
    ALLOC(ws->grad, nl + 1);
    ALLOC(ws->pool_idx, nl);
    ALLOC(ws->drop_mask, nl);
    ALLOC(ws->drop_on, nl);
    ALLOC(ws->fuse_relu, nl);
    ALLOC(ws->pool_relu, nl);
    ALLOC(ws->ghost, nl);
    ALLOC(ws->ps_off, nl);
    ALLOC(ws->xpad, nl);
    ALLOC(ws->direct, nl);
    ALLOC(ws->cdir, nl);
    ALLOC(ws->state, nl);
    ALLOC(ws->skip_grad, nl);
    ALLOC(ws->skip_slot, nl);
    ALLOC(ws->res_end, nl);
    ALLOC(ws->sq, (size_t)nl * mb);
    ALLOC(ws->scale, (size_t)nl * mb);
    return ok;
}

/* the largest scratch any layer needs: im2col columns, direct-conv scaled gradients, Gram matrices, direct-conv
 * weights, a step's parameters, direct-conv dW partials */
typedef struct {
    size_t col, dsc, gram, cdw, stepn, dwp;
} ws_scratch;

/* Layer l's own buffers (pooling indices, dropout mask, its kind's state (GroupNorm's statistics), a projection shortcut's gradient, a
 * direct convolution's padded input and plan) and its share of the scratch; 0 when out of memory. */
static int ws_layer_buffers(dpfl_nn_ws *ws, int l, size_t mb, ws_scratch *z, dpfl_error *err)
{
    const dpfl_model *m = ws->m;
    const dpfl_layer *L = &m->layers[l];
    int ok = 1;
    if (L->kind == DPFL_LAYER_MAXPOOL2D) {
        ALLOC(ws->pool_idx[l], mb * numel_out(L));
        /* ReLU (in place) -> pool: the pool's backward also does the ReLU's */
        if (l > 0 && m->layers[l - 1].kind == DPFL_LAYER_RELU && ws->in_slot[l - 1] == ws->out_slot[l - 1] &&
            ws->out_slot[l - 1] == ws->in_slot[l] && ws->res_end[l] < 0)
            ws->pool_relu[l] = 1;
    }
    if (L->kind == DPFL_LAYER_DROPOUT) ALLOC(ws->drop_mask[l], mb * numel_out(L));
    const dpfl_layer_ops *ops = dpfl_nn_layer_ops(L->kind);
    if (ops->state_floats) ALLOC(ws->state[l], mb * ops->state_floats(L));
    if (L->kind == DPFL_LAYER_ADD && L->shortcut)
        ALLOC(ws->skip_grad[l], mb * ws->slot_numel[ws->in_slot[L->from - 1]]);
    if (L->kind == DPFL_LAYER_CONV2D) {
        size_t T = (size_t)L->out_h * L->out_w, K = (size_t)L->in_c * L->k * L->k;
        size_t c = K * T * (size_t)dpfl_nn_conv_chunk(L, ws->max_batch);
        if (c > z->col) z->col = c;
        if (2 * T * T > z->gram) z->gram = 2 * T * T;
        if (dpfl_nn_conv_direct_usable(L)) {
            dpfl_conv_direct *d = &ws->cdir[l];
            dpfl_nn_conv_direct_geom(L, d);
            ALLOC(ws->xpad[l], mb * d->C * d->xpl);
            if (d->thread_floats > ws->cdir_per) ws->cdir_per = d->thread_floats;
            if (d->weight_floats > z->cdw) z->cdw = d->weight_floats;
            ws->direct[l] = !dpfl_nn_conv_direct_pays(L) ? 0 : d->wino ? 2 : 1;
            const size_t parts = dpfl_nn_direct_groups(ws->max_batch) * L->nparam;
            if (parts > z->dwp) z->dwp = parts;
        }
    }
    if (L->nparam && mb * numel_out(L) > z->dsc) z->dsc = mb * numel_out(L);
    if (L->kind != DPFL_LAYER_LINEAR && L->nparam > z->stepn) z->stepn = L->nparam;
    return ok;
}

/* The activation slots: each layer's input and output slot (in place where the kind allows and no block needs
 * its input kept), a residual block's shortcut reading the block's input, and every layer's own buffers. */
static int ws_plan_slots(dpfl_nn_ws *ws, size_t mb, ws_scratch *z, dpfl_error *err)
{
    const dpfl_model *m = ws->m;
    const int nl = m->nlayers;
    int cur = 0, ok = 1;
    ws->nslots = 1;
    ws->slot_numel[0] = (size_t)m->in_dim;
    for (int l = 0; l < nl; l++) ws->res_end[l] = -1;
    for (int l = 0; l < nl; l++)
        if (m->layers[l].kind == DPFL_LAYER_ADD) ws->res_end[m->layers[l].from - 1] = l;
    int main_cur = 0; /* the block's output while its shortcut is planned */
    for (int l = 0; l < nl && ok; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (L->from && L->kind != DPFL_LAYER_ADD) { /* a shortcut's first layer reads the block's input */
            main_cur = cur;
            cur = ws->in_slot[L->from - 1];
        } else if (L->kind == DPFL_LAYER_ADD) {
            ws->skip_slot[l] = L->shortcut ? cur : ws->in_slot[L->from - 1];
            if (L->shortcut) cur = main_cur;
        }
        ws->in_slot[l] = cur;
        /* a block's first layer keeps the block's input intact for the shortcut: never in place */
        int alias = ws->res_end[l] < 0 && ((inplace_kind(L->kind) && cur != 0) ||
                                           (L->kind == DPFL_LAYER_FLATTEN && !ws->slot_cnhw[cur]));
        if (!alias) {
            int s = ws->nslots++;
            ws->slot_numel[s] = numel_out(L);
            const dpfl_nn_layout lay = dpfl_nn_layer_ops(L->kind)->layout;
            ws->slot_cnhw[s] = lay == DPFL_NN_LAYOUT_CNHW ? 1 : lay == DPFL_NN_LAYOUT_ROWS ? 0 : ws->slot_cnhw[cur];
            ALLOC(ws->act[s], mb * ws->slot_numel[s]);
            ALLOC(ws->grad[s], mb * ws->slot_numel[s]);
            cur = s;
        }
        ws->out_slot[l] = cur;
        ok = ok && ws_layer_buffers(ws, l, mb, z, err);
    }
    return ok;
}

/* ReLUs done by their neighbours: one right after a conv or linear layer, in place on its output, is applied in
 * that layer's bias pass; the pool after an in-place ReLU does its backward (unless a Sigmoid later in place
 * overwrites the pool's output, which the fused ReLU test reads: dropout, ReLU and Tanh are sign-preserving). */
static void ws_plan_fusions(dpfl_nn_ws *ws)
{
    const dpfl_model *m = ws->m;
    const int nl = m->nlayers;
    for (int l = 0; l + 1 < nl; l++)
        if ((m->layers[l].kind == DPFL_LAYER_LINEAR || m->layers[l].kind == DPFL_LAYER_CONV2D) &&
            m->layers[l + 1].kind == DPFL_LAYER_RELU && ws->in_slot[l + 1] == ws->out_slot[l] &&
            ws->out_slot[l + 1] == ws->out_slot[l])
            ws->fuse_relu[l] = 1;
    for (int l = 0; l < nl; l++)
        for (int l2 = l + 1; ws->pool_relu[l] && l2 < nl && ws->in_slot[l2] == ws->out_slot[l] &&
                             ws->out_slot[l2] == ws->out_slot[l];
             l2++)
            if (m->layers[l2].kind == DPFL_LAYER_SIGMOID) ws->pool_relu[l] = 0;
}

/* the scratch buffers shared by the layers, each at least one element */
static int ws_alloc_scratch(dpfl_nn_ws *ws, const ws_scratch *z, dpfl_error *err)
{
    int ok = 1;
    ALLOC(ws->col, z->col ? z->col : 1);
    ALLOC(ws->gram, z->gram ? z->gram : 1);
    ALLOC(ws->dw_part, z->dwp ? z->dwp : 1);
    ALLOC(ws->dscaled, z->dsc ? z->dsc : 1);
    ALLOC(ws->cdir_w, z->cdw ? z->cdw : 1);
    ALLOC(ws->step_buf, z->stepn ? z->stepn : 1);
    ws->cdir_per = (ws->cdir_per + 15) & ~(size_t)15; /* keep every thread's scratch 64-byte aligned */
    return ok;
}
#undef ALLOC

dpfl_nn_ws *dpfl_nn_ws_create(const dpfl_model *m, int32_t max_batch, dpfl_error *err)
{
    if (max_batch < 1) {
        dpfl_fail(err, DPFL_EINVAL, "workspace batch size must be >= 1 (model %s), got %d", m->spec, max_batch);
        return NULL;
    }
    dpfl_nn_ws *ws = dpfl_calloc(1, sizeof *ws, err);
    if (!ws) return NULL;
    ws->m = m;
    ws->max_batch = max_batch;
    const size_t mb = (size_t)max_batch;
    ws_scratch z = {0};
    if (!ws_alloc_tables(ws, m->nlayers, mb, err) || !ws_plan_slots(ws, mb, &z, err)) goto fail;
    ws_plan_fusions(ws);
    if (!ws_alloc_scratch(ws, &z, err) || plan_persample(ws, DPFL_CONV_NORMS_AUTO, err)) goto fail;
    if (dpfl_nn_ws_set_threads(ws, default_threads(), err)) goto fail;
    return ws;
fail:
    dpfl_nn_ws_free(ws);
    return NULL;
}

dpfl_status dpfl_nn_ws_set_threads(dpfl_nn_ws *ws, int nthreads, dpfl_error *err)
{
    if (nthreads < 1 || nthreads > 256)
        return dpfl_fail(err, DPFL_EINVAL, "nn threads must be in 1..256 (model %s), got %d", ws->m->spec, nthreads);
    dpfl_par_free(ws->par);
    ws->par = dpfl_par_create(nthreads);
    if (nthreads > 1 && !ws->par)
        return dpfl_fail(err, DPFL_ENOMEM, "could not start %d nn threads (model %s)", nthreads, ws->m->spec);
    int n = dpfl_par_size(ws->par);
    if (ws->cdir_per && n != ws->cdir_threads) {
        dpfl_free(ws->cdir_scratch);
        ws->cdir_threads = 0;
        if (!(ws->cdir_scratch = dpfl_calloc((size_t)n * ws->cdir_per, sizeof *ws->cdir_scratch, err)))
            return DPFL_ENOMEM;
        ws->cdir_threads = n;
    }
    return DPFL_OK;
}

dpfl_status dpfl_nn_ws_set_conv_norms(dpfl_nn_ws *ws, dpfl_conv_norms mode, dpfl_error *err)
{
    if (mode == ws->conv_mode) return DPFL_OK;
    return plan_persample(ws, mode, err);
}

void dpfl_nn_ws_set_conv_impl(dpfl_nn_ws *ws, dpfl_conv_impl impl)
{
    for (int l = 0; l < ws->m->nlayers; l++)
        ws->direct[l] = !ws->xpad[l] || impl == DPFL_CONV_IMPL_IM2COL                             ? 0
                        : impl == DPFL_CONV_IMPL_AUTO && !dpfl_nn_conv_direct_pays(&ws->m->layers[l]) ? 0
                        : impl == DPFL_CONV_IMPL_AUTO && ws->cdir[l].wino                             ? 2
                                                                                                    : 1;
}

/* ---------------------------------------------------------------- the built-in kinds' forward passes */
static void linear_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    const float *w = f->w;
    dpfl_nn_linear_forward(f->out, f->in, w, L->bias ? w + (size_t)L->out_w * L->in_w : NULL, f->B, L->in_w, L->out_w,
                           f->ws->fuse_relu[f->l], f->ws->par);
}

static void conv_forward(const dpfl_nn_fwd *f)
{
    dpfl_nn_ws *ws = f->ws;
    const dpfl_layer *L = f->L;
    const int l = f->l, B = f->B;
    const float *w = f->w;
    dpfl_conv_geom g;
    dpfl_nn_conv_geom(ws, l, &g);
    size_t nw = (size_t)L->out_c * L->in_c * L->k * L->k;
    if (ws->direct[l]) {
        dpfl_nn_conv2d_direct_forward(ws, l, f->out, f->in, w, L->bias ? w + nw : NULL, ws->fuse_relu[l]);
        return;
    }
    dpfl_nn_conv2d_forward(f->out, f->in, w, L->bias ? w + nw : NULL, &g, B, dpfl_nn_conv_chunk(L, B), ws->col,
                           ws->fuse_relu[l], ws->par);
}

static void maxpool_forward(const dpfl_nn_fwd *f)
{
    dpfl_par_for(f->ws->par, (int64_t)f->B * f->L->in_c, pool_job,
                 &(layer_job){.L = f->L, .out = f->out, .in = f->in, .idx = f->ws->pool_idx[f->l]});
}

static void activation_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    if (!(L->kind == DPFL_LAYER_RELU && f->l > 0 && f->ws->fuse_relu[f->l - 1]))
        run_elem(f->ws->par, &(layer_job){.L = L, .out = f->out, .in = f->in, .kind = L->kind, .n = f->n});
}

static void dropout_forward(const dpfl_nn_fwd *f)
{
    dpfl_nn_ws *ws = f->ws;
    const dpfl_layer *L = f->L;
    const int l = f->l;
    ws->drop_on[l] = f->train && f->rng && L->drop > 0.0f;
    if (ws->drop_on[l]) {
        uint64_t sa = dpfl_rng_u64(f->rng), sb = dpfl_rng_u64(f->rng);
        run_elem(ws->par, &(layer_job){.L = L, .out = f->out, .in = f->in, .mask = ws->drop_mask[l], .kind = L->kind,
                                       .n = f->n, .sa = sa, .sb = sb});
    } else if (f->out != f->in) {
        memcpy(f->out, f->in, f->n * sizeof *f->out);
    }
}

static void flatten_forward(const dpfl_nn_fwd *f)
{
    const dpfl_layer *L = f->L;
    if (f->out != f->in && f->ws->slot_cnhw[f->ws->in_slot[f->l]])
        dpfl_nn_flatten_forward(f->out, f->in, f->B, L->in_c, L->in_h * L->in_w);
    else if (f->out != f->in)
        memcpy(f->out, f->in, f->n * sizeof *f->out);
}

static void affine_forward(const dpfl_nn_fwd *f) { dpfl_nn_affine_forward(f->out, f->in, f->w, f->L, f->B); }

static void avgpool_forward(const dpfl_nn_fwd *f)
{
    dpfl_par_for(f->ws->par, (int64_t)f->B * f->L->in_c, avgpool_job,
                 &(layer_job){.L = f->L, .out = f->out, .in = f->in});
}

static void add_forward(const dpfl_nn_fwd *f)
{
    dpfl_nn_ws *ws = f->ws;
    const dpfl_layer *L = f->L;
    const int l = f->l;
    dpfl_nn_add_forward(f->out, ws->slot_cnhw[ws->out_slot[l]], f->in, ws->act[ws->skip_slot[l]],
                        ws->slot_cnhw[ws->skip_slot[l]], f->B, L->out_c, (size_t)L->out_h * L->out_w);
}

const float *dpfl_nn_run_forward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x,
                                 int32_t B, int train, dpfl_rng *rng)
{
    DPFL_ASSERT(B >= 0 && B <= ws->max_batch && ws->m == m);
    ws->B = B;
    ws->act[0] = (float *)x; /* slot 0 is only ever read */
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        const dpfl_nn_fwd f = {.ws = ws, .L = L, .l = l, .B = B, .train = train, .out = ws->act[ws->out_slot[l]],
                               .in = ws->act[ws->in_slot[l]], .w = params + L->param_off,
                               .n = (size_t)B * numel_in(L), .rng = rng};
        dpfl_nn_layer_ops(L->kind)->forward(&f);
    }
    return ws->act[ws->out_slot[m->nlayers - 1]];
}

double dpfl_nn_run_loss(const dpfl_model *m, dpfl_nn_ws *ws, const int32_t *y, float scale, int32_t *correct)
{
    int s = ws->out_slot[m->nlayers - 1];
    if (m->loss == DPFL_LOSS_MSE) return dpfl_nn_mse(ws->grad[s], ws->act[s], y, ws->B, m->out_dim, scale, correct);
    if (m->out_dim == 1) return dpfl_nn_sigmoid_bce(ws->grad[s], ws->act[s], y, ws->B, scale, correct);
    return dpfl_nn_softmax_ce(ws->grad[s], ws->act[s], y, ws->B, m->out_dim, scale, correct);
}

static int first_param_layer(const dpfl_model *m)
{
    for (int l = 0; l < m->nlayers; l++)
        if (m->layers[l].nparam) return l;
    return m->nlayers;
}

/* ---------------------------------------------------------------- the built-in kinds' backward passes */
static void linear_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int B = j->B, step = j->step;
    const dpfl_bwd_mode mode = j->mode;
    (void)m;
    float *dw = mode == DPFL_BWD_PERSAMPLE ? NULL : j->grads + L->param_off;
    if (mode == DPFL_BWD_PERSAMPLE) dpfl_nn_linear_sqnorms(j->sq, j->gout, j->in, B, L->in_w, L->out_w, L->bias);
    dpfl_nn_linear_backward(j->gin, dw, dw && L->bias ? dw + (size_t)L->out_w * L->in_w : NULL, j->gout, j->in, j->w,
                            B, L->in_w, L->out_w, step ? ws->step_alpha : 1.0f, step ? 1.0f : 0.0f, ws->par);
    /* a STEP has been applied by the GEMM */
}

static void conv_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int l = j->l, B = j->B;
    const dpfl_bwd_mode mode = j->mode;
    float *gin = j->gin;
    const float *gout = j->gout, *in = j->in, *w = j->w;
    double *sq = j->sq;
    (void)m;
    dpfl_conv_geom g;
    dpfl_nn_conv_geom(ws, l, &g);
    int chunk = dpfl_nn_conv_chunk(L, B);
    float *dw = j->gbuf;
    size_t nw = (size_t)L->out_c * L->in_c * L->k * L->k;
    if (ws->direct[l] && !(mode == DPFL_BWD_PERSAMPLE && ws->ghost[l])) {
        dpfl_nn_conv2d_direct_backward(ws, l, gin, dw, gout, in, w, mode == DPFL_BWD_PERSAMPLE, sq);
        return;
    }
    if (mode == DPFL_BWD_PERSAMPLE) {
        if (ws->ghost[l])
            dpfl_nn_conv2d_ghost_sqnorms(sq, gout, in, &g, B, L->bias, chunk, ws->col, ws->gram, ws->par);
        else
            dpfl_nn_conv2d_persample(ws->ps + ws->ps_off[l], sq, gout, in, &g, B, L->bias, chunk, ws->col, ws->par);
    }
    dpfl_nn_conv2d_backward(gin, dw, dw && L->bias ? dw + nw : NULL, gout, in, w, &g, B, chunk, ws->col, ws->par);
}

static void affine_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    (void)m;
    if (j->mode == DPFL_BWD_PERSAMPLE)
        dpfl_nn_affine_persample(ws->ps + ws->ps_off[j->l], j->sq, j->gout, j->in, j->L, j->B);
    dpfl_nn_affine_backward(j->gin, j->gbuf, j->gout, j->in, j->w, j->L, j->B);
}

static void maxpool_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    (void)m;
    if (j->gin)
        dpfl_par_for(ws->par, (int64_t)j->B * j->L->in_c, pool_job,
                     &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout, .idx = ws->pool_idx[j->l],
                                  .act = ws->pool_relu[j->l] ? j->out : NULL});
}

static void activation_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int l = j->l;
    if (j->gin && !(L->kind == DPFL_LAYER_RELU && l + 1 < m->nlayers && ws->pool_relu[l + 1]))
        run_elem(ws->par, &(layer_job){.L = L, .out = j->gin, .gout = j->gout, .act = j->out, .kind = L->kind,
                                       .n = j->n});
}

static void dropout_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    (void)m;
    if (j->gin && ws->drop_on[j->l])
        run_elem(ws->par, &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout, .mask = ws->drop_mask[j->l],
                                       .kind = j->L->kind, .n = j->n});
    else if (j->gin && j->gin != j->gout)
        memcpy(j->gin, j->gout, j->n * sizeof *j->gin);
}

static void flatten_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    (void)m;
    if (j->gin && j->gin != j->gout && ws->slot_cnhw[ws->in_slot[j->l]])
        dpfl_nn_flatten_backward(j->gin, j->gout, j->B, j->L->in_c, j->L->in_h * j->L->in_w);
    else if (j->gin && j->gin != j->gout)
        memcpy(j->gin, j->gout, j->n * sizeof *j->gin);
}

static void avgpool_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    (void)m;
    if (j->gin)
        dpfl_par_for(ws->par, (int64_t)j->B * j->L->in_c, avgpool_job,
                     &(layer_job){.L = j->L, .out = j->gin, .gout = j->gout});
}

static void add_backward(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int l = j->l;
    const size_t S = (size_t)L->out_h * L->out_w;
    const int oc = ws->slot_cnhw[ws->out_slot[l]];
    (void)m;
    if (j->gin) memcpy(j->gin, j->gout, j->n * sizeof *j->gin); /* the block's output: same layout as the sum */
    if (L->shortcut) /* the shortcut's output gradient; its first layer sends its own to skip_grad */
        dpfl_nn_planes_copy(ws->grad[ws->skip_slot[l]], ws->slot_cnhw[ws->skip_slot[l]], j->gout, oc, j->B, L->out_c,
                            S, 0);
}

/* the first layer of a residual block: add the shortcut's gradient to the block input's */
static void backward_block_input(const dpfl_model *m, dpfl_nn_ws *ws, const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int l = j->l, B = j->B;
    float *gin = j->gin;
    if (ws->res_end[l] >= 0 && gin) {
        const dpfl_layer *A = &m->layers[ws->res_end[l]];
        const int bc = ws->slot_cnhw[ws->in_slot[l]];
        if (A->shortcut)
            dpfl_nn_planes_copy(gin, bc, ws->skip_grad[ws->res_end[l]], bc, B, L->in_c,
                                (size_t)L->in_h * L->in_w, 1);
        else
            dpfl_nn_planes_copy(gin, bc, ws->grad[ws->out_slot[ws->res_end[l]]], ws->slot_cnhw[ws->out_slot[ws->res_end[l]]],
                                B, L->in_c, (size_t)L->in_h * L->in_w, 1);
    }
}

void dpfl_nn_run_backward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, float *grads, dpfl_bwd_mode mode)
{
    const int B = ws->B, first = first_param_layer(m);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        const dpfl_layer *L = &m->layers[l];
        const int step = mode == DPFL_BWD_STEP && L->nparam;
        const dpfl_nn_bwd j = {
            .L = L, .l = l, .B = B, .mode = mode, .step = step, .grads = grads,
            .gin = l <= first ? NULL
                   : L->from && L->kind != DPFL_LAYER_ADD ? ws->skip_grad[ws->res_end[L->from - 1]]
                                                          : ws->grad[ws->in_slot[l]],
            .gbuf = step ? ws->step_buf : mode == DPFL_BWD_GRAD ? grads + L->param_off : NULL,
            .gout = ws->grad[ws->out_slot[l]], .in = ws->act[ws->in_slot[l]], .out = ws->act[ws->out_slot[l]],
            .w = params + L->param_off, .n = (size_t)B * numel_in(L), .sq = ws->sq + (size_t)l * ws->max_batch,
        };
        dpfl_nn_layer_ops(L->kind)->backward(m, ws, &j);
        backward_block_input(m, ws, &j);
        if (step && L->kind != DPFL_LAYER_LINEAR)
            dpfl_vec_axpy(grads + L->param_off, ws->step_alpha, ws->step_buf, L->nparam);
    }
}

const float *dpfl_nn_forward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, int32_t B,
                             int train, dpfl_rng *rng)
{
    return dpfl_nn_run_forward(m, params, ws, x, B, train, rng);
}

double dpfl_nn_grad(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                    int32_t B, dpfl_rng *rng, float *grads, int32_t *correct)
{
    if (correct) *correct = 0;
    if (B == 0) {
        dpfl_vec_zero(grads, m->nparam);
        return 0.0;
    }
    dpfl_nn_run_forward(m, params, ws, x, B, 1, rng);
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
    dpfl_nn_run_forward(m, params, ws, x, B, 1, rng);
    double loss = dpfl_nn_run_loss(m, ws, y, 1.0f / (float)B, correct);
    ws->step_alpha = -lr;
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
        dpfl_nn_run_forward(m, params, ws, x + (size_t)i * m->in_dim, B, 0, NULL);
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
    .name = "linear", .match = dpfl_nn_match_fc, .parse = dpfl_nn_parse_fc, .layout = DPFL_NN_LAYOUT_ROWS,
    .forward = linear_forward, .backward = linear_backward, .arrays = weight_bias_arrays,
};
const dpfl_layer_ops dpfl_nn_conv2d_ops = {
    .name = "conv2d", .match = dpfl_nn_match_conv, .parse = dpfl_nn_parse_conv_pool, .layout = DPFL_NN_LAYOUT_CNHW,
    .forward = conv_forward, .backward = conv_backward, .arrays = weight_bias_arrays,
};
const dpfl_layer_ops dpfl_nn_maxpool2d_ops = {
    .name = "maxpool2d", .match = dpfl_nn_match_pool, .parse = dpfl_nn_parse_conv_pool,
    .forward = maxpool_forward, .backward = maxpool_backward,
};
const dpfl_layer_ops dpfl_nn_relu_ops = {
    .name = "relu", .match = dpfl_nn_match_relu, .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_tanh_ops = {
    .name = "tanh", .match = dpfl_nn_match_tanh, .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_sigmoid_ops = {
    .name = "sigmoid", .match = dpfl_nn_match_sigmoid, .parse = dpfl_nn_parse_activation, .inplace = 1,
    .forward = activation_forward, .backward = activation_backward,
};
const dpfl_layer_ops dpfl_nn_flatten_ops = {
    .name = "flatten", .match = dpfl_nn_match_flatten, .parse = dpfl_nn_parse_flatten,
    .layout = DPFL_NN_LAYOUT_ROWS, .forward = flatten_forward, .backward = flatten_backward,
};
const dpfl_layer_ops dpfl_nn_dropout_ops = {
    .name = "dropout", .match = dpfl_nn_match_dropout, .parse = dpfl_nn_parse_dropout, .inplace = 1,
    .forward = dropout_forward, .backward = dropout_backward,
};
const dpfl_layer_ops dpfl_nn_affine_ops = {
    .name = "affine", .match = dpfl_nn_match_affine, .parse = dpfl_nn_parse_affine, .init = dpfl_nn_affine_init,
    .keeps_persample = 1, .forward = affine_forward, .backward = affine_backward, .arrays = affine_arrays,
};
const dpfl_layer_ops dpfl_nn_avgpool2d_ops = {
    .name = "avgpool2d", .match = dpfl_nn_match_avgpool, .parse = dpfl_nn_parse_avgpool,
    .forward = avgpool_forward, .backward = avgpool_backward,
};
/* a residual block's end: made by the block syntax of model.c, no token of its own */
const dpfl_layer_ops dpfl_nn_add_ops = {
    .name = "add", .forward = add_forward, .backward = add_backward,
};
