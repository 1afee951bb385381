/* The paper examples that need data dpfl cannot download here (examples/prifedsync_cifar10.ini, rpdp_cifar10.ini,
 * privatefl_cifar10.ini, privatefl_features.ini, privatefl_emnist_ddp.ini, privatefl_purchase.ini) run as 1-round
 * smoke versions of the same files on small data written here in the published formats: CIFAR-10's binary batches,
 * EMNIST's gzipped IDX files, NumPy .npz arrays.  Each must train privately and write its summary.  (The full
 * runs need the real data; test_fl.c checks that every example's config loads and validates.) */
#include "testutil.h"
#include "arrays_write.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char root[64];

static const char *at(const char *name)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, 512, "%s/%s", root, name);
    return b;
}

/* pixel bytes of an image of class c: a class pattern plus noise, so that the data is learnable */
static uint8_t pixel(int c, int i, uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (uint8_t)(((i * (c + 3)) % 97) + (c * 13) + (*state >> 27));
}

/* CIFAR-10: five training batches of 40 records and a test batch of 40, labels i mod 10 */
static void write_cifar10(void)
{
    mkdir(at("cifar10"), 0700);
    mkdir(at("cifar10/cifar-10-batches-bin"), 0700);
    const int n = 40;
    uint8_t lab[40], *px = malloc((size_t)n * 3072);
    uint32_t st = 1;
    for (int f = 0; f < 6; f++) {
        for (int i = 0; i < n; i++) {
            lab[i] = (uint8_t)(i % 10);
            for (int k = 0; k < 3072; k++) px[(size_t)i * 3072 + k] = pixel(lab[i], k, &st);
        }
        char name[64];
        if (f < 5) snprintf(name, sizeof name, "cifar10/cifar-10-batches-bin/data_batch_%d.bin", f + 1);
        else snprintf(name, sizeof name, "cifar10/cifar-10-batches-bin/test_batch.bin");
        cifar_write(at(name), 0, n, NULL, lab, px);
    }
    free(px);
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void gz_write(const char *path, const uint8_t *data, size_t len)
{
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
}

/* EMNIST digits: 400 training and 100 test images of 28 x 28, gzipped IDX as in gzip.zip */
static void write_emnist_digits(void)
{
    mkdir(at("emnist"), 0700);
    const int counts[2] = {400, 100};
    const char *part[2] = {"train", "test"};
    uint32_t st = 7;
    for (int t = 0; t < 2; t++) {
        const int n = counts[t];
        uint8_t *img = malloc(16 + (size_t)n * 784), *lab = malloc(8 + (size_t)n);
        img[0] = img[1] = 0, img[2] = 8, img[3] = 3;
        be32(img + 4, (uint32_t)n), be32(img + 8, 28), be32(img + 12, 28);
        lab[0] = lab[1] = 0, lab[2] = 8, lab[3] = 1;
        be32(lab + 4, (uint32_t)n);
        for (int i = 0; i < n; i++) {
            lab[8 + i] = (uint8_t)(i % 10);
            for (int k = 0; k < 784; k++) img[16 + (size_t)i * 784 + k] = pixel(i % 10, k, &st);
        }
        char name[128];
        snprintf(name, sizeof name, "emnist/emnist-digits-%s-images-idx3-ubyte.gz", part[t]);
        gz_write(at(name), img, 16 + (size_t)n * 784);
        snprintf(name, sizeof name, "emnist/emnist-digits-%s-labels-idx1-ubyte.gz", part[t]);
        gz_write(at(name), lab, 8 + (size_t)n);
        free(img), free(lab);
    }
}

/* float32 features (n, f) of class i mod classes (a class mean plus noise), labels int64 */
static void features(int n, int f, int classes, uint32_t seed, uint8_t **x, size_t *xl, uint8_t **y, size_t *yl)
{
    float *v = malloc((size_t)n * f * sizeof *v);
    int64_t *lab = malloc((size_t)n * sizeof *lab);
    uint32_t st = seed;
    for (int i = 0; i < n; i++) {
        lab[i] = i % classes;
        for (int j = 0; j < f; j++) v[(size_t)i * f + j] = (float)((j % classes == lab[i]) + (pixel(0, j, &st) % 16) / 32.0);
    }
    int64_t sx[2] = {n, f}, sy[1] = {n};
    *x = npy_bytes("<f4", 0, sx, 2, v, (size_t)n * f * sizeof *v, xl);
    *y = npy_bytes("<i8", 0, sy, 1, lab, (size_t)n * sizeof *lab, yl);
    free(v), free(lab);
}

/* cifar100_clip.npz (x_train, y_train, x_test, y_test: 64 features, 100 classes) and purchase100.npz (x, y: 600
 * binary-ish features, 100 classes) in the folder the two examples are run from */
static void write_npz(void)
{
    uint8_t *d[4];
    size_t l[4];
    features(1000, 64, 100, 3, &d[0], &l[0], &d[1], &l[1]);
    features(200, 64, 100, 4, &d[2], &l[2], &d[3], &l[3]);
    const char *names[4] = {"x_train", "y_train", "x_test", "y_test"};
    npz_write(at("cifar100_clip.npz"), 4, names, d, l, 0);
    for (int i = 0; i < 4; i++) free(d[i]);
    features(1000, 600, 100, 5, &d[0], &l[0], &d[1], &l[1]);
    const char *pn[2] = {"x", "y"};
    npz_write(at("purchase100.npz"), 2, pn, d, l, 1);
    free(d[0]), free(d[1]);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dpfl-test-papers-XXXXXX");
    if (!mkdtemp(root)) return -1;
    write_cifar10();
    write_emnist_digits();
    write_npz();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

/* dpfl train EXAMPLE SETS from root (relative npy: paths), data.data_dir = root; summary.json private */
static void smoke(const char *example, const char *sets)
{
    const char *b = getenv("BUILD");
    char cwd[1024], cmd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/%s/dpfl' train '%s/examples/%s' --set data.data_dir='%s' %s --out run "
                              "--force --quiet > train.log 2>&1 && grep -qE '\"private\":[[:space:]]*true' run/summary.json",
             root, cwd, b ? b : "build", cwd, example, root, sets);
    if (system(cmd) != 0) {
        char log[512];
        snprintf(log, sizeof log, "tail -3 '%s/train.log' >&2", root);
        print_error("%s failed: %s\n", example, cmd);
        if (system(log)) {}
        fail();
    }
}

static void prifedsync_cifar10(void **state)
{
    (void)state;
    smoke("prifedsync_cifar10.ini", "--set fl.rounds=1 --set data.clients=4 --set data.samples_per_client=20 "
                                    "--set data.test_per_client=4 --set fl.local_steps=2 --set run.eval_every=1");
}

static void rpdp_cifar10(void **state)
{
    (void)state;
    smoke("rpdp_cifar10.ini", "--set fl.rounds=1 --set fl.local_steps=1 --set fl.batch=4 --set data.clients=4");
}

static void privatefl_cifar10(void **state)
{
    (void)state;
    smoke("privatefl_cifar10.ini", "--set fl.rounds=1 --set data.clients=5 --set data.test_per_client=4 "
                                   "--set fl.batch=8");
}

static void privatefl_features(void **state)
{
    (void)state;
    smoke("privatefl_features.ini", "--set fl.rounds=1");
}

static void privatefl_emnist_ddp(void **state)
{
    (void)state;
    smoke("privatefl_emnist_ddp.ini", "--set fl.rounds=1 --set data.clients=20 --set fl.client_rate=0.5 "
                                      "--set data.test_per_client=4");
}

static void privatefl_purchase(void **state)
{
    (void)state;
    smoke("privatefl_purchase.ini", "--set fl.rounds=1 --set fl.client_rate=0.5");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prifedsync_cifar10), cmocka_unit_test(rpdp_cifar10),
        cmocka_unit_test(privatefl_cifar10),  cmocka_unit_test(privatefl_features),
        cmocka_unit_test(privatefl_emnist_ddp), cmocka_unit_test(privatefl_purchase),
    };
    return cmocka_run_group_tests_name("paper examples", tests, setup, teardown);
}
