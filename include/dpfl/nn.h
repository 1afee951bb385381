/* dpfl nn: sequential float32 models whose parameters are one flat vector.
 *
 * A dpfl_model describes an architecture only (layers, shapes, where each layer's parameters live in the flat
 * vector).  Parameters and gradients are plain float arrays of length model->nparam owned by the caller, so a
 * server, each client and each thread can hold their own copies, and averaging, clipping, noising and norms are
 * flat loops (dpfl_vec_*).  Activations live in a dpfl_nn_ws (one per thread), sized for a maximum batch.
 *
 * Shapes: inputs are B x (c*h*w) row-major, channel-major within an example (NCHW). Logits are B x classes.
 * Losses: softmax cross-entropy for classes > 2 or when the last layer has 2+ outputs; binary cross-entropy
 * with a sigmoid when the model has a single output (classes = 2, "logreg" on heart disease); or, when the spec
 * names it (a last item "mse", or the prefix "mse:"), the mean squared error between the outputs and the label's
 * one-hot vector (one output: the label 0 or 1 itself), an example's loss being the mean over its outputs.
 *
 * Gradient conventions:
 *  - dpfl_nn_grad: gradient of the MEAN loss over the batch (what non-private SGD uses).
 *  - dpfl_nn_clipped_grad_sum: DP-SGD's sum over examples of each example's own loss gradient clipped to L2
 *    norm <= clip (flat over all parameters, or per layer); NO division by B and no noise: the caller adds
 *    noise and picks the denominator. */
#ifndef DPFL_NN_H
#define DPFL_NN_H

#include "dpfl/core.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

typedef enum {
    DPFL_LAYER_LINEAR,
    DPFL_LAYER_CONV2D,
    DPFL_LAYER_MAXPOOL2D,
    DPFL_LAYER_RELU,
    DPFL_LAYER_TANH,
    DPFL_LAYER_SIGMOID,
    DPFL_LAYER_FLATTEN,
    DPFL_LAYER_DROPOUT,
    DPFL_LAYER_AFFINE, /* PrivateFL's input transform x -> a (.) x + b; first layer only (k: a's shape, pad: b's) */
    DPFL_LAYER_GROUPNORM, /* GroupNorm over `groups` groups of channels, per example; gamma, beta per channel */
    DPFL_LAYER_AVGPOOL2D, /* average pooling, k x k windows (k = 0: global, over the whole plane) */
    DPFL_LAYER_ADD        /* end of a residual block: the block's output + its input (or its shortcut's output) */
} dpfl_layer_kind;

/* Shapes of the affine transform's scale a and shift b: none, one per channel, or one per pixel and channel. */
enum { DPFL_AFFINE_NONE = 0, DPFL_AFFINE_CHANNEL = 1, DPFL_AFFINE_PIXEL = 2 };

typedef struct {
    dpfl_layer_kind kind;
    int32_t in_c, in_h, in_w;    /* per-example input shape (linear: in_c = in_h = 1, in_w = features) */
    int32_t out_c, out_h, out_w; /* per-example output shape */
    int32_t k, stride, pad;      /* conv / pool; affine: k = a's shape, pad = b's (DPFL_AFFINE_*) */
    int32_t bias;                /* linear / conv: has a bias */
    float drop;                  /* dropout probability */
    int32_t groups;              /* groupnorm: number of groups (1 = LayerNorm) */
    int32_t from;                /* residual blocks: 1 + the index of the block's first layer, on the block's ADD and
                                    on the first layer of its shortcut (which reads the block's input); else 0 */
    int32_t shortcut;            /* ADD: layers in the shortcut just before it (0 = identity) */
    size_t param_off, nparam;    /* this layer's slice of the flat parameter vector (weights then bias) */
} dpfl_layer;

typedef struct {
    int32_t nlayers;
    dpfl_layer *layers;
    size_t nparam;
    int32_t in_c, in_h, in_w, in_dim;
    int32_t out_dim; /* logits per example (1 => binary cross-entropy) */
    char spec[128];  /* the spec string it was built from */
    int32_t loss;    /* DPFL_LOSS_CE (cross-entropy, the default) or DPFL_LOSS_MSE (the spec's "mse") */
} dpfl_model;

/* The loss a model trains on.  MSE: an example's loss is (1/K) sum_k (z_k - t_k)^2 over its K outputs, t the
 * label's one-hot vector (K = 1: t = the label, 0 or 1), as PyTorch's nn.MSELoss on one-hot targets; its
 * prediction is the largest output (K = 1: output > 0.5). */
enum { DPFL_LOSS_CE = 0, DPFL_LOSS_MSE = 1 };

/* Build from a name or spec:
 *   "logreg"                      linear in_dim -> classes (1 output when classes == 2)
 *   "mlp:784-600-100-10"          linear layers with ReLU between; ":nobias" suffix drops all biases
 *   "cnn-mnist"                   conv3x3 32, relu, conv3x3 64, relu, maxpool2, dropout .25, fc 128, relu,
 *                                 dropout .5, fc classes (PriFedSync)
 *   "cnn-mcmahan"                 conv5x5 32 (pad 2), relu, maxpool2, conv5x5 64 (pad 2), relu, maxpool2, fc 512,
 *                                 relu, fc classes
 *   "cnn-small"                   conv 16 k8 s2 p3, tanh, maxpool 2 s1, conv 32 k4 s2, tanh, maxpool 2 s1, fc 32,
 *                                 tanh, fc classes (Opacus example; 26,010 parameters on MNIST)
 *   "cnn-tf-cifar", "resnet20-gn", "resnet18-gn"  CIFAR models (docs/models.md): the TensorFlow tutorial's CNN,
 *                                 ResNet-20 and ResNet-18 (torchvision's, 11,181,642 parameters for 10 classes) with
 *                                 GroupNorm in place of BatchNorm
 *   "privatefl-dnn"               PrivateFL's 3-layer DNN (MNIST, Fashion-MNIST, EMNIST): fc600, relu, fc100, relu,
 *                                 fc classes, no biases
 *   "privatefl-purchase"          PrivateFL's 4-layer DNN for Purchase-100: fc512, tanh, fc256, tanh, fc128, tanh,
 *                                 fc classes, no biases
 *   "net:conv8k3p1,relu,pool2,fc10"  any layer list: conv<OC>[k<k>][s<stride>][p<pad>][nb], pool<k>[s<stride>][p<pad>],
 *                                 fc<OC>[nb], relu, tanh, sigmoid, flatten, drop<p> (nb = no bias; a Flatten is
 *                                 inserted before fc after spatial layers); a last item "mse" trains on the mean
 *                                 squared error instead of cross-entropy
 *   "mse:SPEC"                    SPEC (any of these) with the mean squared error loss
 * The CNNs end in `classes` logits (softmax CE even for 2 classes); logreg has 1 logit for 2 classes; an mlp's
 * last size must be classes (or 1 for 2 classes).  Unknown names or sizes that do not fit the input fail with
 * the list of valid names. */
dpfl_status dpfl_model_create(const char *spec, int32_t in_c, int32_t in_h, int32_t in_w, int32_t classes,
                              dpfl_model *m, dpfl_error *err);
void dpfl_model_free(dpfl_model *m);

/* The affine input transform's identity (a = 1, b = 0) into its parameter slice p. */
void dpfl_model_affine_identity(const dpfl_layer *L, float *p);
/* PyTorch-style default initialisation (Kaiming-uniform weights, uniform bias in +-1/sqrt(fan_in)); an input
 * transform starts at the identity. */
void dpfl_model_init(const dpfl_model *m, float *params, dpfl_rng *rng);

/* The standardization a model's inputs had in training: each input value x of an example (C x H x W) became
 * (x - mean[j]) / std[j], with one pair for every value (n = 1), one per channel (n = C: channel c is the H x W
 * plane c) or one per value (n = C H W).  n = 0: the inputs were used as loaded; n = -1: not recorded (a file
 * written by dpfl_model_save, or before model.bin version 3). */
typedef struct {
    int32_t n;
    double *mean, *std; /* n each; dpfl_alloc'd when read from a file */
} dpfl_input_standardization;
void dpfl_input_standardization_free(dpfl_input_standardization *s);

/* Save / load parameters with the architecture spec, in a versioned checksummed file (atomic write). Load
 * checks that the file's spec and nparam match m.  dpfl_model_save records no standardization (n = -1);
 * dpfl_model_save_standardized records s (NULL: not recorded), so that the model can be fed without its config. */
dpfl_status dpfl_model_save(const dpfl_model *m, const float *params, const char *path, dpfl_error *err);
dpfl_status dpfl_model_save_standardized(const dpfl_model *m, const float *params, const dpfl_input_standardization *s,
                                         const char *path, dpfl_error *err);
dpfl_status dpfl_model_load(const dpfl_model *m, float *params, const char *path, dpfl_error *err);
/* What a model file holds, without knowing its architecture first: the spec it was saved with (NUL-terminated
 * into spec, at most spec_cap - 1 bytes) and its parameters (*params: *nparam floats, dpfl_alloc'd; free with
 * dpfl_free).  The file is checked (magic, version, checksum, lengths) as dpfl_model_load does.  Build the model
 * with dpfl_model_create(spec, <the data's shape and classes>) and compare its nparam: the spec alone does not fix
 * the input size. */
dpfl_status dpfl_model_file_read(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                 dpfl_error *err);
/* The same, and the shape the model was built for: shape = {in_c, in_h, in_w, out_dim} (its logits: the classes,
 * or 1 for a 2-class logreg), all 0 for a file written before dpfl stored it (model.bin version 1).  With it the
 * model is rebuilt without its data: dpfl_model_create(spec, in_c, in_h, in_w, classes). */
dpfl_status dpfl_model_file_read_shape(const char *path, char *spec, size_t spec_cap, float **params,
                                       size_t *nparam, int32_t shape[4], dpfl_error *err);
/* The same, and the standardization its inputs had in training (*s; n = -1: not recorded; free with
 * dpfl_input_standardization_free).  shape and s may be NULL. */
dpfl_status dpfl_model_file_read_all(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                     int32_t shape[4], dpfl_input_standardization *s, dpfl_error *err);

/* A NumPy .npz archive of the parameters (src/nn/model_npz.c), readable by numpy.load without dpfl: an uncompressed
 * ZIP of NPY 1.0 arrays, '<f4', C order, one per parameter tensor, named after PyTorch's nn.Sequential state_dict
 * with dpfl's layer indices (a Flatten dpfl inserts counts as a layer, as nn.Flatten would):
 *   Linear   "<i>.weight" (out, in),  "<i>.bias" (out,)
 *   Conv2d   "<i>.weight" (out, in, k, k),  "<i>.bias" (out,)
 *   input transform (PrivateFL affine, layer 0)  "0.scale", "0.shift": (C,) per channel, (C, H, W) per pixel
 * and three arrays about the model: "dpfl_spec" (0-d unicode string: the spec), "dpfl_input_shape" ('<i4' (3,):
 * C, H, W of one example) and "dpfl_classes" ('<i4' 0-d); with a standardization s (n > 0), "dpfl_input_mean" and
 * "dpfl_input_std" ('<f8' (n,)): feed the model (x - mean) / std as dpfl_input_standardization says (s NULL or
 * n <= 0: neither array).  The bytes depend only on m, params and s (fixed ZIP timestamps: 1980-01-01).  Written
 * atomically; an archive over 4 GiB fails (no ZIP64). */
dpfl_status dpfl_model_export_npz(const dpfl_model *m, const float *params, int32_t classes,
                                  const dpfl_input_standardization *s, const char *path, dpfl_error *err);

/* Per-thread workspace for batches of up to max_batch examples.  GEMMs run on OpenBLAS's threads; the rest
 * (im2col, pooling, element-wise layers) on the workspace's own helper threads, as many as
 * openblas_get_num_threads() at creation.  Results are bit-identical whatever the thread count. */
typedef struct dpfl_nn_ws dpfl_nn_ws;
dpfl_nn_ws *dpfl_nn_ws_create(const dpfl_model *m, int32_t max_batch, dpfl_error *err);
void dpfl_nn_ws_free(dpfl_nn_ws *ws);
/* Number of threads (including the caller) for the non-GEMM work; 1 = none.  Use 1 when many workspaces
 * train in parallel threads (and call openblas_set_num_threads(1) then). */
dpfl_status dpfl_nn_ws_set_threads(dpfl_nn_ws *ws, int nthreads, dpfl_error *err);

/* Forward pass; returns a pointer to the B x out_dim logits inside ws. train != 0 enables dropout, whose masks
 * are drawn from rng (may be NULL when train == 0).  In dpfl_nn_grad and dpfl_nn_clipped_grad_sum, rng == NULL
 * likewise turns dropout off.  Labels y must lie in [0, classes) ({0, 1} with one logit): the data module
 * validates them, and a label out of range is an internal invariant violation (DPFL_ASSERT). */
const float *dpfl_nn_forward(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, int32_t B,
                             int train, dpfl_rng *rng);

/* Forward + backward: grads (nparam, overwritten) = gradient of the mean loss; returns the mean loss.
 * *correct (may be NULL) receives the number of correctly classified examples. */
double dpfl_nn_grad(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                    int32_t B, dpfl_rng *rng, float *grads, int32_t *correct);

/* One SGD step on the mean loss, the update fused into the backward pass: params -= lr * (the gradient
 * dpfl_nn_grad would return), equal to dpfl_nn_grad + dpfl_vec_axpy(params, -lr, grads) up to float rounding.
 * Linear layers add their weight gradient inside the GEMM that computes it (C = alpha A B + C) once their input
 * gradient has been taken from the old weights; no gradient vector is formed or read again.  Returns the mean
 * loss; B = 0 leaves params unchanged. */
double dpfl_nn_sgd_step(const dpfl_model *m, float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                        int32_t B, float lr, dpfl_rng *rng, int32_t *correct);

/* dpfl_rng_add_gaussian_chunked(r, x, n, sigma, scale, t), bit for bit, with t the workspace's threads running
 * the chunks: right after a gradient call those threads are still awake, and no helper threads of the noise
 * compete with them for the cores. */
void dpfl_nn_ws_add_gaussian(dpfl_nn_ws *ws, dpfl_rng *r, float *x, size_t n, double sigma, float scale);

/* Clipping of per-example gradients for DP-SGD. */
typedef struct {
    double clip;      /* flat: each example's whole gradient scaled to L2 norm <= clip (INFINITY = no clip) */
    int per_layer;    /* 1: each layer's slice clipped to clip * sqrt(layer_nparam / nparam) instead, so the
                         whole example's norm is still <= clip */
    const float *radius; /* NULL, or per example b of the batch its own bound: clipped to min(clip, radius[b])
                            (flat clipping only; 0 removes the example from the sum) */
} dpfl_clip_spec;

/* grads (overwritten) = sum_i clip(g_i) where g_i is example i's own loss gradient.  norms (may be NULL)
 * receives B per-example norms before clipping.  Returns the mean loss.  B = 0 gives zero grads. */
double dpfl_nn_clipped_grad_sum(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x,
                                const int32_t *y, int32_t B, const dpfl_clip_spec *clip, dpfl_rng *rng,
                                float *grads, float *norms);

/* params += alpha * (the sum dpfl_nn_clipped_grad_sum would return), fused as in dpfl_nn_sgd_step: Linear
 * layers add their clipped sum inside the GEMM that forms it.  A DP-SGD step is this with alpha = -lr / denom,
 * then Gaussian noise of std lr / denom * sigma added to params (dpfl_rng_add_gaussian_chunked): the same
 * release as noising the sum and stepping, up to float rounding.  B = 0 leaves params unchanged. */
double dpfl_nn_clipped_grad_sum_axpy(const dpfl_model *m, float *params, dpfl_nn_ws *ws, const float *x,
                                     const int32_t *y, int32_t B, const dpfl_clip_spec *clip, dpfl_rng *rng,
                                     float alpha, float *norms);

/* How dpfl_nn_clipped_grad_sum gets the per-example norms of Conv2d layers: AUTO (the default) picks, per
 * layer, the cheaper of ghost norms from T x T Gram matrices (T = output positions; cost ~T^2 (K + OC)) and
 * materialized per-example weight gradients (cost ~T K OC, K = in_c k^2).  Results agree up to float rounding;
 * the others exist so that tests can check both paths. */
typedef enum { DPFL_CONV_NORMS_AUTO = 0, DPFL_CONV_NORMS_MATERIALIZE = 1, DPFL_CONV_NORMS_GHOST = 2 } dpfl_conv_norms;
/* The workspace keeps room for the per-example gradients of the convs that materialize them in the current mode
 * only (a ResNet-18 under AUTO: its first five convs), so changing the mode may allocate: DPFL_ENOMEM, the
 * workspace unchanged, when that fails. */
dpfl_status dpfl_nn_ws_set_conv_norms(dpfl_nn_ws *ws, dpfl_conv_norms mode, dpfl_error *err);

/* How Conv2d layers compute: AUTO (the default) uses the direct AVX-512 kernels for stride-1 convolutions with
 * outputs of at least 8 x 8 when the build has them, with Winograd F(2x2, 3x3) for 3x3 layers with at least 8
 * input and output channels, and im2col + SGEMM otherwise; DIRECT runs every stride-1 layer on the direct kernels,
 * never Winograd; IM2COL forces im2col (tests compare the three). */
typedef enum { DPFL_CONV_IMPL_AUTO = 0, DPFL_CONV_IMPL_IM2COL = 1, DPFL_CONV_IMPL_DIRECT = 2 } dpfl_conv_impl;
void dpfl_nn_ws_set_conv_impl(dpfl_nn_ws *ws, dpfl_conv_impl impl);

/* Loss and accuracy of params on n examples (batched through ws, no dropout). */
void dpfl_nn_evaluate(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, const int32_t *y,
                      int32_t n, double *mean_loss, double *accuracy);

/* Gradient check helper for tests: max relative error between dpfl_nn_grad and central finite differences
 * (in double around float params) over `probes` randomly chosen parameters. */
double dpfl_nn_gradcheck(const dpfl_model *m, const float *params, const float *x, const int32_t *y, int32_t B,
                         int probes, dpfl_rng *rng, dpfl_error *err);

#pragma GCC visibility pop

#endif
