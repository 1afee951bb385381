/* EMNIST (Cohen, Afshar, Tapson & van Schaik, "EMNIST: an extension of MNIST to handwritten letters", IJCNN 2017;
 * https://www.nist.gov/itl/products-and-services/emnist-dataset) in its IDX form: the files of the published
 * gzip.zip, emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz (gzip, or unpacked: both are read).
 *
 * Two differences from MNIST's files, both handled here:
 *  - the images are stored transposed (the NIST conversion wrote each 28 x 28 image column by column), so every
 *    image is transposed on load and the characters stand upright as MNIST's digits do;
 *  - the letters split numbers its 26 classes 1..26 (no class 0); dpfl makes them 0..25.
 * Every split has a fixed number of classes, and each label is checked against it. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    int32_t classes;
    int32_t first; /* the smallest label in the files */
} splits[] = {
    {"balanced", 47, 0}, {"byclass", 62, 0}, {"bymerge", 47, 0}, {"digits", 10, 0}, {"letters", 26, 1}, {"mnist", 10, 0},
};
#define NSPLITS ((int)(sizeof splits / sizeof splits[0]))

int32_t dpfl_emnist_classes(const char *split)
{
    for (int i = 0; split && i < NSPLITS; i++)
        if (!strcmp(splits[i].name, split)) return splits[i].classes;
    return 0;
}

/* path of <dir>/emnist-<split>-<part>-<kind>-ubyte.gz, or without .gz when only that one is there; *missing = 1
 * when neither is. */
static void file_path(char *buf, size_t len, const char *dir, const char *split, const char *part, const char *kind,
                      int *missing)
{
    snprintf(buf, len, "%s/emnist-%s-%s-%s-ubyte.gz", dir, split, part, kind);
    if (access(buf, R_OK) == 0) return;
    snprintf(buf, len, "%s/emnist-%s-%s-%s-ubyte", dir, split, part, kind);
    if (access(buf, R_OK) != 0) {
        *missing = 1;
        snprintf(buf, len, "%s/emnist-%s-%s-%s-ubyte.gz", dir, split, part, kind); /* the published name */
    }
}

/* Each image (h, w) of d becomes its transpose (w, h). */
static dpfl_status transpose_images(dpfl_dataset *d, const char *path, dpfl_error *err)
{
    const size_t h = (size_t)d->h, w = (size_t)d->w, plane = h * w;
    float *t = malloc(plane * sizeof *t);
    if (!t) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    for (int32_t i = 0; i < d->n; i++) {
        float *x = d->x + (size_t)i * plane;
        for (size_t r = 0; r < h; r++)
            for (size_t c = 0; c < w; c++) t[c * h + r] = x[r * w + c];
        memcpy(x, t, plane * sizeof *t);
    }
    free(t);
    d->h = (int32_t)w, d->w = (int32_t)h;
    return DPFL_OK;
}

static dpfl_status load_part(const char *dir, int s, const char *part, dpfl_dataset *d, dpfl_error *err)
{
    char img[DPFL__PATH_MAX], lab[DPFL__PATH_MAX];
    int missing = 0;
    file_path(img, sizeof img, dir, splits[s].name, part, "images-idx3", &missing);
    if (missing)
        return dpfl_fail(err, DPFL_EIO, "EMNIST file missing (%s): put the files of EMNIST's gzip.zip (its gzip/ "
                         "folder) there", img);
    file_path(lab, sizeof lab, dir, splits[s].name, part, "labels-idx1", &missing);
    if (missing)
        return dpfl_fail(err, DPFL_EIO, "EMNIST file missing (%s): put the files of EMNIST's gzip.zip (its gzip/ "
                         "folder) there", lab);
    dpfl_status st = dpfl_idx_load(img, lab, d, err);
    if (st) return st;
    const int32_t first = splits[s].first, classes = splits[s].classes;
    for (int32_t i = 0; i < d->n && !st; i++) {
        if (d->y[i] < first || d->y[i] >= first + classes)
            st = dpfl_fail(err, DPFL_EFORMAT, "bad EMNIST label (%s, byte %lld): %d, the %s split's labels are "
                           "%d..%d", lab, 8LL + i, d->y[i], splits[s].name, first, first + classes - 1);
        else
            d->y[i] -= first;
    }
    if (!st) st = transpose_images(d, img, err);
    if (st) {
        dpfl_dataset_free(d);
        return st;
    }
    d->classes = classes;
    return DPFL_OK;
}

dpfl_status dpfl_emnist_load(const char *dir, const char *split, dpfl_dataset *train, dpfl_dataset *test,
                             dpfl_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    int s = -1;
    for (int i = 0; split && i < NSPLITS; i++)
        if (!strcmp(splits[i].name, split)) s = i;
    if (s < 0)
        return dpfl_fail(err, DPFL_EINVAL, "unknown EMNIST split '%s' (data.dataset): valid: balanced, byclass, "
                         "bymerge, digits, letters, mnist", split ? split : "");
    dpfl_status st = load_part(dir, s, "train", train, err);
    if (!st) st = load_part(dir, s, "test", test, err);
    if (!st && (train->h != test->h || train->w != test->w))
        st = dpfl_fail(err, DPFL_EFORMAT, "EMNIST train and test images differ in shape (%s, split %s): %dx%d vs "
                       "%dx%d", dir, split, train->h, train->w, test->h, test->w);
    if (st) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
    }
    return st;
}
