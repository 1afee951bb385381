/* Shared fixtures for the federated tests: synthetic data split into train and test from one draw (so both
 * share the class means), and partitions by hand. */
#ifndef DPFL_TEST_FIXTURES_H
#define DPFL_TEST_FIXTURES_H
#include "testutil.h"
#include "dpfl/data.h"
#include "dpfl/fl.h"

#include <dirent.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

/* n training and ntest test examples (dim features, classes labels) from one synthetic draw. */
static inline void fixture_split_synthetic(int32_t n, int32_t ntest, int32_t dim, int32_t classes, uint64_t seed,
                                           dpfl_dataset *train, dpfl_dataset *test)
{
    dpfl_error err;
    assert_int_equal(dpfl_synthetic(n + ntest, dim, classes, 2.0, seed, train, &err), DPFL_OK);
    *test = *train;
    test->n = ntest;
    test->group = NULL;
    test->x = malloc((size_t)ntest * (size_t)dim * sizeof(float));
    test->y = malloc((size_t)ntest * sizeof(int32_t));
    memcpy(test->x, train->x + (size_t)n * (size_t)dim, (size_t)ntest * (size_t)dim * sizeof(float));
    memcpy(test->y, train->y + n, (size_t)ntest * sizeof(int32_t));
    train->n = n;
}

/* Client k owns the next sizes[k] examples in order. */
static inline dpfl_partition fixture_contiguous(const int32_t *sizes, int32_t K)
{
    dpfl_partition p = {0};
    p.clients = K;
    p.offset = malloc((size_t)(K + 1) * sizeof(int32_t));
    p.offset[0] = 0;
    for (int32_t k = 0; k < K; k++) p.offset[k + 1] = p.offset[k] + sizes[k];
    p.index = malloc((size_t)p.offset[K] * sizeof(int32_t));
    for (int32_t i = 0; i < p.offset[K]; i++) p.index[i] = i;
    return p;
}
/* A federation on synthetic data: n examples (dim 10, 3 classes) split contiguously into K clients of the given
 * sizes, a model `arch` (10 inputs, 3 classes), and the config's defaults for it. */
typedef struct {
    dpfl_dataset train, test;
    dpfl_model model;
    dpfl_config cfg;
    dpfl_partition part;
} fl_fixture;

static inline void fl_fixture_make(fl_fixture *f, const char *arch, const int32_t *sizes, int32_t K)
{
    dpfl_error err;
    int32_t n = 0;
    for (int32_t k = 0; k < K; k++) n += sizes[k];
    fixture_split_synthetic(n, 50, 10, 3, 21, &f->train, &f->test);
    assert_int_equal(dpfl_model_create(arch, 1, 1, 10, 3, &f->model, &err), DPFL_OK);
    f->part = fixture_contiguous(sizes, K);
    dpfl_config_defaults(&f->cfg);
    assert_int_equal(dpfl_config_set(&f->cfg, "data.dataset=synthetic", &err), DPFL_OK);
    f->cfg.data.clients = K;
}

/* A simulation of the fixture's federation: the model initialized into global from the seed, then created over it. */
static inline dpfl_sim *fl_fixture_sim(fl_fixture *f, float *global, uint64_t seed)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, seed);
    dpfl_model_init(&f->model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, global, &sim, &err),
                     DPFL_OK);
    return sim;
}

static inline void fl_fixture_free(fl_fixture *f)
{
    dpfl_partition_free(&f->part);
    dpfl_model_free(&f->model);
    dpfl_dataset_free(&f->train);
    dpfl_dataset_free(&f->test);
}

/* Set a config key by name (section.key) and value, as an INI file or --set would. */
static inline void fixture_set(dpfl_config *c, const char *key, const char *value)
{
    char a[256];
    dpfl_error err;
    snprintf(a, sizeof a, "%s=%s", key, value);
    if (dpfl_config_set(c, a, &err) != DPFL_OK) {
        print_error("%s\n", err.msg);
        fail();
    }
}
/* The checkpoints of two run folders agree in everything but the wall time and the metrics line (which carries
 * it).  Layout (src/run/checkpoint.c): 16 bytes of file header; payload head: rounds, clients, nparam, record z,
 * client z (32 bytes), wall (8), examples, S, event count (24), line length (8); then the partition key and
 * digest, parameters, ledger, events, client states, budgets, line; CRC (4).  Returns the payload's size without
 * the line (for callers that check what it holds). */
static inline size_t fixture_checkpoints_match(const char *dir_a, const char *dir_b)
{
    char pa[512], pb[512], *ma, *mb;
    size_t la, lb;
    dpfl_error err;
    snprintf(pa, sizeof pa, "%s/checkpoint.bin", dir_a);
    snprintf(pb, sizeof pb, "%s/checkpoint.bin", dir_b);
    assert_int_equal(dpfl_file_read_all(pa, &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all(pb, &mb, &lb, &err), DPFL_OK);
    int64_t lla, llb;
    memcpy(&lla, ma + 16 + 64, 8);
    memcpy(&llb, mb + 16 + 64, 8);
    assert_int_equal(la - (size_t)lla, lb - (size_t)llb);
    assert_memory_equal(ma + 16, mb + 16, 32);
    assert_memory_equal(ma + 56, mb + 56, 24);
    assert_memory_equal(ma + 88, mb + 88, la - (size_t)lla - 88 - 4);
    free(ma);
    free(mb);
    return la - (size_t)lla;
}
/* The clients' state files of two runs (RUN/clients/client<k>.g<round>.bin): the same names with the same bytes;
 * their number. */
static inline int fixture_client_files_match(const char *a, const char *b)
{
    char da[512], db[512], pa[1200], pb[1200];
    snprintf(da, sizeof da, "%s/clients", a);
    snprintf(db, sizeof db, "%s/clients", b);
    int na = 0, nb = 0;
    DIR *d = opendir(da);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(pa, sizeof pa, "%s/%s", da, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", db, e->d_name);
        char *fa = NULL, *fb = NULL;
        size_t la, lb;
        assert_int_equal(dpfl_file_read_all(pa, &fa, &la, NULL), DPFL_OK);
        if (dpfl_file_read_all(pb, &fb, &lb, NULL) != DPFL_OK) fail_msg("%s has no %s", db, e->d_name);
        assert_int_equal(la, lb);
        assert_memory_equal(fa, fb, la);
        free(fa);
        free(fb);
        na++;
    }
    closedir(d);
    assert_non_null(d = opendir(db));
    for (struct dirent *e; (e = readdir(d));) nb += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(na, nb);
    return na;
}
#endif
