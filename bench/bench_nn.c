/* Training throughput of the nn engine (examples/s) against the machine's SGEMM rate.
 *
 * For logreg, mlp:784-512-256-10 and cnn-mnist at batch 16 and 64 on synthetic MNIST-shaped data, for
 * cnn-tf-cifar and resnet20-gn at batch 64 and resnet18-gn (11.2M parameters) at batch 32 on synthetic
 * CIFAR-shaped (3 x 32 x 32) data:
 *   nonprivate: one SGD step on the mean gradient (dpfl_nn_sgd_step: the update inside the backward GEMMs);
 *   dpsgd:      params -= lr / B * (clipped sum, flat clip C = 1) (dpfl_nn_clipped_grad_sum_axpy, fused the same
 *               way), then Gaussian noise of std lr / B * z C (z = 1) added to params on the workspace's threads,
 *               as many as there are cores (dpfl_nn_ws_add_gaussian): the DP-SGD step, the noise in its own pass.
 * The two modes of a model and batch warm up, then alternate in blocks of about 50 ms until each has run for at
 * least DPFL_BENCH_SECONDS (default 2) and 5 steps, so that a drifting host (other tenants) slows both alike and
 * their ratio, what the DP-SGD target is stated in, is measured under the same conditions.  Prints a table and
 * writes a JSON list of {model, batch, mode, examples_per_second, grad_examples_per_second, peak_rss_mb, nparam,
 * train_mflop_per_example} (nparam: the model's parameter count, which bench/pytorch_reference.py checks its
 * models against; train_mflop_per_example: train_flop below, so examples/s x it is the GEMM rate reached) plus
 * {gemm_gflops, fma_peak_gflops} to argv[1] (default bench/results.json).  grad_examples_per_second counts only the fused
 * gradient-and-update call, so the cost of the noise is visible separately.  peak_rss_mb is the process's peak
 * resident memory when the row is done (models run in order, the largest last: for resnet18-gn it is that
 * model's peak, its two workspaces, parameter copies and the data included). */
#define _GNU_SOURCE /* sched_getaffinity */
#include "dpfl/nn.h"

#include <cblas.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NDATA 2048

static double bench_seconds(void)
{
    const char *s = getenv("DPFL_BENCH_SECONDS");
    double v = s ? atof(s) : 2.0;
    return v > 0 ? v : 2.0;
}

/* Large square SGEMM: the ceiling for everything above. */
static double gemm_gflops(double secs)
{
    /* dpfl keeps OpenBLAS single-threaded (src/nn/linear.c); the ceiling is OpenBLAS on every core this process may
     * run on (taskset, a cgroup cpuset): more threads than that would only measure oversubscription */
    cpu_set_t cs;
    int ncpu = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    openblas_set_num_threads(ncpu > 0 ? ncpu : 1);
    const int n = 2048;
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b),
          *c = malloc((size_t)n * n * sizeof *c);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double best = 0;
    double t_end = dpfl_now() + secs;
    int reps = 0;
    while (reps < 3 || dpfl_now() < t_end) {
        double t = dpfl_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t = dpfl_now() - t;
        double g = 2.0 * n * n * (double)n / t / 1e9;
        if (g > best) best = g;
        reps++;
    }
    free(a), free(b), free(c);
    openblas_set_num_threads(1);
    return best;
}

/* The machine's measured FMA rate: every core this process may run on, each thread a chain-free loop of 12
 * independent vector FMAs (enough to cover the FMA latency on two pipes), at the widest width the CPU runs
 * (AVX-512 where it has it, else AVX2 + FMA).  It is the hard ceiling for any float32 training step, dpfl's or
 * PyTorch's: examples/s x train_mflop_per_example cannot exceed it (2 FLOP per lane per FMA). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <pthread.h>
#define FMA_ITERS 20000000L
__attribute__((target("avx2,fma"))) static void *fma_loop_avx2(void *arg)
{
    __m256 acc[12], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < FMA_ITERS; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
    float sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm256_cvtss_f32(acc[i]);
    *(float *)arg = sink;
    return NULL;
}
__attribute__((target("avx512f"))) static void *fma_loop_avx512(void *arg)
{
    __m512 acc[12], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < FMA_ITERS; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
    float sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm512_cvtss_f32(acc[i]);
    *(float *)arg = sink;
    return NULL;
}
static double fma_gflops(int *lanes_out)
{
    *lanes_out = 0;
    int lanes = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8 : 0;
    if (!lanes) return 0.0;
    void *(*loop)(void *) = lanes == 16 ? fma_loop_avx512 : fma_loop_avx2;
    cpu_set_t cs;
    int n = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 256) n = 256;
    pthread_t th[256];
    float sink[256];
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        double t = dpfl_now();
        int started = 0;
        for (int i = 0; i < n; i++) started += pthread_create(&th[i], NULL, loop, &sink[i]) == 0;
        if (started < n) n = started; /* pthread_create failed: measure the threads that did start */
        for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
        t = dpfl_now() - t;
        double g = (double)n * FMA_ITERS * 12.0 * lanes * 2.0 / t / 1e9;
        if (g > best) best = g;
    }
    *lanes_out = lanes;
    return best;
}
#else
static double fma_gflops(int *lanes_out)
{
    *lanes_out = 0;
    return 0.0;
}
#endif

typedef struct {
    const char *model, *mode;
    int batch;
    double eps, grad_eps, rss_mb;
    size_t nparam;
    double mflop; /* multiply-add FLOPs of one example's training step (train_flop) / 1e6 */
} row;

/* 2 x the multiply-adds of one example's SGD step in the convolutions and linear layers: forward, weight gradient,
 * and input gradient except for the first such layer (no gradient is taken for the input).  GroupNorm, pooling,
 * activations and the update are left out: this is the GEMM-shaped work the FMA peak bounds. */
static double train_flop(const dpfl_model *m)
{
    double f = 0.0, first = -1.0;
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        double mac = 0.0;
        if (L->kind == DPFL_LAYER_CONV2D)
            mac = (double)L->out_c * L->out_h * L->out_w * L->in_c * L->k * L->k;
        else if (L->kind == DPFL_LAYER_LINEAR)
            mac = (double)L->in_c * L->in_h * L->in_w * L->out_c * L->out_h * L->out_w;
        if (mac > 0 && first < 0) first = mac;
        f += 3.0 * mac;
    }
    return 2.0 * (f - (first > 0 ? first : 0.0));
}

static double peak_rss_mb(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) ? 0.0 : u.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

/* One model and batch, both modes: each has its own model copy, workspace and generators; the two alternate in
 * blocks of about 50 ms until each has run for secs (and at least 5 steps), so that a host whose speed drifts
 * (other tenants) slows both alike and the DP-SGD / non-private ratio stays meaningful. */
typedef struct {
    dpfl_model m;
    dpfl_rng rng, noise;
    float *p;
    dpfl_nn_ws *ws;
    long steps, it;
    double t, tg;
} mode_state;

static int shape_c = 1, shape_hw = 28; /* the current model's input: c x hw x hw */

static void mode_init(mode_state *s, const char *spec, int B)
{
    dpfl_error err;
    memset(s, 0, sizeof *s);
    if (dpfl_model_create(spec, shape_c, shape_hw, shape_hw, 10, &s->m, &err) || !(s->p = malloc(s->m.nparam * sizeof *s->p))) {
        fprintf(stderr, "bench_nn: %s\n", err.msg);
        exit(1);
    }
    dpfl_rng_init_seed(&s->rng, 1);
    dpfl_rng_derive(&s->rng, &s->noise, 1, 2, 3);
    dpfl_model_init(&s->m, s->p, &s->rng);
    if (!(s->ws = dpfl_nn_ws_create(&s->m, B, &err))) {
        fprintf(stderr, "bench_nn: %s\n", err.msg);
        exit(1);
    }
}

/* n steps of the mode; returns their wall time, adds the gradient calls' time to s->tg */
static double mode_steps(mode_state *s, int dp, int B, const float *x, const int32_t *y, long n)
{
    const float lr = 0.01f;
    dpfl_clip_spec clip = {1.0, 0, NULL};
    double t0 = dpfl_now();
    for (long k = 0; k < n; k++, s->it++) {
        double ts = dpfl_now();
        int off = (int)((s->it * B) % (NDATA - B));
        const float *xb = x + (size_t)off * s->m.in_dim;
        if (dp) {
            dpfl_nn_clipped_grad_sum_axpy(&s->m, s->p, s->ws, xb, y + off, B, &clip, &s->rng, -lr / B, NULL);
            s->tg += dpfl_now() - ts;
            dpfl_nn_ws_add_gaussian(s->ws, &s->noise, s->p, s->m.nparam, lr / B * clip.clip, 1.0f);
        } else {
            dpfl_nn_sgd_step(&s->m, s->p, s->ws, xb, y + off, B, lr, &s->rng, NULL);
            s->tg += dpfl_now() - ts;
        }
    }
    return dpfl_now() - t0;
}

static void mode_free(mode_state *s)
{
    dpfl_nn_ws_free(s->ws);
    free(s->p);
    dpfl_model_free(&s->m);
}

/* Fills r[0] (non-private) and r[1] (DP-SGD) for the model and batch. */
static void run_pair(const char *spec, int B, const float *x, const int32_t *y, double secs, row r[2])
{
    mode_state st[2];
    long block[2];
    for (int dp = 0; dp < 2; dp++) {
        mode_init(&st[dp], spec, B);
        mode_steps(&st[dp], dp, B, x, y, 3); /* warm-up */
        double t = mode_steps(&st[dp], dp, B, x, y, 2) / 2;
        block[dp] = (long)(0.05 / t) + 1;
        st[dp].tg = 0;
    }
    while (st[0].t < secs || st[1].t < secs || st[0].steps < 5 || st[1].steps < 5)
        for (int dp = 0; dp < 2; dp++) {
            st[dp].t += mode_steps(&st[dp], dp, B, x, y, block[dp]);
            st[dp].steps += block[dp];
        }
    for (int dp = 0; dp < 2; dp++) {
        r[dp].eps = st[dp].steps * B / st[dp].t;
        r[dp].grad_eps = st[dp].steps * B / st[dp].tg;
        r[dp].nparam = st[dp].m.nparam;
        r[dp].mflop = train_flop(&st[dp].m) / 1e6;
        mode_free(&st[dp]);
    }
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: bench_nn [OUT.json]  (default bench/results.json): examples/s of the models, DP-SGD "
                        "and not, and the GEMM rate\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    const char *out = argc > 1 ? argv[1] : "bench/results.json";
    const char *only = getenv("DPFL_BENCH_MODEL"); /* optional filter for profiling */
    double secs = bench_seconds();
    float *x = malloc((size_t)NDATA * 3072 * sizeof *x);
    int32_t *y = malloc(NDATA * sizeof *y);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2024);
    for (size_t i = 0; i < (size_t)NDATA * 3072; i++) x[i] = (float)dpfl_rng_uniform(&r);
    for (int i = 0; i < NDATA; i++) y[i] = (int32_t)dpfl_rng_below(&r, 10);

    /* MNIST-shaped models at batch 16 and 64; CIFAR-shaped (3 x 32 x 32) ones at batch 64, ResNet-18 at 32 */
    const char *models[] = {"logreg", "mlp:784-512-256-10", "cnn-mnist", "cnn-tf-cifar", "resnet20-gn", "resnet18-gn"};
    const int batches[] = {16, 64, 32};
    row rows[24];
    int nr = 0;
    printf("%-20s %6s %-11s %14s %18s %13s\n", "model", "batch", "mode", "examples/s", "grad-only ex/s", "GEMM GFLOP/s");
    for (int mi = 0; mi < 6; mi++) {
        if (only && strcmp(only, models[mi])) continue;
        shape_c = mi >= 3 ? 3 : 1, shape_hw = mi >= 3 ? 32 : 28;
        for (int bi = mi == 5 ? 2 : mi >= 3 ? 1 : 0; bi < (mi == 5 ? 3 : 2); bi++) {
            row *rw = &rows[nr];
            run_pair(models[mi], batches[bi], x, y, secs, rw);
            for (int dp = 0; dp < 2; dp++, rw++, nr++) {
                rw->model = models[mi], rw->batch = batches[bi], rw->mode = dp ? "dpsgd" : "nonprivate";
                rw->rss_mb = peak_rss_mb();
                printf("%-20s %6d %-11s %14.0f %18.0f %13.1f\n", rw->model, rw->batch, rw->mode, rw->eps, rw->grad_eps,
                       rw->eps * rw->mflop / 1e3);
            }
            fflush(stdout);
        }
    }
    double gf = gemm_gflops(secs < 1.0 ? secs : 1.0);
    printf("SGEMM (2048^3): %.1f GFLOP/s\n", gf);
    int lanes;
    double fma = fma_gflops(&lanes);
    printf("FMA peak (measured, %d float lanes, every core): %.1f GFLOP/s\n", lanes, fma);

    FILE *f = fopen(out, "w");
    if (!f) {
        perror(out);
        return 1;
    }
    fprintf(f, "[\n");
    for (int i = 0; i < nr; i++)
        fprintf(f,
                "  {\"model\": \"%s\", \"batch\": %d, \"mode\": \"%s\", \"examples_per_second\": %.1f, "
                "\"grad_examples_per_second\": %.1f, \"peak_rss_mb\": %.0f, \"nparam\": %zu, "
                "\"train_mflop_per_example\": %.2f},\n",
                rows[i].model, rows[i].batch, rows[i].mode, rows[i].eps, rows[i].grad_eps, rows[i].rss_mb,
                rows[i].nparam, rows[i].mflop);
    fprintf(f, "  {\"gemm_gflops\": %.1f, \"fma_peak_gflops\": %.1f}\n]\n", gf, fma);
    fclose(f);
    free(x), free(y);
    return 0;
}
