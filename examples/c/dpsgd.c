/* DP-SGD from C on the caller's own arrays, with no config file: libdpfl's model, per-example clipping, sampler,
 * noise and optimizer as plain function calls (include/dpfl/nn.h, mech.h, optim.h), and the accountant on the
 * event the mechanism says it carried out.
 *
 *   cc -std=c11 dpsgd.c $(pkg-config --cflags --libs dpfl) -o dpsgd
 *   ./dpsgd [STEPS]                                       (default 300)
 *
 * The data are three Gaussian blobs in 10 dimensions held in ordinary float / int32_t arrays, as a program's own
 * data would be.  Each step: Poisson-sample a batch (each record with probability q = B / n), clip every example's
 * gradient to L2 norm C, sum, add Gaussian noise of std z C, divide by the expected batch q n, take an SGD step.
 * The noise and the sampling come from ChaCha20 keyed from OS entropy, as in a deployment.  Prints the test
 * accuracy and the record-level epsilon of the run. */
#include <dpfl/mech.h>
#include <dpfl/nn.h>
#include <dpfl/optim.h>
#include <dpfl/privacy.h>

#include <stdio.h>
#include <stdlib.h>

enum { DIM = 10, CLASSES = 3, NTRAIN = 3000, NTEST = 1500, BATCH = 64 };

/* x in the shortest "%g" form that reads back as the same double (0.1, not 0.10000000000000001) */
static const char *shortest(double x, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* The caller's data: example i of class i % 3 is N(mean of its class, I), class means 1.5 apart per axis. */
static void make_data(dpfl_rng *r, float *x, int32_t *y, int n)
{
    for (int i = 0; i < n; i++) {
        y[i] = i % CLASSES;
        for (int j = 0; j < DIM; j++)
            x[i * DIM + j] = (float)(dpfl_rng_gaussian(r) + (j % CLASSES == y[i] ? 1.5 : 0.0));
    }
}

int main(int argc, char **argv)
{
    const long long steps = argc > 1 ? atoll(argv[1]) : 300;
    const double clip = 1.0, z = 1.0, lr = 0.5, delta = 1e-5;
    if (steps < 1) {
        fprintf(stderr, "usage: %s [STEPS >= 1]\n", argv[0]);
        return 2;
    }
    static float xtr[NTRAIN * DIM], xte[NTEST * DIM], xb[NTRAIN * DIM];
    static int32_t ytr[NTRAIN], yte[NTEST], yb[NTRAIN], all[NTRAIN], batch[NTRAIN];
    dpfl_rng data_rng, rng;
    dpfl_error err;
    dpfl_rng_init_seed(&data_rng, 7); /* the data only: the same blobs every run */
    make_data(&data_rng, xtr, ytr, NTRAIN);
    make_data(&data_rng, xte, yte, NTEST);
    if (dpfl_rng_init_os(&rng, &err)) goto fail;

    dpfl_model model;
    if (dpfl_model_create("mlp:10-32-3", 1, 1, DIM, CLASSES, &model, &err)) goto fail;
    const size_t P = model.nparam;
    float *params = malloc(P * sizeof *params), *grad = malloc(P * sizeof *grad);
    /* a Poisson batch has no fixed size: a workspace for every record can take any of them */
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&model, NTRAIN, &err);
    dpfl_optim opt;
    dpfl_optim_config oc;
    dpfl_optim_defaults(&oc); /* plain SGD */
    if (!params || !grad || !ws || dpfl_optim_init(&opt, &oc, P, &err)) goto fail;
    dpfl_model_init(&model, params, &rng);
    for (int i = 0; i < NTRAIN; i++) all[i] = i;

    /* The mechanism of one step: sampling rate, sensitivity (C, add-remove), noise std, denominator. */
    const dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(1, NTRAIN, BATCH, clip, z);
    const dpfl_clip_spec cs = {.clip = clip, .per_layer = 0, .radius = NULL};
    for (long long t = 0; t < steps; t++) {
        int32_t b = dpfl_mech_poisson_batch(&rng, all, NTRAIN, d.q, batch);
        for (int32_t i = 0; i < b; i++) {
            for (int j = 0; j < DIM; j++) xb[i * DIM + j] = xtr[batch[i] * DIM + j];
            yb[i] = ytr[batch[i]];
        }
        dpfl_nn_clipped_grad_sum(&model, params, ws, xb, yb, b, &cs, NULL, grad, NULL); /* b = 0: zeros */
        dpfl_mech_gaussian(&rng, grad, P, d.z, d.sens, (float)(1.0 / d.denom), 1);    /* (sum + noise) / (q n) */
        dpfl_optim_step(&opt, params, grad, lr);
    }

    double loss, acc;
    dpfl_nn_evaluate(&model, params, ws, xte, yte, NTEST, &loss, &acc);
    dpfl_event ev = dpfl_mech_dpsgd_event(&d, steps); /* what the loop above did, as the accountant sees it */
    dpfl_guarantee g;
    if (dpfl_account_epsilon(&ev, 1, delta, DPFL_ACC_RDP, NULL, &g, &err)) goto fail;
    printf("model: %s, %zu parameters\n", model.spec, P);
    char qs[32], zs[32];
    printf("steps: %lld, q: %s, noise: %s, clip: %g\n", steps, shortest(d.q, qs, sizeof qs),
           shortest(d.z, zs, sizeof zs), clip);
    printf("test accuracy: %.4f (loss %.4f)\n", acc, loss);
    printf("record-level epsilon: %.12g at delta %g (rdp, order %.4g)\n", g.epsilon, delta, g.order);
    dpfl_optim_free(&opt);
    dpfl_nn_ws_free(ws);
    dpfl_model_free(&model);
    free(params);
    free(grad);
    return 0;
fail:
    fprintf(stderr, "dpsgd: %s\n", err.msg);
    return 1;
}
