/* Your own data: csv: and idx: datasets (src/data/files.c) and the [data] keys that configure them
 * (src/config/config_data.c). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "testutil.h"

#include "dpfl/data.h"
#include "dpfl/fl.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];

static const char *tp(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dpfl-test-own-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A site file of m rows "id,x,label" with ids base..base+m-1 (each row findable by its id). */
static void site_file(const char *path, int base, int m)
{
    char text[8192] = "id,x,label\n";
    for (int i = 0; i < m; i++) {
        char row[64];
        snprintf(row, sizeof row, "%d,%d,%d\n", base + i, (base + i) % 7, (base + i) % 3);
        strcat(text, row);
    }
    write_text(path, text);
}

static dpfl_status load(const char *spec, const dpfl_file_options *o, uint64_t seed, dpfl_dataset *tr,
                        dpfl_dataset *te, dpfl_error *err)
{
    return dpfl_dataset_load_files(spec, o, seed, tr, te, err);
}

static const char *spec(const char *fmt, const char *a, const char *b)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], fmt, a, b);
    return buf[k];
}

/* Header names pick and order the columns; auto detects the header; a header read as data fails on its line. */
static void csv_columns_by_name(void **state)
{
    (void)state;
    const char *f = tp("h.csv");
    write_text(f, "age, chol ,\"label\",unused\n50,200,1,9\n60,250,0,9\n70,300,1,9\n40,180,0,9\n45,190,1,9\n");
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.label = "label";
    o.features = "chol, age";
    o.test = spec("csv:%s", f, NULL); /* the same file as test set: no split, rows in file order */
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 5);
    assert_int_equal(tr.dim, 2);
    assert_int_equal(tr.classes, 2);
    assert_true(tr.x[0] == 200.0f && tr.x[1] == 50.0f && tr.x[2] == 250.0f && tr.x[3] == 60.0f);
    assert_int_equal(tr.y[0], 1);
    assert_int_equal(tr.y[1], 0);
    assert_int_equal(tr.groups, 1);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* by index: label -2 (the quoted "label"), features 0 and 1 */
    o.label = "-2";
    o.features = "0,1";
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_true(tr.x[0] == 50.0f && tr.x[1] == 200.0f && tr.y[0] == 1);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* errors name the key, the column and the file */
    o.features = "chol,cholesterol";
    assert_int_not_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "data.feature_columns: no column named 'cholesterol'"));
    assert_non_null(strstr(err.msg, f));
    o.features = "label";
    o.label = "label";
    assert_int_not_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "is the label column"));
    o.features = NULL;
    o.label = "7";
    assert_int_not_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "data.label_column: column 7 is out of range"));
    /* header = no: the header line is data, and not a number */
    o.label = NULL;
    o.header = 0;
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "not a number"));
    assert_non_null(strstr(err.msg, "line 1"));
    /* a name without a header */
    const char *g = tp("nohdr.csv");
    write_text(g, "1,2,0\n3,4,1\n");
    o.header = -1;
    o.label = "label";
    o.test = spec("csv:%s", g, NULL);
    assert_int_equal(load(spec("csv:%s", g, NULL), &o, 1, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "has no header line"));
}

/* Missing values: every spelling; an error names file, line and column; drop skips only rows whose used columns
 * miss a value. */
static void csv_missing_values(void **state)
{
    (void)state;
    const char *f = tp("m.csv");
    write_text(f, "a,b,unused,y\n1,2,,0\n3,NA,5,1\n4,5,6,null\n7,?,8,1\n9,10,NaN,0\n11,,12,1\n13,14,15,1\n");
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.features = "a,b";
    o.test = spec("csv:%s", f, NULL);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, f));
    assert_non_null(strstr(err.msg, "line 3, column 2"));
    assert_non_null(strstr(err.msg, "data.missing = drop"));
    o.drop_missing = 1;
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 3); /* lines 2, 6 and 8: missing only in the unused column, or nowhere */
    assert_true(tr.x[0] == 1.0f && tr.x[2] == 9.0f && tr.x[4] == 13.0f);
    assert_int_equal(tr.y[1], 0);
    assert_int_equal(tr.y[2], 1);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* a label that is not a class number */
    write_text(f, "1,2,0.5\n");
    o.test = NULL;
    o.features = NULL;
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "label is not an integer"));
    /* one class only */
    write_text(f, "1,2,0\n3,4,0\n5,6,0\n7,8,0\n9,9,0\n");
    assert_int_equal(load(spec("csv:%s", f, NULL), &o, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "2 classes"));
}

static int find_id(const dpfl_dataset *d, float id)
{
    for (int32_t i = 0; i < d->n; i++)
        if (d->x[(size_t)i * d->dim] == id) return i;
    return -1;
}

/* A folder of site files: one source each, in name order; the held-out split per source is a partition of its
 * rows, fixed by the seed, different for another seed, and the same when a site loads only its own file. */
static void csv_sources_and_split(void **state)
{
    (void)state;
    assert_int_equal(mkdir(tp("sites"), 0700), 0);
    site_file(tp("sites/b.csv"), 100, 20);
    site_file(tp("sites/a.csv"), 0, 40);
    site_file(tp("sites/c.csv"), 200, 10);
    write_text(tp("sites/README.txt"), "not data\n");
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.test_fraction = 0.25;
    o.features = "id";
    dpfl_dataset tr, te, tr2, te2;
    dpfl_error err;
    assert_int_equal(load(spec("csv:%s", tp("sites"), NULL), &o, 7, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.groups, 3);
    assert_int_equal(te.groups, 3);
    assert_int_equal(tr.n + te.n, 70);
    assert_int_equal(te.n, 10 + 5 + 3); /* round(40/4), round(20/4), round(10/4) */
    int per[3] = {0}, seen[300] = {0};
    for (int32_t i = 0; i < tr.n; i++) {
        int id = (int)tr.x[i];
        assert_int_equal(tr.group[i], id / 100 == 0 ? 0 : id / 100); /* a.csv first, then b, c */
        seen[id]++;
    }
    for (int32_t i = 0; i < te.n; i++) {
        int id = (int)te.x[i];
        per[te.group[i]]++;
        seen[id]++;
        assert_int_equal(te.y[i], id % 3);
    }
    assert_int_equal(per[0], 10);
    assert_int_equal(per[1], 5);
    assert_int_equal(per[2], 3);
    for (int id = 0; id < 300; id++)
        assert_int_equal(seen[id], (id < 40) || (id >= 100 && id < 120) || (id >= 200 && id < 210));
    /* same seed: same split; another seed: another */
    assert_int_equal(load(spec("csv:%s", tp("sites"), NULL), &o, 7, &tr2, &te2, &err), DPFL_OK);
    assert_int_equal(te2.n, te.n);
    assert_memory_equal(te2.x, te.x, (size_t)te.n * sizeof(float));
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    assert_int_equal(load(spec("csv:%s", tp("sites"), NULL), &o, 8, &tr2, &te2, &err), DPFL_OK);
    assert_int_equal(te2.n, te.n);
    assert_memory_not_equal(te2.x, te.x, (size_t)te.n * sizeof(float));
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    /* site b alone, as its client (position 1) loads it: the same train rows in the same order */
    o.first_source = 1;
    assert_int_equal(load(spec("csv:%s", tp("sites/b.csv"), NULL), &o, 7, &tr2, &te2, &err), DPFL_OK);
    int32_t k = 0;
    for (int32_t i = 0; i < tr.n; i++)
        if (tr.group[i] == 1) {
            assert_true(k < tr2.n);
            assert_true(tr2.x[k++] == tr.x[i]);
        }
    assert_int_equal(k, tr2.n);
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    o.first_source = 0; /* at position 0 it would be another split */
    assert_int_equal(load(spec("csv:%s", tp("sites/b.csv"), NULL), &o, 7, &tr2, &te2, &err), DPFL_OK);
    int differs = 0;
    for (int32_t i = 0, j = 0; i < tr.n && j < tr2.n; i++)
        if (tr.group[i] == 1) differs |= tr2.x[j++] != tr.x[i];
    assert_true(differs);
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    /* a list and a glob pattern */
    assert_int_equal(load(spec("csv:%s, %s", tp("sites/c.csv"), tp("sites/a.csv")), &o, 7, &tr2, &te2, &err), DPFL_OK);
    assert_int_equal(tr2.groups, 2);
    assert_true(find_id(&tr2, 205) >= 0 || find_id(&te2, 205) >= 0);
    assert_int_equal(tr2.group[0], 0);
    assert_true(tr2.x[0] >= 200); /* listed order, not name order */
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    assert_int_equal(load(spec("csv:%s", tp("sites/[bc].csv"), NULL), &o, 7, &tr2, &te2, &err), DPFL_OK);
    assert_int_equal(tr2.groups, 2);
    assert_int_equal(tr2.n + te2.n, 30);
    dpfl_dataset_free(&tr2);
    dpfl_dataset_free(&te2);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* what is not there is named */
    assert_int_equal(load(spec("csv:%s", tp("sites/z*.csv"), NULL), &o, 7, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "no file matches"));
    assert_int_equal(load(spec("csv:%s", tp("sites/none.csv"), NULL), &o, 7, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, tp("sites/none.csv")));
    assert_int_equal(load("csv:", &o, 7, &tr, &te, &err), DPFL_EINVAL);
    /* files that disagree */
    write_text(tp("odd.csv"), "id,x,y,extra\n1,2,0,4\n");
    assert_int_equal(load(spec("csv:%s,%s", tp("sites/a.csv"), tp("odd.csv")), &o, 7, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, tp("odd.csv")));
    write_text(tp("odd.csv"), "id,z,label\n1,2,0\n");
    assert_int_equal(load(spec("csv:%s,%s", tp("sites/a.csv"), tp("odd.csv")), &o, 7, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "column 2 is 'z'"));
}

/* A separate test set: all rows train; its per-source groups kept only when they match the training files. */
static void csv_separate_test_set(void **state)
{
    (void)state;
    site_file(tp("t1.csv"), 0, 8);
    site_file(tp("t2.csv"), 50, 6);
    site_file(tp("v.csv"), 500, 4);
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.test = spec("csv:%s", tp("v.csv"), NULL);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(load(spec("csv:%s,%s", tp("t1.csv"), tp("t2.csv")), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 14);
    assert_int_equal(te.n, 4);
    assert_null(te.group);
    assert_true(te.x[0] == 500.0f);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    o.test = spec("csv:%s,%s", tp("v.csv"), tp("v.csv"));
    assert_int_equal(load(spec("csv:%s,%s", tp("t1.csv"), tp("t2.csv")), &o, 1, &tr, &te, &err), DPFL_OK);
    assert_non_null(te.group);
    assert_int_equal(te.group[4], 1);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    write_text(tp("w.csv"), "id,label\n1,0\n");
    o.test = spec("csv:%s", tp("w.csv"), NULL);
    assert_int_equal(load(spec("csv:%s", tp("t1.csv"), NULL), &o, 1, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "data.test"));
    o.test = NULL;
    o.test_fraction = 0;
    assert_int_equal(load(spec("csv:%s", tp("t1.csv"), NULL), &o, 1, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.test_fraction"));
}

/* A deployment's view: with source_rows, a listed file that is not here is absent -- placeholders of its count, the
 * same split sizes and train order of the present ones as with every file here -- and classes must be given;
 * a present file must have its declared count; with no file here the features are the listed ones. */
static void csv_absent_sources(void **state)
{
    (void)state;
    site_file(tp("s0.csv"), 0, 30);
    site_file(tp("s1.csv"), 100, 20);
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.features = "id, x";
    const int32_t rows[3] = {30, 20, 12};
    o.source_rows = rows;
    o.nsource_rows = 3;
    o.classes = 3;
    dpfl_dataset tr, te, ftr, fte;
    dpfl_error err;
    site_file(tp("s2.csv"), 200, 12);
    const char *all3 = spec("csv:%s,%s", tp("s0.csv"), tp("s1.csv"));
    char full[700];
    snprintf(full, sizeof full, "%s,%s", all3, tp("s2.csv"));
    assert_int_equal(load(full, &o, 5, &ftr, &fte, &err), DPFL_OK); /* every file here */
    assert_null(ftr.absent);
    unlink(tp("s2.csv"));
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_OK); /* s2 not here */
    assert_int_equal(dpfl_dataset_absent_count(&tr), 1);
    assert_non_null(tr.absent);
    assert_true(tr.absent[2] && !tr.absent[0] && !tr.absent[1]);
    assert_non_null(te.absent);
    assert_true(te.absent[2]);
    assert_int_equal(tr.n, ftr.n);
    assert_int_equal(te.n, fte.n);
    assert_int_equal(tr.classes, 3);
    for (int32_t i = 0; i < tr.n; i++) {
        assert_int_equal(tr.group[i], ftr.group[i]);
        if (tr.group[i] < 2) assert_true(tr.x[2 * i] == ftr.x[2 * i]);
        else assert_true(tr.x[2 * i] == 0.0f && tr.y[i] == 0);
    }
    char path[512];
    assert_int_equal(dpfl_dataset_source_path(full, 2, path, sizeof path, &err), DPFL_OK);
    assert_string_equal(path, tp("s2.csv"));
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    dpfl_dataset_free(&ftr);
    dpfl_dataset_free(&fte);
    /* without the counts a missing file is an error; without classes too */
    o.source_rows = NULL;
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, tp("s2.csv")));
    o.source_rows = rows;
    o.classes = 0;
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.classes"));
    o.classes = 3;
    /* a present file with another count is not the run's file */
    const int32_t wrong[3] = {30, 21, 12};
    o.source_rows = wrong;
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, tp("s1.csv")));
    assert_non_null(strstr(err.msg, "data.source_rows says 21"));
    o.source_rows = rows;
    o.nsource_rows = 2;
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "3 files"));
    o.nsource_rows = 3;
    /* no file here: the listed features give the shape; unlisted, it cannot be known */
    unlink(tp("s0.csv"));
    unlink(tp("s1.csv"));
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.dim, 2);
    assert_int_equal(dpfl_dataset_absent_count(&tr), 3);
    assert_int_equal(tr.n + te.n, 62);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    o.features = NULL;
    assert_int_equal(load(full, &o, 5, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.feature_columns"));
}

static uint32_t be32(uint32_t v)
{
    return ((v >> 24) & 0xff) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
}

/* An IDX pair of n 2x3 images (pixel j of image i = 10 i + j) with labels i % 4, gzip-compressed when gz. */
static void idx_pair(const char *img, const char *lab, uint32_t n, int gz)
{
    gzFile f = gzopen(img, gz ? "wb" : "wbT");
    uint32_t h[4] = {be32(0x803), be32(n), be32(2), be32(3)};
    gzwrite(f, h, sizeof h);
    for (uint32_t i = 0; i < n; i++)
        for (int j = 0; j < 6; j++) {
            uint8_t v = (uint8_t)(10 * i + j);
            gzwrite(f, &v, 1);
        }
    gzclose(f);
    f = gzopen(lab, gz ? "wb" : "wbT");
    uint32_t hl[2] = {be32(0x801), be32(n)};
    gzwrite(f, hl, sizeof hl);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t v = (uint8_t)(i % 4);
        gzwrite(f, &v, 1);
    }
    gzclose(f);
}

/* IDX: a folder with MNIST's names (its t10k files the test set, gzip too), or an IMAGES,LABELS pair (split). */
static void idx_folder_and_pair(void **state)
{
    (void)state;
    assert_int_equal(mkdir(tp("idx"), 0700), 0);
    idx_pair(tp("idx/train-images-idx3-ubyte.gz"), tp("idx/train-labels-idx1-ubyte.gz"), 12, 1);
    idx_pair(tp("idx/t10k-images-idx3-ubyte.gz"), tp("idx/t10k-labels-idx1-ubyte.gz"), 5, 1);
    dpfl_dataset tr, te;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_load(spec("idx:%s", tp("idx"), NULL), NULL, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 12);
    assert_int_equal(te.n, 5);
    assert_int_equal(tr.h, 2);
    assert_int_equal(tr.w, 3);
    assert_int_equal(tr.classes, 4);
    assert_true(tr.x[6 * 3 + 2] == 32.0f / 255.0f);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    idx_pair(tp("p-img"), tp("p-lab"), 20, 0);
    assert_int_equal(dpfl_dataset_load(spec("idx:%s,%s", tp("p-img"), tp("p-lab")), NULL, 1, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 16);
    assert_int_equal(te.n, 4);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    assert_int_equal(dpfl_dataset_load(spec("idx:%s", tp("nothere"), NULL), NULL, 1, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, tp("nothere")));
    assert_int_equal(dpfl_dataset_load(spec("idx:%s,%s", tp("p-img"), tp("idx/t10k-labels-idx1-ubyte.gz")), NULL,
                                       1, &tr, &te, &err), DPFL_EFORMAT);
}

static dpfl_status parse(const char *ini, dpfl_config *c, dpfl_error *err)
{
    const char *path = tp("c.ini");
    write_text(path, ini);
    dpfl_config_defaults(c);
    return dpfl_config_load(c, path, err);
}

/* Several IDX folders, one source each (train files only): present, absent with counts, none here (the test set
 * gives the shape). */
static void idx_folders_as_sources(void **state)
{
    (void)state;
    const char *d[3] = {"ia", "ib", "ic"};
    const int n[3] = {10, 6, 8};
    char a[3][256];
    for (int f = 0; f < 3; f++) {
        snprintf(a[f], sizeof a[f], "%s", tp(d[f]));
        assert_int_equal(mkdir(a[f], 0700), 0);
        char img[1100], lab[1100];
        snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", a[f]);
        snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte", a[f]);
        idx_pair(img, lab, (uint32_t)n[f], f == 1);
    }
    char sp[900], test[700];
    snprintf(sp, sizeof sp, "idx:%s, %s, %s", a[0], a[1], a[2]);
    snprintf(test, sizeof test, "idx:%s/train-images-idx3-ubyte,%s/train-labels-idx1-ubyte", a[2], a[2]);
    dpfl_file_options o;
    dpfl_file_options_default(&o);
    o.test_fraction = 0.25;
    dpfl_dataset tr, te, ftr, fte;
    dpfl_error err;
    assert_int_equal(load(sp, &o, 2, &ftr, &fte, &err), DPFL_OK);
    assert_int_equal(ftr.groups, 3);
    assert_int_equal(ftr.n + fte.n, 24);
    assert_int_equal(ftr.h, 2);
    assert_int_equal(ftr.w, 3);
    /* folder b not here: its images are placeholders; the others' rows are unchanged */
    const int32_t rows[3] = {10, 6, 8};
    o.source_rows = rows;
    o.nsource_rows = 3;
    o.classes = 4;
    char gone[300];
    snprintf(gone, sizeof gone, "%s-gone", a[1]);
    assert_int_equal(rename(a[1], gone), 0);
    assert_int_equal(load(sp, &o, 2, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, ftr.n);
    assert_true(tr.absent && tr.absent[1] && !tr.absent[0]);
    for (int32_t i = 0; i < tr.n; i++)
        if (tr.group[i] != 1) assert_memory_equal(tr.x + 6 * i, ftr.x + 6 * i, 6 * sizeof(float));
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* a folder with another count is refused */
    const int32_t wrong[3] = {10, 6, 9};
    o.source_rows = wrong;
    assert_int_equal(load(sp, &o, 2, &tr, &te, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "data.source_rows says 9"));
    o.source_rows = rows;
    /* none here: the shape from the test set, else an error */
    snprintf(sp, sizeof sp, "idx:%s, %s", tp("none1"), tp("none2"));
    o.nsource_rows = 2;
    o.test = test;
    assert_int_equal(load(sp, &o, 2, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.n, 16);
    assert_int_equal(tr.dim, 6);
    assert_int_equal(te.n, 8);
    assert_int_equal(dpfl_dataset_absent_count(&tr), 2);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    o.test = NULL;
    assert_int_equal(load(sp, &o, 2, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "image shape"));
    /* a listed file that is not a folder */
    snprintf(sp, sizeof sp, "idx:%s, %s, %s", a[0], a[2], tp("s9.csv"));
    write_text(tp("s9.csv"), "1,0\n");
    o.source_rows = NULL;
    assert_int_equal(load(sp, &o, 2, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "not a folder"));
    dpfl_dataset_free(&ftr);
    dpfl_dataset_free(&fte);
}

/* The [data] keys: accepted with own data, refused where they would be ignored; normalize = standard needs
 * the given constants and applies them. */
static void config_keys(void **state)
{
    (void)state;
    site_file(tp("k1.csv"), 0, 30);
    site_file(tp("k2.csv"), 100, 30);
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[data]\ndataset = csv:%s, %s\npartition = natural\nclients = 2\nfeature_columns = id, x\n"
             "normalize = standard\nfeature_mean = 100, 3\nfeature_std = 50, 2\n[model]\narch = logreg\n",
             tp("k1.csv"), tp("k2.csv"));
    dpfl_config c;
    dpfl_error err;
    assert_int_equal(parse(ini, &c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    dpfl_dataset tr, te;
    assert_int_equal(dpfl_config_load_data(&c, 3, &tr, &te, &err), DPFL_OK);
    assert_int_equal(tr.groups, 2);
    int32_t i = find_id(&tr, (0 - 100) / 50.0f);
    if (i < 0) { /* id 0 held out: look at another */
        assert_true(find_id(&te, -2.0f) >= 0);
    } else {
        assert_true(tr.x[(size_t)i * 2 + 1] == (0 - 3) / 2.0f);
    }
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* the wrong number of constants */
    assert_int_equal(dpfl_config_set(&c, "data.feature_std=50, 2, 1", &err), DPFL_OK);
    assert_int_equal(dpfl_config_load_data(&c, 3, &tr, &te, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "feature_std"));
    /* standard without constants */
    snprintf(ini, sizeof ini, "[data]\ndataset = csv:%s\nnormalize = standard\n", tp("k1.csv"));
    assert_int_equal(parse(ini, &c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.feature_mean"));
    /* csv keys with a named dataset would be ignored */
    assert_int_equal(parse("[data]\ndataset = mnist\nlabel_column = 3\n", &c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.label_column"));
    assert_int_equal(parse("[data]\ndataset = idx:/x\nmissing = drop\n", &c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.missing"));
    assert_int_equal(parse("[data]\ndataset = cvs:/x\n", &c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.dataset"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(csv_columns_by_name),   cmocka_unit_test(csv_missing_values),
        cmocka_unit_test(csv_sources_and_split), cmocka_unit_test(csv_separate_test_set),
        cmocka_unit_test(csv_absent_sources),    cmocka_unit_test(idx_folder_and_pair),
        cmocka_unit_test(idx_folders_as_sources), cmocka_unit_test(config_keys),
    };
    return cmocka_run_group_tests_name("own data", tests, setup, teardown);
}
