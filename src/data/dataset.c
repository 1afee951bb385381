/* Dataset lifetime, and finding datasets by name on disk. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dpfl_status dpfl__dataset_alloc(dpfl_dataset *d, int32_t n, int32_t c, int32_t h, int32_t w, int32_t groups,
                                const char *what, dpfl_error *err)
{
    memset(d, 0, sizeof *d);
    int64_t dim = (int64_t)c * h * w;
    if (n < 0 || c <= 0 || h <= 0 || w <= 0 || dim > INT32_MAX || (int64_t)n * dim > (int64_t)1 << 40)
        return dpfl_fail(err, DPFL_EINVAL, "dataset too large or empty (%s): %d examples of %dx%dx%d", what, n, c,
                         h, w);
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->dim = (int32_t)dim;
    d->x = dpfl_alloc((size_t)n * (size_t)dim * sizeof(float), err);
    d->y = dpfl_alloc((size_t)n * sizeof(int32_t), err);
    if (groups > 0) {
        d->groups = groups;
        d->group = dpfl_alloc((size_t)n * sizeof(int32_t), err);
    }
    if (!d->x || !d->y || (groups > 0 && !d->group)) {
        dpfl_dataset_free(d);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s): %d examples of dimension %d", what, n, (int)dim);
    }
    return DPFL_OK;
}

void dpfl_dataset_free(dpfl_dataset *d)
{
    if (!d) return;
    dpfl_free(d->x);
    dpfl_free(d->y);
    dpfl_free(d->group);
    dpfl_free(d->absent);
    memset(d, 0, sizeof *d);
}

/* MNIST-style pair of IDX files <dir>/<prefix>-images-idx3-ubyte<ext> and ...-labels-idx1-ubyte<ext>. */
static dpfl_status load_idx_pair(const char *dir, const char *prefix, const char *ext, const char *hint,
                                 dpfl_dataset *out, dpfl_error *err)
{
    char img[4096], lab[4096];
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte%s", dir, prefix, ext);
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte%s", dir, prefix, ext);
    if (access(img, R_OK) != 0 || access(lab, R_OK) != 0)
        return dpfl_fail(err, DPFL_EIO, "dataset file missing (%s): %s", access(img, R_OK) ? img : lab, hint);
    return dpfl_idx_load(img, lab, out, err);
}

static dpfl_status load_idx_dataset(const char *dir, const char *ext, const char *hint, dpfl_dataset *train,
                                    dpfl_dataset *test, dpfl_error *err)
{
    dpfl_status s = load_idx_pair(dir, "train", ext, hint, train, err);
    if (s) return s;
    s = load_idx_pair(dir, "t10k", ext, hint, test, err);
    if (s) {
        dpfl_dataset_free(train);
        return s;
    }
    int32_t k = train->classes > test->classes ? train->classes : test->classes;
    train->classes = test->classes = k;
    if (train->dim != test->dim) {
        dpfl_status e = dpfl_fail(err, DPFL_EFORMAT, "train and test images differ in shape (%s): %dx%d vs %dx%d",
                                  dir, train->h, train->w, test->h, test->w);
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
        return e;
    }
    return DPFL_OK;
}

/* Synthetic train/test: one draw of n_train + n_test examples (so both share the class means), then split. */
static dpfl_status load_synthetic(uint64_t seed, dpfl_dataset *train, dpfl_dataset *test, dpfl_error *err)
{
    const int32_t ntr = 10000, nte = 2000, dim = 20, classes = 10;
    dpfl_dataset all;
    dpfl_status s = dpfl_synthetic(ntr + nte, dim, classes, 3.0, seed, &all, err);
    if (s) return s;
    s = dpfl__dataset_alloc(train, ntr, 1, 1, dim, 0, "synthetic", err);
    if (!s) s = dpfl__dataset_alloc(test, nte, 1, 1, dim, 0, "synthetic", err);
    if (s) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(&all);
        return s;
    }
    memcpy(train->x, all.x, (size_t)ntr * dim * sizeof(float));
    memcpy(train->y, all.y, (size_t)ntr * sizeof(int32_t));
    memcpy(test->x, all.x + (size_t)ntr * dim, (size_t)nte * dim * sizeof(float));
    memcpy(test->y, all.y + ntr, (size_t)nte * sizeof(int32_t));
    train->classes = test->classes = classes;
    dpfl_dataset_free(&all);
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ the registry */
static dpfl_status load_mnist(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                              dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    (void)seed;
    return load_idx_dataset(dir, "", "run 'dpfl data fetch' or 'make setup' to download MNIST", train, test, err);
}

static dpfl_status load_fashion(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                                dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    (void)seed;
    return load_idx_dataset(dir, ".gz", "install the Debian package dataset-fashion-mnist ('make setup')", train, test,
                            err);
}

static dpfl_status load_cifar10(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                                dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    (void)seed;
    return dpfl_cifar_load(dir, 0, train, test, err);
}

static dpfl_status load_cifar100(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                                 dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    (void)seed;
    return dpfl_cifar_load(dir, 1, train, test, err);
}

/* emnist-<split>: the registry's name after "emnist-" is the split */
static dpfl_status load_emnist(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                               dpfl_dataset *test, dpfl_error *err)
{
    (void)seed;
    return dpfl_emnist_load(dir, name + 7, train, test, err);
}

static dpfl_status load_heart(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                              dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    return dpfl_heart_load(dir, seed, train, test, err);
}

static dpfl_status load_generated(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train,
                                  dpfl_dataset *test, dpfl_error *err)
{
    (void)name;
    (void)dir;
    return load_synthetic(seed, train, test, err);
}

/* One entry per dataset: where it lives, how it loads, its published standardization constants (0 = none).
 * Downloaded (cache) and shipped datasets are searched for (paths.c): the first folder holding `probe` is used. */
typedef enum { WHERE_CACHE, WHERE_FIXED, WHERE_SHIPPED, WHERE_NONE } where_kind;
static const struct {
    const char *name;
    where_kind where;
    const char *dir;   /* cache, shipped: subfolder of the data folders; fixed: absolute */
    const char *probe; /* cache, shipped: the file whose presence says the folder holds the dataset (gzipped:
                          the name + ".gz" also does) */
    int gz;
    const char *hint;  /* cache, shipped: how to get the dataset */
    dpfl_status (*load)(const char *name, const char *dir, uint64_t seed, dpfl_dataset *train, dpfl_dataset *test,
                        dpfl_error *err);
    double mean, sd;
    double cmean[3], csd[3]; /* per channel (RGB datasets), used when csd[0] > 0 */
} registry[] = {
    {"mnist", WHERE_CACHE, "mnist", "train-images-idx3-ubyte", 0,
     "run 'dpfl data fetch' to download it into the first of them (DPFL_DATA, else XDG_CACHE_HOME, else HOME "
     "chooses that folder; from a dpfl checkout: export DPFL_DATA=<checkout>/data)",
     load_mnist, 0.1307, 0.3081, {0}, {0}},
    {"fashion-mnist", WHERE_FIXED, DPFL_FASHION_MNIST_DIR, NULL, 0, NULL, load_fashion, 0.2860, 0.3530, {0}, {0}},
    {"heart", WHERE_SHIPPED, "heart-disease", "processed.cleveland.data", 0,
     "the heart-disease files ship with dpfl: 'make install' copies them into the installed data folder; from a dpfl "
     "checkout: export DPFL_DATA=<checkout>/data",
     load_heart, 0, 0, {0}, {0}},
    {"synthetic", WHERE_NONE, "(generated)", NULL, 0, NULL, load_generated, 0, 0, {0}, {0}},
    /* per-channel constants: the training set's RGB means and standard deviations (the values every CIFAR
     * training script uses), not recomputed from the data */
    {"cifar10", WHERE_CACHE, "cifar10", "cifar-10-batches-bin/test_batch.bin", 0,
     "run 'dpfl data fetch cifar10' to download it (the official binary archive, MD5 checked) into the first of "
     "them, or unpack cifar-10-binary.tar.gz there yourself",
     load_cifar10, 0, 0, {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}},
    {"cifar100", WHERE_CACHE, "cifar100", "cifar-100-binary/test.bin", 0,
     "run 'dpfl data fetch cifar100' to download it (the official binary archive, MD5 checked) into the first of "
     "them, or unpack cifar-100-binary.tar.gz there yourself",
     load_cifar100, 0, 0, {0.5071, 0.4865, 0.4409}, {0.2673, 0.2564, 0.2762}},
    /* EMNIST's splits share one folder, emnist/, holding the files of the published gzip.zip (emnist.c); no
     * published standardization constants */
#define EMNIST(split)                                                                                                \
    {"emnist-" split, WHERE_CACHE, "emnist", "emnist-" split "-test-labels-idx1-ubyte", 1, EMNIST_HINT, load_emnist, \
     0, 0, {0}, {0}}
#define EMNIST_HINT                                                                                                  \
    "download gzip.zip from https://www.nist.gov/itl/products-and-services/emnist-dataset (Cohen et al. 2017) and "  \
    "put the files of its gzip/ folder (emnist-<split>-*-ubyte.gz) into the first of them"
    EMNIST("balanced"), EMNIST("byclass"), EMNIST("bymerge"), EMNIST("digits"), EMNIST("letters"), EMNIST("mnist"),
#undef EMNIST
#undef EMNIST_HINT
};
#define NREGISTRY (sizeof registry / sizeof registry[0])

static int find_dataset(const char *name)
{
    for (size_t i = 0; name && i < NREGISTRY; i++)
        if (!strcmp(registry[i].name, name)) return (int)i;
    return -1;
}

static dpfl_status unknown(const char *name, dpfl_error *err)
{
    char valid[512] = "";
    for (size_t i = 0; i < NREGISTRY; i++) {
        if (i) strncat(valid, ", ", sizeof valid - strlen(valid) - 1);
        strncat(valid, registry[i].name, sizeof valid - strlen(valid) - 1);
    }
    return dpfl_fail(err, DPFL_EINVAL, "unknown dataset (data.dataset): '%s'; valid: %s, csv:FILES, idx:FILES, npy:FILES",
                     name ? name : "", valid);
}

/* The folder dataset i is read from: *found = 1 and the first candidate holding its probe file, else *found = 0,
 * the first candidate in buf and the list of every candidate in searched (may be NULL). */
static dpfl_status locate(int i, const char *data_dir, char *buf, size_t len, int *found, char *searched,
                          size_t slen, dpfl_error *err)
{
    *found = 1;
    if (registry[i].where == WHERE_FIXED || registry[i].where == WHERE_NONE) {
        snprintf(buf, len, "%s", registry[i].dir);
        return DPFL_OK;
    }
    char dirs[2][DPFL__PATH_MAX], probe[DPFL__PATH_MAX + 64];
    int n;
    dpfl_status s = dpfl__data_candidates(registry[i].where == WHERE_SHIPPED, registry[i].dir, data_dir, dirs, &n,
                                          err);
    if (s) return s;
    *found = 0;
    for (int j = 0; j < n && !*found; j++) {
        for (int gz = 0; gz <= registry[i].gz && !*found; gz++) {
            int w = snprintf(probe, sizeof probe, "%s/%s%s", dirs[j], registry[i].probe, gz ? ".gz" : "");
            if (w > 0 && (size_t)w < sizeof probe && access(probe, R_OK) == 0) {
                snprintf(buf, len, "%s", dirs[j]);
                *found = 1;
            }
        }
    }
    if (!*found) snprintf(buf, len, "%s", dirs[0]);
    if (searched) dpfl__data_list(dirs, n, searched, slen);
    return DPFL_OK;
}

dpfl_status dpfl_dataset_path(const char *name, const char *data_dir, char *buf, size_t len, dpfl_error *err)
{
    if (dpfl_dataset_is_files(name)) { /* the files themselves */
        snprintf(buf, len, "%s", name + 4);
        return DPFL_OK;
    }
    int i = find_dataset(name), found;
    if (i < 0) return unknown(name, err);
    return locate(i, data_dir, buf, len, &found, NULL, 0, err);
}

dpfl_status dpfl_dataset_load(const char *name, const char *data_dir, uint64_t seed, dpfl_dataset *train,
                              dpfl_dataset *test, dpfl_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!name) return dpfl_fail(err, DPFL_EINVAL, "no dataset named (data.dataset)");
    if (dpfl_dataset_is_files(name)) return dpfl_dataset_load_files(name, NULL, seed, train, test, err);
    if (dpfl_dataset_is_memory(name))
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset = %s: the run's data were arrays in the memory of the program "
                         "that started it (dpfl_run_options.train, Python's dpfl.arrays), not files; run or resume it "
                         "from that program with the same arrays", name);
    int i = find_dataset(name), found;
    if (i < 0) return unknown(name, err);
    char dir[DPFL__PATH_MAX], searched[2 * DPFL__PATH_MAX + 8];
    dpfl_status s = locate(i, data_dir, dir, sizeof dir, &found, searched, sizeof searched, err);
    if (s) return s;
    if (!found)
        return dpfl_fail(err, DPFL_EIO, "dataset not found (%s): no %s%s in %s; %s", name, registry[i].probe,
                         registry[i].gz ? "[.gz]" : "", searched, registry[i].hint);
    return registry[i].load(name, dir, seed, train, test, err);
}

int dpfl_dataset_known(const char *name)
{
    return dpfl_dataset_is_files(name) || dpfl_dataset_is_memory(name) || find_dataset(name) >= 0;
}

/* Standardization with the datasets' published per-pixel mean and std (never computed from the training data:
 * that would itself be a release).  Only the image datasets have them. */
dpfl_status dpfl_dataset_standard_constants(const char *name, int32_t c, double mean[3], double sd[3], int32_t *n,
                                            dpfl_error *err)
{
    int i = find_dataset(name);
    if (i < 0) return unknown(name, err);
    if (registry[i].csd[0] > 0 && c == 3) {
        memcpy(mean, registry[i].cmean, sizeof registry[i].cmean);
        memcpy(sd, registry[i].csd, sizeof registry[i].csd);
        *n = 3;
        return DPFL_OK;
    }
    if (!(registry[i].sd > 0))
        return dpfl_fail(err, DPFL_EINVAL, "data.normalize: standard needs published constants, and '%s' has none "
                                           "(mnist, fashion-mnist, cifar10 and cifar100 do)", name);
    mean[0] = registry[i].mean, sd[0] = registry[i].sd;
    *n = 1;
    return DPFL_OK;
}

dpfl_status dpfl_dataset_standardize_as(dpfl_dataset *d, const double *mean, const double *sd, int32_t n,
                                        dpfl_error *err)
{
    if (n != 1 && n != d->c && n != d->dim)
        return dpfl_fail(err, DPFL_EINVAL, "a standardization of %d values fits neither 1 value, the %d channels nor "
                                           "the %d values of an example", (int)n, (int)d->c, (int)d->dim);
    /* value k of an example: channel k / plane when n is the channels (n = 1: all one pair) */
    const size_t plane = (size_t)d->h * d->w, dim = (size_t)d->dim;
    for (size_t e = 0; e < (size_t)d->n; e++) {
        float *x = d->x + e * dim;
        for (size_t k = 0; k < dim; k++) {
            const size_t j = n == 1 ? 0 : n == d->dim ? k : k / plane;
            x[k] = (float)((x[k] - mean[j]) / sd[j]);
        }
    }
    return DPFL_OK;
}

dpfl_status dpfl_dataset_standardize(const char *name, dpfl_dataset *d, dpfl_error *err)
{
    double mean[3], sd[3];
    int32_t n = 0;
    dpfl_status st = dpfl_dataset_standard_constants(name, d->c, mean, sd, &n, err);
    return st ? st : dpfl_dataset_standardize_as(d, mean, sd, n, err);
}

int dpfl_dataset_has_standardization(const char *name)
{
    int i = find_dataset(name);
    return i >= 0 && (registry[i].sd > 0 || registry[i].csd[0] > 0);
}
