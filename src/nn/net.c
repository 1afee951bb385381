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

void dpfl_nn_conv_geom(const dpfl_layer *L, int B, int in_cnhw, dpfl_conv_geom *g)
{
    size_t hw = (size_t)L->in_h * L->in_w;
    g->C = L->in_c, g->H = L->in_h, g->W = L->in_w;
    g->OC = L->out_c, g->OH = L->out_h, g->OW = L->out_w;
    g->k = L->k, g->stride = L->stride, g->pad = L->pad;
    g->B = B;
    if (in_cnhw)
        g->cs = (size_t)B * hw, g->bs = hw;
    else
        g->cs = hw, g->bs = (size_t)L->in_c * hw;
}

/* ---------------------------------------------------------------- the workspace's parts: freeing */
static void slots_free(dpfl_nn_slots *s)
{
    if (s->act)
        for (int i = 1; i < s->nslots; i++) dpfl_free(s->act[i]);
    if (s->grad)
        for (int i = 1; i < s->nslots; i++) dpfl_free(s->grad[i]);
    dpfl_free(s->in_slot), dpfl_free(s->out_slot), dpfl_free(s->slot_numel), dpfl_free(s->slot_cnhw);
    dpfl_free(s->act), dpfl_free(s->grad);
}

static void kept_free(dpfl_nn_kept *k, int nl)
{
    for (int l = 0; l < nl; l++) {
        if (k->pool_idx) dpfl_free(k->pool_idx[l]);
        if (k->drop_mask) dpfl_free(k->drop_mask[l]);
        if (k->state) dpfl_free(k->state[l]);
    }
    dpfl_free(k->pool_idx), dpfl_free(k->drop_mask), dpfl_free(k->drop_on), dpfl_free(k->fuse_relu);
    dpfl_free(k->pool_relu), dpfl_free(k->state);
}

static void blocks_free(dpfl_nn_blocks *b, int nl)
{
    if (b->skip_grad)
        for (int l = 0; l < nl; l++) dpfl_free(b->skip_grad[l]);
    dpfl_free(b->skip_grad), dpfl_free(b->skip_slot), dpfl_free(b->res_end);
}

static void persample_free(dpfl_nn_persample *p)
{
    dpfl_free(p->ghost), dpfl_free(p->sq), dpfl_free(p->scale), dpfl_free(p->ps), dpfl_free(p->ps_off);
    dpfl_free(p->dscaled), dpfl_free(p->gram);
}

static void direct_free(dpfl_nn_direct *d, int nl)
{
    if (d->xpad)
        for (int l = 0; l < nl; l++) dpfl_free(d->xpad[l]);
    dpfl_free(d->xpad), dpfl_free(d->mode), dpfl_free(d->geom), dpfl_free(d->scratch), dpfl_free(d->w);
    dpfl_free(d->dw_part);
}

void dpfl_nn_ws_free(dpfl_nn_ws *ws)
{
    if (!ws) return;
    const int nl = ws->m->nlayers;
    slots_free(&ws->slots);
    kept_free(&ws->kept, nl);
    blocks_free(&ws->blocks, nl);
    persample_free(&ws->pers);
    direct_free(&ws->dir, nl);
    dpfl_free(ws->col), dpfl_free(ws->step.buf);
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

/* Room for every example's own gradient, p->ps: the kinds that keep them (GroupNorm, input transform); a Conv2d
 * only when `mode` materializes them there (dpfl_nn_conv_uses_ghost says no).  Ghost-norm convs need none, which
 * keeps a ResNet-18's workspace from holding max_batch copies of its 11 million weights. */
static dpfl_status plan_persample(dpfl_nn_persample *p, const dpfl_model *m, int32_t max_batch, dpfl_conv_norms mode,
                                  dpfl_error *err)
{
    size_t ps = 0, mb = (size_t)max_batch;
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        int keep = dpfl_nn_layer_ops(L->kind)->keeps_persample ||
                   (L->kind == DPFL_LAYER_CONV2D && !dpfl_nn_conv_uses_ghost(mode, L));
        /* a kind with parameters whose row does not keep per-example gradients would leave its parameters out of
         * every example's norm and out of the clipped sum: only Linear and Conv2d have their own paths */
        DPFL_ASSERT(!L->nparam || dpfl_nn_layer_ops(L->kind)->keeps_persample || L->kind == DPFL_LAYER_LINEAR ||
                    L->kind == DPFL_LAYER_CONV2D);
        p->ps_off[l] = ps;
        if (keep) ps += mb * L->nparam;
    }
    float *buf = dpfl_calloc(ps ? ps : 1, sizeof *buf, err);
    if (!buf) return DPFL_ENOMEM;
    dpfl_free(p->ps);
    p->ps = buf;
    p->conv_mode = mode;
    return DPFL_OK;
}

/* ---------------------------------------------------------------- the workspace's parts: tables */
/* calloc into p, unless an earlier one failed (ok = 0: the caller frees what was allocated) */
#define ALLOC(p, n) ok = ok && ((p) = dpfl_calloc((n), sizeof *(p), err)) != NULL

/* Each part's per-layer (and per-slot) tables; 0 when out of memory. */
static int slots_alloc(dpfl_nn_slots *s, int nl, dpfl_error *err)
{
    int ok = 1;
    ALLOC(s->in_slot, nl);
    ALLOC(s->out_slot, nl);
    ALLOC(s->slot_numel, nl + 1);
    ALLOC(s->slot_cnhw, nl + 1);
    ALLOC(s->act, nl + 1);
    ALLOC(s->grad, nl + 1);
    return ok;
}

static int kept_alloc(dpfl_nn_kept *k, int nl, dpfl_error *err)
{
    int ok = 1;
    ALLOC(k->pool_idx, nl);
    ALLOC(k->drop_mask, nl);
    ALLOC(k->drop_on, nl);
    ALLOC(k->fuse_relu, nl);
    ALLOC(k->pool_relu, nl);
    ALLOC(k->state, nl);
    return ok;
}

static int blocks_alloc(dpfl_nn_blocks *b, int nl, dpfl_error *err)
{
    int ok = 1;
    ALLOC(b->skip_grad, nl);
    ALLOC(b->skip_slot, nl);
    ALLOC(b->res_end, nl);
    return ok;
}

static int persample_alloc(dpfl_nn_persample *p, int nl, size_t mb, dpfl_error *err)
{
    int ok = 1;
    ALLOC(p->ghost, nl);
    ALLOC(p->ps_off, nl);
    ALLOC(p->sq, (size_t)nl * mb);
    ALLOC(p->scale, (size_t)nl * mb);
    return ok;
}

static int direct_alloc(dpfl_nn_direct *d, int nl, dpfl_error *err)
{
    int ok = 1;
    ALLOC(d->xpad, nl);
    ALLOC(d->mode, nl);
    ALLOC(d->geom, nl);
    return ok;
}

/* ---------------------------------------------------------------- the workspace's parts: each layer's buffers */
/* the largest scratch any layer needs: im2col columns, per-example scaled gradients, Gram matrices, direct-conv
 * weights, a step's parameters, direct-conv dW partials */
typedef struct {
    size_t col, dsc, gram, cdw, stepn, dwp;
} ws_scratch;

/* What layer l keeps from forward to backward (pooling indices, dropout mask, its kind's state: GroupNorm's
 * statistics), and whether a max pool does the backward of the in-place ReLU before it; 0 when out of memory. */
static int kept_layer(dpfl_nn_kept *k, const dpfl_model *m, int l, const dpfl_nn_slots *s, const dpfl_nn_blocks *bk,
                      size_t mb, dpfl_error *err)
{
    const dpfl_layer *L = &m->layers[l];
    int ok = 1;
    if (L->kind == DPFL_LAYER_MAXPOOL2D) {
        ALLOC(k->pool_idx[l], mb * numel_out(L));
        /* ReLU (in place) -> pool: the pool's backward also does the ReLU's */
        if (l > 0 && m->layers[l - 1].kind == DPFL_LAYER_RELU && s->in_slot[l - 1] == s->out_slot[l - 1] &&
            s->out_slot[l - 1] == s->in_slot[l] && bk->res_end[l] < 0)
            k->pool_relu[l] = 1;
    }
    if (L->kind == DPFL_LAYER_DROPOUT) ALLOC(k->drop_mask[l], mb * numel_out(L));
    const dpfl_layer_ops *ops = dpfl_nn_layer_ops(L->kind);
    if (ops->state_floats) ALLOC(k->state[l], mb * ops->state_floats(L));
    return ok;
}

/* A direct convolution's plan and padded input, and its share of the scratch; 0 when out of memory. */
static int direct_layer(dpfl_nn_direct *d, const dpfl_layer *L, int l, int32_t max_batch, ws_scratch *z,
                        dpfl_error *err)
{
    int ok = 1;
    if (!dpfl_nn_conv_direct_usable(L)) return ok;
    dpfl_conv_direct *g = &d->geom[l];
    dpfl_nn_conv_direct_geom(L, g);
    ALLOC(d->xpad[l], (size_t)max_batch * g->C * g->xpl);
    if (g->thread_floats > d->per) d->per = g->thread_floats;
    if (g->weight_floats > z->cdw) z->cdw = g->weight_floats;
    d->mode[l] = !dpfl_nn_conv_direct_pays(L) ? 0 : g->wino ? 2 : 1;
    const size_t parts = dpfl_nn_direct_groups(max_batch) * L->nparam;
    if (parts > z->dwp) z->dwp = parts;
    return ok;
}

/* layer L's share of the scratch every layer uses: im2col, Gram matrices, scaled gradients, a step's gradient */
static void scratch_layer(const dpfl_layer *L, int32_t max_batch, ws_scratch *z)
{
    const size_t mb = (size_t)max_batch;
    if (L->kind == DPFL_LAYER_CONV2D) {
        size_t T = (size_t)L->out_h * L->out_w, K = (size_t)L->in_c * L->k * L->k;
        size_t c = K * T * (size_t)dpfl_nn_conv_chunk(L, max_batch);
        if (c > z->col) z->col = c;
        if (2 * T * T > z->gram) z->gram = 2 * T * T;
    }
    if (L->nparam && mb * numel_out(L) > z->dsc) z->dsc = mb * numel_out(L);
    if (L->kind != DPFL_LAYER_LINEAR && L->nparam > z->stepn) z->stepn = L->nparam;
}

/* The activation slots: each layer's input and output slot (in place where the kind allows and no block needs
 * its input kept), a residual block's shortcut reading the block's input (bk: where blocks start and end). */
static int plan_slots(dpfl_nn_slots *s, dpfl_nn_blocks *bk, const dpfl_model *m, size_t mb, dpfl_error *err)
{
    const int nl = m->nlayers;
    int cur = 0, ok = 1;
    s->nslots = 1;
    s->slot_numel[0] = (size_t)m->in_dim;
    for (int l = 0; l < nl; l++) bk->res_end[l] = -1;
    for (int l = 0; l < nl; l++)
        if (m->layers[l].kind == DPFL_LAYER_ADD) bk->res_end[m->layers[l].from - 1] = l;
    int main_cur = 0; /* the block's output while its shortcut is planned */
    for (int l = 0; l < nl && ok; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (L->from && L->kind != DPFL_LAYER_ADD) { /* a shortcut's first layer reads the block's input */
            main_cur = cur;
            cur = s->in_slot[L->from - 1];
        } else if (L->kind == DPFL_LAYER_ADD) {
            bk->skip_slot[l] = L->shortcut ? cur : s->in_slot[L->from - 1];
            if (L->shortcut) cur = main_cur;
        }
        s->in_slot[l] = cur;
        /* a block's first layer keeps the block's input intact for the shortcut: never in place */
        int alias = bk->res_end[l] < 0 && ((inplace_kind(L->kind) && cur != 0) ||
                                           (L->kind == DPFL_LAYER_FLATTEN && !s->slot_cnhw[cur]));
        if (!alias) {
            int i = s->nslots++;
            s->slot_numel[i] = numel_out(L);
            const dpfl_nn_layout lay = dpfl_nn_layer_ops(L->kind)->layout;
            s->slot_cnhw[i] = lay == DPFL_NN_LAYOUT_CNHW ? 1 : lay == DPFL_NN_LAYOUT_ROWS ? 0 : s->slot_cnhw[cur];
            ALLOC(s->act[i], mb * s->slot_numel[i]);
            ALLOC(s->grad[i], mb * s->slot_numel[i]);
            cur = i;
        }
        s->out_slot[l] = cur;
        /* a projection shortcut's gradient for the block input */
        if (L->kind == DPFL_LAYER_ADD && L->shortcut)
            ALLOC(bk->skip_grad[l], mb * s->slot_numel[s->in_slot[L->from - 1]]);
    }
    return ok;
}

/* ReLUs done by their neighbours: one right after a conv or linear layer, in place on its output, is applied in
 * that layer's bias pass; the pool after an in-place ReLU does its backward (unless a Sigmoid later in place
 * overwrites the pool's output, which the fused ReLU test reads: dropout, ReLU and Tanh are sign-preserving). */
static void plan_fusions(dpfl_nn_kept *k, const dpfl_model *m, const dpfl_nn_slots *s)
{
    const int nl = m->nlayers;
    for (int l = 0; l + 1 < nl; l++)
        if ((m->layers[l].kind == DPFL_LAYER_LINEAR || m->layers[l].kind == DPFL_LAYER_CONV2D) &&
            m->layers[l + 1].kind == DPFL_LAYER_RELU && s->in_slot[l + 1] == s->out_slot[l] &&
            s->out_slot[l + 1] == s->out_slot[l])
            k->fuse_relu[l] = 1;
    for (int l = 0; l < nl; l++)
        for (int l2 = l + 1; k->pool_relu[l] && l2 < nl && s->in_slot[l2] == s->out_slot[l] &&
                             s->out_slot[l2] == s->out_slot[l];
             l2++)
            if (m->layers[l2].kind == DPFL_LAYER_SIGMOID) k->pool_relu[l] = 0;
}

/* the scratch buffers shared by the layers, each at least one element, in the parts that use them */
static int persample_scratch(dpfl_nn_persample *p, const ws_scratch *z, dpfl_error *err)
{
    int ok = 1;
    ALLOC(p->gram, z->gram ? z->gram : 1);
    ALLOC(p->dscaled, z->dsc ? z->dsc : 1);
    return ok;
}

static int direct_scratch(dpfl_nn_direct *d, const ws_scratch *z, dpfl_error *err)
{
    int ok = 1;
    ALLOC(d->dw_part, z->dwp ? z->dwp : 1);
    ALLOC(d->w, z->cdw ? z->cdw : 1);
    d->per = (d->per + 15) & ~(size_t)15; /* keep every thread's scratch 64-byte aligned */
    return ok;
}
#undef ALLOC

/* The direct convolutions' per-thread scratch for n threads (none when no layer runs them). */
static dpfl_status direct_threads(dpfl_nn_direct *d, int n, dpfl_error *err)
{
    if (!d->per || n == d->threads) return DPFL_OK;
    dpfl_free(d->scratch);
    d->threads = 0;
    if (!(d->scratch = dpfl_calloc((size_t)n * d->per, sizeof *d->scratch, err))) return DPFL_ENOMEM;
    d->threads = n;
    return DPFL_OK;
}

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
    const int nl = m->nlayers;
    const size_t mb = (size_t)max_batch;
    ws_scratch z = {0};
    int ok = slots_alloc(&ws->slots, nl, err) && kept_alloc(&ws->kept, nl, err) &&
             blocks_alloc(&ws->blocks, nl, err) && persample_alloc(&ws->pers, nl, mb, err) &&
             direct_alloc(&ws->dir, nl, err) && plan_slots(&ws->slots, &ws->blocks, m, mb, err);
    for (int l = 0; l < nl && ok; l++) {
        ok = kept_layer(&ws->kept, m, l, &ws->slots, &ws->blocks, mb, err) &&
             direct_layer(&ws->dir, &m->layers[l], l, max_batch, &z, err);
        scratch_layer(&m->layers[l], max_batch, &z);
    }
    if (!ok) goto fail;
    plan_fusions(&ws->kept, m, &ws->slots);
    if (!(ws->col = dpfl_calloc(z.col ? z.col : 1, sizeof *ws->col, err)) ||
        !(ws->step.buf = dpfl_calloc(z.stepn ? z.stepn : 1, sizeof *ws->step.buf, err)) ||
        !persample_scratch(&ws->pers, &z, err) || !direct_scratch(&ws->dir, &z, err) ||
        plan_persample(&ws->pers, m, max_batch, DPFL_CONV_NORMS_AUTO, err))
        goto fail;
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
    return direct_threads(&ws->dir, dpfl_par_size(ws->par), err);
}

dpfl_status dpfl_nn_ws_set_conv_norms(dpfl_nn_ws *ws, dpfl_conv_norms mode, dpfl_error *err)
{
    if (mode == ws->pers.conv_mode) return DPFL_OK;
    return plan_persample(&ws->pers, ws->m, ws->max_batch, mode, err);
}

void dpfl_nn_ws_set_conv_impl(dpfl_nn_ws *ws, dpfl_conv_impl impl)
{
    for (int l = 0; l < ws->m->nlayers; l++)
        ws->dir.mode[l] = !ws->dir.xpad[l] || impl == DPFL_CONV_IMPL_IM2COL                             ? 0
                        : impl == DPFL_CONV_IMPL_AUTO && !dpfl_nn_conv_direct_pays(&ws->m->layers[l]) ? 0
                        : impl == DPFL_CONV_IMPL_AUTO && ws->dir.geom[l].wino                             ? 2
                                                                                                    : 1;
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
                               .n = (size_t)B * numel_in(L), .rng = rng, .par = ws->par,
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
            .w = params + L->param_off, .n = (size_t)B * numel_in(L), .sq = p->sq + (size_t)l * ws->max_batch,
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
