/* CIFAR-10 and CIFAR-100, binary version (Krizhevsky, "Learning Multiple Layers of Features from Tiny Images",
 * 2009; https://www.cs.toronto.edu/~kriz/cifar.html): each record is <label byte(s)><3072 pixel bytes>, the
 * label 0..9 (CIFAR-10) or <coarse 0..19><fine 0..99> (CIFAR-100), the pixels the red, green, then blue 32 x 32
 * planes, row-major -- already dpfl's channel-major layout.  The archives unpack into cifar-10-batches-bin/
 * (data_batch_1..5.bin, 10,000 records each, and test_batch.bin) and cifar-100-binary/ (train.bin: 50,000,
 * test.bin: 10,000). */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_PIXELS 3072

/* Appends the records of path to d (which has room) starting at example *at. */
static dpfl_status read_batch(const char *path, int hundred, dpfl_dataset *d, int32_t *at, dpfl_error *err)
{
    const size_t rec = (size_t)(hundred ? 2 : 1) + CIFAR_PIXELS;
    FILE *f = fopen(path, "rb");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot open CIFAR file (%s)", path);
    uint8_t *buf = malloc(rec);
    if (!buf) {
        fclose(f);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    }
    dpfl_status s = DPFL_OK;
    size_t off = 0, got;
    while ((got = fread(buf, 1, rec, f)) == rec) {
        if (*at >= d->n) {
            s = dpfl_fail(err, DPFL_EFORMAT, "bad CIFAR file (%s, byte %zu): more records than expected", path, off);
            break;
        }
        const int coarse = buf[0], label = buf[hundred ? 1 : 0];
        if ((hundred && coarse >= 20) || label >= (hundred ? 100 : 10)) {
            s = dpfl_fail(err, DPFL_EFORMAT, "bad CIFAR file (%s, byte %zu): label %d out of range (0..%d)", path,
                          off + (hundred && coarse >= 20 ? 0 : (size_t)hundred), hundred && coarse >= 20 ? coarse : label,
                          hundred && coarse >= 20 ? 19 : hundred ? 99 : 9);
            break;
        }
        float *x = d->x + (size_t)*at * CIFAR_PIXELS;
        const uint8_t *p = buf + rec - CIFAR_PIXELS;
        for (int i = 0; i < CIFAR_PIXELS; i++) x[i] = (float)p[i] / 255.0f;
        d->y[(*at)++] = label;
        off += rec;
    }
    if (!s && got != 0)
        s = dpfl_fail(err, DPFL_EFORMAT, "bad CIFAR file (%s, byte %zu): truncated record (%zu of %zu bytes)", path,
                      off, got, rec);
    if (!s && ferror(f)) s = dpfl_fail(err, DPFL_EIO, "cannot read CIFAR file (%s)", path);
    free(buf);
    fclose(f);
    return s;
}

/* Loads the listed files into one dataset, sized from the files' lengths. */
static dpfl_status load_files(const char *dir, const char *const *names, int nfiles, int hundred, const char *what,
                              dpfl_dataset *d, dpfl_error *err)
{
    const size_t rec = (size_t)(hundred ? 2 : 1) + CIFAR_PIXELS;
    char path[DPFL__PATH_MAX + 64];
    int64_t total = 0;
    for (int i = 0; i < nfiles; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) != 0) return dpfl_fail(err, DPFL_EIO, "dataset file missing (%s): CIFAR %s", path, what);
        if ((size_t)st.st_size % rec)
            return dpfl_fail(err, DPFL_EFORMAT, "bad CIFAR file (%s, byte %zu): truncated record (%zu of %zu bytes)",
                             path, (size_t)st.st_size / rec * rec, (size_t)st.st_size % rec, rec);
        total += (int64_t)st.st_size / (int64_t)rec;
    }
    if (total < 1 || total > INT32_MAX) return dpfl_fail(err, DPFL_EFORMAT, "no CIFAR records (%s)", dir);
    dpfl_status s = dpfl__dataset_alloc(d, (int32_t)total, 3, 32, 32, 0, dir, err);
    int32_t at = 0;
    for (int i = 0; i < nfiles && !s; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        s = read_batch(path, hundred, d, &at, err);
    }
    if (!s && at != d->n) s = dpfl_fail(err, DPFL_EFORMAT, "CIFAR files changed while read (%s)", dir);
    if (s) dpfl_dataset_free(d);
    else d->classes = hundred ? 100 : 10;
    return s;
}

dpfl_status dpfl_cifar_load(const char *dir, int hundred, dpfl_dataset *train, dpfl_dataset *test, dpfl_error *err)
{
    static const char *const c10_train[] = {"cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/data_batch_2.bin",
                                            "cifar-10-batches-bin/data_batch_3.bin", "cifar-10-batches-bin/data_batch_4.bin",
                                            "cifar-10-batches-bin/data_batch_5.bin"};
    static const char *const c10_test[] = {"cifar-10-batches-bin/test_batch.bin"};
    static const char *const c100_train[] = {"cifar-100-binary/train.bin"};
    static const char *const c100_test[] = {"cifar-100-binary/test.bin"};
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    dpfl_status s = load_files(dir, hundred ? c100_train : c10_train, hundred ? 1 : 5, hundred, "training batch", train, err);
    if (!s) s = load_files(dir, hundred ? c100_test : c10_test, 1, hundred, "test batch", test, err);
    if (s) dpfl_dataset_free(train);
    return s;
}
