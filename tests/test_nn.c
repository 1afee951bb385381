/* nn: gradient checks for every layer and loss, DP-SGD per-example gradients and clipping, model specs and
 * files. Models are kept small so the suite stays fast under sanitizers. */
#include "testutil.h"
#include "dpfl/nn.h"
#include "nn/layers.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    dpfl_model m;
    float *params, *x;
    int32_t *y;
    int32_t B, classes;
} fixture;

static void fx_make(fixture *f, const char *spec, int c, int h, int w, int classes, int B, uint64_t seed)
{
    dpfl_error err;
    dpfl_rng r;
    int st = dpfl_model_create(spec, c, h, w, classes, &f->m, &err);
    if (st) print_error("%s: %s\n", spec, err.msg);
    assert_int_equal(st, DPFL_OK);
    dpfl_rng_init_seed(&r, seed);
    f->params = malloc(f->m.nparam * sizeof(float));
    dpfl_model_init(&f->m, f->params, &r);
    if (f->m.layers[0].kind == DPFL_LAYER_AFFINE) /* away from the identity, so that a and b both matter */
        for (size_t i = 0; i < f->m.layers[0].nparam; i++) f->params[i] += (float)(0.3 * dpfl_rng_gaussian(&r));
    f->B = B;
    f->classes = classes;
    f->x = malloc((size_t)B * f->m.in_dim * sizeof(float));
    f->y = malloc((size_t)B * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)B * f->m.in_dim; i++) f->x[i] = (float)dpfl_rng_gaussian(&r);
    for (int b = 0; b < B; b++) f->y[b] = (int32_t)dpfl_rng_below(&r, classes);
}

static void fx_free(fixture *f)
{
    dpfl_model_free(&f->m);
    free(f->params), free(f->x), free(f->y);
}

/* ---------------------------------------------------------------- gradient checks */
typedef struct {
    const char *spec;
    int c, h, w, classes;
} arch;

static const arch small_archs[] = {
    {"net:fc3", 2, 4, 4, 3},                      /* linear + softmax CE */
    {"net:fc3nb", 2, 4, 4, 3},                    /* linear without bias */
    {"net:fc4,tanh,fc1", 1, 1, 6, 2},             /* binary cross-entropy */
    {"net:fc6,relu,fc3", 1, 1, 7, 3},
    {"net:fc6,tanh,fc3", 1, 1, 7, 3},
    {"net:fc6,sigmoid,fc3", 1, 1, 7, 3},
    {"net:conv3k3p1,tanh,flatten,fc3", 2, 5, 5, 3},
    {"net:conv3k3s2p1,relu,fc3", 2, 7, 7, 3},     /* stride + padding, fused ReLU */
    {"net:conv3k2nb,tanh,conv2k3,tanh,fc3", 2, 6, 6, 3}, /* conv without bias, conv on a CNHW input */
    {"net:conv4k3p1,tanh,pool2,fc3", 1, 6, 6, 3},
    {"net:conv4k3,tanh,pool2s1,fc3", 1, 6, 6, 3}, /* overlapping pooling windows */
    {"net:pool2,fc3", 2, 4, 4, 3},                /* layers before the first parameter */
    {"net:conv3k2,relu,pool2,fc3", 1, 6, 6, 3},   /* ReLU fused into a pool whose windows miss a border */
    {"net:conv3k3,relu,pool2,sigmoid,fc3", 1, 8, 8, 3}, /* pool output overwritten in place: no fusion */
    {"net:conv3k3,relu,pool2,drop0.4,tanh,fc3", 1, 8, 8, 3},
    {"net:conv3k3,drop0.3,tanh,fc5,drop0.5,tanh,fc3", 1, 6, 6, 3},
    {"logreg", 1, 5, 5, 10},
    {"logreg", 1, 5, 5, 2},
    {"mlp:12-8-6-4", 1, 3, 4, 4},
    {"mlp:12-8-4:nobias", 1, 3, 4, 4},
    {"net:affine,fc6,tanh,fc3", 2, 3, 3, 3},       /* PrivateFL's transform: a per channel, b per pixel */
    {"net:affinepc,conv3k3p1,tanh,fc3", 2, 5, 5, 3},
    {"transform-cn:mlp:12-8-4", 1, 3, 4, 4},
    {"transform-cp-relu:mlp:12-8-4", 1, 3, 4, 4},  /* a ReLU after the transform (not fused into it) */
    /* normalization, average pooling, residual blocks */
    {"net:conv4k3p1,gn2,tanh,fc3", 2, 5, 5, 3},            /* GroupNorm on a CNHW conv output */
    {"net:gn2,conv3k3,tanh,fc3", 4, 5, 5, 3},              /* on the ROWS input */
    {"net:conv4k3,ln,tanh,avgpool2,fc3", 1, 6, 7, 3},      /* LayerNorm, average pooling */
    {"net:fc6,ln,tanh,fc3", 1, 1, 7, 3},                   /* LayerNorm over features */
    {"net:fc6,gn3,sigmoid,fc3", 1, 1, 7, 3},
    {"net:conv4k3,tanh,avgpool3s2,fc3", 1, 8, 8, 3},       /* overlapping average windows */
    {"net:conv5k3,tanh,gap,fc3", 2, 6, 5, 3},              /* global average pooling */
    {"net:conv4k3p1,tanh,(conv4k3p1,gn2,tanh,conv4k3p1)+,tanh,fc3", 2, 5, 5, 3},
    {"net:(conv2k3p1,tanh)+,fc3", 2, 4, 4, 3},             /* identity block on the raw input (mixed layouts) */
    {"net:conv3k3,(tanh,conv3k3p1)+,tanh,fc3", 1, 6, 6, 3}, /* block starting with an in-place layer */
    {"net:conv3k3p1,tanh,(conv6k3s2p1,gn3,tanh,conv6k3p1)+pg3,tanh,gap,fc3", 2, 7, 7, 3}, /* projection + gn */
    {"net:conv3k3p1,tanh,(conv5k3p1,tanh)+p,(tanh,conv5k3p1)+,tanh,fc3", 1, 5, 5, 3},   /* two blocks in a row */
    {"net:fc6,tanh,(fc6,tanh,fc6)+,tanh,fc3", 1, 1, 5, 3},    /* a block of linear layers */
    {"net:conv4k3p1,relu,(pool2,conv4k3p1)+p,tanh,fc3", 1, 6, 6, 3}, /* pool after ReLU opening a block */
    {"net:conv4k3p1nb,gn2,relu,block4*2,block6s2g3,gap,fc3", 2, 6, 6, 3}, /* the ResNet macro */
    {"net:conv3k3p1,tanh,pool3s2p1,fc3", 1, 7, 7, 3},      /* max pooling with padding (ResNet-18's stem) */
    {"net:conv3k3,relu,pool2p1,fc3", 2, 5, 5, 3},          /* ... after a fused ReLU, windows off both edges */
    /* the mean squared error loss */
    {"net:fc6,tanh,fc3,mse", 1, 1, 7, 3},
    {"mse:net:fc4,tanh,fc1", 1, 1, 6, 2},                  /* one output, target 0 or 1 */
    {"mse:net:conv3k3p1,gn3,relu,gap,fc3", 2, 5, 5, 3},
};

/* The input transform starts at the identity: a model with it computes the same logits as the model without it
 * (same remaining parameters); its parameter count is a's block plus b's; a misplaced or malformed one is an
 * error. */
static void input_transform_is_identity_at_init(void **state)
{
    (void)state;
    dpfl_model plain, tr;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("mlp:12-8-4", 3, 2, 2, 4, &plain, &err), DPFL_OK);
    assert_int_equal(dpfl_model_create("transform:mlp:12-8-4", 3, 2, 2, 4, &tr, &err), DPFL_OK);
    const size_t T = tr.layers[0].nparam;
    assert_int_equal(tr.layers[0].kind, DPFL_LAYER_AFFINE);
    assert_int_equal(T, 3 + 12); /* a per channel, b per pixel and channel */
    assert_int_equal(tr.nparam, plain.nparam + T);
    float *pp = malloc(plain.nparam * sizeof(float)), *pt = malloc(tr.nparam * sizeof(float));
    float x[5 * 12];
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 3);
    dpfl_model_init(&tr, pt, &r);
    for (size_t i = 0; i < T; i++) assert_true(pt[i] == (i < 3 ? 1.0f : 0.0f));
    memcpy(pp, pt + T, plain.nparam * sizeof(float));
    for (int i = 0; i < 5 * 12; i++) x[i] = (float)dpfl_rng_gaussian(&r);
    dpfl_nn_ws *wp = dpfl_nn_ws_create(&plain, 5, &err), *wt = dpfl_nn_ws_create(&tr, 5, &err);
    const float *lp = dpfl_nn_forward(&plain, pp, wp, x, 5, 0, NULL), *lt = dpfl_nn_forward(&tr, pt, wt, x, 5, 0, NULL);
    for (int i = 0; i < 5 * 4; i++) assert_true(lp[i] == lt[i]);
    dpfl_nn_ws_free(wp);
    dpfl_nn_ws_free(wt);
    free(pp);
    free(pt);
    dpfl_model_free(&plain);
    dpfl_model_free(&tr);
    dpfl_model m;
    assert_int_equal(dpfl_model_create("net:fc6,affine,fc3", 1, 1, 6, 3, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "first layer"));
    assert_int_equal(dpfl_model_create("net:affinenn,fc3", 1, 1, 6, 3, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("transform-x:logreg", 1, 1, 6, 3, &m, &err), DPFL_EINVAL);
}

static void gradcheck_small_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof small_archs / sizeof *small_archs; i++) {
        const arch *a = &small_archs[i];
        fixture f;
        fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, 4, 100 + i);
        dpfl_rng r;
        dpfl_rng_init_seed(&r, 7 + i);
        dpfl_error err;
        double rel = dpfl_nn_gradcheck(&f.m, f.params, f.x, f.y, f.B, 12, &r, &err);
        if (!(rel < 1e-2)) print_error("%s: gradcheck relative error %g\n", a->spec, rel);
        assert_true(rel < 1e-2);
        fx_free(&f);
    }
}

/* Max pooling is only piecewise smooth, and the named CNNs on 28x28 inputs have thousands of pooling windows,
 * so a 1e-3 step on a first-layer weight always switches some argmax and single-parameter differences are
 * dominated by kinks.  Their geometry is checked per parameter on narrow copies (same kernels, strides,
 * padding, fewer channels), and the full models by the derivative along the gradient direction, where the
 * kinks' contributions are small next to ||g||. */
static void gradcheck_named_geometries(void **state)
{
    (void)state;
    const arch narrow[] = {
        {"net:conv2k8s2p3,tanh,pool2s1,conv3k4s2,tanh,pool2s1,fc6,tanh,fc3", 1, 16, 16, 3}, /* cnn-small */
        {"net:conv2k3,relu,conv3k3,relu,pool2,drop0.25,fc5,relu,drop0.5,fc3", 1, 10, 10, 3}, /* cnn-mnist */
        {"net:conv2k5p2,relu,pool2,conv3k5p2,relu,pool2,fc6,relu,fc3", 2, 8, 8, 3},          /* cnn-mcmahan */
    };
    for (int i = 0; i < 3; i++) {
        fixture f;
        fx_make(&f, narrow[i].spec, narrow[i].c, narrow[i].h, narrow[i].w, narrow[i].classes, 2, 300 + i);
        dpfl_rng r;
        dpfl_rng_init_seed(&r, 11 + i);
        double rel = dpfl_nn_gradcheck(&f.m, f.params, f.x, f.y, f.B, 10, &r, NULL);
        if (!(rel < 1e-2)) print_error("%s: gradcheck relative error %g\n", narrow[i].spec, rel);
        assert_true(rel < 1e-2);
        fx_free(&f);
    }
}

static void directional_derivative_named_models(void **state)
{
    (void)state;
    const char *specs[] = {"cnn-small", "cnn-mnist", "cnn-mcmahan", "mlp:784-64-10", "logreg"};
    for (int i = 0; i < 5; i++) {
        fixture f;
        fx_make(&f, specs[i], 1, 28, 28, 10, 2, 400 + i);
        size_t n = f.m.nparam;
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, f.B, NULL);
        float *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
        dpfl_nn_grad(&f.m, f.params, ws, f.x, f.y, f.B, NULL, g, NULL);
        double gn = dpfl_vec_norm2(g, n), eps = 1e-3, lp, lm;
        for (size_t j = 0; j < n; j++) p[j] = f.params[j] + (float)(eps * g[j] / gn);
        dpfl_nn_evaluate(&f.m, p, ws, f.x, f.y, f.B, &lp, NULL);
        for (size_t j = 0; j < n; j++) p[j] = f.params[j] - (float)(eps * g[j] / gn);
        dpfl_nn_evaluate(&f.m, p, ws, f.x, f.y, f.B, &lm, NULL);
        double num = (lp - lm) / (2 * eps);
        if (!(fabs(num - gn) < 1e-2 * gn)) print_error("%s: directional derivative %g vs |g| %g\n", specs[i], num, gn);
        assert_true(fabs(num - gn) < 1e-2 * gn);
        free(g), free(p);
        dpfl_nn_ws_free(ws);
        fx_free(&f);
    }
}

/* ---------------------------------------------------------------- per-example gradients and clipping */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(d) / fmax(sqrt(s), 1e-30);
}

/* Example b's own gradient, computed alone (mean over a batch of one = its own loss gradient). */
static void one_grad(const fixture *f, dpfl_nn_ws *ws, int b, float *g)
{
    dpfl_nn_grad(&f->m, f->params, ws, f->x + (size_t)b * f->m.in_dim, f->y + b, 1, NULL, g, NULL);
}

static void clip_reference(const dpfl_model *m, float *g, double c, int per_layer)
{
    if (!per_layer) {
        dpfl_vec_clip(g, m->nparam, c);
        return;
    }
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (L->nparam) dpfl_vec_clip(g + L->param_off, L->nparam, c * sqrt((double)L->nparam / m->nparam));
    }
}

static const arch ps_archs[] = {
    {"net:fc3", 2, 4, 4, 3},
    {"net:fc4,tanh,fc1", 1, 1, 6, 2},
    {"net:fc6,sigmoid,fc3nb", 1, 1, 7, 3},
    {"net:conv3k3s2p1,relu,fc3", 2, 7, 7, 3},
    {"net:conv3k2nb,tanh,conv2k3,tanh,fc3", 2, 6, 6, 3},
    {"net:conv4k3,tanh,pool2s1,fc3", 1, 6, 6, 3},
    {"net:pool2,fc3", 2, 4, 4, 3},
    {"net:conv3k2,relu,pool2,fc3", 1, 6, 6, 3},
    {"net:conv3k3,relu,pool2,sigmoid,fc3", 1, 8, 8, 3},
    {"net:conv3k3,drop0.3,tanh,fc5,drop0.5,tanh,fc3", 1, 6, 6, 3}, /* dropout off without an rng */
    {"mlp:12-8-6-4:nobias", 1, 3, 4, 4},
    {"net:affinepp,conv3k3,tanh,fc3", 2, 5, 5, 3},
    {"transform:mlp:12-8-4", 1, 3, 4, 4},
    {"cnn-small", 1, 28, 28, 10},
    {"cnn-mnist", 1, 28, 28, 10},
    {"net:conv4k3p1,gn2,tanh,fc3", 2, 5, 5, 3},
    {"net:gn2,conv3k3,tanh,fc3", 4, 5, 5, 3},
    {"net:conv4k3,ln,tanh,avgpool2,fc3", 1, 6, 7, 3},
    {"net:fc6,ln,tanh,fc3", 1, 1, 7, 3},
    {"net:conv5k3,tanh,gap,fc3", 2, 6, 5, 3},
    {"net:(conv2k3p1,tanh)+,fc3", 2, 4, 4, 3},
    {"net:conv3k3p1,tanh,(conv6k3s2p1,gn3,tanh,conv6k3p1)+pg3,tanh,gap,fc3", 2, 7, 7, 3},
    {"net:fc6,tanh,(fc6,tanh,fc6)+,tanh,fc3", 1, 1, 5, 3},
    {"net:conv4k3p1,relu,(pool2,conv4k3p1)+p,relu,fc3", 1, 6, 6, 3},
    {"net:conv8k3p1nb,gn4,relu,block8*2,block16s2,gap,fc3", 3, 8, 8, 3},
    {"net:conv3k3p1,relu,pool3s2p1,fc3", 2, 7, 7, 3},
    {"mse:mlp:12-8-4", 1, 3, 4, 4},
    {"net:conv4k3p1,gn2,tanh,fc1,mse", 2, 5, 5, 2},
};

static void persample_equals_one_at_a_time(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ps_archs / sizeof *ps_archs; i++) {
        const arch *a = &ps_archs[i];
        fixture f;
        const int B = 5;
        fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, B, 500 + i);
        size_t n = f.m.nparam;
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, B, NULL), *ws1 = dpfl_nn_ws_create(&f.m, 1, NULL);
        assert_non_null(ws);
        float *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        float norms[5], own[5];
        for (int b = 0; b < B; b++) {
            one_grad(&f, ws1, b, g);
            own[b] = (float)dpfl_vec_norm2(g, n);
        }
        /* a clip between the smallest and largest norm, so both branches run */
        float lo = own[0], hi = own[0];
        for (int b = 1; b < B; b++) lo = fminf(lo, own[b]), hi = fmaxf(hi, own[b]);
        double c = 0.5 * (lo + hi);
        for (int mode = DPFL_CONV_NORMS_MATERIALIZE; mode <= DPFL_CONV_NORMS_GHOST; mode++)
            for (int per_layer = 0; per_layer < 2; per_layer++) {
                assert_int_equal(dpfl_nn_ws_set_conv_norms(ws, (dpfl_conv_norms)mode, NULL), DPFL_OK);
                dpfl_vec_zero(want, n);
                for (int b = 0; b < B; b++) {
                    one_grad(&f, ws1, b, g);
                    clip_reference(&f.m, g, c, per_layer);
                    dpfl_vec_axpy(want, 1.0f, g, n);
                }
                dpfl_clip_spec cs = {c, per_layer, NULL};
                for (size_t j = 0; j < n; j++) got[j] = NAN; /* every parameter must be written */
                dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x, f.y, B, &cs, NULL, got, norms);
                for (int b = 0; b < B; b++) assert_close(norms[b], own[b], 1e-4);
                double d = rel_diff(got, want, n);
                if (!(d < 1e-4)) print_error("%s mode %d per_layer %d: rel diff %g\n", a->spec, mode, per_layer, d);
                assert_true(d < 1e-4);
            }
        free(g), free(want), free(got);
        dpfl_nn_ws_free(ws), dpfl_nn_ws_free(ws1);
        fx_free(&f);
    }
}

static void clipped_norms_bounded(void **state)
{
    (void)state;
    const double clips[] = {1e-3, 0.05, 1.0};
    for (size_t i = 0; i < sizeof ps_archs / sizeof *ps_archs; i++) {
        const arch *a = &ps_archs[i];
        fixture f;
        fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, 3, 700 + i);
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, 1, NULL);
        float *g = malloc(f.m.nparam * sizeof *g);
        for (int mode = DPFL_CONV_NORMS_MATERIALIZE; mode <= DPFL_CONV_NORMS_GHOST; mode++)
            for (int per_layer = 0; per_layer < 2; per_layer++)
                for (int ci = 0; ci < 3; ci++)
                    for (int b = 0; b < f.B; b++) {
                        assert_int_equal(dpfl_nn_ws_set_conv_norms(ws, (dpfl_conv_norms)mode, NULL), DPFL_OK);
                        dpfl_clip_spec cs = {clips[ci], per_layer, NULL};
                        dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x + (size_t)b * f.m.in_dim, f.y + b, 1, &cs,
                                                 NULL, g, NULL);
                        double norm = dpfl_vec_norm2(g, f.m.nparam);
                        if (!(norm <= clips[ci] * (1 + 1e-6)))
                            print_error("%s: clipped norm %.9g > C = %g\n", a->spec, norm, clips[ci]);
                        assert_true(norm <= clips[ci] * (1 + 1e-6));
                    }
        free(g);
        dpfl_nn_ws_free(ws);
        fx_free(&f);
    }
}

static void infinite_clip_is_batch_times_mean_grad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ps_archs / sizeof *ps_archs; i++) {
        const arch *a = &ps_archs[i];
        fixture f;
        const int B = 6;
        fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, B, 900 + i);
        size_t n = f.m.nparam;
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, B, NULL);
        float *g = malloc(n * sizeof *g), *s = malloc(n * sizeof *s);
        dpfl_rng r1, r2;
        dpfl_rng_init_seed(&r1, 5);
        dpfl_rng_init_seed(&r2, 5); /* same dropout masks in both passes */
        double l1 = dpfl_nn_grad(&f.m, f.params, ws, f.x, f.y, B, &r1, g, NULL);
        dpfl_vec_scale(g, (float)B, n);
        dpfl_clip_spec cs = {INFINITY, 0, NULL};
        double l2 = dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x, f.y, B, &cs, &r2, s, NULL);
        assert_close(l2, l1, 1e-6);
        double d = rel_diff(s, g, n);
        if (!(d < 1e-5)) print_error("%s: rel diff %g\n", a->spec, d);
        assert_true(d < 1e-5);
        /* an empty batch is a valid DP-SGD step: zero sum */
        dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x, f.y, 0, &cs, &r2, s, NULL);
        assert_true(dpfl_vec_norm2(s, n) == 0.0);
        free(g), free(s);
        dpfl_nn_ws_free(ws);
        fx_free(&f);
    }
}

/* The fused steps (the update inside the backward pass) against gradient, then update: the same step up to float
 * rounding, for every layer kind and both conv-norm paths; the loss and the norms are the same; an empty batch
 * leaves the model alone; and the fused step gives the same bits on 1 or 3 threads. */
static void fused_steps_match_gradient_then_update(void **state)
{
    (void)state;
    const float lr = 0.5f;
    for (size_t i = 0; i < sizeof ps_archs / sizeof *ps_archs; i++) {
        const arch *a = &ps_archs[i];
        fixture f;
        const int B = 5;
        fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, B, 1100 + i);
        const size_t n = f.m.nparam;
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, B, NULL), *ws3 = dpfl_nn_ws_create(&f.m, B, NULL);
        assert_non_null(ws);
        assert_non_null(ws3);
        assert_int_equal(dpfl_nn_ws_set_threads(ws, 1, NULL), DPFL_OK);
        assert_int_equal(dpfl_nn_ws_set_threads(ws3, 3, NULL), DPFL_OK);
        float *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got),
              *got3 = malloc(n * sizeof *got3), norms[5], norms2[5];
        dpfl_rng r1, r2, r3;
        /* non-private: the update params_after - params */
        dpfl_rng_init_seed(&r1, 9), dpfl_rng_init_seed(&r2, 9), dpfl_rng_init_seed(&r3, 9); /* same dropout masks */
        int32_t c1 = -1, c2 = -2;
        double l1 = dpfl_nn_grad(&f.m, f.params, ws, f.x, f.y, B, &r1, g, &c1);
        memcpy(want, f.params, n * sizeof *want);
        dpfl_vec_axpy(want, -lr, g, n);
        memcpy(got, f.params, n * sizeof *got);
        memcpy(got3, f.params, n * sizeof *got3);
        double l2 = dpfl_nn_sgd_step(&f.m, got, ws, f.x, f.y, B, lr, &r2, &c2);
        dpfl_nn_sgd_step(&f.m, got3, ws3, f.x, f.y, B, lr, &r3, NULL);
        assert_close(l2, l1, 1e-6);
        assert_int_equal(c1, c2);
        assert_memory_equal(got, got3, n * sizeof *got);
        for (size_t j = 0; j < n; j++) want[j] -= f.params[j], got[j] -= f.params[j];
        double d = rel_diff(got, want, n);
        if (!(d < 1e-4)) print_error("%s: sgd step rel diff %g\n", a->spec, d);
        assert_true(d < 1e-4);
        assert_true(dpfl_vec_norm2(want, n) > 0.0);
        /* DP-SGD: params += alpha * clipped sum, both conv-norm paths */
        for (int mode = DPFL_CONV_NORMS_MATERIALIZE; mode <= DPFL_CONV_NORMS_GHOST; mode++) {
            assert_int_equal(dpfl_nn_ws_set_conv_norms(ws, (dpfl_conv_norms)mode, NULL), DPFL_OK);
            dpfl_clip_spec cs = {0.05, 0, NULL};
            const float alpha = -lr / B;
            dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x, f.y, B, &cs, NULL, g, norms);
            memcpy(want, f.params, n * sizeof *want);
            dpfl_vec_axpy(want, alpha, g, n);
            memcpy(got, f.params, n * sizeof *got);
            dpfl_nn_clipped_grad_sum_axpy(&f.m, got, ws, f.x, f.y, B, &cs, NULL, alpha, norms2);
            assert_memory_equal(norms, norms2, sizeof norms);
            for (size_t j = 0; j < n; j++) want[j] -= f.params[j], got[j] -= f.params[j];
            d = rel_diff(got, want, n);
            if (!(d < 1e-4)) print_error("%s mode %d: clipped step rel diff %g\n", a->spec, mode, d);
            assert_true(d < 1e-4);
            /* every example clipped: the step is at most lr * C */
            assert_true(dpfl_vec_norm2(got, n) <= lr * cs.clip * (1 + 1e-4));
        }
        /* an empty batch moves nothing */
        memcpy(got, f.params, n * sizeof *got);
        dpfl_clip_spec cs = {1.0, 0, NULL};
        dpfl_nn_clipped_grad_sum_axpy(&f.m, got, ws, f.x, f.y, 0, &cs, NULL, -lr, NULL);
        dpfl_nn_sgd_step(&f.m, got, ws, f.x, f.y, 0, lr, NULL, NULL);
        assert_memory_equal(got, f.params, n * sizeof *got);
        free(g), free(want), free(got), free(got3);
        dpfl_nn_ws_free(ws), dpfl_nn_ws_free(ws3);
        fx_free(&f);
    }
}

/* Noise on a workspace's threads: the bits of dpfl_rng_add_gaussian_chunked, for 1 and 3 threads, over several
 * chunks and a partial one; and it is noise (std within 2% of sigma over 3.3e5 draws, zero mean). */
static void ws_noise_equals_chunked_noise(void **state)
{
    (void)state;
    dpfl_model m;
    assert_int_equal(dpfl_model_create("net:fc3", 1, 1, 4, 3, &m, NULL), DPFL_OK);
    const size_t n = 5 * DPFL_NOISE_CHUNK + 123;
    float *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
    for (int t = 1; t <= 3; t += 2) {
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, 2, NULL);
        assert_non_null(ws);
        assert_int_equal(dpfl_nn_ws_set_threads(ws, t, NULL), DPFL_OK);
        dpfl_rng r1, r2;
        dpfl_rng_init_seed(&r1, 77 + t), dpfl_rng_init_seed(&r2, 77 + t);
        for (size_t i = 0; i < n; i++) want[i] = got[i] = (float)i * 1e-6f;
        dpfl_rng_add_gaussian_chunked(&r1, want, n, 0.7, 0.5f, 1);
        dpfl_nn_ws_add_gaussian(ws, &r2, got, n, 0.7, 0.5f);
        assert_memory_equal(got, want, n * sizeof *got);
        assert_true(dpfl_rng_u64(&r1) == dpfl_rng_u64(&r2)); /* both advanced r alike */
        double s1 = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) {
            double z = (double)got[i] / 0.5 - (double)i * 1e-6;
            s1 += z, s2 += z * z;
        }
        assert_true(fabs(sqrt(s2 / n) / 0.7 - 1) < 0.02);
        assert_true(fabs(s1 / n) < 5 * 0.7 / sqrt((double)n));
        dpfl_nn_ws_free(ws);
    }
    free(want), free(got);
    dpfl_model_free(&m);
}

/* ---------------------------------------------------------------- specs, files, determinism */
static void spec_errors_are_reported(void **state)
{
    (void)state;
    dpfl_model m;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("resnet50", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "unknown model"));
    assert_non_null(strstr(err.msg, "cnn-small"));
    assert_int_equal(dpfl_model_create("mlp:100-10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "784"));
    assert_int_equal(dpfl_model_create("mlp:784-100-7", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("mlp:784-100-10:bias", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("mlp:784--10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:conv8k3,frob,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "frob"));
    assert_int_equal(dpfl_model_create("net:conv8k30,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:drop1.5,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("cnn-mnist", 1, 4, 4, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("logreg", 1, 28, 28, 1, &m, &err), DPFL_EINVAL);
    /* BatchNorm is refused, saying why and what to use */
    assert_int_equal(dpfl_model_create("net:conv8k3,bn,relu,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "BatchNorm"));
    assert_non_null(strstr(err.msg, "per-example"));
    assert_non_null(strstr(err.msg, "gn<G>"));
    assert_int_equal(dpfl_model_create("net:conv8k3,batchnorm2d,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    /* groups must divide the channels; residual blocks must be closed, not nested, and fit */
    assert_int_equal(dpfl_model_create("net:conv6k3,gn4,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "divide"));
    assert_int_equal(dpfl_model_create("net:conv6k3,(conv6k3p1,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "not closed"));
    assert_int_equal(dpfl_model_create("net:conv6k3,(conv6k3p1,(relu)+)+,fc10", 1, 28, 28, 10, &m, &err),
                     DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "nested"));
    assert_int_equal(dpfl_model_create("net:conv6k3,relu)+,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:conv6k3,(conv8k3p1)+,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "identity shortcut"));
    assert_int_equal(dpfl_model_create("net:conv6k3,(conv8k3p1)+q,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:conv6k3,(conv6k3p1)+pg4,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:conv6k3,avgpool30,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:conv6k3,gap,gn0,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    /* an unknown token's error lists the tokens of every kind the layer table lets a spec name */
    assert_int_equal(dpfl_model_create("net:conv8k3,frob,fc10", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    for (int k = 0; k < dpfl_nn_layer_kind_count(); k++) {
        const dpfl_layer_ops *ops = dpfl_nn_layer_ops((dpfl_layer_kind)k);
        if (!ops->match) continue;
        assert_non_null(ops->syntax);
        assert_non_null(strstr(err.msg, ops->syntax));
    }
}

/* The squared-error loss against its definition (nn.h DPFL_LOSS_MSE), computed here from the forward pass's
 * outputs: the mean loss, the accuracy (argmax; one output: > 0.5), and a linear model's weight gradient
 * (1/B) sum_b (2/K) (z_b - t_b) x_b^T.  Where the spec may name it: the last item, or the mse: prefix. */
static void mse_loss_matches_its_definition(void **state)
{
    (void)state;
    for (int K = 1; K <= 4; K += 3) {
        fixture f;
        const int B = 6, F = 5, classes = K == 1 ? 2 : K;
        fx_make(&f, K == 1 ? "mse:net:fc1" : "net:fc4,mse", 1, 1, F, classes, B, 60 + K);
        assert_int_equal(f.m.loss, DPFL_LOSS_MSE);
        assert_int_equal(f.m.out_dim, K);
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, B, NULL);
        float z[6 * 4], dz[6 * 4], *g = malloc(f.m.nparam * sizeof *g);
        memcpy(z, dpfl_nn_forward(&f.m, f.params, ws, f.x, B, 0, NULL), sizeof(float) * B * K);
        double want = 0;
        int hits = 0;
        for (int b = 0; b < B; b++) {
            int arg = 0;
            for (int k = 0; k < K; k++) {
                double t = K == 1 ? f.y[b] : (k == f.y[b]), e = z[b * K + k] - t;
                want += e * e / K / B;
                dz[b * K + k] = (float)(2 * e / K / B);
                if (z[b * K + k] > z[b * K + arg]) arg = k;
            }
            hits += K == 1 ? (z[b] > 0.5f) == (f.y[b] == 1) : arg == f.y[b];
        }
        double loss, acc;
        dpfl_nn_evaluate(&f.m, f.params, ws, f.x, f.y, B, &loss, &acc);
        assert_close(loss, want, 1e-6);
        assert_close(acc, hits / (double)B, 1e-12);
        int32_t correct;
        assert_close(dpfl_nn_grad(&f.m, f.params, ws, f.x, f.y, B, NULL, g, &correct), want, 1e-6);
        assert_int_equal(correct, hits);
        for (int k = 0; k < K; k++)
            for (int j = 0; j < F; j++) {
                double gw = 0;
                for (int b = 0; b < B; b++) gw += dz[b * K + k] * f.x[b * F + j];
                assert_close(g[k * F + j], gw, 1e-5);
            }
        for (int k = 0; k < K; k++) { /* the bias: the summed output gradient */
            double gb = 0;
            for (int b = 0; b < B; b++) gb += dz[b * K + k];
            assert_close(g[K * F + k], gb, 1e-5);
        }
        free(g);
        dpfl_nn_ws_free(ws);
        fx_free(&f);
    }
    dpfl_model m;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("mse:transform:mlp:12-8-4", 1, 3, 4, 4, &m, &err), DPFL_OK);
    assert_int_equal(m.loss, DPFL_LOSS_MSE);
    assert_int_equal(m.layers[0].kind, DPFL_LAYER_AFFINE);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("mlp:12-8-4", 1, 3, 4, 4, &m, &err), DPFL_OK);
    assert_int_equal(m.loss, DPFL_LOSS_CE);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("net:fc4,mse,relu", 1, 3, 4, 4, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "last item"));
    assert_int_equal(dpfl_model_create("mse:net:fc4,mse", 1, 3, 4, 4, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:fc4,(fc4,mse)+", 1, 3, 4, 4, &m, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_model_create("net:mse", 1, 3, 4, 4, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "no layers"));
}

/* Max pooling with padding pads with -infinity (PyTorch's MaxPool2d): on an all-negative plane every window's
 * output is the max of the cells it covers inside the plane, never a 0 from the padding.  Padding over half the
 * kernel is refused. */
static void maxpool_padding_is_minus_infinity(void **state)
{
    (void)state;
    dpfl_model m;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("net:pool3s2p1,fc2", 1, 5, 5, 2, &m, &err), DPFL_OK);
    assert_int_equal(m.layers[0].out_h, 3);
    assert_int_equal(m.layers[0].out_w, 3);
    float x[25], w[9 * 2 + 2] = {0};
    for (int i = 0; i < 25; i++) x[i] = -1.0f - (float)((i * 7) % 11);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, 1, &err);
    dpfl_nn_forward(&m, w, ws, x, 1, 0, NULL);
    const float *o = ws->slots.act[ws->slots.out_slot[0]];
    for (int oy = 0; oy < 3; oy++)
        for (int ox = 0; ox < 3; ox++) {
            float best = -INFINITY;
            for (int y = 2 * oy - 1; y <= 2 * oy + 1; y++)
                for (int c = 2 * ox - 1; c <= 2 * ox + 1; c++)
                    if (y >= 0 && y < 5 && c >= 0 && c < 5) best = fmaxf(best, x[y * 5 + c]);
            assert_true(o[oy * 3 + ox] == best);
            assert_true(best < 0);
        }
    dpfl_nn_ws_free(ws);
    dpfl_model_free(&m);
    assert_int_equal(dpfl_model_create("net:pool3p2,fc2", 1, 5, 5, 2, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "half"));
}

static void param_counts(void **state)
{
    (void)state;
    struct {
        const char *spec;
        size_t n;
        int out;
    } cases[] = {
        {"cnn-small", 26010, 10},           {"cnn-mcmahan", 1663370, 10},
        {"cnn-mnist", 1199882, 10},         {"mlp:784-512-256-10", 535818, 10},
        {"mlp:784-600-100-10:nobias", 784 * 600 + 600 * 100 + 1000, 10},
        {"logreg", 7850, 10},
        /* on 3 x 32 x 32: the TensorFlow CNN tutorial's summary; ResNet-20 (He et al. 2016, 6n+2 layers, n = 3)
         * is 269,722 with option-A shortcuts, + 2,752 for the two 1x1 projections and their GroupNorms */
        {"cnn-tf-cifar", 122570, 10},       {"resnet20-gn", 272474, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dpfl_model m;
        const int rgb = i >= 6;
        assert_int_equal(dpfl_model_create(cases[i].spec, rgb ? 3 : 1, rgb ? 32 : 28, rgb ? 32 : 28, 10, &m, NULL),
                         DPFL_OK);
        assert_int_equal(m.nparam, cases[i].n);
        assert_int_equal(m.out_dim, cases[i].out);
        dpfl_model_free(&m);
    }
    dpfl_model m;
    assert_int_equal(dpfl_model_create("logreg", 1, 1, 13, 2, &m, NULL), DPFL_OK);
    assert_int_equal(m.out_dim, 1);
    assert_int_equal(m.nparam, 14);
    dpfl_model_free(&m);
}

static void init_is_deterministic(void **state)
{
    (void)state;
    fixture a, b, c;
    fx_make(&a, "cnn-small", 1, 28, 28, 10, 2, 42);
    fx_make(&b, "cnn-small", 1, 28, 28, 10, 2, 42);
    fx_make(&c, "cnn-small", 1, 28, 28, 10, 2, 43);
    assert_memory_equal(a.params, b.params, a.m.nparam * sizeof(float));
    assert_memory_not_equal(a.params, c.params, a.m.nparam * sizeof(float));
    /* bounds of PyTorch's default init: first conv fan_in = 64 */
    for (size_t i = 0; i < 1024; i++) assert_true(fabsf(a.params[i]) <= 0.125f);
    fx_free(&a), fx_free(&b), fx_free(&c);
}

static void save_load_round_trip_and_rejects(void **state)
{
    (void)state;
    char dir[] = "/tmp/dpfl_nn_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.bin", dir);
    fixture f;
    fx_make(&f, "mlp:12-8-4", 1, 3, 4, 4, 1, 3);
    dpfl_error err;
    assert_int_equal(dpfl_model_save(&f.m, f.params, path, &err), DPFL_OK);
    float *p = calloc(f.m.nparam, sizeof *p);
    assert_int_equal(dpfl_model_load(&f.m, p, path, &err), DPFL_OK);
    assert_memory_equal(p, f.params, f.m.nparam * sizeof *p);
    /* another architecture */
    dpfl_model other;
    assert_int_equal(dpfl_model_create("mlp:12-9-4", 1, 3, 4, 4, &other, NULL), DPFL_OK);
    float *q = calloc(other.nparam, sizeof *q);
    assert_int_equal(dpfl_model_load(&other, q, path, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "architecture"));
    /* a flipped byte fails the checksum */
    FILE *fp = fopen(path, "r+b");
    fseek(fp, 40, SEEK_SET);
    int ch = fgetc(fp);
    fseek(fp, 40, SEEK_SET);
    fputc(ch ^ 0x10, fp);
    fclose(fp);
    assert_int_not_equal(dpfl_model_load(&f.m, p, path, &err), DPFL_OK);
    /* missing file */
    snprintf(path, sizeof path, "%s/none.bin", dir);
    assert_int_equal(dpfl_model_load(&f.m, p, path, &err), DPFL_EIO);
    snprintf(path, sizeof path, "%s/model.bin", dir);
    unlink(path);
    rmdir(dir);
    free(p), free(q);
    dpfl_model_free(&other);
    fx_free(&f);
}

static void evaluate_matches_forward_and_ignores_dropout(void **state)
{
    (void)state;
    fixture f;
    fx_make(&f, "cnn-mnist", 1, 28, 28, 10, 7, 17);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, 3, NULL); /* batches 3 + 3 + 1 */
    double loss, acc;
    dpfl_nn_evaluate(&f.m, f.params, ws, f.x, f.y, f.B, &loss, &acc);
    dpfl_nn_ws *ws7 = dpfl_nn_ws_create(&f.m, 7, NULL);
    float *g = malloc(f.m.nparam * sizeof *g);
    int32_t correct;
    double l2 = dpfl_nn_grad(&f.m, f.params, ws7, f.x, f.y, f.B, NULL, g, &correct);
    assert_close(loss, l2, 1e-5);
    assert_close(acc, correct / 7.0, 1e-12);
    free(g);
    dpfl_nn_ws_free(ws), dpfl_nn_ws_free(ws7);
    fx_free(&f);
}

/* The direct stride-1 kernels (AVX-512 builds), with (AUTO) and without (DIRECT) Winograd F(2x2, 3x3) for 3x3
 * layers with 8+ channels each way, agree with im2col + SGEMM on outputs, gradients, per-example norms and
 * clipped sums: padding, odd output sizes, channel counts that are not multiples of 4 or 16, k = 5, a conv
 * reading a CNHW activation, and batches that are not multiples of the weight-gradient groups. */
static void direct_conv_matches_im2col(void **state)
{
    (void)state;
    static const arch cases[] = {
        {"net:conv3k3p1,tanh,flatten,fc3", 2, 5, 5, 3},
        {"net:conv5k5p2,relu,pool2,conv7k3,relu,fc4", 3, 12, 11, 4},
        {"net:conv3k2nb,tanh,conv2k3,tanh,fc3", 2, 6, 6, 3},
        {"net:conv8k3,relu,conv16k3p1,relu,pool2,fc3", 5, 9, 9, 3},
        {"net:conv9k3,tanh,conv10k3,tanh,conv18k3p1,relu,fc3", 9, 10, 11, 3},
        {"cnn-mnist", 1, 28, 28, 10},
        {"cnn-mcmahan", 1, 28, 28, 10},
    };
    static const dpfl_conv_impl impls[] = {DPFL_CONV_IMPL_AUTO, DPFL_CONV_IMPL_DIRECT};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t v = 0; v < 2; v++) {
            const arch *a = &cases[i];
            fixture f;
            const int B = 7;
            fx_make(&f, a->spec, a->c, a->h, a->w, a->classes, B, 40 + i);
            size_t n = f.m.nparam, no = (size_t)B * f.m.out_dim;
            dpfl_nn_ws *wd = dpfl_nn_ws_create(&f.m, B, NULL), *wi = dpfl_nn_ws_create(&f.m, B, NULL);
            assert_non_null(wd);
            assert_non_null(wi);
            dpfl_nn_ws_set_conv_impl(wd, impls[v]);
            dpfl_nn_ws_set_conv_impl(wi, DPFL_CONV_IMPL_IM2COL);
            float *gd = malloc(n * sizeof *gd), *gi = malloc(n * sizeof *gi), *od = malloc(no * sizeof *od);
            memcpy(od, dpfl_nn_forward(&f.m, f.params, wd, f.x, B, 0, NULL), no * sizeof *od);
            const float *oi = dpfl_nn_forward(&f.m, f.params, wi, f.x, B, 0, NULL);
            double d = rel_diff(od, oi, no);
            if (!(d < 1e-5)) print_error("%s (impl %d) forward: rel diff %g\n", a->spec, (int)impls[v], d);
            assert_true(d < 1e-5);
            dpfl_nn_grad(&f.m, f.params, wd, f.x, f.y, B, NULL, gd, NULL);
            dpfl_nn_grad(&f.m, f.params, wi, f.x, f.y, B, NULL, gi, NULL);
            d = rel_diff(gd, gi, n);
            if (!(d < 1e-5)) print_error("%s (impl %d) grad: rel diff %g\n", a->spec, (int)impls[v], d);
            assert_true(d < 1e-5);
            float nd[7], ni[7];
            dpfl_clip_spec cs = {0.05, 0, NULL};
            dpfl_nn_clipped_grad_sum(&f.m, f.params, wd, f.x, f.y, B, &cs, NULL, gd, nd);
            dpfl_nn_clipped_grad_sum(&f.m, f.params, wi, f.x, f.y, B, &cs, NULL, gi, ni);
            for (int b = 0; b < B; b++) assert_close(nd[b], ni[b], 1e-5);
            d = rel_diff(gd, gi, n);
            if (!(d < 1e-5)) print_error("%s (impl %d) clipped sum: rel diff %g\n", a->spec, (int)impls[v], d);
            assert_true(d < 1e-5);
            free(gd), free(gi), free(od);
            dpfl_nn_ws_free(wd), dpfl_nn_ws_free(wi);
            fx_free(&f);
        }
}

/* Same seed, same gradients, whatever the number of nn threads (dropout masks included). */
/* AUTO runs a stride-1 conv on the direct kernels only when its output has 64 or more positions: below that one
 * im2col GEMM over the batch is faster (dpfl_nn_conv_direct_pays); DIRECT still forces them everywhere. */
static void direct_kernels_only_where_they_pay(void **state)
{
    (void)state;
    if (!dpfl_cpu_avx512() && !dpfl_cpu_avx2()) skip(); /* no direct kernels in this build or on this CPU */
    dpfl_model m;
    assert_int_equal(dpfl_model_create("net:conv8k3p1,relu,pool2,conv8k3p1,relu,conv8k3s2p1,fc3", 4, 8, 8, 3, &m, NULL),
                     DPFL_OK);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, 2, NULL);
    const int l8 = 0, l4 = 3, strided = 5; /* 8 x 8 output, 4 x 4 output, stride 2 */
    assert_int_equal(m.layers[l4].out_h, 4);
    assert_true(ws->dir.mode[l8] > 0);
    assert_int_equal(ws->dir.mode[l4], 0);
    assert_int_equal(ws->dir.mode[strided], 0);
    dpfl_nn_ws_set_conv_impl(ws, DPFL_CONV_IMPL_DIRECT);
    assert_int_equal(ws->dir.mode[l4], 1);
    assert_int_equal(ws->dir.mode[strided], 0);
    dpfl_nn_ws_set_conv_impl(ws, DPFL_CONV_IMPL_AUTO);
    assert_int_equal(ws->dir.mode[l4], 0);
    dpfl_nn_ws_free(ws);
    dpfl_model_free(&m);
}

static void threads_case(const char *spec, int c, int h, int w);
static void results_independent_of_threads(void **state)
{
    (void)state;
    threads_case("cnn-mnist", 1, 28, 28);
    threads_case("net:conv8k3p1nb,gn4,relu,block8,block16s2g4,avgpool2,fc12,(fc12,ln,tanh,fc12)+,fc10", 3, 12, 12);
}

static void threads_case(const char *spec, int c, int h, int w)
{
    fixture f;
    fx_make(&f, spec, c, h, w, 10, 9, 21);
    size_t n = f.m.nparam;
    float *g[3], nrm[3][9];
    for (int t = 0; t < 3; t++) {
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.m, f.B, NULL);
        assert_int_equal(dpfl_nn_ws_set_threads(ws, t + 1, NULL), DPFL_OK);
        dpfl_rng r;
        dpfl_rng_init_seed(&r, 99);
        g[t] = malloc(2 * n * sizeof(float));
        dpfl_nn_grad(&f.m, f.params, ws, f.x, f.y, f.B, &r, g[t], NULL);
        dpfl_clip_spec cs = {0.5, 0, NULL};
        dpfl_nn_clipped_grad_sum(&f.m, f.params, ws, f.x, f.y, f.B, &cs, &r, g[t] + n, nrm[t]);
        dpfl_nn_ws_free(ws);
    }
    for (int t = 1; t < 3; t++) {
        assert_memory_equal(g[0], g[t], 2 * n * sizeof(float));
        assert_memory_equal(nrm[0], nrm[t], sizeof nrm[0]);
    }
    for (int t = 0; t < 3; t++) free(g[t]);
    fx_free(&f);
}

/* GroupNorm's kernel against a direct double-precision computation of Wu & He's eq. 1-3, in both layouts: every
 * (example, group) standardized with its own mean and variance (eps 1e-5), then scaled and shifted per channel;
 * an example's output does not change when the other examples do. */
static void groupnorm_matches_reference(void **state)
{
    (void)state;
    enum { B = 3, C = 6, S = 5, G = 3 };
    float x[B * C * S], xc[B * C * S], out[B * C * S], outc[B * C * S], w[2 * C], stats[B * G * 2];
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 8);
    for (int i = 0; i < B * C * S; i++) x[i] = (float)(3.0 + 2.0 * dpfl_rng_gaussian(&r));
    for (int i = 0; i < 2 * C; i++) w[i] = (float)dpfl_rng_gaussian(&r);
    for (int b = 0; b < B; b++) /* the same tensor in CNHW */
        for (int c = 0; c < C; c++) memcpy(xc + (c * B + b) * S, x + (b * C + c) * S, S * sizeof(float));
    dpfl_nn_groupnorm_forward(out, stats, x, w, B, C, S, G, 0, 0, B * G);
    dpfl_nn_groupnorm_forward(outc, stats, xc, w, B, C, S, G, 1, 0, B * G);
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++) {
            const int c0 = g * (C / G), c1 = c0 + C / G;
            double mu = 0, var = 0;
            for (int c = c0; c < c1; c++)
                for (int s2 = 0; s2 < S; s2++) mu += x[(b * C + c) * S + s2];
            mu /= (C / G) * S;
            for (int c = c0; c < c1; c++)
                for (int s2 = 0; s2 < S; s2++) var += pow(x[(b * C + c) * S + s2] - mu, 2);
            var /= (C / G) * S;
            for (int c = c0; c < c1; c++)
                for (int s2 = 0; s2 < S; s2++) {
                    double want = (x[(b * C + c) * S + s2] - mu) / sqrt(var + 1e-5) * w[c] + w[C + c];
                    assert_true(fabs(out[(b * C + c) * S + s2] - want) < 1e-5 * (1 + fabs(want)));
                    assert_true(outc[(c * B + b) * S + s2] == out[(b * C + c) * S + s2]);
                }
        }
    float first[C * S];
    memcpy(first, out, sizeof first);
    for (int i = C * S; i < B * C * S; i++) x[i] = 100.0f * x[i] - 7.0f;
    dpfl_nn_groupnorm_forward(out, stats, x, w, B, C, S, G, 0, 0, B * G);
    assert_memory_equal(first, out, sizeof first);
}

/* The tanh layer's own tanh (no libm call, vectorized) within 2 ulp of the exact value over [-20, 20] and over
 * magnitudes from 1e-12 to 100, on both sides of its switch at |x| = 0.55; NaN stays NaN, +-inf gives +-1, and
 * its odd symmetry is exact. */
static void tanh_within_two_ulp(void **state)
{
    (void)state;
    const size_t n = 400000;
    float *x = malloc(2 * n * sizeof *x), *y = malloc(2 * n * sizeof *y);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    for (size_t i = 0; i < n; i++) x[i] = (float)(-20.0 + 40.0 * (double)i / (double)n);
    for (size_t i = n; i < 2 * n; i++)
        x[i] = (float)(pow(10.0, -12.0 + 14.0 * dpfl_rng_uniform(&r)) * (i % 2 ? -1.0 : 1.0));
    x[0] = 0.55f, x[1] = nextafterf(0.55f, 0.0f), x[2] = -0.55f, x[3] = 1e-30f;
    dpfl_nn_tanh_forward(y, x, 2 * n);
    double worst = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        const double t = tanh((double)x[i]), ulp = nextafterf((float)fabs(t), INFINITY) - (float)fabs(t);
        const double e = fabs((double)y[i] - t) / ulp;
        if (e > worst) worst = e;
    }
    print_message("tanh: worst error %.2f ulp\n", worst);
    assert_true(worst <= 2.0);
    for (size_t i = 0; i < n; i++) x[i] = -x[i + n];
    dpfl_nn_tanh_forward(y, x, n);
    for (size_t i = 0; i < n; i++) assert_true(y[i] == -y[i + n]);
    float sx[3] = {NAN, INFINITY, -INFINITY}, sy[3];
    dpfl_nn_tanh_forward(sy, sx, 3);
    assert_true(isnan(sy[0]));
    assert_true(sy[1] == 1.0f && sy[2] == -1.0f);
    free(x), free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(input_transform_is_identity_at_init),
        cmocka_unit_test(gradcheck_small_models),
        cmocka_unit_test(gradcheck_named_geometries),
        cmocka_unit_test(directional_derivative_named_models),
        cmocka_unit_test(persample_equals_one_at_a_time),
        cmocka_unit_test(clipped_norms_bounded),
        cmocka_unit_test(infinite_clip_is_batch_times_mean_grad),
        cmocka_unit_test(fused_steps_match_gradient_then_update),
        cmocka_unit_test(ws_noise_equals_chunked_noise),
        cmocka_unit_test(spec_errors_are_reported),
        cmocka_unit_test(mse_loss_matches_its_definition),
        cmocka_unit_test(maxpool_padding_is_minus_infinity),
        cmocka_unit_test(param_counts),
        cmocka_unit_test(init_is_deterministic),
        cmocka_unit_test(save_load_round_trip_and_rejects),
        cmocka_unit_test(evaluate_matches_forward_and_ignores_dropout),
        cmocka_unit_test(results_independent_of_threads),
        cmocka_unit_test(direct_conv_matches_im2col),
        cmocka_unit_test(direct_kernels_only_where_they_pay),
        cmocka_unit_test(tanh_within_two_ulp),
        cmocka_unit_test(groupnorm_matches_reference),
    };
    return cmocka_run_group_tests_name("nn", tests, NULL, NULL);
}
