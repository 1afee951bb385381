/* One thread's training step in CPU time: examples per CPU-second of a non-private SGD step at batch 64.
 *
 * bench_nn's examples/s are wall-clock rates on every core, the figure users see, but on a shared machine they
 * drift with the other tenants' load by +-50%.  The CPU time of one thread does not count the time it waits for
 * the cores (only what it shares with them: caches, memory bandwidth), so two builds of a kernel can be compared
 * here, interleaved, while the machine is busy.  Not a substitute for bench_nn's figures on a quiet machine.
 *
 *   bench_step [STEPS [MODEL...]]    default: 6 steps of cnn-tf-cifar and resnet20-gn on 3 x 32 x 32 input
 */
#include "dpfl/nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define B 64

static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* examples per CPU-second over `steps` steps after one warm-up step; 0 and a message on error */
static double step_rate(const char *spec, int steps, const float *x, const int32_t *y)
{
    dpfl_error err = {{0}};
    dpfl_model m;
    if (dpfl_model_create(spec, 3, 32, 32, 10, &m, &err)) {
        fprintf(stderr, "bench_step: %s\n", err.msg);
        return 0.0;
    }
    double rate = 0.0;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    float *p = malloc(m.nparam * sizeof *p);
    dpfl_nn_ws *ws = p ? dpfl_nn_ws_create(&m, B, &err) : NULL;
    if (!ws || dpfl_nn_ws_set_threads(ws, 1, &err)) {
        fprintf(stderr, "bench_step: %s: %s\n", spec, p ? err.msg : "out of memory");
    } else {
        dpfl_model_init(&m, p, &r);
        dpfl_nn_sgd_step(&m, p, ws, x, y, B, 0.01f, &r, NULL);
        double t = thread_cpu_seconds();
        for (int s = 0; s < steps; s++) dpfl_nn_sgd_step(&m, p, ws, x, y, B, 0.01f, &r, NULL);
        t = thread_cpu_seconds() - t;
        rate = t > 0 ? steps * (double)B / t : 0.0;
    }
    dpfl_nn_ws_free(ws);
    free(p);
    dpfl_model_free(&m);
    return rate;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    if (steps < 1) {
        fprintf(stderr, "usage: bench_step [STEPS [MODEL...]]\n");
        return 2;
    }
    const char *defaults[] = {"cnn-tf-cifar", "resnet20-gn"};
    const char **models = argc > 2 ? (const char **)argv + 2 : defaults;
    const int nmodels = argc > 2 ? argc - 2 : 2;
    float *x = malloc((size_t)B * 3072 * sizeof *x);
    int32_t y[B];
    if (!x) return 1;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2024);
    for (size_t i = 0; i < (size_t)B * 3072; i++) x[i] = (float)dpfl_rng_uniform(&r);
    for (int i = 0; i < B; i++) y[i] = (int32_t)dpfl_rng_below(&r, 10);
    int rc = 0;
    for (int i = 0; i < nmodels; i++) {
        double e = step_rate(models[i], steps, x, y);
        if (e <= 0) rc = 1;
        else printf("%-16s batch %d, 1 thread: %8.1f examples per CPU-second\n", models[i], B, e);
    }
    free(x);
    return rc;
}
