/* The papers' own partitions (src/data/partition_client_mix.c, partition_split.c), on synthetic labels:
 *  - PriFedSync sec. 4.2 (DPFL_PART_DIRICHLET_CLIENT): each client draws q_k ~ Dir(beta), then its training examples
 *    and its test examples from Multinomial(q_k), without replacement within the client;
 *  - PrivateFL sec. 5 (DPFL_PART_CLASSES_RANDOM): N random classes per client, equally many holders per class, each
 *    class split among its holders in proportion to weights in (0.4, 0.6).
 * And the answer to "is DPFL_PART_CLASSES PrivateFL's?": no, it gives client k the classes k..k+N-1 and splits each
 * class evenly; the test below shows the difference. */
#include "testutil.h"
#include "dpfl/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static dpfl_dataset tr, te; /* 20,000 training (2,000 per class) and 5,000 test examples, 10 classes */

static int setup(void **state)
{
    (void)state;
    if (dpfl_synthetic(20000, 2, 10, 3.0, 21, &tr, NULL)) return -1;
    return dpfl_synthetic(5000, 2, 10, 3.0, 22, &te, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    return 0;
}

static void make(const dpfl_partition_spec *sp, uint64_t seed, dpfl_partition *p)
{
    dpfl_rng r;
    dpfl_error err;
    dpfl_rng_init_seed(&r, seed);
    if (dpfl_partition_make(&tr, &te, sp, &r, p, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
}

/* class histogram of idx[a, b) over d */
static void hist(const dpfl_dataset *d, const int32_t *idx, int32_t a, int32_t b, int32_t *h)
{
    memset(h, 0, (size_t)d->classes * sizeof *h);
    for (int32_t i = a; i < b; i++) h[d->y[idx[i]]]++;
}

/* no index twice in idx[a, b), all in [0, n) */
static void distinct(const int32_t *idx, int32_t a, int32_t b, int32_t n)
{
    char *seen = calloc((size_t)n, 1);
    for (int32_t i = a; i < b; i++) {
        assert_true(idx[i] >= 0 && idx[i] < n);
        assert_int_equal(seen[idx[i]], 0);
        seen[idx[i]] = 1;
    }
    free(seen);
}

/* PriFedSync's clients: 200 training and 200 test examples each, no repeats within a client, clients free to
 * share examples.  The test set follows the client's own q_k: a client's test class proportions are much closer
 * to its own training proportions than to another client's (both estimate q_k; Dir(0.5) mixes differ a lot). */
static void dirichlet_client_test_sets_follow_the_clients_mix(void **state)
{
    (void)state;
    const int K = 40, s = 200, t = 200;
    dpfl_partition_spec sp = {.kind = DPFL_PART_DIRICHLET_CLIENT, .clients = K, .beta = 0.5, .samples_per_client = s,
                              .test_per_client = t};
    dpfl_partition p;
    make(&sp, 5, &p);
    assert_non_null(p.test_offset);
    int32_t (*htr)[10] = calloc((size_t)K, sizeof *htr), (*hte)[10] = calloc((size_t)K, sizeof *hte);
    for (int k = 0; k < K; k++) {
        assert_int_equal(p.offset[k], k * s);
        assert_int_equal(p.test_offset[k], k * t);
        distinct(p.index, p.offset[k], p.offset[k + 1], tr.n);
        distinct(p.test_index, p.test_offset[k], p.test_offset[k + 1], te.n);
        hist(&tr, p.index, p.offset[k], p.offset[k + 1], htr[k]);
        hist(&te, p.test_index, p.test_offset[k], p.test_offset[k + 1], hte[k]);
    }
    assert_int_equal(p.offset[K], K * s);
    double own = 0, other = 0; /* mean total-variation distance, own pairing vs the next client's */
    for (int k = 0; k < K; k++)
        for (int c = 0; c < 10; c++) {
            own += fabs(htr[k][c] / (double)s - hte[k][c] / (double)t) / 2 / K;
            other += fabs(htr[(k + 1) % K][c] / (double)s - hte[k][c] / (double)t) / 2 / K;
        }
    print_message("train/test total variation: own client %.3f, next client %.3f\n", own, other);
    assert_true(own < 0.12);     /* two multinomials of 200 from the same q: about 0.08 */
    assert_true(other > 2 * own); /* Dir(0.5) mixes of different clients: far apart */
    free(htr), free(hte);
    /* the same seed, the same partition; another seed, another */
    dpfl_partition p2, p3;
    make(&sp, 5, &p2);
    make(&sp, 6, &p3);
    uint8_t d1[32], d2[32], d3[32];
    dpfl_partition_digest(&p, d1), dpfl_partition_digest(&p2, d2), dpfl_partition_digest(&p3, d3);
    assert_memory_equal(d1, d2, 32);
    assert_memory_not_equal(d1, d3, 32);
    dpfl_partition_free(&p), dpfl_partition_free(&p2), dpfl_partition_free(&p3);
}

/* The test set is drawn from q_k, not from the training counts that came out: with 10 training examples per client,
 * many classes get none of them, yet with 200 test examples drawn from q_k some of those classes appear in the
 * test set (a test set shaped by the training counts could never hold them). */
static void dirichlet_client_test_draws_from_q_not_from_counts(void **state)
{
    (void)state;
    const int K = 50;
    dpfl_partition_spec sp = {.kind = DPFL_PART_DIRICHLET_CLIENT, .clients = K, .beta = 0.5, .samples_per_client = 10,
                              .test_per_client = 200};
    dpfl_partition p;
    make(&sp, 9, &p);
    int unseen = 0;
    for (int k = 0; k < K; k++) {
        int32_t a[10], b[10];
        hist(&tr, p.index, p.offset[k], p.offset[k + 1], a);
        hist(&te, p.test_index, p.test_offset[k], p.test_offset[k + 1], b);
        for (int c = 0; c < 10; c++) unseen += a[c] == 0 && b[c] > 0;
    }
    print_message("classes absent from a client's training draw but in its test draw: %d\n", unseen);
    assert_true(unseen >= 10);
    dpfl_partition_free(&p);
}

static void expect_error(const dpfl_partition_spec *sp, const dpfl_dataset *test, const char *want)
{
    dpfl_rng r;
    dpfl_error err;
    dpfl_partition p;
    dpfl_rng_init_seed(&r, 1);
    assert_int_equal(dpfl_partition_make(&tr, test, sp, &r, &p, &err), DPFL_EINVAL);
    if (!strstr(err.msg, want)) {
        print_error("'%s' does not say '%s'\n", err.msg, want);
        fail();
    }
    assert_null(p.offset);
}

static void dirichlet_client_errors(void **state)
{
    (void)state;
    dpfl_partition_spec sp = {.kind = DPFL_PART_DIRICHLET_CLIENT, .clients = 4, .beta = 0.5};
    expect_error(&sp, &te, "data.samples_per_client"); /* its size is required */
    sp.samples_per_client = 10, sp.beta = 0;
    expect_error(&sp, &te, "data.beta");
    sp.beta = 0.5, sp.test_per_client = 5;
    expect_error(&sp, NULL, "no test set");
    sp.samples_per_client = 2001, sp.beta = 1e-4; /* one class takes everything: more than its 2,000 */
    expect_error(&sp, &te, "data.samples_per_client: client 0 draws 2001 examples of class");
}

/* PrivateFL's recipe: 20 clients x 2 classes over 10 classes, so 4 holders per class.  Every client 2 distinct
 * classes, every class 4 holders, disjoint and complete; a holder's share of its class lies in
 * [0.4 / (0.4 + 3 x 0.6), 0.6 / (0.6 + 3 x 0.4)] (up to one example of rounding), and the shares are not all equal.
 * The classes are random, not the rotation k, k+1 that DPFL_PART_CLASSES gives. */
static void classes_random_is_privatefl(void **state)
{
    (void)state;
    const int K = 20;
    dpfl_partition_spec sp = {.kind = DPFL_PART_CLASSES_RANDOM, .clients = K, .classes_per_client = 2};
    dpfl_partition p, rot;
    make(&sp, 3, &p);
    sp.kind = DPFL_PART_CLASSES;
    make(&sp, 3, &rot);
    distinct(p.index, 0, p.offset[K], tr.n);
    assert_int_equal(p.offset[K], tr.n); /* complete */
    int holders[10] = {0}, rotation = 0, unequal = 0;
    for (int k = 0; k < K; k++) {
        int32_t h[10], hr[10];
        hist(&tr, p.index, p.offset[k], p.offset[k + 1], h);
        hist(&tr, rot.index, rot.offset[k], rot.offset[k + 1], hr);
        int n = 0;
        for (int c = 0; c < 10; c++) {
            if (!h[c]) continue;
            n++, holders[c]++;
            double share = h[c] / 2000.0;
            assert_true(share >= 0.4 / 2.2 - 1e-3 && share <= 0.6 / 1.8 + 1e-3);
            unequal += h[c] != 500;
        }
        assert_int_equal(n, 2);
        rotation += h[k % 10] > 0 && h[(k + 1) % 10] > 0;
        /* DPFL_PART_CLASSES: classes k, k+1, split evenly */
        assert_int_equal(hr[k % 10], 500);
        assert_int_equal(hr[(k + 1) % 10], 500);
    }
    for (int c = 0; c < 10; c++) assert_int_equal(holders[c], 4);
    assert_true(unequal > 10);
    assert_true(rotation < K / 2);
    dpfl_partition_free(&p), dpfl_partition_free(&rot);
    /* 7 clients x 3 classes = 21 places over 10 classes: one class has 3 holders, the others 2 */
    sp = (dpfl_partition_spec){.kind = DPFL_PART_CLASSES_RANDOM, .clients = 7, .classes_per_client = 3};
    make(&sp, 4, &p);
    distinct(p.index, 0, p.offset[7], tr.n);
    int three = 0;
    memset(holders, 0, sizeof holders);
    for (int k = 0; k < 7; k++) {
        int32_t h[10];
        int n = 0;
        hist(&tr, p.index, p.offset[k], p.offset[k + 1], h);
        for (int c = 0; c < 10; c++) n += h[c] > 0, holders[c] += h[c] > 0;
        assert_int_equal(n, 3);
    }
    for (int c = 0; c < 10; c++) {
        assert_true(holders[c] == 2 || holders[c] == 3);
        three += holders[c] == 3;
    }
    assert_int_equal(three, 1);
    dpfl_partition_free(&p);
    sp.samples_per_client = 100;
    expect_error(&sp, &te, "data.samples_per_client");
    sp.samples_per_client = 0, sp.classes_per_client = 11;
    expect_error(&sp, &te, "data.classes_per_client");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dirichlet_client_test_sets_follow_the_clients_mix),
        cmocka_unit_test(dirichlet_client_test_draws_from_q_not_from_counts),
        cmocka_unit_test(dirichlet_client_errors),
        cmocka_unit_test(classes_random_is_privatefl),
    };
    return cmocka_run_group_tests_name("partitions", tests, setup, teardown);
}
