/* The nn workspace (layers.h, "workspace and driver"): its parts by concern -- the activation slots and their
 * layout, what layers keep from forward to backward, residual-block bookkeeping, the per-example (DP-SGD) state,
 * the direct convolution's plan and scratch, the fused step's buffer -- planned and allocated for a model and a
 * largest batch, and freed; the thread pool and the choice of convolution kernels.  The passes that use it are
 * net.c's. */
#include "layers.h"

#include <cblas.h>
#include <pthread.h>


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
        ALLOC(k->pool_idx[l], mb * dpfl_nn_numel_out(L));
        /* ReLU (in place) -> pool: the pool's backward also does the ReLU's */
        if (l > 0 && m->layers[l - 1].kind == DPFL_LAYER_RELU && s->in_slot[l - 1] == s->out_slot[l - 1] &&
            s->out_slot[l - 1] == s->in_slot[l] && bk->res_end[l] < 0)
            k->pool_relu[l] = 1;
    }
    if (L->kind == DPFL_LAYER_DROPOUT) ALLOC(k->drop_mask[l], mb * dpfl_nn_numel_out(L));
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
    if (L->nparam && mb * dpfl_nn_numel_out(L) > z->dsc) z->dsc = mb * dpfl_nn_numel_out(L);
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
        int alias = bk->res_end[l] < 0 && ((dpfl_nn_layer_ops(L->kind)->inplace && cur != 0) ||
                                           (L->kind == DPFL_LAYER_FLATTEN && !s->slot_cnhw[cur]));
        if (!alias) {
            int i = s->nslots++;
            s->slot_numel[i] = dpfl_nn_numel_out(L);
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
