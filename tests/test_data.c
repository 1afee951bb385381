#include "testutil.h"
#include "dpfl/data.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------------------------------------ file helpers */
static char tmpdir[64];

static const char *tpath(const char *name)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 256, "%s/%s", tmpdir, name);
    return b;
}

static void write_bytes(const char *path, const void *data, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        if (len) assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        fclose(f);
    }
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text), 0); }

static size_t put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

/* n images of r x c with pixel (i, j) = (7 i + j) mod 256, labels i mod 3; returns total image file bytes. */
static size_t make_idx(uint8_t *img, uint8_t *lab, uint32_t n, uint32_t r, uint32_t c, uint32_t nlab)
{
    size_t k = 0;
    img[k++] = 0, img[k++] = 0, img[k++] = 8, img[k++] = 3;
    k += put_be32(img + k, n);
    k += put_be32(img + k, r);
    k += put_be32(img + k, c);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < r * c; j++) img[k++] = (uint8_t)((7 * i + j) % 256);
    size_t l = 0;
    lab[l++] = 0, lab[l++] = 0, lab[l++] = 8, lab[l++] = 1;
    l += put_be32(lab + l, nlab);
    for (uint32_t i = 0; i < nlab; i++) lab[l++] = (uint8_t)(i % 3);
    return k;
}

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpfl-test-data-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    const char *names[] = {"i", "l", "i.gz", "l.gz", "bad", "l4", "a.csv", "b.csv", "c.csv", "d.csv", NULL};
    for (int i = 0; names[i]; i++) unlink(tpath(names[i]));
    return rmdir(tmpdir);
}

/* -------------------------------------------------------------------------------------------------- IDX */
static void idx_roundtrip_plain_and_gzip(void **state)
{
    (void)state;
    uint8_t img[16 + 5 * 12], lab[8 + 5];
    size_t ni = make_idx(img, lab, 5, 3, 4, 5);
    for (int gz = 0; gz < 2; gz++) {
        const char *ip = tpath(gz ? "i.gz" : "i"), *lp = tpath(gz ? "l.gz" : "l");
        write_bytes(ip, img, ni, gz);
        write_bytes(lp, lab, sizeof lab, gz);
        dpfl_dataset d;
        dpfl_error err;
        assert_int_equal(dpfl_idx_load(ip, lp, &d, &err), DPFL_OK);
        assert_int_equal(d.n, 5);
        assert_int_equal(d.h, 3);
        assert_int_equal(d.w, 4);
        assert_int_equal(d.c, 1);
        assert_int_equal(d.dim, 12);
        assert_int_equal(d.classes, 3);
        for (int i = 0; i < 5; i++) {
            assert_int_equal(d.y[i], i % 3);
            for (int j = 0; j < 12; j++) assert_true(d.x[i * 12 + j] == (float)((7 * i + j) % 256) / 255.0f);
        }
        dpfl_dataset_free(&d);
    }
}

static void expect_idx_error(const char *ip, const char *lp, const char *named, const char *why)
{
    dpfl_dataset d;
    dpfl_error err;
    dpfl_status s = dpfl_idx_load(ip, lp, &d, &err);
    assert_int_not_equal(s, DPFL_OK);
    if (!strstr(err.msg, named) || !strstr(err.msg, why)) {
        print_error("message '%s' should name '%s' and say '%s'\n", err.msg, named, why);
        fail();
    }
    assert_null(d.x);
}

static void idx_rejects_corrupt_files(void **state)
{
    (void)state;
    uint8_t img[16 + 5 * 12], lab[8 + 5], lab4[8 + 4];
    size_t ni = make_idx(img, lab, 5, 3, 4, 5);
    make_idx(img, lab4, 5, 3, 4, 4);
    const char *ip = tpath("i"), *lp = tpath("l"), *bad = tpath("bad");
    write_bytes(ip, img, ni, 0);
    write_bytes(lp, lab, sizeof lab, 0);
    /* truncated pixels, plain and gzip */
    write_bytes(bad, img, ni - 7, 0);
    expect_idx_error(bad, lp, bad, "truncated");
    write_bytes(bad, img, ni - 7, 1);
    expect_idx_error(bad, lp, bad, "truncated");
    /* truncated header */
    write_bytes(bad, img, 10, 0);
    expect_idx_error(bad, lp, bad, "truncated");
    write_bytes(bad, img, 0, 0);
    expect_idx_error(bad, lp, bad, "truncated");
    /* a gzip stream cut in the middle */
    write_bytes(bad, img, ni, 1);
    struct stat st;
    assert_int_equal(stat(bad, &st), 0);
    assert_int_equal(truncate(bad, st.st_size / 2), 0);
    expect_idx_error(bad, lp, bad, "IDX");
    /* wrong magic, wrong type, wrong ndims */
    uint8_t copy[sizeof img];
    memcpy(copy, img, ni);
    copy[0] = 0x1f;
    write_bytes(bad, copy, ni, 0);
    expect_idx_error(bad, lp, bad, "magic");
    memcpy(copy, img, ni);
    copy[2] = 0x0d;
    write_bytes(bad, copy, ni, 0);
    expect_idx_error(bad, lp, bad, "type");
    expect_idx_error(lp, lp, lp, "dimension");
    /* extra bytes after the data */
    memcpy(copy, img, ni);
    write_bytes(bad, copy, ni - 12, 0);
    FILE *f = fopen(bad, "ab");
    fwrite(img + 16, 1, 24, f);
    fclose(f);
    expect_idx_error(bad, lp, bad, "longer");
    /* counts disagree */
    write_bytes(tpath("l4"), lab4, sizeof lab4, 0);
    expect_idx_error(ip, tpath("l4"), ip, "counts differ");
    /* missing file */
    expect_idx_error(tpath("nope"), lp, tpath("nope"), "cannot open");
}

/* -------------------------------------------------------------------------------------------------- CSV */
static void csv_missing_values_and_columns(void **state)
{
    (void)state;
    dpfl_dataset d;
    dpfl_error err;
    const char *a = tpath("a.csv");
    write_text(a, "f1,f2,label\n1.5,2,0\n?,3,1\n4, 5 ,2\n6,,1\n\n7,8,1\r\n");
    assert_int_equal(dpfl_csv_load(a, -1, 1, 1, &d, &err), DPFL_OK);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.dim, 2);
    assert_int_equal(d.classes, 3);
    assert_true(d.x[0] == 1.5f && d.x[1] == 2.0f && d.x[2] == 4.0f && d.x[3] == 5.0f && d.x[4] == 7.0f);
    assert_int_equal(d.y[0], 0);
    assert_int_equal(d.y[1], 2);
    assert_int_equal(d.y[2], 1);
    dpfl_dataset_free(&d);
    /* label in column 0 */
    assert_int_equal(dpfl_csv_load(a, 2, 1, 1, &d, &err), DPFL_OK);
    dpfl_dataset_free(&d);
    /* missing values not allowed: names the line */
    assert_int_equal(dpfl_csv_load(a, -1, 1, 0, &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, a));
    assert_non_null(strstr(err.msg, "line 3"));
    /* wrong column count */
    const char *b = tpath("b.csv");
    write_text(b, "1,2,0\n3,4,1\n5,6\n");
    assert_int_equal(dpfl_csv_load(b, -1, 0, 1, &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, b));
    assert_non_null(strstr(err.msg, "columns"));
    assert_non_null(strstr(err.msg, "line 3"));
    /* not a number, bad label, label column out of range */
    const char *c = tpath("c.csv");
    write_text(c, "1,2,0\n3,x4,1\n");
    assert_int_equal(dpfl_csv_load(c, -1, 0, 1, &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "not a number"));
    write_text(c, "1,2,0.5\n");
    assert_int_equal(dpfl_csv_load(c, -1, 0, 1, &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "label"));
    write_text(c, "1,2,0\n");
    assert_int_equal(dpfl_csv_load(c, 3, 0, 1, &d, &err), DPFL_EINVAL);
    const char *e = tpath("d.csv");
    write_text(e, "\n\n");
    assert_int_equal(dpfl_csv_load(e, 0, 0, 1, &d, &err), DPFL_EFORMAT);
    assert_int_equal(dpfl_csv_load(tpath("none.csv"), 0, 0, 1, &d, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "none.csv"));
}

/* ------------------------------------------------------------------------------------------------ heart */
static char heart_dir[4200];

static void heart_counts_and_zscore(void **state)
{
    (void)state;
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_path("heart", NULL, heart_dir, sizeof heart_dir, &err), DPFL_OK);
    if (dpfl_heart_load(heart_dir, 1, &tr, &te, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
    const int want_tr[4] = {199, 172, 30, 85}, want_te[4] = {104, 89, 16, 45};
    int ntr[4] = {0}, nte[4] = {0};
    assert_int_equal(tr.dim, 13);
    assert_int_equal(tr.classes, 2);
    assert_int_equal(tr.groups, 4);
    for (int i = 0; i < tr.n; i++) ntr[tr.group[i]]++;
    for (int i = 0; i < te.n; i++) nte[te.group[i]]++;
    for (int c = 0; c < 4; c++) {
        assert_int_equal(ntr[c], want_tr[c]);
        assert_int_equal(nte[c], want_te[c]);
        for (int j = 0; j < 13; j++) {
            double m = 0, v = 0;
            for (int i = 0; i < tr.n; i++)
                if (tr.group[i] == c) m += tr.x[i * 13 + j];
            m /= ntr[c];
            for (int i = 0; i < tr.n; i++)
                if (tr.group[i] == c) v += (tr.x[i * 13 + j] - m) * (tr.x[i * 13 + j] - m);
            double sd = sqrt(v / ntr[c]);
            assert_true(fabs(m) < 1e-5);
            /* sd 1, or a feature constant in this centre's train split (centred to 0) */
            assert_true(fabs(sd - 1.0) < 1e-4 || sd < 1e-6);
        }
    }
    int pos = 0;
    for (int i = 0; i < tr.n; i++) pos += tr.y[i];
    assert_true(pos > 100 && pos < tr.n - 100);
    /* the split depends on the seed, the counts do not */
    dpfl_dataset tr2, te2;
    assert_int_equal(dpfl_heart_load(heart_dir, 2, &tr2, &te2, &err), DPFL_OK);
    assert_int_equal(tr2.n, tr.n);
    assert_memory_not_equal(tr.x, tr2.x, (size_t)tr.n * 13 * sizeof(float));
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    assert_int_equal(dpfl_heart_load("/nonexistent", 1, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/processed.cleveland.data"));
}

/* ------------------------------------------------------------------------------------------- partitions */
/* Every client's indices valid; if disjoint, no index twice; if complete, all n covered. */
static void check_partition(const dpfl_partition *p, int32_t n, int disjoint, int complete)
{
    char *seen = calloc((size_t)n, 1);
    assert_int_equal(p->offset[0], 0);
    for (int32_t k = 0; k < p->clients; k++) {
        assert_true(dpfl_partition_size(p, k) > 0);
        for (int32_t i = p->offset[k]; i < p->offset[k + 1]; i++) {
            int32_t j = p->index[i];
            assert_true(j >= 0 && j < n);
            if (disjoint) assert_int_equal(seen[j], 0);
            seen[j] = 1;
        }
    }
    if (complete) {
        for (int32_t j = 0; j < n; j++) assert_int_equal(seen[j], 1);
        assert_int_equal(p->offset[p->clients], n);
    }
    free(seen);
}

static int distinct_labels(const dpfl_dataset *d, const dpfl_partition *p, int32_t k, int32_t *hist)
{
    memset(hist, 0, (size_t)d->classes * sizeof *hist);
    for (int32_t i = p->offset[k]; i < p->offset[k + 1]; i++) hist[d->y[p->index[i]]]++;
    int m = 0;
    for (int c = 0; c < d->classes; c++) m += hist[c] > 0;
    return m;
}

static dpfl_dataset syn_tr, syn_te; /* 1000 train (100 per class), 500 test, 10 classes */

static int setup_syn(void **state)
{
    if (setup_tmp(state)) return -1;
    if (dpfl_synthetic(1000, 4, 10, 3.0, 11, &syn_tr, NULL)) return -1;
    if (dpfl_synthetic(500, 4, 10, 3.0, 12, &syn_te, NULL)) return -1;
    return 0;
}

static int teardown_syn(void **state)
{
    dpfl_dataset_free(&syn_tr);
    dpfl_dataset_free(&syn_te);
    return teardown_tmp(state);
}

static void make_ok(const dpfl_partition_spec *sp, uint64_t seed, dpfl_partition *p)
{
    dpfl_rng r;
    dpfl_error err;
    dpfl_rng_init_seed(&r, seed);
    if (dpfl_partition_make(&syn_tr, &syn_te, sp, &r, p, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
}

static void synthetic_balanced_and_deterministic(void **state)
{
    (void)state;
    int h[10] = {0};
    for (int i = 0; i < syn_tr.n; i++) h[syn_tr.y[i]]++;
    for (int c = 0; c < 10; c++) assert_int_equal(h[c], 100);
    dpfl_dataset again;
    assert_int_equal(dpfl_synthetic(1000, 4, 10, 3.0, 11, &again, NULL), DPFL_OK);
    assert_memory_equal(again.x, syn_tr.x, 4000 * sizeof(float));
    assert_memory_equal(again.y, syn_tr.y, 1000 * sizeof(int32_t));
    dpfl_dataset_free(&again);
    dpfl_error err;
    assert_int_equal(dpfl_synthetic(10, 4, 1, 1.0, 1, &again, &err), DPFL_EINVAL);
}

static void partition_iid(void **state)
{
    (void)state;
    dpfl_partition p;
    dpfl_partition_spec sp = {.kind = DPFL_PART_IID, .clients = 7};
    make_ok(&sp, 1, &p);
    check_partition(&p, 1000, 1, 1);
    for (int k = 0; k < 7; k++) assert_true(dpfl_partition_size(&p, k) == 142 || dpfl_partition_size(&p, k) == 143);
    assert_null(p.test_offset);
    dpfl_partition_free(&p);
}

static void partition_shards(void **state)
{
    (void)state;
    dpfl_partition p;
    int32_t h[10];
    dpfl_partition_spec sp = {.kind = DPFL_PART_SHARDS, .clients = 20, .shards = 2};
    make_ok(&sp, 1, &p);
    check_partition(&p, 1000, 1, 1);
    for (int k = 0; k < 20; k++) {
        assert_int_equal(dpfl_partition_size(&p, k), 50); /* 2 shards of 1000/40 */
        assert_true(distinct_labels(&syn_tr, &p, k, h) <= 2);
    }
    dpfl_partition_free(&p);
}

static void partition_classes(void **state)
{
    (void)state;
    dpfl_partition p;
    int32_t h[10];
    dpfl_partition_spec sp = {.kind = DPFL_PART_CLASSES, .clients = 20, .classes_per_client = 2};
    make_ok(&sp, 1, &p);
    check_partition(&p, 1000, 1, 1);
    for (int k = 0; k < 20; k++) {
        assert_int_equal(distinct_labels(&syn_tr, &p, k, h), 2);
        /* classes k, k+1 mod 10, each held by 4 clients: 100 / 4 = 25 each */
        assert_int_equal(h[k % 10], 25);
        assert_int_equal(h[(k + 1) % 10], 25);
    }
    dpfl_partition_free(&p);
    /* 3 clients x 3 classes: classes 0..4 held, 5..9 not (disjoint, incomplete); uneven holders */
    sp = (dpfl_partition_spec){.kind = DPFL_PART_CLASSES, .clients = 3, .classes_per_client = 3};
    make_ok(&sp, 1, &p);
    check_partition(&p, 1000, 1, 0);
    assert_int_equal(distinct_labels(&syn_tr, &p, 0, h), 3);
    assert_int_equal(h[0], 100);
    assert_int_equal(h[1], 50);
    assert_int_equal(h[2], 33); /* holders of class 2 get 33, 33, 34 */
    dpfl_partition_free(&p);
}

static void partition_dirichlet_with_client_test_sets(void **state)
{
    (void)state;
    dpfl_partition p;
    int32_t h[10];
    dpfl_partition_spec sp = {.kind = DPFL_PART_DIRICHLET, .clients = 10, .beta = 0.3, .test_per_client = 40};
    make_ok(&sp, 3, &p);
    check_partition(&p, 1000, 1, 1);
    assert_non_null(p.test_offset);
    int skewed = 0;
    for (int k = 0; k < 10; k++) {
        int32_t size = dpfl_partition_size(&p, k);
        skewed += distinct_labels(&syn_tr, &p, k, h) < 10;
        int32_t th[10] = {0};
        assert_int_equal(p.test_offset[k + 1] - p.test_offset[k], 40);
        char seen[500] = {0};
        for (int32_t i = p.test_offset[k]; i < p.test_offset[k + 1]; i++) {
            int32_t j = p.test_index[i];
            assert_true(j >= 0 && j < 500);
            assert_int_equal(seen[j], 0); /* without replacement within a client */
            seen[j] = 1;
            th[syn_te.y[j]]++;
        }
        for (int c = 0; c < 10; c++) assert_true(fabs(th[c] - 40.0 * h[c] / size) < 1.0);
    }
    assert_true(skewed > 0);
    dpfl_partition_free(&p);
}

static void partition_natural_heart(void **state)
{
    (void)state;
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_heart_load(heart_dir, 1, &tr, &te, &err), DPFL_OK);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    dpfl_partition p;
    dpfl_partition_spec sp = {.kind = DPFL_PART_NATURAL, .clients = 4};
    assert_int_equal(dpfl_partition_make(&tr, &te, &sp, &r, &p, &err), DPFL_OK);
    check_partition(&p, tr.n, 1, 1);
    const int want_te[4] = {104, 89, 16, 45};
    for (int k = 0; k < 4; k++) {
        for (int32_t i = p.offset[k]; i < p.offset[k + 1]; i++) assert_int_equal(tr.group[p.index[i]], k);
        assert_int_equal(p.test_offset[k + 1] - p.test_offset[k], want_te[k]);
        for (int32_t i = p.test_offset[k]; i < p.test_offset[k + 1]; i++)
            assert_int_equal(te.group[p.test_index[i]], k);
    }
    dpfl_partition_free(&p);
    sp.clients = 5;
    assert_int_equal(dpfl_partition_make(&tr, &te, &sp, &r, &p, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.clients"));
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    sp.clients = 4;
    assert_int_equal(dpfl_partition_make(&syn_tr, &syn_te, &sp, &r, &p, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "natural"));
}

static void partition_replication(void **state)
{
    (void)state;
    dpfl_partition p;
    int32_t h[10];
    const int32_t K = 1000, s = 60; /* 60,000 slots over 1,000 examples: each used 60 times */
    dpfl_partition_spec kinds[4] = {
        {.kind = DPFL_PART_IID, .clients = K, .samples_per_client = s},
        {.kind = DPFL_PART_SHARDS, .clients = K, .shards = 2, .samples_per_client = s},
        {.kind = DPFL_PART_CLASSES, .clients = K, .classes_per_client = 3, .samples_per_client = s},
        {.kind = DPFL_PART_DIRICHLET, .clients = K, .beta = 0.5, .samples_per_client = s, .test_per_client = 10},
    };
    for (int t = 0; t < 4; t++) {
        make_ok(&kinds[t], 5, &p);
        check_partition(&p, 1000, 0, 0);
        assert_int_equal(p.clients, K);
        for (int k = 0; k < K; k++) assert_int_equal(dpfl_partition_size(&p, k), s);
        /* indices only: the partition is offsets + K*s indices, nothing per example beyond that */
        assert_int_equal(p.offset[K], K * s);
        int32_t *uses = calloc(1000, sizeof *uses);
        for (int32_t i = 0; i < K * s; i++) uses[p.index[i]]++;
        for (int j = 0; j < 1000; j++) {
            if (t == 0 || t == 1) assert_int_equal(uses[j], 60); /* whole copies of the training set */
            if (t == 2) assert_true(abs(uses[j] - 60) <= 1);     /* 300 holders x 20 per class of 100 */
        }
        free(uses);
        for (int k = 0; k < K; k++) {
            int m = distinct_labels(&syn_tr, &p, k, h);
            if (t == 1) assert_true(m <= 2);
            if (t == 2) {
                assert_int_equal(m, 3);
                for (int j = 0; j < 3; j++) assert_int_equal(h[(k + j) % 10], 20);
            }
        }
        dpfl_partition_free(&p);
    }
    /* s not a multiple of the shards */
    dpfl_partition_spec bad = {.kind = DPFL_PART_SHARDS, .clients = 10, .shards = 7, .samples_per_client = 60};
    dpfl_rng r;
    dpfl_error err;
    dpfl_rng_init_seed(&r, 1);
    assert_int_equal(dpfl_partition_make(&syn_tr, NULL, &bad, &r, &p, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.samples_per_client"));
}

static void expect_spec_error(dpfl_partition_spec sp, const char *key)
{
    dpfl_rng r;
    dpfl_error err;
    dpfl_partition p;
    dpfl_rng_init_seed(&r, 1);
    assert_int_equal(dpfl_partition_make(&syn_tr, &syn_te, &sp, &r, &p, &err), DPFL_EINVAL);
    if (!strstr(err.msg, key)) {
        print_error("message '%s' should name %s\n", err.msg, key);
        fail();
    }
    assert_null(p.index);
}

static void partition_spec_errors(void **state)
{
    (void)state;
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_IID, .clients = 0}, "data.clients");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_IID, .clients = 1001}, "data.clients");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_SHARDS, .clients = 100, .shards = 11},
                      "data.shards");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_SHARDS, .clients = 10, .shards = 0},
                      "data.shards");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_CLASSES, .clients = 10, .classes_per_client = 11},
                      "data.classes_per_client");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_CLASSES, .clients = 10, .classes_per_client = 0},
                      "data.classes_per_client");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_CLASSES, .clients = 1000, .classes_per_client = 2},
                      "data.clients");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_DIRICHLET, .clients = 10, .beta = 0},
                      "data.beta");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_DIRICHLET, .clients = 900, .beta = 0.001},
                      "data.beta");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_IID, .clients = 10, .test_per_client = 600},
                      "data.test_per_client");
    expect_spec_error((dpfl_partition_spec){.kind = DPFL_PART_IID, .clients = 10, .samples_per_client = -1},
                      "data.samples_per_client");
}

static void partition_deterministic_for_a_seed(void **state)
{
    (void)state;
    dpfl_partition_kind kinds[4] = {DPFL_PART_IID, DPFL_PART_SHARDS, DPFL_PART_DIRICHLET, DPFL_PART_CLASSES};
    for (int t = 0; t < 4; t++) {
        dpfl_partition_spec sp = {.kind = kinds[t], .clients = 10, .shards = 2, .beta = 0.5,
                                  .classes_per_client = 2, .test_per_client = 20};
        dpfl_partition a, b, c;
        make_ok(&sp, 42, &a);
        make_ok(&sp, 42, &b);
        make_ok(&sp, 43, &c);
        assert_int_equal(a.offset[10], b.offset[10]);
        assert_memory_equal(a.offset, b.offset, 11 * sizeof(int32_t));
        assert_memory_equal(a.index, b.index, (size_t)a.offset[10] * sizeof(int32_t));
        assert_memory_equal(a.test_index, b.test_index, 200 * sizeof(int32_t));
        assert_true(a.offset[10] != c.offset[10] ||
                    memcmp(a.index, c.index, (size_t)a.offset[10] * sizeof(int32_t)) != 0);
        dpfl_partition_free(&a);
        dpfl_partition_free(&b);
        dpfl_partition_free(&c);
    }
}

/* ---------------------------------------------------------------------------------------------- by name */
static void dataset_by_name_errors(void **state)
{
    (void)state;
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load("cifar", NULL, 1, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "mnist, fashion-mnist, heart, synthetic"));
    assert_int_equal(dpfl_dataset_load("mnist", tmpdir, 1, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "train-images-idx3-ubyte"));
    assert_non_null(strstr(err.msg, "dpfl data fetch"));
    assert_int_equal(dpfl_dataset_load("synthetic", NULL, 3, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 10000);
    assert_int_equal(te.n, 2000);
    assert_int_equal(tr.classes, 10);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
}

/* The real MNIST files, when the cache holds them (CI fetches them in `make test` before running tests). */
static void mnist_real_files(void **state)
{
    (void)state;
    if (!dpfl_mnist_present(NULL)) {
        char dir[4096];
        dpfl_dataset_path("mnist", NULL, dir, sizeof dir, NULL);
        print_message("MNIST not in %s: skipped\n", dir);
        skip();
    }
    dpfl_dataset tr, te;
    dpfl_error err;
    if (dpfl_dataset_load("mnist", NULL, 1, &tr, &te, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
    assert_int_equal(tr.n, 60000);
    assert_int_equal(te.n, 10000);
    assert_int_equal(tr.h, 28);
    assert_int_equal(tr.w, 28);
    assert_int_equal(tr.dim, 784);
    assert_int_equal(tr.classes, 10);
    int h[10] = {0};
    for (int i = 0; i < tr.n; i++) {
        assert_true(tr.y[i] >= 0 && tr.y[i] < 10);
        h[tr.y[i]]++;
    }
    for (int c = 0; c < 10; c++) assert_true(h[c] > 5000);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < (size_t)tr.n * 784; i++) {
        if (tr.x[i] < lo) lo = tr.x[i];
        if (tr.x[i] > hi) hi = tr.x[i];
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    /* Geyer's setting: 1,000 clients x 600, shards of 300 */
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    dpfl_partition p;
    dpfl_partition_spec sp = {.kind = DPFL_PART_SHARDS, .clients = 1000, .shards = 2, .samples_per_client = 600};
    assert_int_equal(dpfl_partition_make(&tr, &te, &sp, &r, &p, &err), DPFL_OK);
    assert_int_equal(p.offset[1000], 600000);
    dpfl_partition_free(&p);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idx_roundtrip_plain_and_gzip),
        cmocka_unit_test(idx_rejects_corrupt_files),
        cmocka_unit_test(csv_missing_values_and_columns),
        cmocka_unit_test(heart_counts_and_zscore),
        cmocka_unit_test(synthetic_balanced_and_deterministic),
        cmocka_unit_test(partition_iid),
        cmocka_unit_test(partition_shards),
        cmocka_unit_test(partition_classes),
        cmocka_unit_test(partition_dirichlet_with_client_test_sets),
        cmocka_unit_test(partition_natural_heart),
        cmocka_unit_test(partition_replication),
        cmocka_unit_test(partition_spec_errors),
        cmocka_unit_test(partition_deterministic_for_a_seed),
        cmocka_unit_test(dataset_by_name_errors),
        cmocka_unit_test(mnist_real_files),
    };
    return cmocka_run_group_tests_name("data", tests, setup_syn, teardown_syn);
}
