/* The named models of the papers' larger experiments (src/nn/model.c): ResNet-18 with GroupNorm (rPDP-FL's CIFAR-10
 * model, torchvision's resnet18), PrivateFL's 3-layer DNN (MNIST, Fashion-MNIST, EMNIST) and its 4-layer DNN for
 * Purchase-100.  Their shapes and parameter counts against the published ones; ResNet-18 trains (the loss falls on
 * a small batch, by SGD and by DP-SGD's clipped sums), its per-example gradients equal one-example backward passes,
 * and a narrow copy of its layer list (same kernels, strides, padding, blocks; fewer channels) passes a
 * finite-difference gradient check.  Kept out of the TSan list: ResNet-18 is 11 million parameters. */
#include "testutil.h"
#include "dpfl/nn.h"
#include "nn/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int count_kind(const dpfl_model *m, dpfl_layer_kind k)
{
    int n = 0;
    for (int l = 0; l < m->nlayers; l++) n += m->layers[l].kind == k;
    return n;
}

/* ResNet-18: 11,181,642 parameters for 10 classes (rPDP-FL, Table 1; torchvision's resnet18 with a 10-way fc: its
 * BatchNorm scale and shift are GroupNorm's); 20 convolutions (stem, 16 in blocks, 3 projections), 20 GroupNorms,
 * 8 residual additions; 32x32 -> 16x16 (stem) -> 8x8 (padded max pool) -> 8, 4, 2, 1.  PrivateFL's DNNs: 784-600-
 * 100-C and 600-512-256-128-100, no biases. */
static void preset_shapes_and_parameter_counts(void **state)
{
    (void)state;
    dpfl_model m;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("resnet18-gn", 3, 32, 32, 10, &m, &err), DPFL_OK);
    assert_int_equal(m.nparam, 11181642);
    assert_int_equal(count_kind(&m, DPFL_LAYER_CONV2D), 20);
    assert_int_equal(count_kind(&m, DPFL_LAYER_GROUPNORM), 20);
    assert_int_equal(count_kind(&m, DPFL_LAYER_ADD), 8);
    const dpfl_layer *pool = NULL;
    for (int l = 0; l < m.nlayers && !pool; l++)
        if (m.layers[l].kind == DPFL_LAYER_MAXPOOL2D) pool = &m.layers[l];
    assert_non_null(pool);
    assert_int_equal(pool->in_h, 16);
    assert_int_equal(pool->out_h, 8);
    assert_int_equal(pool->pad, 1);
    const dpfl_layer *gap = &m.layers[m.nlayers - 3]; /* then flatten, fc */
    assert_int_equal(gap->kind, DPFL_LAYER_AVGPOOL2D);
    assert_int_equal(gap->in_c, 512);
    assert_int_equal(gap->in_h, 1);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("resnet18-gn", 3, 32, 32, 100, &m, &err), DPFL_OK);
    assert_int_equal(m.nparam, 11181642 - 5130 + 51300);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("privatefl-dnn", 1, 28, 28, 10, &m, &err), DPFL_OK);
    assert_int_equal(m.nparam, 784 * 600 + 600 * 100 + 100 * 10);
    assert_int_equal(m.nlayers, 6); /* a Flatten in front of fc600 on the 1x28x28 input, then 5 layers */
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("privatefl-dnn", 1, 28, 28, 47, &m, &err), DPFL_OK); /* EMNIST balanced */
    assert_int_equal(m.nparam, 784 * 600 + 600 * 100 + 100 * 47);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("privatefl-purchase", 1, 1, 600, 100, &m, &err), DPFL_OK);
    assert_int_equal(m.nparam, 600 * 512 + 512 * 256 + 256 * 128 + 128 * 100);
    int tanh = count_kind(&m, DPFL_LAYER_TANH), lin = count_kind(&m, DPFL_LAYER_LINEAR);
    assert_int_equal(tanh, 3);
    assert_int_equal(lin, 4);
    for (int l = 0; l < m.nlayers; l++) assert_int_equal(m.layers[l].bias, 0);
    dpfl_model_free(&m);
}

typedef struct {
    dpfl_model m;
    float *p, *x;
    int32_t *y;
    int B;
} net;

static void net_make(net *n, const char *spec, int c, int h, int w, int classes, int B, uint64_t seed)
{
    dpfl_error err;
    if (dpfl_model_create(spec, c, h, w, classes, &n->m, &err)) {
        print_error("%s: %s\n", spec, err.msg);
        fail();
    }
    dpfl_rng r;
    dpfl_rng_init_seed(&r, seed);
    n->p = malloc(n->m.nparam * sizeof(float));
    dpfl_model_init(&n->m, n->p, &r);
    n->B = B;
    n->x = malloc((size_t)B * n->m.in_dim * sizeof(float));
    n->y = malloc((size_t)B * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)B * n->m.in_dim; i++) n->x[i] = (float)dpfl_rng_uniform(&r);
    for (int b = 0; b < B; b++) n->y[b] = b % classes;
}

static void net_free(net *n)
{
    dpfl_model_free(&n->m);
    free(n->p), free(n->x), free(n->y);
}

/* ResNet-18 trains: on a batch of 4 CIFAR-shaped images, three SGD steps (lr 0.001) lower the loss each time and
 * to under 0.7 of its start, and so do three DP-SGD steps made of the clipped sum (C = 1, no noise, lr 0.001 times
 * the batch, since a clipped sum is not divided by it), with finite per-example norms. */
static void resnet18_loss_falls(void **state)
{
    (void)state;
    net n;
    net_make(&n, "resnet18-gn", 3, 32, 32, 10, 4, 18);
    dpfl_error err;
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&n.m, n.B, &err);
    assert_non_null(ws);
    float *start = malloc(n.m.nparam * sizeof(float));
    memcpy(start, n.p, n.m.nparam * sizeof(float));
    for (int dp = 0; dp < 2; dp++) {
        memcpy(n.p, start, n.m.nparam * sizeof(float));
        double loss[4]; /* before each step (what the step returns), then after the last */
        for (int step = 0; step < 3; step++) {
            if (dp) {
                float norms[4];
                dpfl_clip_spec cs = {1.0, 0, NULL};
                loss[step] = dpfl_nn_clipped_grad_sum_axpy(&n.m, n.p, ws, n.x, n.y, n.B, &cs, NULL, -0.004f, norms);
                for (int b = 0; b < n.B; b++) assert_true(isfinite(norms[b]) && norms[b] > 0);
            } else {
                loss[step] = dpfl_nn_sgd_step(&n.m, n.p, ws, n.x, n.y, n.B, 0.001f, NULL, NULL);
            }
        }
        dpfl_nn_evaluate(&n.m, n.p, ws, n.x, n.y, n.B, &loss[3], NULL);
        print_message("%s: loss %.4f %.4f %.4f %.4f\n", dp ? "DP-SGD" : "SGD", loss[0], loss[1], loss[2], loss[3]);
        for (int i = 0; i < 3; i++) assert_true(loss[i + 1] < loss[i]);
        assert_true(loss[3] < 0.7 * loss[0]);
    }
    free(start);
    dpfl_nn_ws_free(ws);
    net_free(&n);
}

/* Each example's gradient from the clipped-sum pass (C = infinity) equals a one-example backward pass. */
static void resnet18_per_example_gradients(void **state)
{
    (void)state;
    net n;
    net_make(&n, "resnet18-gn", 3, 32, 32, 10, 2, 81);
    const size_t P = n.m.nparam;
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&n.m, 2, NULL), *ws1 = dpfl_nn_ws_create(&n.m, 1, NULL);
    float *g = malloc(P * sizeof *g), *sum = calloc(P, sizeof *sum), *got = malloc(P * sizeof *got);
    double own[2];
    for (int b = 0; b < 2; b++) {
        dpfl_nn_grad(&n.m, n.p, ws1, n.x + (size_t)b * n.m.in_dim, n.y + b, 1, NULL, g, NULL);
        own[b] = dpfl_vec_norm2(g, P);
        dpfl_vec_axpy(sum, 1.0f, g, P);
    }
    float norms[2];
    dpfl_clip_spec cs = {INFINITY, 0, NULL};
    dpfl_nn_clipped_grad_sum(&n.m, n.p, ws, n.x, n.y, 2, &cs, NULL, got, norms);
    for (int b = 0; b < 2; b++) assert_close(norms[b], own[b], 1e-4);
    double d = 0, s = 0;
    for (size_t i = 0; i < P; i++) {
        d += ((double)got[i] - sum[i]) * ((double)got[i] - sum[i]);
        s += (double)sum[i] * sum[i];
    }
    if (!(sqrt(d) < 1e-4 * sqrt(s))) print_error("relative difference %g\n", sqrt(d / s));
    assert_true(sqrt(d) < 1e-4 * sqrt(s));
    free(g), free(sum), free(got);
    dpfl_nn_ws_free(ws), dpfl_nn_ws_free(ws1);
    net_free(&n);
}

/* ResNet-18's layer list with 4 and 8 channels (GroupNorm with 2 groups) on 3 x 16 x 16: the 7x7/2 stem, the padded
 * 3x3/2 max pool, identity and projection blocks down to 1 x 1, global pooling.  Its ReLUs and max pools make
 * single-parameter differences unreliable this deep (a step crosses kinks: errors of a few percent on small
 * gradients), so the whole network is checked along the gradient direction, where kinks weigh little next to
 * ||g||, and the same stem and blocks with tanh in place of ReLU and no max pool per parameter. */
static void resnet18_narrow_gradcheck(void **state)
{
    (void)state;
    net n;
    net_make(&n, "net:conv4k7s2p3nb,gn2,relu,pool3s2p1,block4g2*2,block8s2g2*2,block8s2g2*2,block8s2g2*2,gap,fc3", 3,
             16, 16, 3, 2, 7);
    const size_t P = n.m.nparam;
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&n.m, n.B, NULL);
    float *g = malloc(P * sizeof *g), *q = malloc(P * sizeof *q);
    dpfl_nn_grad(&n.m, n.p, ws, n.x, n.y, n.B, NULL, g, NULL);
    double gn = dpfl_vec_norm2(g, P), eps = 1e-3, lp, lm;
    for (size_t j = 0; j < P; j++) q[j] = n.p[j] + (float)(eps * g[j] / gn);
    dpfl_nn_evaluate(&n.m, q, ws, n.x, n.y, n.B, &lp, NULL);
    for (size_t j = 0; j < P; j++) q[j] = n.p[j] - (float)(eps * g[j] / gn);
    dpfl_nn_evaluate(&n.m, q, ws, n.x, n.y, n.B, &lm, NULL);
    const double num = (lp - lm) / (2 * eps);
    if (!(fabs(num - gn) < 1e-2 * gn)) print_error("directional derivative %g vs |g| %g\n", num, gn);
    assert_true(fabs(num - gn) < 1e-2 * gn);
    free(g), free(q);
    dpfl_nn_ws_free(ws);
    net_free(&n);
    net_make(&n, "net:conv4k7s2p3nb,gn2,tanh,(conv4k3p1nb,gn2,tanh,conv4k3p1nb,gn2)+,(conv8k3s2p1nb,gn2,tanh,"
             "conv8k3p1nb,gn2)+pg2,tanh,gap,fc3", 3, 16, 16, 3, 2, 9);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    double rel = dpfl_nn_gradcheck(&n.m, n.p, n.x, n.y, n.B, 24, &r, NULL);
    if (!(rel < 1e-2)) print_error("gradcheck relative error %g\n", rel);
    assert_true(rel < 1e-2);
    net_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(preset_shapes_and_parameter_counts),
        cmocka_unit_test(resnet18_narrow_gradcheck),
        cmocka_unit_test(resnet18_per_example_gradients),
        cmocka_unit_test(resnet18_loss_falls),
    };
    return cmocka_run_group_tests_name("presets", tests, NULL, NULL);
}
