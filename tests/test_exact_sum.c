/* The server's exact, order-independent sum (src/core/exact_sum.c; Demmel and Nguyen, "Parallel reproducible
 * summation", IEEE Trans. Computers 2015) and the round that adds each update to it as it arrives (issue 35):
 *   1. the sum's bits do not depend on the order of its terms (random permutations), and it is exact: terms on a
 *      coarse grid whose double sum is exact give that sum, rounded once;
 *   2. truncation is toward zero: no coordinate's magnitude, hence no clipped update's norm, grows;
 *   3. out-of-range and non-finite terms make their coordinate NaN, and only theirs; the term limit is an error;
 *   4. a whole-round transport that hands updates to job->arrive in any order gives the same model bits, equal to
 *      an independent computation of the weighted mean and of the clipped sum;
 *   5. the server's memory for a round's updates does not grow with the cohort (malloc accounting, mallinfo2):
 *      8 and 256 sampled clients of a 112,003-parameter model. */
#include "testutil.h"
#include "fixtures.h"
#include "core/exact_sum.h"
#include "fl/sim_internal.h"

#include <float.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------------------------------- the sum itself */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* a float of random sign, magnitude 2^-40 .. 2^20 */
static float wide(uint64_t *s)
{
    const double m = ldexp((double)(mix(s) >> 40) / 16777216.0 + 0.5, (int)(mix(s) % 61) - 40);
    return (float)(mix(s) & 1 ? -m : m);
}

static void shuffle(int32_t *o, int32_t n, uint64_t *s)
{
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(mix(s) % (uint64_t)(i + 1)), t = o[i];
        o[i] = o[j], o[j] = t;
    }
}

static void sum_in_order(const float *u, const double *scale, const int32_t *order, int32_t n, size_t P,
                         float *out)
{
    dpfl_xsum x;
    dpfl_error err;
    assert_int_equal(dpfl_xsum_init(&x, P, &err), DPFL_OK);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(dpfl_xsum_add(&x, u + (size_t)order[i] * P, scale[order[i]], &err), DPFL_OK);
    dpfl_xsum_result(&x, 1.0, out);
    dpfl_xsum_free(&x);
}

static void permutations_give_identical_bits(void **state)
{
    (void)state;
    const int32_t n = 64;
    const size_t P = 2000;
    uint64_t s = 7;
    float *u = malloc((size_t)n * P * sizeof *u), *ref = malloc(P * sizeof *ref), *got = malloc(P * sizeof *got);
    double scale[64];
    int32_t order[64];
    for (size_t i = 0; i < (size_t)n * P; i++) u[i] = wide(&s);
    for (int32_t i = 0; i < n; i++) scale[i] = i % 3 ? 1.0 : (double)(1 + mix(&s) % 600), order[i] = i;
    sum_in_order(u, scale, order, n, P, ref);
    /* a plain float sum of the same terms does depend on the order (so the test can tell) */
    float fa = 0, fb = 0;
    for (int32_t i = 0; i < n; i++) fa += (float)(scale[i] * u[(size_t)i * P]);
    for (int32_t i = n - 1; i >= 0; i--) fb += (float)(scale[i] * u[(size_t)i * P]);
    int floats_differ = fa != fb;
    for (int trial = 0; trial < 8; trial++) {
        shuffle(order, n, &s);
        sum_in_order(u, scale, order, n, P, got);
        assert_memory_equal(ref, got, P * sizeof *got);
        float f = 0;
        for (int32_t i = 0; i < n; i++) f += (float)(scale[order[i]] * u[(size_t)order[i] * P]);
        floats_differ |= f != fa;
    }
    assert_true(floats_differ);
    free(u), free(ref), free(got);
}

/* Terms on the grid 2^-20 with |sum| < 2^32: the double sum is exact, so the exact sum must be it, rounded once to
 * float (and divided once, for a mean). */
static void sum_is_exact(void **state)
{
    (void)state;
    const int32_t n = 300;
    const size_t P = 500;
    uint64_t s = 11;
    float *u = malloc((size_t)n * P * sizeof *u), *got = malloc(P * sizeof *got);
    double *exact = calloc(P, sizeof *exact);
    dpfl_xsum x;
    dpfl_error err;
    assert_int_equal(dpfl_xsum_init(&x, P, &err), DPFL_OK);
    for (int32_t i = 0; i < n; i++) {
        for (size_t c = 0; c < P; c++) {
            const int64_t k = (int64_t)(mix(&s) % (1u << 24)) - (1 << 23); /* 24 bits: exact in a float */
            u[(size_t)i * P + c] = (float)ldexp((double)k, (int)(mix(&s) % 20) - 20);
            exact[c] += (double)u[(size_t)i * P + c];
        }
        assert_int_equal(dpfl_xsum_add(&x, u + (size_t)i * P, 1.0, &err), DPFL_OK);
    }
    dpfl_xsum_result(&x, 1.0, got);
    for (size_t c = 0; c < P; c++) assert_true(got[c] == (float)exact[c]);
    dpfl_xsum_result(&x, 7.0, got);
    for (size_t c = 0; c < P; c++) assert_true(got[c] == (float)(exact[c] / 7.0));
    /* cancellation a float accumulator loses: 2^30 + 1 - 2^30 */
    const float big[3] = {0x1p30f, 1.0f, -0x1p30f};
    dpfl_xsum y;
    assert_int_equal(dpfl_xsum_init(&y, 1, &err), DPFL_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(dpfl_xsum_add(&y, &big[i], 1.0, &err), DPFL_OK);
    float r;
    dpfl_xsum_result(&y, 1.0, &r);
    assert_true(r == 1.0f && (big[0] + big[1]) + big[2] == 0.0f);
    dpfl_xsum_free(&y);
    dpfl_xsum_free(&x);
    free(u), free(got), free(exact);
}

/* Truncation toward zero: |term| <= |t| with the sign kept, exact for floats above 2^-32; an update clipped to S
 * stays within S as summed. */
static void truncation_never_increases_magnitude(void **state)
{
    (void)state;
    uint64_t s = 5;
    for (int i = 0; i < 200000; i++) {
        const double t = i % 2 ? (double)wide(&s) : ldexp((double)(int64_t)mix(&s), -(int)(mix(&s) % 200) - 40);
        const double q = dpfl_xsum_term(t);
        assert_true(fabs(q) <= fabs(t));
        assert_true(q == 0 || (q > 0) == (t > 0));
        assert_true(fabs(t - q) < 0x1p-56);
        if (fabs(t) >= 0x1p-32 && (double)(float)t == t) assert_true(q == t);
    }
    /* below the grid, toward zero on both sides: -1.5 grid steps is -1 step, not -2 */
    assert_true(dpfl_xsum_term(-1.5 * 0x1p-56) == -0x1p-56);
    assert_true(dpfl_xsum_term(1.5 * 0x1p-56) == 0x1p-56);
    assert_true(dpfl_xsum_term(0.75 * 0x1p-56) == 0.0 && dpfl_xsum_term(-0.75 * 0x1p-56) == 0.0);
    /* a clipped update (tiny coordinates where truncation bites) keeps its norm <= S as summed */
    const size_t P = 4096;
    float *u = malloc(P * sizeof *u);
    for (int trial = 0; trial < 20; trial++) {
        for (size_t c = 0; c < P; c++) u[c] = (float)ldexp((double)wide(&s), -(int)(mix(&s) % 30));
        const double S = 0.5 + trial;
        dpfl_mech_clip_update(u, P, S, NULL, NULL, 0);
        double n2 = 0;
        dpfl_xsum x;
        dpfl_error err;
        float *one = malloc(P * sizeof *one);
        assert_int_equal(dpfl_xsum_init(&x, P, &err), DPFL_OK);
        assert_int_equal(dpfl_xsum_add(&x, u, 1.0, &err), DPFL_OK);
        dpfl_xsum_result(&x, 1.0, one);
        for (size_t c = 0; c < P; c++) {
            assert_true(fabsf(one[c]) <= fabsf(u[c]));
            n2 += (double)one[c] * one[c];
        }
        assert_true(sqrt(n2) <= dpfl_vec_norm2(u, P));
        assert_true(sqrt(n2) <= S * (1 + 1e-6)); /* the clip's own float rounding, not the sum's */
        dpfl_xsum_free(&x);
        free(one);
    }
    free(u);
}

static void out_of_range_terms_poison_their_coordinate_only(void **state)
{
    (void)state;
    dpfl_xsum x;
    dpfl_error err;
    assert_int_equal(dpfl_xsum_init(&x, 4, &err), DPFL_OK);
    const float a[4] = {1.0f, NAN, INFINITY, 0x1p47f}, b[4] = {2.0f, 1.0f, 1.0f, 1.0f};
    float out[4];
    assert_int_equal(dpfl_xsum_add(&x, a, 1.0, &err), DPFL_OK);
    assert_int_equal(dpfl_xsum_add(&x, b, 1.0, &err), DPFL_OK);
    dpfl_xsum_result(&x, 1.0, out);
    assert_true(out[0] == 3.0f && isnan(out[1]) && isnan(out[2]) && isnan(out[3]));
    /* the largest term in range, the most terms: no overflow (2^46 - 1 grid step, 2^24 times, fits in 2^127) */
    dpfl_xsum_zero(&x);
    const float m[4] = {0x1.fffffep45f, -0x1.fffffep45f, 0.0f, 1.0f};
    x.terms = DPFL_XSUM_MAX_TERMS - 1;
    for (int i = 0; i < 1; i++) assert_int_equal(dpfl_xsum_add(&x, m, 1.0, &err), DPFL_OK);
    assert_int_equal(dpfl_xsum_add(&x, m, 1.0, &err), DPFL_EINVAL); /* one vector too many */
    assert_true(strstr(err.msg, "exact sum") != NULL);
    dpfl_xsum_free(&x);
}

/* ----------------------------------------------------------------------- the round, updates in any order */
/* A whole-round transport (as dpfl serve and MPI rank 0): every client that has not dropped out sends a synthetic
 * update, on the grid 2^-20, handed to job->arrive in the order of a permutation drawn from `seed`; one update
 * buffer, allocated before the round; the heap in use after the last arrival (mallinfo2) is recorded. */
typedef struct {
    uint64_t seed;
    float *u;
    size_t heap_after;
    int32_t arrived;
} test_transport;

static void synthetic_update(int32_t round, int32_t k, float *u, size_t P)
{
    uint64_t s = (uint64_t)round * 1000003u + (uint64_t)k;
    for (size_t c = 0; c < P; c++) u[c] = (float)ldexp((double)((int64_t)(mix(&s) % 4001) - 2000), -20);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static dpfl_status run_arrivals(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    test_transport *tt = t->ctx;
    int32_t *order = malloc((size_t)job->count * sizeof *order);
    for (int32_t j = 0; j < job->count; j++) order[j] = job->start + j;
    uint64_t s = tt->seed + (uint64_t)job->round;
    shuffle(order, job->count, &s);
    assert_null(job->slots);
    dpfl_status st = DPFL_OK;
    for (int32_t j = 0; j < job->count && !st; j++) {
        const int32_t i = order[j];
        dpfl_client_report *r = &job->reports[i];
        if (r->dropped) continue;
        synthetic_update(job->round, job->sampled[i], tt->u, job->nparam);
        r->examples = 1;
        r->steps = 1;
        if (job->client_level) r->norm = dpfl_vec_norm2(tt->u, job->nparam);
        st = job->arrive(job, i, tt->u, err);
        tt->arrived++;
    }
    free(order);
    tt->heap_after = heap_in_use();
    return st;
}

/* One round of a fixture of K clients through the test transport; the model after it into out. */
static void round_through(fl_fixture *f, uint64_t order_seed, float *out, size_t *heap_growth, int32_t *arrived)
{
    const size_t P = f->model.nparam;
    test_transport tt = {.seed = order_seed, .u = malloc(P * sizeof(float))};
    dpfl_transport t = {.run_clients = run_arrivals, .whole_round = 1, .clients_hold_data = 1, .ctx = &tt};
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 9);
    dpfl_model_init(&f->model, out, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, out, &sim, &err),
                     DPFL_OK);
    fl_sim_set_transport(sim, &t);
    dpfl_round_metrics m;
    dpfl_sim_sample(sim, 1, NULL);
    const size_t before = heap_in_use();
    assert_int_equal(dpfl_sim_train(sim, 1, &m, &err), DPFL_OK);
    if (heap_growth) *heap_growth = tt.heap_after > before ? tt.heap_after - before : 0;
    if (arrived) *arrived = tt.arrived;
    assert_int_equal(m.replied, tt.arrived);
    dpfl_sim_free(sim);
    free(tt.u);
}

static void fixture_for_rounds(fl_fixture *f, const char *arch, int32_t K)
{
    int32_t *sizes = malloc((size_t)K * sizeof *sizes);
    for (int32_t k = 0; k < K; k++) sizes[k] = 2 + k % 5; /* unequal weights */
    fl_fixture_make(f, arch, sizes, K);
    free(sizes);
    f->cfg.run.threads = 2;
    f->cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f->cfg.fl.eta = 1.0;
    f->cfg.fl.rounds = 1;
}

static void arrival_order_does_not_change_the_mean(void **state)
{
    (void)state;
    fl_fixture f;
    fixture_for_rounds(&f, "mlp:10-32-3", 40);
    const size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b), *g0 = malloc(P * sizeof *g0);
    round_through(&f, 1, a, NULL, NULL);
    round_through(&f, 2, b, NULL, NULL);
    assert_memory_equal(a, b, P * sizeof *a);
    /* independently: sum_k n_k u_k / sum_k n_k (the double sum is exact for these updates), one float step */
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 9);
    dpfl_model_init(&f.model, g0, &root);
    double *num = calloc(P, sizeof *num), W = 0;
    float *u = malloc(P * sizeof *u);
    for (int32_t k = 0; k < f.part.clients; k++) {
        const double w = dpfl_partition_size(&f.part, k);
        synthetic_update(1, k, u, P);
        for (size_t c = 0; c < P; c++) num[c] += w * u[c];
        W += w;
    }
    for (size_t c = 0; c < P; c++) assert_true(a[c] == g0[c] + (float)f.cfg.fl.eta * (float)(num[c] / W));
    free(a), free(b), free(g0), free(num), free(u);
    fl_fixture_free(&f);
}

static void arrival_order_does_not_change_the_clipped_sum(void **state)
{
    (void)state;
    fl_fixture f;
    fixture_for_rounds(&f, "mlp:10-32-3", 40);
    f.cfg.client_dp.enabled = 1;
    f.cfg.client_dp.noise = 0.0; /* no noise: the release is the clipped sum / n, checkable */
    f.cfg.client_dp.clip = 0.01; /* clips most of the synthetic updates (norms about 0.025) */
    const size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b), *g0 = malloc(P * sizeof *g0);
    float *u = malloc(P * sizeof *u);
    round_through(&f, 3, a, NULL, NULL);
    round_through(&f, 4, b, NULL, NULL);
    assert_memory_equal(a, b, P * sizeof *a);
    /* independently: each update clipped to S, its truncated terms summed in long double, / K, one step (the
     * check allows the float roundings of the release) */
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 9);
    dpfl_model_init(&f.model, g0, &root);
    long double *sum = calloc(P, sizeof *sum);
    int32_t clipped = 0;
    for (int32_t k = 0; k < f.part.clients; k++) {
        synthetic_update(1, k, u, P);
        clipped += dpfl_vec_norm2(u, P) > f.cfg.client_dp.clip;
        dpfl_mech_clip_update(u, P, f.cfg.client_dp.clip, NULL, NULL, 0);
        for (size_t c = 0; c < P; c++) sum[c] += (long double)dpfl_xsum_term(u[c]);
    }
    assert_true(clipped > f.part.clients / 2);
    for (size_t c = 0; c < P; c++) { /* within the float roundings of the division and the step */
        const double step = (double)(sum[c] / f.part.clients);
        const double d = fabs((double)a[c] - ((double)g0[c] + step));
        assert_true(d <= 2 * FLT_EPSILON * fmax(fabs((double)a[c]), fabs(step)));
    }
    free(a), free(b), free(g0), free(u), free(sum);
    fl_fixture_free(&f);
}

/* The heap the round allocates while updates arrive, for 8 and for 256 sampled clients of a 112,003-parameter
 * model (448 KB an update): a slot per client would be 3.5 MB against 115 MB; the exact sum is O(model) alone. */
static size_t growth_for(int32_t K, int client_dp)
{
    fl_fixture f;
    fixture_for_rounds(&f, "mlp:10-8000-3", K);
    f.cfg.client_dp.enabled = client_dp;
    f.cfg.client_dp.noise = 0.0;
    float *g = malloc(f.model.nparam * sizeof *g);
    size_t growth;
    int32_t arrived;
    round_through(&f, 5, g, &growth, &arrived);
    assert_int_equal(arrived, K);
    free(g);
    fl_fixture_free(&f);
    return growth;
}

static void server_memory_does_not_grow_with_the_cohort(void **state)
{
    (void)state;
    const size_t update = 112003 * sizeof(float);
    for (int cdp = 0; cdp <= 1; cdp++) {
        const size_t small = growth_for(8, cdp), large = growth_for(256, cdp);
        print_message("client_dp %d: heap grown during the round: %zu bytes (8 clients), %zu bytes (256 clients); "
                      "one update is %zu bytes\n", cdp, small, large, update);
        assert_true(large < small + update / 4); /* 248 more clients: not even a quarter of one more update */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(permutations_give_identical_bits),
        cmocka_unit_test(sum_is_exact),
        cmocka_unit_test(truncation_never_increases_magnitude),
        cmocka_unit_test(out_of_range_terms_poison_their_coordinate_only),
        cmocka_unit_test(arrival_order_does_not_change_the_mean),
        cmocka_unit_test(arrival_order_does_not_change_the_clipped_sum),
        cmocka_unit_test(server_memory_does_not_grow_with_the_cohort),
    };
    return cmocka_run_group_tests_name("exact_sum", tests, NULL, NULL);
}
