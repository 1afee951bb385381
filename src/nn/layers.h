/* Internal to the nn module: layer kernels on raw float buffers, the workspace, and the forward/backward
 * driver shared by dpfl_nn_grad, dpfl_nn_clipped_grad_sum and dpfl_nn_evaluate.
 *
 * Activation layouts.  A batch of per-example (C, H, W) tensors is stored either
 *   ROWS: (B, C, H, W)  -- what callers pass in and what Linear layers read and write, or
 *   CNHW: (C, B, H, W)  -- what Conv2d writes, so that one GEMM over the whole batch produces it directly
 *                          (out (OC, B*T) = W (OC, K) @ col (K, B*T)) with no transposition.
 * Both are sequences of B*C contiguous H*W planes, so pooling and element-wise layers do not care which one
 * they get; only Conv2d (reads either, via channel/batch strides) and Flatten (CNHW -> ROWS) do. */
#ifndef DPFL_NN_LAYERS_H
#define DPFL_NN_LAYERS_H

#include "core/cpu.h"
#include "dpfl/nn.h"
#include "core/parallel.h"

#include <stddef.h>
#include <stdint.h>

/* Sum of squares accumulated in double, in 8 independent lanes so the compiler can vectorize it without
 * reassociation flags. */
static inline double dpfl_nn_sumsq(const float *a, size_t n)
{
    double acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)a[i + j] * a[i + j];
    double s = 0.0;
    for (; i < n; i++) s += (double)a[i] * a[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

/* ---------------------------------------------------------------- linear.c */
/* out (B, OC) = inp (B, C) @ w^T + bias [then ReLU];  w (OC, C), bias (OC) or NULL */
void dpfl_nn_linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int C, int OC,
                            int relu, dpfl_par *par);
/* dinp (B, C) = dout (B, OC) @ w             (skipped when dinp == NULL; computed first, from w on entry)
 * dw (OC, C) = dout^T @ inp, dbias (OC) = column sums of dout (beta = 0, alpha = 1: overwritten), or
 * dw += alpha dout^T @ inp, dbias += alpha column sums (beta = 1: dw may be w, an SGD step); skipped when
 * dw == NULL */
void dpfl_nn_linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, int B, int C, int OC, float alpha, float beta, dpfl_par *par);
/* Ghost norms: sq[b] += ||dout_b||^2 * (||inp_b||^2 + bias), the squared norm of example b's own gradient
 * (outer product dout_b inp_b^T, plus dout_b for the bias).  inp (B, C), dout (B, OC). */
void dpfl_nn_linear_sqnorms(double *sq, const float *dout, const float *inp, int B, int C, int OC, int bias);

/* ---------------------------------------------------------------- gemm.c */
/* C (M, N) = alpha op(A) op(B) + beta C, row-major (op = transpose where trans_a / trans_b), then + bias (N) per
 * column and max(0, .) if relu (both only with trans_b); not both transposed.  On the pool's threads when it is
 * worth it; dpfl's AVX-512 kernels where dpfl_cpu_avx512(), OpenBLAS otherwise; the result does not depend on the
 * number of threads.  C is not read when beta = 0. */
DPFL_HIDDEN void dpfl_nn_gemm(dpfl_par *par, int trans_a, int trans_b, int M, int N, int K, float alpha,
                              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                              const float *bias, int relu);

/* ---------------------------------------------------------------- gemm_avx512.c (AVX-512) */
/* Row-major SGEMMs for the Linear layers, single-threaded; only when dpfl_cpu_avx512().  C (M, N) =
 *   nt: alpha A (M, K) B^T + beta C, B (N, K), then + bias (N) if not NULL, then max(0, .) if relu
 *   nn: alpha A (M, K) B (K, N) + beta C
 *   tn: alpha A^T B + beta C, A (K, M), B (K, N)
 * C is not read when beta = 0.  Each element's sum is one fixed sequence of operations (see the file). */
DPFL_HIDDEN void dpfl_nn_sgemm_nt_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                                         float beta, float *C, int ldc, const float *bias, int relu);
DPFL_HIDDEN void dpfl_nn_sgemm_nn_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                                         float beta, float *C, int ldc);
DPFL_HIDDEN void dpfl_nn_sgemm_tn_avx512(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                                         float beta, float *C, int ldc);

/* ---------------------------------------------------------------- conv2d.c */
/* Geometry of a Conv2d over a batch; inp element (c, b, y, x) lives at inp[c*cs + b*bs + y*in_w + x]. */
typedef struct {
    int C, H, W, OC, OH, OW, k, stride, pad;
    int B;         /* the batch the strides are for */
    size_t cs, bs; /* input channel and batch strides (ROWS: H*W and C*H*W; CNHW: B*H*W and H*W) */
} dpfl_conv_geom;
/* Largest scratch (floats) the kernels below need for a chunk of nb examples: K x (nb*T), K = C*k*k. */
size_t dpfl_nn_conv2d_scratch(const dpfl_conv_geom *g, int nb);
/* out CNHW (OC, B, OH*OW) = conv(inp) + bias, chunked over examples (col: scratch for `chunk` examples);
 * relu != 0 applies max(0, .) in the same pass. */
void dpfl_nn_conv2d_forward(float *out, const float *inp, const float *w, const float *bias,
                            const dpfl_conv_geom *g, int B, int chunk, float *col, int relu, dpfl_par *par);
/* Given dout CNHW (OC, B, T):
 *   dw (OC, K), dbias (OC): batch sums, overwritten (skipped when dw == NULL);
 *   dinp (same strides as inp): input gradient, overwritten (skipped when dinp == NULL). */
void dpfl_nn_conv2d_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                             const float *w, const dpfl_conv_geom *g, int B, int chunk, float *col, dpfl_par *par);
/* Per-example weight gradients, materialized: ps (B, OC*K [+ OC]) and sq[b] += their squared norms. */
void dpfl_nn_conv2d_persample(float *ps, double *sq, const float *dout, const float *inp, const dpfl_conv_geom *g,
                              int B, int bias, int chunk, float *col, dpfl_par *par);
/* Ghost norms without per-example gradients: sq[b] += <A_b A_b^T, D_b D_b^T> (+ ||bias grad_b||^2), where A_b
 * (T, K) is example b's im2col matrix and D_b (T, OC) its output gradient.  gram: 2*T*T floats of scratch. */
void dpfl_nn_conv2d_ghost_sqnorms(double *sq, const float *dout, const float *inp, const dpfl_conv_geom *g, int B,
                                  int bias, int chunk, float *col, float *gram, dpfl_par *par);

/* ---------------------------------------------------------------- conv_direct.c (stride 1, AVX-512 or AVX2) */
/* Compiled with AVX-512 flags (functions ending in _avx512, like conv_winograd.c below) and, as
 * conv_direct_avx2.c, with AVX2 + FMA flags (_avx2): called only for the layers of a workspace made when
 * dpfl_nn_conv_direct_usable() said yes, through the dispatchers below; not exported from libdpfl.so. */
/* Geometry of a direct convolution: padded input planes (C, xpl) of width Wp, output positions y*Wp + x. */
typedef struct {
    int C, OC, Cp, OCp, k, pad, H, W, OH, OW, Hp, Wp, Hz, Wz;
    int pf, pz;                   /* forward / input-gradient positions, rounded up to 16 */
    size_t xpl, zpl;              /* plane strides of the padded input and of the zero-padded output gradient */
    size_t thread_floats;         /* scratch per thread */
    size_t weight_floats;         /* scratch for padded, flipped or transformed weights */
    int bias;                     /* the layer has a bias */
    size_t np;                    /* the layer's parameters: OC*C*k*k weights, then OC biases where bias */
    int wino;                     /* 3x3: the layer can use the Winograd kernels (conv_winograd.c) */
    int isa;                      /* the kernels: 1 AVX-512, 2 AVX2 (chosen by dpfl_nn_conv_direct_geom) */
} dpfl_conv_direct;
/* The workspace's direct-convolution part (defined with the workspace below). */
typedef struct dpfl_nn_direct dpfl_nn_direct;
/* Direct convs sum a batch's weight gradient in fixed groups of DPFL_NN_DW_GROUP examples, then over the groups
 * in order (the same bits on any number of threads): partial sums for this many groups. */
#define DPFL_NN_DW_GROUP 4
static inline size_t dpfl_nn_direct_groups(int B) { return (size_t)(B + DPFL_NN_DW_GROUP - 1) / DPFL_NN_DW_GROUP; }
/* Whether a Conv2d gets its per-example norms as ghost norms (T x T Gram matrices, no per-example gradient) rather
 * than from materialized per-example gradients: forced by the mode, or under AUTO when T^2 (K + OC) < T K OC. */
static inline int dpfl_nn_conv_uses_ghost(dpfl_conv_norms mode, const dpfl_layer *L)
{
    if (mode == DPFL_CONV_NORMS_GHOST) return 1;
    if (mode == DPFL_CONV_NORMS_MATERIALIZE) return 0;
    double T = (double)L->out_h * L->out_w, K = (double)L->in_c * L->k * L->k, OC = L->out_c;
    return T * T * (K + OC) < T * K * OC;
}
/* 1 when this CPU runs the direct kernels (dpfl_cpu_avx512() or dpfl_cpu_avx2(): compiled in, the CPU has the
 * instructions and the portable code is not forced) and layer L can use them (Conv2d with stride 1).  Asked once,
 * when a workspace is made. */
static inline int dpfl_nn_conv_direct_usable(const dpfl_layer *L)
{
    return L->kind == DPFL_LAYER_CONV2D && L->stride == 1 && (dpfl_cpu_avx512() || dpfl_cpu_avx2());
}
/* Whether AUTO runs a usable layer on the direct kernels: only when its output plane has at least 64 positions
 * (8 x 8).  Below that, per-example direct kernels lose to one im2col GEMM over the whole batch, by 2x (4 x 4,
 * 128-256 channels) to 30x (1 x 1, 512 channels: ResNet-18's last stage) on this project's AVX-512 machine. */
/* A layer's input and output floats per example. */
static inline size_t dpfl_nn_numel_in(const dpfl_layer *L) { return (size_t)L->in_c * L->in_h * L->in_w; }
static inline size_t dpfl_nn_numel_out(const dpfl_layer *L) { return (size_t)L->out_c * L->out_h * L->out_w; }
static inline int dpfl_nn_conv_direct_pays(const dpfl_layer *L) { return L->out_h * L->out_w >= 64; }
DPFL_HIDDEN void dpfl_nn_conv_direct_geom_avx512(const dpfl_layer *L, dpfl_conv_direct *d);
DPFL_HIDDEN void dpfl_nn_conv_direct_geom_avx2(const dpfl_layer *L, dpfl_conv_direct *d);
/* The geometry of usable layer L, for the AVX-512 kernels where the CPU has them, else the AVX2 ones (d->isa). */
static inline void dpfl_nn_conv_direct_geom(const dpfl_layer *L, dpfl_conv_direct *d)
{
    if (dpfl_cpu_avx512()) dpfl_nn_conv_direct_geom_avx512(L, d);
    else dpfl_nn_conv_direct_geom_avx2(L, d);
}
/* The direct kernels run layer l of dc (its plan dc->geom[l], its mode dc->mode[l]) on the batch of geometry g, on
 * the threads of par (dc's scratch is sized for them). */
/* out CNHW (OC, B, T) = conv(inp) + bias [ReLU]; the direct kernels keep the padded input in dc->xpad[l] for the
 * backward pass (Winograd reads inp again). */
DPFL_HIDDEN void dpfl_nn_conv2d_direct_forward_avx512(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                                      dpfl_par *par, float *out, const float *inp, const float *w,
                                                      const float *bias, int relu);
DPFL_HIDDEN void dpfl_nn_conv2d_direct_forward_avx2(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                                    dpfl_par *par, float *out, const float *inp, const float *w,
                                                    const float *bias, int relu);
/* the variant its plan chose (src/nn/conv2d.c) */
DPFL_HIDDEN void dpfl_nn_conv2d_direct_forward(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g, dpfl_par *par,
                                               float *out, const float *inp, const float *w, const float *bias,
                                               int relu);
/* After a direct forward of layer l, given dout CNHW (OC, B, T) and the forward's input inp:
 *   dinp (layer input strides): input gradient, overwritten (skipped when NULL);
 *   ps == NULL: dw (OC*K weights then OC bias), the batch gradient, overwritten (skipped when NULL);
 *   ps != NULL: every example's gradient into ps (B, np), sq[b] += its squared norm. */
DPFL_HIDDEN void dpfl_nn_conv2d_direct_backward_avx512(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                                       dpfl_par *par, float *dinp, float *dw, const float *dout,
                                                       const float *inp, const float *w, float *ps, double *sq);
DPFL_HIDDEN void dpfl_nn_conv2d_direct_backward_avx2(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                                     dpfl_par *par, float *dinp, float *dw, const float *dout,
                                                     const float *inp, const float *w, float *ps, double *sq);
DPFL_HIDDEN void dpfl_nn_conv2d_direct_backward(const dpfl_nn_direct *dc, int l, const dpfl_conv_geom *g,
                                                dpfl_par *par, float *dinp, float *dw, const float *dout,
                                                const float *inp, const float *w, float *ps, double *sq);

/* t[o][p] (o < 4 nrow4, row stride np, p < np, np a multiple of 16) = sum over c < C, ki, kj < k of
 * w[o * wo + c k^2 + ki k + kj] x[c * xpl + p + ki Wi + kj]: the direct kernels' register-tiled loop, also the
 * Winograd GEMMs (k = 1). */
DPFL_HIDDEN void dpfl_nn_direct_rows(float *t, int np, const float *x, size_t xpl, int C, int k, int Wi,
                                     const float *w, size_t wo, int nrow4);

/* ---------------------------------------------------------------- conv_winograd.c (3x3, stride 1, AVX-512) */
/* 1 when this build has the Winograd kernels and they pay for direct layer d (3x3, 8 or more channels each way) */
DPFL_HIDDEN int dpfl_nn_wino_usable(const dpfl_conv_direct *d);
/* U (16, Op, C): transformed weights of w (O, C, 3, 3), rows O..Op-1 zero */
DPFL_HIDDEN void dpfl_nn_wino_weights(float *U, const float *w, int O, int Op, int C);
/* An input of the Winograd kernels, read in place: plane c, row r, column x at p[c * cs + r * rs + x] for
 * r < H, x < W, placed at row oy and column ox of an unbounded zero plane (oy = ox = pad for a forward pass). */
typedef struct {
    const float *p;
    size_t cs;
    int rs, H, W, oy, ox;
} dpfl_wino_in;
/* Where the outputs go: channel o, row y, column x at p[o * cs + y * rs + x], plus bias[o] (if not NULL), then
 * max(0, .) if relu. */
typedef struct {
    float *p;
    size_t cs;
    int rs;
    const float *bias;
    int relu;
} dpfl_wino_out;
/* out (O channels, OH x OW) = the 3x3 correlation of the C planes of in with the weights transformed into U (Op
 * rows).  scratch: dpfl_nn_wino_conv_floats(C, Op, OH, OW). */
DPFL_HIDDEN size_t dpfl_nn_wino_conv_floats(int C, int Op, int OH, int OW);
DPFL_HIDDEN void dpfl_nn_wino_conv(const dpfl_wino_out *out, int OH, int OW, const dpfl_wino_in *in, int C,
                                   const float *U, int Op, int O, float *scratch);
/* One example's weight gradient dst (OC, C, 3, 3) = (add ? dst + : ) sum over outputs y < OH, x < OW of
 * dy[o * dcs + y * drs + x] times the 3x3 window at (y, x) of the C planes of in.
 * scratch: dpfl_nn_wino_dw_floats(C, OCp, OH, OW). */
DPFL_HIDDEN size_t dpfl_nn_wino_dw_floats(int C, int OCp, int OH, int OW);
DPFL_HIDDEN void dpfl_nn_wino_dw(float *dst, int add, const float *dy, size_t dcs, int drs, int OH, int OW,
                                 const dpfl_wino_in *in, int C, int OC, int OCp, float *scratch);

/* ---------------------------------------------------------------- pool.c */
/* Max pooling over P = B*C planes: inp (P, H, W) -> out (P, OH, OW); idx (P*OH*OW) records the argmax offset
 * within each input plane for the backward pass.  pad (<= k/2): -infinity padding on every side. */
void dpfl_nn_maxpool_forward(float *out, int32_t *idx, const float *inp, size_t P, int H, int W, int OH, int OW,
                             int k, int stride, int pad);
/* dinp (P, H, W) = scatter of dout (P, OH, OW) to the argmax positions (overwritten), times [out > 0] when the
 * pool's output out (P, OH, OW) is given (fused backward of a ReLU feeding the pool). */
void dpfl_nn_maxpool_backward(float *dinp, const float *dout, const int32_t *idx, const float *out, size_t P, int H,
                              int W, int OH, int OW, int k, int stride, int pad);

/* Average pooling (P planes): out (P, OH, OW) = means of kh x kw windows at `stride`; backward spreads dout
 * evenly over each window (dinp overwritten). */
void dpfl_nn_avgpool_forward(float *out, const float *inp, size_t P, int H, int W, int OH, int OW, int kh, int kw,
                             int stride);
void dpfl_nn_avgpool_backward(float *dinp, const float *dout, size_t P, int H, int W, int OH, int OW, int kh, int kw,
                              int stride);

/* ---------------------------------------------------------------- groupnorm.c */
/* GroupNorm on B examples of C channels of S values; element (b, c, s) at (cnhw ? (c B + b) : (b C + c)) S + s.
 * Work items t in [lo, hi) are (example b, group g) = (t / G, t % G), independent of each other.
 * forward: out = normalized inp * gamma + beta, w = gamma (C) then beta (C); stats (B G, 2) = mean, 1/std.
 * backward: ps (B, 2C) = every example's (dgamma, dbeta), overwritten for the items' channels; dinp (skipped when
 * NULL) = input gradient. */
void dpfl_nn_groupnorm_forward(float *out, float *stats, const float *inp, const float *w, int B, int C, int S, int G,
                               int cnhw, int64_t lo, int64_t hi);
void dpfl_nn_groupnorm_backward(float *dinp, float *ps, const float *dout, const float *inp, const float *w,
                                const float *stats, int B, int C, int S, int G, int cnhw, int64_t lo, int64_t hi);

/* ---------------------------------------------------------------- residual.c */
/* dst = src (add = 0) or dst += src (add = 1), B examples of C planes of S values, each in its own layout. */
void dpfl_nn_planes_copy(float *dst, int dst_cnhw, const float *src, int src_cnhw, int B, int C, size_t S, int add);
/* out = main + skip; out and main in layout out_cnhw, skip in skip_cnhw. */
void dpfl_nn_add_forward(float *out, int out_cnhw, const float *main, const float *skip, int skip_cnhw, int B, int C,
                         size_t S);

/* ---------------------------------------------------------------- activation.c (n elements, in place-safe) */
void dpfl_nn_relu_forward(float *out, const float *inp, size_t n);
void dpfl_nn_relu_backward(float *dinp, const float *dout, const float *out, size_t n);
void dpfl_nn_tanh_forward(float *out, const float *inp, size_t n);
void dpfl_nn_tanh_backward(float *dinp, const float *dout, const float *out, size_t n);
void dpfl_nn_sigmoid_forward(float *out, const float *inp, size_t n);
void dpfl_nn_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n);
/* CNHW (C, B, S) <-> ROWS (B, C*S) */
void dpfl_nn_flatten_forward(float *out, const float *inp, int B, int C, int S);
void dpfl_nn_flatten_backward(float *dinp, const float *dout, int B, int C, int S);

/* ---------------------------------------------------------------- affine.c (input transform, ROWS) */
void dpfl_nn_affine_forward(float *out, const float *inp, const float *w, const dpfl_layer *L, int B);
/* dw (nparam) = batch sum of the parameter gradients, overwritten (skipped when NULL); dinp likewise */
void dpfl_nn_affine_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                             const dpfl_layer *L, int B);
/* ps (B, nparam) = every example's parameter gradient; sq[b] += its squared norm */
void dpfl_nn_affine_persample(float *ps, double *sq, const float *dout, const float *inp, const dpfl_layer *L, int B);

/* ---------------------------------------------------------------- dropout.c */
/* mask (n) = 0 or 1/(1-p), drawn from a xoshiro128++ stream seeded by (seed_a, seed_b); out = inp * mask. */
void dpfl_nn_dropout_forward(float *out, float *mask, const float *inp, size_t n, float p, uint64_t seed_a,
                             uint64_t seed_b);
void dpfl_nn_dropout_backward(float *dinp, const float *dout, const float *mask, size_t n);

/* ---------------------------------------------------------------- loss.c */
/* Softmax cross-entropy: logits (B, K), y (B) in [0, K). dlogits (B, K) = scale * (softmax - onehot).
 * Returns the sum of the B losses; *correct += number of argmax hits (correct may be NULL). */
double dpfl_nn_softmax_ce(float *dlogits, const float *logits, const int32_t *y, int B, int K, float scale,
                          int32_t *correct);
/* Binary cross-entropy on one logit per example, y in {0, 1}: dlogits (B) = scale * (sigmoid(z) - y). */
double dpfl_nn_sigmoid_bce(float *dlogits, const float *logits, const int32_t *y, int B, float scale,
                           int32_t *correct);
/* Mean squared error against one-hot targets (DPFL_LOSS_MSE): dout (B, K) = scale * 2 (z - onehot(y)) / K; an
 * example's loss is the mean of its K squared errors (K = 1: against y in {0, 1}). */
double dpfl_nn_mse(float *dout, const float *out, const int32_t *y, int B, int K, float scale, int32_t *correct);

/* ---------------------------------------------------------------- workspace and driver (net.c) */

/* The workspace (the handle include/dpfl/nn.h hands out) is one part per concern; each function below the handle's
 * own takes only the parts it reads. */

/* The activation slots: the buffer each layer reads and the one it writes, with their gradients. */
typedef struct {
    int32_t nslots;
    int32_t *in_slot, *out_slot; /* per layer */
    size_t *slot_numel;          /* per slot, per example */
    uint8_t *slot_cnhw;          /* per slot: its layout (1 CNHW, 0 ROWS) */
    float **act, **grad;         /* per slot; act[0] is the caller's input, grad[0] is never computed */
} dpfl_nn_slots;

/* What layers keep from their forward pass for their backward, and the ReLUs their neighbours apply. */
typedef struct {
    int32_t **pool_idx;          /* per layer (maxpool): argmax offsets */
    float **drop_mask;           /* per layer (dropout) */
    uint8_t *drop_on;            /* per layer: mask applied in the last forward */
    uint8_t *fuse_relu;          /* per layer: conv/linear applies the following ReLU itself */
    uint8_t *pool_relu;          /* per layer: maxpool's backward applies the preceding ReLU's backward */
    float **state;               /* per layer: max_batch x the kind's state_floats (GroupNorm: mean and 1/std per
                                    group) of the last forward */
} dpfl_nn_kept;

/* Residual blocks: where each block's shortcut starts and ends. */
typedef struct {
    int32_t *skip_slot;          /* per layer (add): the slot added to the block's output */
    int32_t *res_end;            /* per layer: the index of the add closing the block this layer starts, else -1 */
    float **skip_grad;           /* per layer (add with a shortcut): the shortcut's gradient for the block input */
} dpfl_nn_blocks;

/* DP-SGD's per-example pass (persample.c): norms, clipping factors, materialized per-example gradients. */
typedef struct {
    dpfl_conv_norms conv_mode;   /* tests force each path */
    uint8_t *ghost;              /* per layer: conv uses ghost norms in the last clipped pass */
    double *sq;                  /* (nlayers, max_batch) squared per-example norms per layer */
    float *scale;                /* (nlayers, max_batch) clipping factors */
    float *ps;                   /* per-example gradients: GroupNorm, input transform, and the Conv2d layers that
                                    materialize theirs in conv_mode (ghost ones have no room here) */
    size_t *ps_off;              /* per layer offset into ps (per example stride = layer nparam) */
    float *dscaled;              /* scratch: per-example-scaled output gradient */
    float *gram;                 /* 2*T*T scratch for conv ghost norms */
} dpfl_nn_persample;

/* The direct convolutions (conv_direct.c): which layers run them, their plans and buffers. */
struct dpfl_nn_direct {
    uint8_t *mode;               /* per layer: 0 im2col, 1 direct kernels, 2 direct with Winograd for 3x3 (tests
                                    can force the others) */
    dpfl_conv_direct *geom;      /* per layer (conv layers that can run direct) */
    float **xpad;                /* per layer: padded inputs of the last forward, (B, C, xpl) */
    float *scratch;              /* per floats per thread */
    size_t per;
    int threads;                 /* threads the scratch is sized for */
    float *w;                    /* padded or flipped weights */
    float *dw_part;              /* partial batch weight gradients, one per group of examples */
};

/* Fused SGD steps (dpfl_nn_sgd_step, dpfl_nn_clipped_grad_sum_axpy). */
typedef struct {
    float alpha;                 /* params += alpha * gradient */
    float *buf;                  /* one non-Linear layer's gradient before it is added (largest such layer) */
} dpfl_nn_step;

struct dpfl_nn_ws {
    const dpfl_model *m;
    int32_t max_batch, B;        /* capacity; batch of the last forward */
    dpfl_nn_slots slots;
    dpfl_nn_kept kept;
    dpfl_nn_blocks blocks;
    float *col;                  /* im2col scratch */
    dpfl_nn_persample pers;
    dpfl_nn_direct dir;
    dpfl_nn_step step;
    dpfl_par *par;               /* helper threads for non-GEMM work (NULL: serial) */
};

typedef enum { DPFL_BWD_GRAD, DPFL_BWD_PERSAMPLE, DPFL_BWD_STEP } dpfl_bwd_mode;

/* The forward pass is dpfl_nn_forward (include/dpfl/nn.h). */
/* Loss on the last forward's logits: fills grad of the logits slot with scale * dloss_b/dlogits_b and returns
 * the summed loss. */
double dpfl_nn_run_loss(const dpfl_model *m, dpfl_nn_ws *ws, const int32_t *y, float scale, int32_t *correct);
/* Backward through all layers.  GRAD: grads (nparam) = parameter gradient of the loss set by run_loss.
 * PERSAMPLE: no parameter gradient; fills ws->pers.sq (per layer, per example) and ws->pers.ps for the kinds that
 * keep per-example gradients, keeping every slot's output gradient for the clipped sum.  STEP: grads are the params
 * themselves, and each layer's gradient is added times ws->step.alpha once the layer's input gradient no longer
 * needs its weights (Linear: inside the weight-gradient GEMM; other layers through ws->step.buf). */
void dpfl_nn_run_backward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, float *grads, dpfl_bwd_mode mode);
/* ---------------------------------------------------------------- the layer operation table (layer_table.c) */
/* What the model builder (model.c), the workspace and driver (net.c, persample.c) and the exporter (model_npz.c)
 * ask of a layer kind.  A new layer is its own .c file, defining a dpfl_layer_ops with these hooks, plus one row in
 * layer_table.c and its value in dpfl_layer_kind (include/dpfl/nn.h). */

/* The model being built: the activation a layer token reads (c, h, w; cnhw: spatial) and the open residual
 * block (its first layer, -1: none, and its input's shape). */
typedef struct {
    dpfl_model *m;
    int c, h, w;
    int cnhw;
    const char *spec;
    dpfl_error *err;
    int bstart, bc, bh, bw, bcnhw;
} dpfl_nn_builder;
/* The next layer, of the given kind, shaped as the current activation (in = out) at the end of the parameter
 * vector; NULL when the model is full. */
DPFL_HIDDEN dpfl_layer *dpfl_nn_build_push(dpfl_nn_builder *bd, dpfl_layer_kind kind);
/* The one-line error of a bad layer token: its text, the spec, why, and the valid layers. */
DPFL_HIDDEN dpfl_status dpfl_nn_build_bad(dpfl_nn_builder *bd, const char *tok, const char *why);
/* An unsigned decimal at *p (advanced past it); -1 if there is none or it exceeds 2^24. */
DPFL_HIDDEN long dpfl_nn_read_int(const char **p);

/* One layer's own part of the workspace, the same for its forward and backward hooks: the layouts it reads and
 * writes, the ReLUs fused into it or its neighbours, what it keeps from its forward for its backward, and a block
 * end's shortcut.  Besides these a hook touches only its job's buffers. */
typedef struct {
    int in_cnhw, out_cnhw;  /* layouts of its input and output (1 CNHW, 0 ROWS) */
    int fuse_relu;          /* Conv2d, Linear: apply the following ReLU in the bias pass */
    int relu_fused;         /* ReLU: the previous layer applies it (its forward does nothing) */
    int relu_in_pool;       /* ReLU: the next layer, a max pool, does its backward */
    int pool_relu;          /* MaxPool2d: its backward also does the preceding in-place ReLU's */
    int32_t *pool_idx;      /* MaxPool2d: argmax offsets of the last forward */
    float *drop_mask;       /* Dropout: the mask of the last forward, */
    uint8_t *drop_on;       /*   and whether it was applied (written by the forward) */
    float *state;           /* B x the kind's state_floats (GroupNorm: mean and 1/std) of the last forward */
    const float *skip;      /* Add: the shortcut's output (forward) */
    float *skip_gout;       /* Add: the shortcut's output gradient (backward, where the block has a shortcut) */
    int skip_cnhw;          /* Add: their layout */
} dpfl_nn_own;

/* One layer's forward pass: what it reads and writes. */
typedef struct {
    const dpfl_layer *L;
    int l, B, train;
    float *out;
    const float *in, *w;        /* the layer's input activation and parameters */
    size_t n;                   /* the input's floats */
    dpfl_rng *rng;              /* dropout's draws (NULL: none) */
    dpfl_par *par;              /* helper threads */
    dpfl_nn_own own;
    float *col;                 /* Conv2d: im2col scratch */
    const dpfl_nn_direct *dir;  /* Conv2d: the direct convolutions (dir->mode[l] != 0: this layer runs them) */
} dpfl_nn_fwd;

/* One layer's backward pass: what it reads and where its gradients go. */
typedef struct {
    const dpfl_layer *L;
    int l, B;
    dpfl_bwd_mode mode;
    int step;           /* STEP: non-Linear layers write their gradient to gbuf, added to the params after */
    float alpha;        /* STEP: Linear adds alpha times its gradient to grads itself */
    float *gin, *gbuf;  /* the input's gradient (NULL: not needed); the parameters' (GRAD, STEP), else NULL */
    float *grads;
    const float *gout, *in, *out, *w;
    size_t n;           /* the input's floats */
    double *sq;         /* per-example squared norms (PERSAMPLE) */
    float *ps;          /* its rows of every example's gradients, (B, nparam), where the workspace keeps them */
    int ghost;          /* Conv2d, PERSAMPLE: ghost norms (no per-example gradients) */
    float *gram;        /* Conv2d: the ghost norms' scratch */
    dpfl_par *par;
    dpfl_nn_own own;
    float *col;
    const dpfl_nn_direct *dir;
} dpfl_nn_bwd;

/* A parameter array of an exported layer: name suffix (PyTorch's: "weight", "bias", ...), where it starts in the
 * layer's slice, its length and its shape (ndim <= 4). */
typedef struct {
    const char *name;
    size_t off, count;
    int ndim;
    int64_t shape[4];
} dpfl_nn_param_array;

typedef enum { DPFL_NN_LAYOUT_SAME, DPFL_NN_LAYOUT_CNHW, DPFL_NN_LAYOUT_ROWS } dpfl_nn_layout;

typedef struct {
    const char *name;                    /* the kind's name in exported models (dpfl_layer_kinds) */
    int (*match)(const char *tok);       /* 1 for the spec tokens it reads (NULL: inserted by the builder only) */
    const char *syntax;                  /* those tokens as a person writes them, ", "-separated (with match): the
                                            builder's error lists every row's, docs/models.md each (tests/model.sh) */
    dpfl_status (*parse)(dpfl_nn_builder *bd, const char *tok); /* pushes and shapes the layer, moves bd's shape */
    void (*init)(const dpfl_layer *L, float *p, dpfl_rng *rng); /* NULL: U(+-1/sqrt(fan_in)), PyTorch's */
    int inplace;                         /* may overwrite its input (its backward needs only its output) */
    dpfl_nn_layout layout;               /* its output's layout */
    int keeps_persample;                 /* its backward leaves every example's gradient in its job's ps (the clipped
                                            sum then reads them); Conv2d decides per workspace mode (net.c) */
    size_t (*state_floats)(const dpfl_layer *L); /* per-example state kept from forward to backward; NULL: none */
    void (*forward)(const dpfl_nn_fwd *f);  /* touches only what f holds or points at */
    void (*backward)(const dpfl_nn_bwd *j); /* touches only what j holds or points at */
    /* its parameter arrays for export, into a (at most 2: model_npz.c's room); returns how many; NULL: the kind
     * has no parameters */
    int (*arrays)(const dpfl_layer *L, dpfl_nn_param_array *a);
} dpfl_layer_ops;

/* The row of a kind (every dpfl_layer_kind has one). */
DPFL_HIDDEN const dpfl_layer_ops *dpfl_nn_layer_ops(dpfl_layer_kind kind);
/* How many kinds there are; their names, comma-separated in dpfl_layer_kind's order, into buf (cap bytes, enough:
 * asserted), returning the length. */
DPFL_HIDDEN int dpfl_nn_layer_kind_count(void);
DPFL_HIDDEN size_t dpfl_nn_layer_kind_names(char *buf, size_t cap);
/* The spec tokens of every kind a spec names (the rows' syntax), ", "-separated, into buf (cap bytes, enough:
 * asserted), returning the length. */
DPFL_HIDDEN size_t dpfl_nn_layer_syntax(char *buf, size_t cap);

/* model.c: the built-in kinds' spec tokens and parsers (their rows are in net.c beside their driver hooks) */
DPFL_HIDDEN int dpfl_nn_match_conv(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_pool(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_fc(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_flatten(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_relu(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_tanh(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_sigmoid(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_affine(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_avgpool(const char *tok);
DPFL_HIDDEN int dpfl_nn_match_dropout(const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_conv_pool(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_fc(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_flatten(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_activation(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_affine(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_avgpool(dpfl_nn_builder *bd, const char *tok);
DPFL_HIDDEN dpfl_status dpfl_nn_parse_dropout(dpfl_nn_builder *bd, const char *tok);
/* the input transform's initial parameters: the identity (dpfl_model_affine_identity) */
DPFL_HIDDEN void dpfl_nn_affine_init(const dpfl_layer *L, float *p, dpfl_rng *rng);

/* Examples per im2col chunk for conv layer L at batch B. */
int dpfl_nn_conv_chunk(const dpfl_layer *L, int B);
/* Geometry of conv layer L at batch B, its input in layout in_cnhw. */
void dpfl_nn_conv_geom(const dpfl_layer *L, int B, int in_cnhw, dpfl_conv_geom *g);

#endif
