/* data: NumPy .npy / .npz arrays and CIFAR-10/100 binary files, generated here in their exact published formats
 * (tests/arrays_write.h): values, shapes and labels read back; every malformed file fails with one line naming the
 * file and the byte offset. */
#include "testutil.h"
#include "arrays_write.h"
#include "dpfl/data.h"
#include "dpfl/nn.h"
#include "data/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static const char *tpath(const char *name)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 256, "%s/%s", tmpdir, name);
    return b;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpfl-test-arrays-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_npy(const char *name, const char *descr, int fortran, const int64_t *shape, int ndim,
                      const void *data, size_t nbytes)
{
    size_t len;
    uint8_t *b = npy_bytes(descr, fortran, shape, ndim, data, nbytes, &len);
    arrays_write_file(tpath(name), b, len);
    free(b);
}

/* ------------------------------------------------------------------------------------------ NPY */
static void npy_pairs_read_back(void **state)
{
    (void)state;
    dpfl_dataset d;
    dpfl_error err;
    /* float32 (N, C, H, W) and int64 labels */
    float x[5 * 24];
    int64_t y[5] = {0, 3, 1, 2, 3};
    for (int i = 0; i < 5 * 24; i++) x[i] = 0.25f * (float)i - 3.0f;
    write_npy("x.npy", "<f4", 0, (int64_t[]){5, 2, 3, 4}, 4, x, sizeof x);
    write_npy("y.npy", "<i8", 0, (int64_t[]){5}, 1, y, sizeof y);
    assert_int_equal(dpfl_npy_load(tpath("x.npy"), tpath("y.npy"), &d, &err), DPFL_OK);
    assert_int_equal(d.n, 5);
    assert_true(d.c == 2 && d.h == 3 && d.w == 4 && d.dim == 24);
    assert_memory_equal(d.x, x, sizeof x);
    for (int i = 0; i < 5; i++) assert_int_equal(d.y[i], y[i]);
    dpfl_dataset_free(&d);
    /* float64 (N, F) in Fortran order, uint8 labels of shape (N, 1) */
    double xf[3 * 4]; /* column-major: element (i, j) at j * 3 + i */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) xf[j * 3 + i] = 10.0 * i + j;
    uint8_t yu[3] = {1, 0, 1};
    write_npy("xf.npy", "<f8", 1, (int64_t[]){3, 4}, 2, xf, sizeof xf);
    write_npy("yu.npy", "|u1", 0, (int64_t[]){3, 1}, 2, yu, sizeof yu);
    assert_int_equal(dpfl_npy_load(tpath("xf.npy"), tpath("yu.npy"), &d, &err), DPFL_OK);
    assert_true(d.c == 1 && d.h == 1 && d.w == 4);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) assert_true(d.x[i * 4 + j] == (float)(10.0 * i + j));
    assert_int_equal(d.y[0], 1);
    dpfl_dataset_free(&d);
    /* uint8 images (N, H, W) kept as they are (0..255), int32 labels, through the "npy:" spec with a held-out
     * test fraction */
    uint8_t xi[10 * 6];
    int32_t yi[10];
    for (int i = 0; i < 60; i++) xi[i] = (uint8_t)(i * 4);
    for (int i = 0; i < 10; i++) yi[i] = i % 3;
    write_npy("xi.npy", "|u1", 0, (int64_t[]){10, 2, 3}, 3, xi, sizeof xi);
    write_npy("yi.npy", "<i4", 0, (int64_t[]){10}, 1, yi, sizeof yi);
    char spec[600];
    snprintf(spec, sizeof spec, "npy:%s,%s", tpath("xi.npy"), tpath("yi.npy"));
    dpfl_dataset tr, te;
    assert_true(dpfl_dataset_is_files(spec));
    assert_int_equal(dpfl_dataset_load_files(spec, NULL, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n + te.n, 10);
    assert_int_equal(te.n, 2);
    assert_true(tr.c == 1 && tr.h == 2 && tr.w == 3 && tr.classes == 3);
    float mx = 0;
    for (int i = 0; i < tr.n * tr.dim; i++) mx = fmaxf(mx, tr.x[i]);
    assert_true(mx > 200.0f && mx <= 236.0f);
    dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
}

static void expect_fail(dpfl_status st, const dpfl_error *err, const char *file, const char *what)
{
    if (st == DPFL_OK || !strstr(err->msg, file) || !strstr(err->msg, what)) {
        print_error("status %d, message: %s (want '%s' and '%s')\n", st, err->msg, file, what);
        fail();
    }
    assert_null(strchr(err->msg, '\n'));
}

static void npy_errors_name_file_and_offset(void **state)
{
    (void)state;
    dpfl_dataset d;
    dpfl_error err;
    float x[4] = {1, 2, 3, 4};
    int64_t y[2] = {0, 1};
    write_npy("y.npy", "<i8", 0, (int64_t[]){2}, 1, y, sizeof y);
    /* data shorter than the shape: the offset is where the data starts (header padded to 64 bytes) */
    write_npy("x.npy", "<f4", 0, (int64_t[]){2, 3}, 2, x, sizeof x);
    expect_fail(dpfl_npy_load(tpath("x.npy"), tpath("y.npy"), &d, &err), &err, tpath("x.npy"), "byte 128");
    /* no magic */
    arrays_write_file(tpath("bad.npy"), "PK\x03\x04 not numpy", 14);
    expect_fail(dpfl_npy_load(tpath("bad.npy"), tpath("y.npy"), &d, &err), &err, "bad.npy", "byte 0");
    /* big-endian, unsupported type, bad header */
    write_npy("be.npy", ">f4", 0, (int64_t[]){2, 2}, 2, x, sizeof x);
    expect_fail(dpfl_npy_load(tpath("be.npy"), tpath("y.npy"), &d, &err), &err, "be.npy", "big-endian");
    write_npy("c8.npy", "<c8", 0, (int64_t[]){2, 1}, 2, x, sizeof x);
    expect_fail(dpfl_npy_load(tpath("c8.npy"), tpath("y.npy"), &d, &err), &err, "c8.npy", "unsupported dtype");
    /* labels: negative (offset of that label), wrong count, wrong shape */
    write_npy("x.npy", "<f4", 0, (int64_t[]){2, 2}, 2, x, sizeof x);
    int64_t yneg[2] = {0, -1};
    write_npy("yneg.npy", "<i8", 0, (int64_t[]){2}, 1, yneg, sizeof yneg);
    expect_fail(dpfl_npy_load(tpath("x.npy"), tpath("yneg.npy"), &d, &err), &err, "yneg.npy", "byte 136");
    write_npy("y3.npy", "<i8", 0, (int64_t[]){1}, 1, y, 8);
    expect_fail(dpfl_npy_load(tpath("x.npy"), tpath("y3.npy"), &d, &err), &err, "y3.npy", "1 labels for 2");
    /* a non-finite feature */
    float xn[4] = {1, NAN, 3, 4};
    write_npy("xn.npy", "<f4", 0, (int64_t[]){2, 2}, 2, xn, sizeof xn);
    expect_fail(dpfl_npy_load(tpath("xn.npy"), tpath("y.npy"), &d, &err), &err, "xn.npy", "byte 132");
    /* features of one dimension only */
    write_npy("x1.npy", "<f4", 0, (int64_t[]){4}, 1, x, sizeof x);
    expect_fail(dpfl_npy_load(tpath("x1.npy"), tpath("y.npy"), &d, &err), &err, "x1.npy", "(N, ...)");
    /* a missing file */
    expect_fail(dpfl_npy_load(tpath("none.npy"), tpath("y.npy"), &d, &err), &err, "none.npy", "cannot open");
}

/* ------------------------------------------------------------------------------------------ NPZ */
static void npz_stored_and_deflated(void **state)
{
    (void)state;
    float xtr[6 * 3], xte[2 * 3];
    uint8_t ytr[6] = {0, 1, 2, 0, 1, 2}, yte[2] = {2, 1};
    for (int i = 0; i < 18; i++) xtr[i] = (float)i / 7.0f;
    for (int i = 0; i < 6; i++) xte[i] = -(float)i;
    const char *names[4] = {"x_train", "y_train", "x_test", "y_test"};
    uint8_t *b[4];
    size_t l[4];
    b[0] = npy_bytes("<f4", 0, (int64_t[]){6, 3}, 2, xtr, sizeof xtr, &l[0]);
    b[1] = npy_bytes("|u1", 0, (int64_t[]){6}, 1, ytr, sizeof ytr, &l[1]);
    b[2] = npy_bytes("<f4", 0, (int64_t[]){2, 3}, 2, xte, sizeof xte, &l[2]);
    b[3] = npy_bytes("|u1", 0, (int64_t[]){2}, 1, yte, sizeof yte, &l[3]);
    for (int deflate = 0; deflate < 2; deflate++) {
        npz_write(tpath("k.npz"), 4, names, b, l, deflate);
        dpfl_dataset tr, te;
        dpfl_error err;
        int has = 0;
        assert_int_equal(dpfl_npz_load(tpath("k.npz"), NULL, NULL, &tr, &te, &has, &err), DPFL_OK);
        assert_int_equal(has, 1);
        assert_int_equal(tr.n, 6);
        assert_int_equal(te.n, 2);
        assert_memory_equal(tr.x, xtr, sizeof xtr);
        assert_memory_equal(te.x, xte, sizeof xte);
        assert_int_equal(te.y[0], 2);
        dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
        /* through the spec: the archive's own test set, classes over both */
        char spec[600];
        snprintf(spec, sizeof spec, "npy:%s", tpath("k.npz"));
        assert_int_equal(dpfl_dataset_load_files(spec, NULL, 3, &tr, &te, &err), DPFL_OK);
        assert_true(tr.n == 6 && te.n == 2 && tr.classes == 3);
        dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
        /* arrays by name */
        snprintf(spec, sizeof spec, "npy:%s:x_train,y_train", tpath("k.npz"));
        assert_int_equal(dpfl_dataset_load_files(spec, NULL, 3, &tr, &te, &err), DPFL_OK);
        assert_int_equal(tr.n + te.n, 6);
        dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
        /* a name that is not there: the message lists what is */
        snprintf(spec, sizeof spec, "npy:%s:feat,label", tpath("k.npz"));
        expect_fail(dpfl_dataset_load_files(spec, NULL, 3, &tr, &te, &err), &err, "k.npz", "x_train, y_train");
    }
    /* a flipped byte in a member: its CRC (stored) or its stream (deflated) fails, naming the offset */
    for (int deflate = 0; deflate < 2; deflate++) {
        npz_write(tpath("k.npz"), 4, names, b, l, deflate);
        FILE *f = fopen(tpath("k.npz"), "r+b");
        fseek(f, 30 + 11 + 20 + 70, SEEK_SET); /* inside the first member's data */
        int ch = fgetc(f);
        fseek(f, 30 + 11 + 20 + 70, SEEK_SET);
        fputc(ch ^ 0x5a, f);
        fclose(f);
        dpfl_dataset tr, te;
        dpfl_error err;
        expect_fail(dpfl_npz_load(tpath("k.npz"), NULL, NULL, &tr, &te, NULL, &err), &err, "k.npz", "byte");
    }
    /* not a ZIP at all */
    arrays_write_file(tpath("z.npz"), "\x93NUMPY", 6);
    dpfl_dataset tr;
    dpfl_error err;
    expect_fail(dpfl_npz_load(tpath("z.npz"), NULL, NULL, &tr, NULL, NULL, &err), &err, "z.npz", "not a ZIP");
    for (int i = 0; i < 4; i++) free(b[i]);
}

/* ------------------------------------------------------------------------------------------ CIFAR */
/* Pixel p of record i: (i * 31 + p * 7) mod 256; labels i mod 10 (CIFAR-100: fine i mod 100, coarse i mod 20). */
static void make_cifar(const char *dir, int hundred, const int *counts, const char *const *files, int nfiles)
{
    char path[512];
    snprintf(path, sizeof path, "%s", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, hundred ? "cifar-100-binary" : "cifar-10-batches-bin");
    mkdir(path, 0755);
    int base = 0;
    for (int f = 0; f < nfiles; f++) {
        int n = counts[f];
        uint8_t *px = malloc((size_t)n * 3072), lab[64], co[64];
        for (int i = 0; i < n; i++) {
            lab[i] = (uint8_t)((base + i) % (hundred ? 100 : 10));
            co[i] = (uint8_t)((base + i) % 20);
            for (int p = 0; p < 3072; p++) px[(size_t)i * 3072 + p] = (uint8_t)(((base + i) * 31 + p * 7) % 256);
        }
        snprintf(path, sizeof path, "%s/%s/%s", dir, hundred ? "cifar-100-binary" : "cifar-10-batches-bin", files[f]);
        cifar_write(path, hundred, n, co, lab, px);
        free(px);
        base += n;
    }
}

static void cifar_by_name_and_errors(void **state)
{
    (void)state;
    const char *c10[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                         "data_batch_5.bin", "test_batch.bin"};
    const int n10[] = {3, 2, 2, 2, 3, 4};
    make_cifar(tpath("cifar10"), 0, n10, c10, 6);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load("cifar10", tmpdir, 0, &tr, &te, &err), DPFL_OK);
    assert_true(tr.n == 12 && te.n == 4 && tr.classes == 10 && tr.c == 3 && tr.h == 32 && tr.w == 32);
    for (int i = 0; i < 12; i++) {
        assert_int_equal(tr.y[i], i % 10);
        for (int p = 0; p < 3072; p += 257) assert_true(tr.x[(size_t)i * 3072 + p] == (float)((i * 31 + p * 7) % 256) / 255.0f);
    }
    assert_int_equal(te.y[0], 12 % 10);
    /* per-channel standardization with the published constants: red plane of example 0 */
    assert_true(dpfl_dataset_has_standardization("cifar10"));
    float r0 = tr.x[5], g0 = tr.x[1024 + 5];
    assert_int_equal(dpfl_dataset_standardize("cifar10", &tr, &err), DPFL_OK);
    assert_close(tr.x[5], (r0 - 0.4914) / 0.2470, 1e-5);
    assert_close(tr.x[1024 + 5], (g0 - 0.4822) / 0.2435, 1e-5);
    dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
    /* CIFAR-100: the fine label */
    const char *c100[] = {"train.bin", "test.bin"};
    const int n100[] = {30, 5};
    make_cifar(tpath("cifar100"), 1, n100, c100, 2);
    assert_int_equal(dpfl_dataset_load("cifar100", tmpdir, 0, &tr, &te, &err), DPFL_OK);
    assert_true(tr.n == 30 && te.n == 5 && tr.classes == 100);
    assert_int_equal(tr.y[29], 29);
    dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
    /* a truncated record: file and offset of the partial record */
    char path[512];
    snprintf(path, sizeof path, "%s/cifar-10-batches-bin/data_batch_2.bin", tpath("cifar10"));
    assert_int_equal(truncate(path, 3073 + 100), 0);
    expect_fail(dpfl_dataset_load("cifar10", tmpdir, 0, &tr, &te, &err), &err, "data_batch_2.bin", "byte 3073");
    /* a label out of range, at the third record */
    make_cifar(tpath("cifar10"), 0, n10, c10, 6);
    snprintf(path, sizeof path, "%s/cifar-10-batches-bin/data_batch_1.bin", tpath("cifar10"));
    FILE *f = fopen(path, "r+b");
    fseek(f, 2 * 3073, SEEK_SET);
    fputc(10, f);
    fclose(f);
    expect_fail(dpfl_dataset_load("cifar10", tmpdir, 0, &tr, &te, &err), &err, "data_batch_1.bin", "byte 6146");
    /* a missing folder names where it looked and how to fetch */
    expect_fail(dpfl_dataset_load("cifar100", "/nonexistent-dpfl", 0, &tr, &te, &err), &err, "cifar100",
                "dpfl data fetch cifar100");
}

/* The download check: MD5 against RFC 1321's test vectors; an archive whose MD5 is not the published one is refused
 * naming both sums; a tar member of the wrong size is refused naming it and its offset; members that are missing
 * are named.  (The real archives cannot be downloaded here.) */
static void cifar_archive_checks(void **state)
{
    (void)state;
    char h[33];
    const char *vec[][2] = {{"", "d41d8cd98f00b204e9800998ecf8427e"},
                            {"abc", "900150983cd24fb0d6963f7d28e17f72"},
                            {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
                            {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
                            {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                             "57edf4a22be3c955ac49da2e2107b67a"}};
    for (int i = 0; i < 5; i++) {
        dpfl__md5_hex(vec[i][0], strlen(vec[i][0]), h);
        assert_string_equal(h, vec[i][1]);
    }
    /* a gzipped ustar archive holding cifar-10-batches-bin/data_batch_1.bin of 2 records */
    uint8_t tar[512 * 16];
    memset(tar, 0, sizeof tar);
    snprintf((char *)tar, 100, "cifar-10-batches-bin/data_batch_1.bin");
    snprintf((char *)tar + 124, 12, "%011o", 2 * 3073);
    tar[156] = '0';
    memcpy(tar + 257, "ustar", 6);
    char tgz[300];
    snprintf(tgz, sizeof tgz, "%s", tpath("c.tar.gz"));
    gzFile g = gzopen(tgz, "wb");
    gzwrite(g, tar, 512);
    uint8_t *rec = calloc(2, 3073);
    gzwrite(g, rec, 2 * 3073);
    gzwrite(g, tar + 1024, (unsigned)(sizeof tar - 1024 - (512 + 2 * 3073) % 512));
    gzclose(g);
    free(rec);
    char *raw;
    size_t len;
    dpfl_error err;
    assert_int_equal(dpfl_file_read_all(tgz, &raw, &len, &err), DPFL_OK);
    expect_fail(dpfl__cifar_unpack(0, tgz, raw, len, DPFL_CIFAR10_MD5, tpath("unpacked"), &err), &err, "c.tar.gz",
                "MD5 mismatch");
    assert_non_null(strstr(err.msg, DPFL_CIFAR10_MD5));
    dpfl__md5_hex(raw, len, h);
    expect_fail(dpfl__cifar_unpack(0, tgz, raw, len, h, tpath("unpacked"), &err), &err,
                "cifar-10-batches-bin/data_batch_1.bin", "byte 0");
    assert_non_null(strstr(err.msg, "unexpected file size"));
    tar[0] = 'x'; /* the member is now something else: the batch files are missing */
    g = gzopen(tgz, "wb");
    gzwrite(g, tar, 512);
    rec = calloc(2, 3073);
    gzwrite(g, rec, 2 * 3073);
    gzwrite(g, tar + 1024, (unsigned)(sizeof tar - 1024 - (512 + 2 * 3073) % 512));
    gzclose(g);
    free(rec), free(raw);
    assert_int_equal(dpfl_file_read_all(tgz, &raw, &len, &err), DPFL_OK);
    dpfl__md5_hex(raw, len, h);
    expect_fail(dpfl__cifar_unpack(0, tgz, raw, len, h, tpath("unpacked"), &err), &err, "data_batch_1.bin",
                "missing from the archive");
    free(raw);
    /* only cifar10 and cifar100 are fetched */
    int fetched;
    expect_fail(dpfl_cifar_fetch("cifar7", NULL, NULL, &fetched, &err), &err, "cifar7", "cifar100");
}

/* A learnable task in CIFAR-10's binary format: class k is a bright 8 x 8 square in one of 5 places, in the red
 * (k < 5) or the blue plane (k >= 5), on uniform noise.  A small ResNet with GroupNorm, trained by DP-SGD's
 * clipped per-example sums (C = 1, no noise: the per-example path through GroupNorm and the residual blocks),
 * reaches test accuracy far above chance (0.1) after six epochs (0.79 when written). */
static void resnet_gn_learns_generated_cifar(void **state)
{
    (void)state;
    enum { NTR = 500, NTE = 200 };
    const char *files[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"};
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s", tpath("learn"));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/cifar10", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/cifar10/cifar-10-batches-bin", dir);
    mkdir(path, 0755);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2024);
    uint8_t *px = malloc((size_t)NTR * 3072), lab[NTR];
    for (int f = 0; f < 6; f++) {
        const int n = f < 5 ? NTR / 5 : NTE;
        for (int i = 0; i < n; i++) {
            const int k = (int)dpfl_rng_below(&r, 10), pos = k % 5, ch = k < 5 ? 0 : 2;
            const int oy = pos < 3 ? 2 : 20, ox = pos < 3 ? 2 + 10 * pos : 6 + 12 * (pos - 3);
            uint8_t *p = px + (size_t)i * 3072;
            for (int j = 0; j < 3072; j++) p[j] = (uint8_t)dpfl_rng_below(&r, 128);
            for (int y = oy; y < oy + 8; y++)
                for (int x = ox; x < ox + 8; x++) p[ch * 1024 + y * 32 + x] = 255;
            lab[i] = (uint8_t)k;
        }
        snprintf(path, sizeof path, "%s/cifar10/cifar-10-batches-bin/%s", dir, files[f]);
        cifar_write(path, 0, n, NULL, lab, px);
    }
    free(px);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load("cifar10", dir, 0, &tr, &te, &err), DPFL_OK);
    assert_int_equal(dpfl_dataset_standardize("cifar10", &tr, &err), DPFL_OK);
    assert_int_equal(dpfl_dataset_standardize("cifar10", &te, &err), DPFL_OK);
    dpfl_model m;
    assert_int_equal(dpfl_model_create("net:conv8k3s2p1nb,gn4,relu,block8,block16s2g4,gap,fc10", 3, 32, 32, 10, &m, &err),
                     DPFL_OK);
    float *w = malloc(m.nparam * sizeof *w);
    dpfl_model_init(&m, w, &r);
    const int B = 25;
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, B, &err);
    assert_non_null(ws);
    double acc0, acc, loss;
    dpfl_nn_evaluate(&m, w, ws, te.x, te.y, te.n, &loss, &acc0);
    dpfl_clip_spec cs = {1.0, 0, NULL};
    for (int epoch = 0; epoch < 6; epoch++)
        for (int i = 0; i + B <= tr.n; i += B)
            dpfl_nn_clipped_grad_sum_axpy(&m, w, ws, tr.x + (size_t)i * tr.dim, tr.y + i, B, &cs, NULL, -1.0f / B, NULL);
    dpfl_nn_evaluate(&m, w, ws, te.x, te.y, te.n, &loss, &acc);
    print_message("resnet-gn on generated CIFAR: test accuracy %.3f (at init %.3f), loss %.3f\n", acc, acc0, loss);
    assert_true(acc > 0.6);
    dpfl_nn_ws_free(ws);
    free(w);
    dpfl_model_free(&m);
    dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(npy_pairs_read_back),
        cmocka_unit_test(npy_errors_name_file_and_offset),
        cmocka_unit_test(npz_stored_and_deflated),
        cmocka_unit_test(cifar_by_name_and_errors),
        cmocka_unit_test(cifar_archive_checks),
        cmocka_unit_test(resnet_gn_learns_generated_cifar),
    };
    return cmocka_run_group_tests_name("arrays", tests, setup, teardown);
}
