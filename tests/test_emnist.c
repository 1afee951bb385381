/* EMNIST by name (emnist-<split>, src/data/emnist.c) on small files written here in the published format: IDX
 * files named as in EMNIST's gzip.zip, gzipped or not, images stored transposed, the letters split labelled
 * 1..26.  And the byte offsets every IDX error names. */
#include "testutil.h"
#include "dpfl/data.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char root[64]; /* a data folder: root/emnist/ holds the files */

static const char *path_in(const char *name)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, 512, "%s/emnist/%s", root, name);
    return b;
}

static void put(const char *path, const uint8_t *data, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        fclose(f);
    }
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* The four files of a split: n images of rows x cols as stored (pixel k of image i = (11 i + k) mod 256) and the
 * labels given; part "train" and "test" get the same content. */
static void write_split(const char *split, uint32_t n, uint32_t rows, uint32_t cols, const uint8_t *labels, int gz)
{
    uint8_t img[16 + 8 * 64], lab[8 + 8];
    assert_true(n <= 8 && rows * cols <= 64);
    img[0] = img[1] = 0, img[2] = 8, img[3] = 3;
    be32(img + 4, n), be32(img + 8, rows), be32(img + 12, cols);
    const uint32_t plane = rows * cols;
    for (uint32_t i = 0; i < n * plane; i++) img[16 + i] = (uint8_t)((11 * (i / plane) + i % plane) % 256);
    lab[0] = lab[1] = 0, lab[2] = 8, lab[3] = 1;
    be32(lab + 4, n);
    memcpy(lab + 8, labels, n);
    char name[128];
    for (int part = 0; part < 2; part++) {
        const char *p = part ? "test" : "train", *ext = gz ? ".gz" : "";
        snprintf(name, sizeof name, "emnist-%s-%s-images-idx3-ubyte%s", split, p, ext);
        put(path_in(name), img, 16 + n * rows * cols, gz);
        snprintf(name, sizeof name, "emnist-%s-%s-labels-idx1-ubyte%s", split, p, ext);
        put(path_in(name), lab, 8 + n, gz);
    }
}

static void remove_split(const char *split)
{
    char name[128];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "emnist-%s-%s-%s-ubyte%s", split, i & 1 ? "test" : "train",
                 i & 2 ? "labels-idx1" : "images-idx3", i & 4 ? ".gz" : "");
        unlink(path_in(name));
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dpfl-test-emnist-XXXXXX");
    if (!mkdtemp(root)) return -1;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/emnist", root);
    return mkdir(dir, 0700);
}

static int teardown(void **state)
{
    (void)state;
    const char *splits[] = {"digits", "letters", "byclass", "mnist"};
    for (int i = 0; i < 4; i++) remove_split(splits[i]);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/emnist", root);
    rmdir(dir);
    return rmdir(root);
}

/* emnist-digits from gzipped files, emnist-mnist from plain ones: found by name in <data_dir>/emnist, every
 * image transposed (stored 3 x 4 -> 4 x 3 upright, pixel (r, c) = stored (c, r)), labels as stored, classes the
 * split's even when fewer labels occur. */
static void split_by_name_transposed_gz_or_plain(void **state)
{
    (void)state;
    const uint8_t labels[5] = {0, 9, 3, 3, 7};
    write_split("digits", 5, 3, 4, labels, 1);
    write_split("mnist", 5, 3, 4, labels, 0);
    const char *names[2] = {"emnist-digits", "emnist-mnist"};
    for (int t = 0; t < 2; t++) {
        dpfl_dataset tr, te;
        dpfl_error err;
        int st = dpfl_dataset_load(names[t], root, 1, &tr, &te, &err);
        if (st) print_error("%s: %s\n", names[t], err.msg);
        assert_int_equal(st, DPFL_OK);
        const dpfl_dataset *ds[2] = {&tr, &te};
        for (int k = 0; k < 2; k++) {
            const dpfl_dataset *d = ds[k];
            assert_int_equal(d->n, 5);
            assert_int_equal(d->c, 1);
            assert_int_equal(d->h, 4);
            assert_int_equal(d->w, 3);
            assert_int_equal(d->dim, 12);
            assert_int_equal(d->classes, 10);
            for (int i = 0; i < 5; i++) {
                assert_int_equal(d->y[i], labels[i]);
                for (int r = 0; r < 4; r++)
                    for (int c = 0; c < 3; c++) /* stored row c, column r of a 3 x 4 image */
                        assert_true(d->x[i * 12 + r * 3 + c] == (float)((11 * i + c * 4 + r) % 256) / 255.0f);
            }
        }
        dpfl_dataset_free(&tr);
        dpfl_dataset_free(&te);
        char dir[4096];
        assert_int_equal(dpfl_dataset_path(names[t], root, dir, sizeof dir, &err), DPFL_OK);
        char want[128];
        snprintf(want, sizeof want, "%s/emnist", root);
        assert_string_equal(dir, want);
    }
    assert_int_equal(dpfl_emnist_classes("byclass"), 62);
    assert_int_equal(dpfl_emnist_classes("balanced"), 47);
    assert_int_equal(dpfl_emnist_classes("letters"), 26);
    assert_int_equal(dpfl_emnist_classes("nope"), 0);
}

/* Letters: the files' 1..26 become 0..25; a 0 or 27 in them fails naming the labels file and the label's byte. */
static void letters_shifted_and_labels_checked(void **state)
{
    (void)state;
    uint8_t labels[4] = {1, 26, 13, 2};
    write_split("letters", 4, 2, 2, labels, 1);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load("emnist-letters", root, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.classes, 26);
    assert_int_equal(tr.y[0], 0);
    assert_int_equal(tr.y[1], 25);
    assert_int_equal(tr.y[2], 12);
    assert_int_equal(te.y[3], 1);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    for (int bad = 0; bad < 2; bad++) {
        labels[2] = bad ? 27 : 0;
        write_split("letters", 4, 2, 2, labels, 1);
        assert_int_equal(dpfl_dataset_load("emnist-letters", root, 1, &tr, &te, &err), DPFL_EFORMAT);
        assert_non_null(strstr(err.msg, "emnist-letters-train-labels-idx1-ubyte.gz"));
        assert_non_null(strstr(err.msg, "byte 10")); /* 8 header bytes, then label 2 */
        assert_non_null(strstr(err.msg, "1..26"));
        assert_null(strchr(err.msg, '\n'));
        assert_null(tr.x);
        assert_null(te.x);
    }
    /* byclass has 62 classes: label 62 is out of range */
    const uint8_t by[3] = {61, 62, 0};
    write_split("byclass", 3, 2, 2, by, 0);
    assert_int_equal(dpfl_dataset_load("emnist-byclass", root, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "emnist-byclass-train-labels-idx1-ubyte"));
    assert_non_null(strstr(err.msg, "byte 9"));
}

/* A split whose files are not there names the file it looked for and how to get it; an unknown split or a bare
 * "emnist" is not a dataset. */
static void missing_and_unknown_splits(void **state)
{
    (void)state;
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load("emnist-balanced", root, 1, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "emnist-balanced-test-labels-idx1-ubyte[.gz]"));
    assert_non_null(strstr(err.msg, "gzip.zip"));
    assert_int_equal(dpfl_emnist_load(path_in(""), "balanced", &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "emnist-balanced-train-images-idx3-ubyte.gz"));
    assert_int_equal(dpfl_emnist_load(path_in(""), "cursive", &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "bymerge"));
    assert_int_equal(dpfl_dataset_load("emnist-cursive", root, 1, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "emnist-letters"));
    assert_true(dpfl_dataset_known("emnist-letters"));
    assert_true(dpfl_dataset_known("cifar100"));
    assert_true(dpfl_dataset_known("npy:x.npy,y.npy"));
    assert_true(dpfl_dataset_known("mnist"));
    assert_false(dpfl_dataset_known("emnist"));
    assert_false(dpfl_dataset_known("cifar"));
    assert_false(dpfl_dataset_known(NULL));
}

/* Every IDX format error names the file and the byte offset where the problem is. */
static void idx_errors_name_the_byte(void **state)
{
    (void)state;
    const uint8_t labels[2] = {1, 2};
    write_split("digits", 2, 2, 3, labels, 0); /* images: 16 + 12 bytes; labels: 8 + 2 */
    char img[512], lab[512];
    snprintf(img, sizeof img, "%s", path_in("emnist-digits-train-images-idx3-ubyte"));
    snprintf(lab, sizeof lab, "%s", path_in("emnist-digits-train-labels-idx1-ubyte"));
    uint8_t b[64];
    FILE *f = fopen(img, "rb");
    assert_int_equal(fread(b, 1, 28, f), 28);
    fclose(f);
    struct {
        size_t len;
        int at;
        uint8_t v;
        const char *want;
    } cases[] = {
        {25, -1, 0, "byte 25"},  /* pixels cut short: 16 + 9 bytes */
        {2, -1, 0, "byte 2"},    /* no room for the magic number */
        {12, -1, 0, "byte 12"},  /* header cut after 12 bytes */
        {28, 1, 1, "byte 0"},    /* magic */
        {28, 2, 9, "byte 2"},    /* data type */
        {28, 3, 2, "byte 3"},    /* dimension count */
        {28, 11, 0, "byte 8"},   /* a zero size: rows */
        {28, 7, 3, "byte 4"},    /* 3 images but 2 labels */
    };
    dpfl_dataset d;
    dpfl_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t c[64];
        memcpy(c, b, 28);
        if (cases[i].at >= 0) c[cases[i].at] = cases[i].v;
        put(path_in("bad"), c, cases[i].len, (int)(i & 1));
        assert_int_not_equal(dpfl_idx_load(path_in("bad"), lab, &d, &err), DPFL_OK);
        if (!strstr(err.msg, path_in("bad")) || !strstr(err.msg, cases[i].want)) {
            print_error("case %zu: '%s' should name the file and '%s'\n", i, err.msg, cases[i].want);
            fail();
        }
        assert_null(d.x);
    }
    /* bytes after the data: where they start */
    memcpy(b + 28, "xyz", 3);
    put(path_in("bad"), b, 31, 1);
    assert_int_equal(dpfl_idx_load(path_in("bad"), lab, &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "byte 28"));
    unlink(path_in("bad"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_by_name_transposed_gz_or_plain),
        cmocka_unit_test(letters_shifted_and_labels_checked),
        cmocka_unit_test(missing_and_unknown_splits),
        cmocka_unit_test(idx_errors_name_the_byte),
    };
    return cmocka_run_group_tests_name("emnist", tests, setup, teardown);
}
