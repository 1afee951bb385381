/* Run-time dispatch to the SIMD kernels (src/core/cpu.h): the kernels are used exactly when the CPU has them, and
 * forcing the portable code (dpfl_cpu_force_portable, DPFL_PORTABLE=1) gives the kernels' results: the same bits
 * for ChaCha20 and the noise (the pinned CRC of tests/test_core.c both ways), the same outputs and gradients
 * within rounding for the convolutions.  On a CPU without AVX-512 (or in a build without the kernels) both sides
 * run the portable code and the comparisons hold trivially; the first test says which case this is. */
#include "testutil.h"
#include "core/chacha20.h"
#include "core/cpu.h"
#include "core/parallel.h"
#include "dpfl/core.h"
#include "dpfl/nn.h"
#include "nn/layers.h"

#include <cblas.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cpu_has_avx512_kernels(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return DPFL_KERNELS_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt");
#else
    return 0;
#endif
}

static int cpu_has_avx2_kernels(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return DPFL_KERNELS_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static int env_portable(void)
{
    const char *e = getenv("DPFL_PORTABLE");
    return e && *e && strcmp(e, "0") != 0;
}

/* The kernels in use are the ones the build has and the CPU supports; forcing the portable code turns them off
 * and back on; DPFL_PORTABLE=1 in a child process turns them off. */
static void kernels_follow_the_cpu(void **state)
{
    (void)state;
    const int a512 = cpu_has_avx512_kernels() && !env_portable(), a2 = cpu_has_avx2_kernels() && !env_portable();
    print_message("kernels: %s (compiled in: avx512 %d, avx2 %d; DPFL_PORTABLE %s)\n", dpfl_cpu_kernels(),
                  DPFL_KERNELS_AVX512, DPFL_KERNELS_AVX2, env_portable() ? "set" : "not set");
    assert_int_equal(dpfl_cpu_avx512(), a512);
    assert_int_equal(dpfl_cpu_avx2(), a2);
    assert_string_equal(dpfl_chacha20_impl(), a512 ? "avx512" : a2 ? "avx2" : "libsodium");
    dpfl_cpu_force_portable(1);
    assert_int_equal(dpfl_cpu_avx512(), 0);
    assert_int_equal(dpfl_cpu_avx2(), 0);
    assert_string_equal(dpfl_cpu_kernels(), "portable");
    assert_string_equal(dpfl_chacha20_impl(), "libsodium");
    dpfl_cpu_force_portable(0);
    assert_int_equal(dpfl_cpu_avx512(), a512);
    assert_int_equal(dpfl_cpu_avx2(), a2);
    /* the environment variable, read once per process: this binary again, as a child */
    char self[4096], cmd[4200], out[64] = "";
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return; /* no /proc: skip this part */
    self[len] = 0;
    snprintf(cmd, sizeof cmd, "DPFL_PORTABLE=1 '%s' --kernels", self);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, sizeof out, p));
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "portable\n");
}

/* ChaCha20 through every path this machine has (AVX-512 with an AVX2 tail, AVX2 alone, libsodium) gives
 * libsodium's bytes, at lengths around the vector widths and counters whose low word wraps. */
static void chacha20_same_bytes_on_every_path(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    static const uint64_t counters[] = {0, 5, 0xfffffff3ULL, 0x1fffffffcULL};
    enum { MAXB = 48 };
    static const uint8_t zeros[64 * MAXB], nonce[crypto_stream_chacha20_NONCEBYTES];
    uint8_t key[32], want[64 * MAXB], got[64 * MAXB];
    uint32_t w1[256], w2[256];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(13 * i + 7);
    for (size_t c = 0; c < sizeof counters / sizeof *counters; c++)
        for (size_t nb = 0; nb <= MAXB; nb++) {
            crypto_stream_chacha20_xor_ic(want, zeros, 64 * nb, nonce, counters[c], key);
            for (int force = 0; force < 2; force++) {
                dpfl_cpu_force_portable(force);
                memset(got, 0x5a, sizeof got);
                dpfl_chacha20_keystream(got, nb, key, counters[c]);
                assert_memory_equal(got, want, 64 * nb);
            }
            dpfl_cpu_force_portable(0);
#if DPFL_KERNELS_AVX2
            if (cpu_has_avx2_kernels()) { /* the AVX2 kernel alone (on AVX-512 machines it only does tails) */
                memset(got, 0x5a, sizeof got);
                size_t done = dpfl_chacha20_blocks_avx2(got, nb, key, counters[c]);
                assert_int_equal(done, nb / 8 * 8);
                assert_memory_equal(got, want, 64 * done);
            }
#endif
        }
    for (size_t c = 0; c < sizeof counters / sizeof *counters; c++) {
        dpfl_cpu_force_portable(1);
        dpfl_chacha20_words16(w1, key, counters[c]);
        dpfl_cpu_force_portable(0);
        dpfl_chacha20_words16(w2, key, counters[c]);
        assert_memory_equal(w1, w2, sizeof w1);
    }
}

/* The pinned noise sequence of test_core.c (every form of the chunked noise, each followed by a u64): the same CRC
 * with the kernels (with and without the VBMI lookup where the CPU has it) and with the portable code, on 1 and 2
 * threads, and the same bits. */
static uint32_t noise_sequence(float *x, float *y, int threads)
{
    static const size_t ns[] = {1, 4097, 70001, 200003};
    uint32_t crc = 0;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 77);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        for (size_t i = 0; i < ns[k]; i++) x[i] = 0.25f * (float)(i % 1000), y[i] = 1.0f;
        dpfl_rng_add_gaussian_chunked(&r, x, ns[k], 1.5, k % 2 ? 0.5f : 1.0f, threads);
        dpfl_rng_axpy_gaussian_chunked(&r, y, -0.1f, x, ns[k], 2.0, threads);
        uint64_t u = dpfl_rng_u64(&r);
        crc = crc * 31u + dpfl_crc32(x, ns[k] * sizeof *x);
        crc = crc * 31u + dpfl_crc32(y, ns[k] * sizeof *y);
        crc = crc * 31u + dpfl_crc32(&u, sizeof u);
    }
    return crc;
}

static void noise_same_bits_on_every_path(void **state)
{
    (void)state;
    const size_t n = 200003;
    float *x0 = malloc(n * sizeof *x0), *y0 = malloc(n * sizeof *y0);
    float *x1 = malloc(n * sizeof *x1), *y1 = malloc(n * sizeof *y1);
    for (int threads = 1; threads <= 2; threads++) {
        dpfl_cpu_force_portable(0);
        assert_int_equal(noise_sequence(x0, y0, threads), 0xdb49b599u);
        if (dpfl_cpu_avx512_vbmi()) { /* that was the VBMI lookup; now the AVX-512 code without it */
            dpfl_cpu_force_no_vbmi(1);
            assert_false(dpfl_cpu_avx512_vbmi());
            assert_int_equal(noise_sequence(x1, y1, threads), 0xdb49b599u);
            dpfl_cpu_force_no_vbmi(0);
            assert_memory_equal(x0, x1, n * sizeof *x0);
            assert_memory_equal(y0, y1, n * sizeof *y0);
        } else if (threads == 1) {
            printf("noise: no AVX512_VBMI on this CPU (%s kernels): the VBMI lookup is not tested here\n",
                   dpfl_cpu_kernels());
        }
        dpfl_cpu_force_portable(1);
        assert_int_equal(noise_sequence(x1, y1, threads), 0xdb49b599u);
        assert_memory_equal(x0, x1, n * sizeof *x0);
        assert_memory_equal(y0, y1, n * sizeof *y0);
    }
    dpfl_cpu_force_portable(0);
    free(x0), free(y0), free(x1), free(y1);
}

/* A workspace made while the kernels are available runs its stride-1 convolutions with outputs of 64 or more
 * positions on them (Winograd for the 3x3 layers with 8+ channels), one made while the portable code is forced runs
 * im2col + SGEMM; both give the same outputs, gradients and clipped sums within rounding. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(d) / fmax(sqrt(s), 1e-30);
}

static void conv_kernels_match_portable(void **state)
{
    (void)state;
    /* direct: convolutions on the direct kernels where the CPU has AVX-512 or AVX2 (Winograd's with AVX-512 only);
     * stride 2 stays on im2col, whose GEMMs then run on the AVX-512 GEMM kernels (gemm.c) where the CPU has them,
     * and so do outputs under 8 x 8 (64 positions) */
    static const struct {
        const char *spec;
        int c, h, w, classes, direct;
    } cases[] = {{"cnn-mnist", 1, 28, 28, 10, 2},
                 {"net:conv8k5p2,relu,pool2,conv12k3,relu,fc4", 3, 22, 21, 4, 2},
                 {"net:conv6k3s2p1,relu,conv7k3s2,tanh,fc5", 2, 15, 13, 5, 0},
                 {"net:conv5k3p1,relu,pool2,conv6k3p1,tanh,fc3", 2, 8, 8, 3, 1}};
    const int B = 6;
    int wino = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dpfl_model m;
        dpfl_error err;
        dpfl_rng r;
        assert_int_equal(dpfl_model_create(cases[i].spec, cases[i].c, cases[i].h, cases[i].w, cases[i].classes, &m,
                                           &err),
                         DPFL_OK);
        dpfl_rng_init_seed(&r, 90 + i);
        const size_t n = m.nparam, no = (size_t)B * m.out_dim;
        float *params = malloc(n * sizeof *params), *x = malloc((size_t)B * m.in_dim * sizeof *x);
        int32_t y[6];
        dpfl_model_init(&m, params, &r);
        for (size_t k = 0; k < (size_t)B * m.in_dim; k++) x[k] = (float)dpfl_rng_gaussian(&r);
        for (int b = 0; b < B; b++) y[b] = (int32_t)dpfl_rng_below(&r, (uint64_t)cases[i].classes);
        dpfl_cpu_force_portable(0);
        dpfl_nn_ws *wk = dpfl_nn_ws_create(&m, B, NULL);
        dpfl_cpu_force_portable(1);
        dpfl_nn_ws *wp = dpfl_nn_ws_create(&m, B, NULL);
        dpfl_cpu_force_portable(0);
        assert_non_null(wk);
        assert_non_null(wp);
        int direct = 0;
        for (int l = 0; l < m.nlayers; l++) {
            assert_int_equal(wp->dir.mode[l], 0);
            direct += wk->dir.mode[l] != 0, wino += wk->dir.mode[l] == 2;
        }
        const int kernels = (cpu_has_avx512_kernels() || cpu_has_avx2_kernels()) && !env_portable();
        assert_int_equal(direct, kernels ? cases[i].direct : 0);
        float *ok = malloc(no * sizeof *ok), *gk = malloc(n * sizeof *gk), *gp = malloc(n * sizeof *gp);
        memcpy(ok, dpfl_nn_forward(&m, params, wk, x, B, 0, NULL), no * sizeof *ok);
        const float *op = dpfl_nn_forward(&m, params, wp, x, B, 0, NULL);
        assert_true(rel_diff(ok, op, no) < 1e-5);
        dpfl_nn_grad(&m, params, wk, x, y, B, NULL, gk, NULL);
        dpfl_nn_grad(&m, params, wp, x, y, B, NULL, gp, NULL);
        assert_true(rel_diff(gk, gp, n) < 1e-5);
        float nk[6], np[6];
        dpfl_clip_spec cs = {0.05, 0, NULL};
        dpfl_nn_clipped_grad_sum(&m, params, wk, x, y, B, &cs, NULL, gk, nk);
        dpfl_nn_clipped_grad_sum(&m, params, wp, x, y, B, &cs, NULL, gp, np);
        for (int b = 0; b < B; b++) assert_close(nk[b], np[b], 1e-5);
        assert_true(rel_diff(gk, gp, n) < 1e-5);
        free(ok), free(gk), free(gp), free(params), free(x);
        dpfl_nn_ws_free(wk), dpfl_nn_ws_free(wp);
        dpfl_model_free(&m);
    }
    assert_int_equal(wino, cpu_has_avx512_kernels() && !env_portable() ? 2 : 0);
}

/* C (M, N) row-major in double: alpha op(A) op(B) + beta C (+ bias, relu), and per element the sum of
 * |alpha a b| + |beta c| (the scale its float rounding error is measured against) */
static void gemm_ref(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, const float *C, int ldc, const float *bias, int relu, double *ref,
                     double *scale)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                const double x = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const double y = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += x * y, a += fabs(x * y);
            }
            s *= alpha, a *= fabs(alpha);
            if (beta != 0.0f) s += (double)beta * C[(size_t)i * ldc + j], a += fabs((double)beta * C[(size_t)i * ldc + j]);
            if (bias) s += bias[j], a += fabs(bias[j]);
            ref[(size_t)i * N + j] = relu && s < 0 ? 0 : s, scale[(size_t)i * N + j] = a;
        }
}

/* dpfl's own AVX-512 GEMMs (gemm_avx512.c) against a double-precision GEMM over ragged shapes (M, N, K not
 * multiples of the tiles, K below one vector), padded leading dimensions whose padding must stay untouched,
 * alpha / beta (beta = 0 must not read C: it holds NaN), bias and ReLU on the forward form, and each element's
 * value independent of where the GEMM is cut (a sub-block computed alone gives the same bits). */
static void gemm_kernels_match_reference(void **state)
{
    (void)state;
    if (!cpu_has_avx512_kernels()) {
        print_message("no AVX-512 kernels here: the Linear layers use OpenBLAS (checked by test_nn)\n");
        return;
    }
    /* M = 5, 10, 13: the NT kernel's 5 x 5 tiles, the others 4 x 6; the sub-block below (M - 1 rows) switches
     * between the two for M = 5, 6, 11, 14 */
    static const int Ms[] = {1, 3, 4, 5, 6, 7, 10, 11, 13, 14, 17}, Ns[] = {1, 5, 6, 7, 16, 17, 33, 64, 65, 70},
                     Ks[] = {1, 3, 15, 16, 17, 40};
    static const float ab[][2] = {{1.0f, 0.0f}, {-0.25f, 1.0f}, {2.0f, 0.5f}};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 4242);
    const int pad = 3, cap = 80 * (80 + pad);
    float *A = malloc(cap * sizeof *A), *B = malloc(cap * sizeof *B), *C = malloc(cap * sizeof *C),
          *C0 = malloc(cap * sizeof *C0), *D = malloc(cap * sizeof *D), bias[80];
    double *ref = malloc(cap * sizeof *ref), *scale = malloc(cap * sizeof *scale);
    for (int i = 0; i < cap; i++) A[i] = (float)dpfl_rng_gaussian(&r), B[i] = (float)dpfl_rng_gaussian(&r);
    for (int i = 0; i < 80; i++) bias[i] = (float)dpfl_rng_gaussian(&r);
    int checked = 0;
    for (int kind = 0; kind < 3; kind++) /* NT, NN, TN */
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
                for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
                    for (int v = 0; v < 3; v++) {
                        const int M = Ms[mi], N = Ns[ni], K = Ks[ki], ta = kind == 2, tb = kind == 0;
                        const float alpha = ab[v][0], beta = ab[v][1];
                        const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
                        const float *bi = kind == 0 && v > 0 ? bias : NULL;
                        const int relu = kind == 0 && v == 2;
                        for (int i = 0; i < cap; i++) C[i] = beta != 0.0f ? (float)dpfl_rng_gaussian(&r) : NAN;
                        for (int i = 0; i < M; i++) C[(size_t)i * ldc + N] = 1234.5f; /* padding */
                        memcpy(C0, C, cap * sizeof *C);
                        gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, ldc, bi, relu, ref, scale);
                        if (kind == 0)
                            dpfl_nn_sgemm_nt_avx512(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bi, relu);
                        else if (kind == 1)
                            dpfl_nn_sgemm_nn_avx512(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                        else
                            dpfl_nn_sgemm_tn_avx512(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                        for (int i = 0; i < M; i++) {
                            assert_true(C[(size_t)i * ldc + N] == 1234.5f);
                            for (int j = 0; j < N; j++) {
                                const double got = C[(size_t)i * ldc + j], want = ref[(size_t)i * N + j];
                                if (!(fabs(got - want) <= 1e-6 * scale[(size_t)i * N + j] + 1e-30))
                                    fail_msg("kind %d M %d N %d K %d alpha %g beta %g: C[%d][%d] = %.9g, want %.9g",
                                             kind, M, N, K, alpha, beta, i, j, got, want);
                            }
                        }
                        /* the block of rows [1, M) x columns [5, N) alone: the same bits */
                        if (M > 1 && N > 5) {
                            memcpy(D, C0, cap * sizeof *D);
                            const float *As = ta ? A + 1 : A + lda, *Bs = tb ? B + 5 * ldb : B + 5;
                            float *Ds = D + ldc + 5;
                            if (kind == 0)
                                dpfl_nn_sgemm_nt_avx512(M - 1, N - 5, K, alpha, As, lda, Bs, ldb, beta, Ds, ldc,
                                                        bi ? bi + 5 : NULL, relu);
                            else if (kind == 1)
                                dpfl_nn_sgemm_nn_avx512(M - 1, N - 5, K, alpha, As, lda, Bs, ldb, beta, Ds, ldc);
                            else
                                dpfl_nn_sgemm_tn_avx512(M - 1, N - 5, K, alpha, As, lda, Bs, ldb, beta, Ds, ldc);
                            for (int i = 1; i < M; i++)
                                assert_memory_equal(D + (size_t)i * ldc + 5, C + (size_t)i * ldc + 5,
                                                    (size_t)(N - 5) * sizeof *D);
                        }
                        checked++;
                    }
    print_message("%d AVX-512 GEMMs checked against the reference\n", checked);
    free(A), free(B), free(C), free(C0), free(D), free(ref), free(scale);
}

/* The Linear layers with the kernels and with OpenBLAS (forced portable) agree within rounding, and with the
 * kernels a pool of 2 threads gives the same bits as one thread: MLP shapes, forward with bias and ReLU, the
 * input gradient, the weight gradient and the fused SGD step (beta = 1 into the weights). */
static void linear_kernels_match_portable(void **state)
{
    (void)state;
    const int Bt = 32, C = 300, OC = 150; /* 1.4 MFLOP a GEMM: over the pool threshold */
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 77);
    const size_t nx = (size_t)Bt * C, no = (size_t)Bt * OC, nw = (size_t)OC * C;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc(OC * sizeof *b),
          *d = malloc(no * sizeof *d), *out[3], *dx[3], *dw[3], *wf[3], *bf[3];
    for (size_t i = 0; i < nx; i++) x[i] = (float)dpfl_rng_gaussian(&r);
    for (size_t i = 0; i < nw; i++) w[i] = (float)dpfl_rng_gaussian(&r) * 0.1f;
    for (int i = 0; i < OC; i++) b[i] = (float)dpfl_rng_gaussian(&r);
    for (size_t i = 0; i < no; i++) d[i] = (float)dpfl_rng_gaussian(&r);
    dpfl_par *par = dpfl_par_create(2);
    for (int v = 0; v < 3; v++) { /* 0: kernels, 1 thread; 1: kernels, 2 threads; 2: portable, 2 threads */
        dpfl_cpu_force_portable(v == 2);
        dpfl_par *p = v == 0 ? NULL : par;
        out[v] = malloc(no * sizeof **out), dx[v] = malloc(nx * sizeof **dx), dw[v] = malloc(nw * sizeof **dw);
        wf[v] = malloc(nw * sizeof **wf), bf[v] = malloc(OC * sizeof **bf);
        float db[150];
        dpfl_nn_linear_forward(out[v], x, w, b, Bt, C, OC, 1, p);
        dpfl_nn_linear_backward(dx[v], dw[v], db, d, x, w, Bt, C, OC, 1.0f, 0.0f, p);
        memcpy(wf[v], w, nw * sizeof *w), memcpy(bf[v], b, OC * sizeof *b);
        dpfl_nn_linear_backward(NULL, wf[v], bf[v], d, x, wf[v], Bt, C, OC, -0.01f, 1.0f, p);
    }
    dpfl_cpu_force_portable(0);
    assert_memory_equal(out[0], out[1], no * sizeof **out);
    assert_memory_equal(dx[0], dx[1], nx * sizeof **dx);
    assert_memory_equal(dw[0], dw[1], nw * sizeof **dw);
    assert_memory_equal(wf[0], wf[1], nw * sizeof **wf);
    assert_true(rel_diff(out[1], out[2], no) < 1e-5);
    assert_true(rel_diff(dx[1], dx[2], nx) < 1e-5);
    assert_true(rel_diff(dw[1], dw[2], nw) < 1e-5);
    assert_true(rel_diff(wf[1], wf[2], nw) < 1e-6);
    assert_true(rel_diff(bf[1], bf[2], OC) < 1e-6);
    /* the step moved the weights (a check that could not pass with the update skipped) */
    assert_true(rel_diff(wf[1], w, nw) > 1e-4);
    for (int v = 0; v < 3; v++) free(out[v]), free(dx[v]), free(dw[v]), free(wf[v]), free(bf[v]);
    free(x), free(w), free(b), free(d);
    dpfl_par_free(par);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--kernels") == 0) { /* for kernels_follow_the_cpu */
        puts(dpfl_cpu_kernels());
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernels_follow_the_cpu),
        cmocka_unit_test(chacha20_same_bytes_on_every_path),
        cmocka_unit_test(noise_same_bits_on_every_path),
        cmocka_unit_test(conv_kernels_match_portable),
        cmocka_unit_test(gemm_kernels_match_reference),
        cmocka_unit_test(linear_kernels_match_portable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
