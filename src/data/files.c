/* Your own data: data.dataset = "csv:SOURCES" or "idx:SOURCES" (include/dpfl/data.h says what SOURCES may be).
 *
 * Each source (a CSV file, or an IDX image/label pair) is one natural group: with several files, the natural
 * partition gives one client per file (the heart-disease layout).  Without a separate test set, each source's
 * rows are shuffled by a stream derived from the seed and the source's position alone, and the last
 * test_fraction of them are held out -- so a client that loads only its own file (first_source = its position)
 * draws the same split.
 * Nothing is computed from the data: no standardization statistics, no label remapping. */
#include "internal.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SOURCES 100000

void dpfl_file_options_default(dpfl_file_options *o)
{
    memset(o, 0, sizeof *o);
    o->header = -1;
    o->test_fraction = 0.2;
}

int dpfl_dataset_is_files(const char *name)
{
    return name && (!strncmp(name, "csv:", 4) || !strncmp(name, "idx:", 4) || !strncmp(name, "npy:", 4));
}

/* ------------------------------------------------------------------------------------------ source lists */

typedef struct {
    char **path;
    uint8_t *absent; /* 1: a listed file that is not here (allowed with source_rows) */
    int32_t n, cap, nabsent;
} paths;

static void paths_free(paths *p)
{
    for (int32_t i = 0; i < p->n; i++) free(p->path[i]);
    free(p->path);
    free(p->absent);
    memset(p, 0, sizeof *p);
}

static dpfl_status paths_add(paths *p, const char *s, int absent, dpfl_error *err)
{
    if (p->n == MAX_SOURCES) return dpfl_fail(err, DPFL_EINVAL, "data.dataset: more than %d files", MAX_SOURCES);
    if (p->n == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 8;
        char **np = realloc(p->path, (size_t)nc * sizeof *np);
        if (np) p->path = np;
        uint8_t *na = realloc(p->absent, (size_t)nc);
        if (na) p->absent = na;
        if (!np || !na) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (data.dataset)");
        p->cap = nc;
    }
    if (!(p->path[p->n] = strdup(s))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (data.dataset)");
    p->absent[p->n++] = (uint8_t)absent;
    p->nabsent += absent;
    return DPFL_OK;
}

/* Every match of pattern (regular files, or folders when folders), in name order; none is an error naming what
 * was looked for. */
static dpfl_status add_glob(paths *p, const char *pattern, int folders, const char *what, dpfl_error *err)
{
    glob_t g;
    int r = glob(pattern, GLOB_ERR, NULL, &g);
    if (r == GLOB_ABORTED) { /* a folder of the pattern is not there (or not readable): is anything matched? */
        globfree(&g);
        r = glob(pattern, 0, NULL, &g);
    }
    if (r == GLOB_NOMATCH) {
        globfree(&g);
        return dpfl_fail(err, DPFL_EIO, "no file matches (%s): %s", pattern, what);
    }
    if (r) {
        globfree(&g);
        return dpfl_fail(err, DPFL_EIO, "cannot list files (%s): %s", pattern,
                         r == GLOB_NOSPACE ? "out of memory" : "read error");
    }
    dpfl_status s = DPFL_OK;
    for (size_t i = 0; i < g.gl_pathc && !s; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) == 0 && (folders ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
            s = paths_add(p, g.gl_pathv[i], 0, err);
    }
    globfree(&g);
    return s;
}

/* Sources: a comma-separated list of files, folders (their *.csv files in name order) and glob patterns; or with
 * folders (idx:) of folders and patterns matching folders.  A listed item that is not here is absent when
 * allow_absent, else an error. */
static dpfl_status list_sources(const char *spec, const char *key, int folders, int allow_absent, paths *out,
                                dpfl_error *err)
{
    char what_glob[64], what_folder[80];
    snprintf(what_glob, sizeof what_glob, "a glob pattern in %s", key);
    snprintf(what_folder, sizeof what_folder, "%s names a folder, and it holds no .csv file", key);
    memset(out, 0, sizeof *out);
    char *copy = strdup(spec), *save = NULL;
    if (!copy) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (data.dataset)");
    dpfl_status s = DPFL_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && !s; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';) *--e = '\0';
        if (!*tok) continue;
        struct stat st;
        if (strpbrk(tok, "*?[")) {
            s = add_glob(out, tok, folders, what_glob, err);
        } else if (stat(tok, &st) != 0) {
            if (errno == ENOENT && allow_absent) s = paths_add(out, tok, 1, err);
            else s = dpfl_fail(err, DPFL_EIO, "cannot open data file (%s): %s", tok, strerror(errno));
        } else if (folders || !S_ISDIR(st.st_mode)) {
            s = paths_add(out, tok, 0, err);
        } else {
            char pat[DPFL__PATH_MAX];
            int w = snprintf(pat, sizeof pat, "%s/*.csv", tok);
            s = w > 0 && (size_t)w < sizeof pat ? add_glob(out, pat, 0, what_folder, err)
                                                : dpfl_fail(err, DPFL_EINVAL, "path too long (%.60s...)", tok);
        }
    }
    free(copy);
    if (!s && out->n == 0) s = dpfl_fail(err, DPFL_EINVAL, "%s: '%s' names no file", key, spec);
    if (s) paths_free(out);
    return s;
}

/* ------------------------------------------------------------------------------------------ CSV */

/* A column given as a header name or a 0-based index (negative from the end). */
static dpfl_status find_column(const dpfl__table *t, const char *col, const char *key, const char *path, int *out,
                               dpfl_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(col, &end, 10);
    if (*col && *end == '\0' && !errno) {
        long c = v < 0 ? t->cols + v : v;
        if (c < 0 || c >= t->cols)
            return dpfl_fail(err, DPFL_EINVAL, "%s: column %ld is out of range (%s has %d columns)", key, v, path,
                             t->cols);
        *out = (int)c;
        return DPFL_OK;
    }
    if (!t->names)
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' names a column, but %s has no header line (data.header)", key,
                         col, path);
    for (int c = 0; c < t->cols; c++)
        if (!strcmp(t->names[c], col)) {
            *out = c;
            return DPFL_OK;
        }
    return dpfl_fail(err, DPFL_EINVAL, "%s: no column named '%s' in %s", key, col, path);
}

/* The label column and the feature columns (in the order given; default every other column, in file order). */
static dpfl_status csv_columns(const dpfl__table *t, const dpfl_file_options *o, const char *path, int *label,
                               int **feat, int *nfeat, dpfl_error *err)
{
    dpfl_status s = find_column(t, o->label && *o->label ? o->label : "-1", "data.label_column", path, label, err);
    if (s) return s;
    *feat = malloc((size_t)t->cols * sizeof(int));
    if (!*feat) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    *nfeat = 0;
    if (!o->features || !*o->features) {
        for (int c = 0; c < t->cols; c++)
            if (c != *label) (*feat)[(*nfeat)++] = c;
    } else {
        char *copy = strdup(o->features), *save = NULL;
        if (!copy) s = dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
        for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !s; tok = strtok_r(NULL, ",", &save)) {
            while (*tok == ' ') tok++;
            for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';) *--e = '\0';
            int c;
            if ((s = find_column(t, tok, "data.feature_columns", path, &c, err))) break;
            if (c == *label)
                s = dpfl_fail(err, DPFL_EINVAL, "data.feature_columns: '%s' is the label column (%s)", tok, path);
            for (int j = 0; j < *nfeat && !s; j++)
                if ((*feat)[j] == c) s = dpfl_fail(err, DPFL_EINVAL, "data.feature_columns: '%s' is listed twice", tok);
            if (!s && *nfeat < t->cols) (*feat)[(*nfeat)++] = c;
        }
        free(copy);
    }
    if (!s && *nfeat == 0) s = dpfl_fail(err, DPFL_EINVAL, "data.feature_columns: no feature column left (%s)", path);
    if (s) {
        free(*feat);
        *feat = NULL;
    }
    return s;
}

/* The number of comma-separated items of a non-empty list. */
static int count_items(const char *list)
{
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    return n;
}

/* File f against the first present file: the same number of columns, a header line in both or neither, the same
 * column names. */
static dpfl_status csv_same_layout(const dpfl__table *tab, int32_t f, int first, const paths *src, dpfl_error *err)
{
    const char *path = src->path[f];
    dpfl_status s = DPFL_OK;
    if (tab[f].cols != tab[first].cols) {
        s = dpfl_fail(err, DPFL_EFORMAT, "wrong number of columns (%s): %d, but %s has %d", path, tab[f].cols,
                      src->path[first], tab[first].cols);
    } else if (!tab[f].names != !tab[first].names) {
        s = dpfl_fail(err, DPFL_EFORMAT, "%s header line (%s), unlike %s (set data.header)",
                      tab[f].names ? "a" : "no", path, src->path[first]);
    } else if (tab[f].names) {
        for (int c = 0; c < tab[first].cols && !s; c++)
            if (strcmp(tab[f].names[c], tab[first].names[c]))
                s = dpfl_fail(err, DPFL_EFORMAT, "column %d is '%s' (%s), but '%s' in %s", c + 1,
                              tab[f].names[c], path, tab[first].names[c], src->path[first]);
    }
    return s;
}

/* *keep = the usable rows of table t (no missing label or feature; those are dropped with data.missing = drop,
 * else refused), each label an integer in 0..65535; at least one, and data.source_rows' count where it is given
 * (want >= 0). */
static dpfl_status csv_count_rows(const dpfl__table *t, const dpfl_file_options *o, const char *path, int label,
                                  const int *feat, int nfeat, int32_t want, int32_t *keep, dpfl_error *err)
{
    dpfl_status s = DPFL_OK;
    for (int32_t r = 0; r < t->rows && !s; r++) {
        const double *row = t->v + (size_t)r * t->cols;
        int miss = isnan(row[label]) ? label + 1 : 0;
        for (int j = 0; j < nfeat && !miss; j++) miss = isnan(row[feat[j]]) ? feat[j] + 1 : 0;
        if (miss) {
            if (!o->drop_missing)
                s = dpfl_fail(err, DPFL_EFORMAT, "missing value (%s): line %d, column %d (set data.missing = "
                              "drop to skip such rows)", path, t->line[r], miss);
            continue;
        }
        if (row[label] < 0 || row[label] != floor(row[label]) || row[label] > 65535)
            s = dpfl_fail(err, DPFL_EFORMAT, "label is not an integer in 0..65535 (%s): line %d: %g", path,
                          t->line[r], row[label]);
        ++*keep;
    }
    if (!s && *keep == 0)
        s = dpfl_fail(err, DPFL_EFORMAT, "no usable row (%s): every row has a missing value", path);
    if (!s && want >= 0 && *keep != want)
        s = dpfl_fail(err, DPFL_EFORMAT, "%d usable rows (%s), but data.source_rows says %d: not the run's file",
                      *keep, path, want);
    return s;
}

/* The usable rows of every source into all, in file order (an absent source: keep[f] placeholder rows). */
static void csv_fill(dpfl_dataset *all, const paths *src, const dpfl__table *tab, const int32_t *keep, int label,
                     const int *feat, int nfeat)
{
    int32_t i = 0;
    for (int32_t f = 0; f < src->n; f++) {
        if (src->absent[f]) {
            memset(all->x + (size_t)i * nfeat, 0, (size_t)keep[f] * (size_t)nfeat * sizeof(float));
            for (int32_t r = 0; r < keep[f]; r++, i++) {
                all->y[i] = 0;
                all->group[i] = f;
            }
            continue;
        }
        for (int32_t r = 0; r < tab[f].rows; r++) {
            const double *row = tab[f].v + (size_t)r * tab[f].cols;
            int miss = isnan(row[label]);
            for (int j = 0; j < nfeat && !miss; j++) miss = isnan(row[feat[j]]);
            if (miss) continue;
            float *x = all->x + (size_t)i * nfeat;
            for (int j = 0; j < nfeat; j++) x[j] = (float)row[feat[j]];
            all->y[i] = (int32_t)row[label];
            all->group[i++] = f;
        }
    }
}

/* One dataset holding every row of every source (group = source), before the train/test split; an absent
 * source's rows are placeholders (zeros, label 0) of its declared count. */
static dpfl_status csv_read_all(const paths *src, const dpfl_file_options *o, dpfl_dataset *all, dpfl_error *err)
{
    memset(all, 0, sizeof *all);
    dpfl__table *tab = calloc((size_t)src->n, sizeof *tab);
    int32_t *keep = calloc((size_t)src->n, sizeof *keep);
    int label = 0, *feat = NULL, nfeat = 0, first = -1; /* first: the first present file */
    dpfl_status s = tab && keep ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (data.dataset)");
    if (!s && o->source_rows && o->nsource_rows != src->n)
        s = dpfl_fail(err, DPFL_EINVAL, "data.source_rows: %d counts for %d files in data.dataset", o->nsource_rows,
                      src->n);
    int64_t total = 0;
    for (int32_t f = 0; f < src->n && !s; f++) {
        const char *path = src->path[f];
        if (src->absent[f]) {
            keep[f] = o->source_rows[f];
            total += keep[f];
            continue;
        }
        if ((s = dpfl__table_read(path, o->header, &tab[f], err))) break;
        if (first < 0) {
            first = f;
            s = csv_columns(&tab[f], o, path, &label, &feat, &nfeat, err);
        } else {
            s = csv_same_layout(tab, f, first, src, err);
        }
        if (!s)
            s = csv_count_rows(&tab[f], o, path, label, feat, nfeat, o->source_rows ? o->source_rows[f] : -1,
                               &keep[f], err);
        total += keep[f];
    }
    if (!s && first < 0) { /* no file here (a deployment's server): the features are what the config lists */
        if (!o->features || !*o->features)
            s = dpfl_fail(err, DPFL_EINVAL, "data.feature_columns: none of the files of data.dataset is here, so the "
                                            "feature columns must be listed");
        else nfeat = count_items(o->features);
    }
    if (!s && total > INT32_MAX) s = dpfl_fail(err, DPFL_EINVAL, "data.dataset: %lld rows are too many", (long long)total);
    if (!s) s = dpfl__dataset_alloc(all, (int32_t)total, 1, 1, nfeat, src->n, src->path[0], err);
    if (!s && src->nabsent) {
        if (!(all->absent = dpfl_alloc((size_t)src->n, err))) s = DPFL_ENOMEM;
        else memcpy(all->absent, src->absent, (size_t)src->n);
    }
    if (!s) csv_fill(all, src, tab, keep, label, feat, nfeat);
    for (int32_t f = 0; tab && f < src->n; f++) dpfl__table_free(&tab[f]);
    free(tab);
    free(keep);
    free(feat);
    if (s) dpfl_dataset_free(all);
    return s;
}

/* ------------------------------------------------------------------------------------------ IDX */

/* DIR's train pair (MNIST's names, plain or .gz) into d. */
static dpfl_status idx_train_pair(const char *dir, dpfl_dataset *d, dpfl_error *err)
{
    char img[DPFL__PATH_MAX + 64], lab[DPFL__PATH_MAX + 64];
    const char *ext = "";
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", dir);
    if (access(img, R_OK) != 0) ext = ".gz";
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte%s", dir, ext);
    snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte%s", dir, ext);
    return dpfl_idx_load(img, lab, d, err);
}

/* Several folders, one source each (their train-* pairs; t10k files are not read: the test set is data.test or
 * test_fraction of each folder); with source_rows a folder that is not here is absent, its rows placeholders of
 * the shape of the first folder here, else of hint (the separate test set's). */
static dpfl_status idx_folders(const paths *src, const dpfl_file_options *o, const dpfl_dataset *hint,
                               dpfl_dataset *all, dpfl_error *err)
{
    memset(all, 0, sizeof *all);
    dpfl_dataset *part = calloc((size_t)src->n, sizeof *part);
    if (!part) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (data.dataset)");
    dpfl_status s = DPFL_OK;
    if (o->source_rows && o->nsource_rows != src->n)
        s = dpfl_fail(err, DPFL_EINVAL, "data.source_rows: %d counts for %d folders in data.dataset", o->nsource_rows,
                      src->n);
    int32_t first = -1;
    int64_t total = 0;
    for (int32_t f = 0; f < src->n && !s; f++) {
        if (src->absent[f]) {
            total += o->source_rows[f];
            continue;
        }
        struct stat st;
        if (stat(src->path[f], &st) != 0 || !S_ISDIR(st.st_mode)) {
            s = dpfl_fail(err, DPFL_EINVAL, "not a folder (%s): idx: lists folders holding train-images-idx3-ubyte "
                          "and train-labels-idx1-ubyte, or is IMAGES,LABELS", src->path[f]);
            break;
        }
        if ((s = idx_train_pair(src->path[f], &part[f], err))) break;
        if (first < 0) first = f;
        else if (part[f].h != part[first].h || part[f].w != part[first].w)
            s = dpfl_fail(err, DPFL_EFORMAT, "images are %dx%d (%s), but %dx%d in %s", part[f].h, part[f].w,
                          src->path[f], part[first].h, part[first].w, src->path[first]);
        if (!s && o->source_rows && part[f].n != o->source_rows[f])
            s = dpfl_fail(err, DPFL_EFORMAT, "%d images (%s), but data.source_rows says %d: not the run's folder",
                          part[f].n, src->path[f], o->source_rows[f]);
        total += part[f].n;
    }
    const dpfl_dataset *shape = first >= 0 ? &part[first] : hint;
    if (!s && (!shape || shape->dim <= 0))
        s = dpfl_fail(err, DPFL_EINVAL, "data.test: none of the folders of data.dataset is here, so a test set "
                                        "(data.test) must give the image shape");
    if (!s && total > INT32_MAX) s = dpfl_fail(err, DPFL_EINVAL, "data.dataset: %lld images are too many", (long long)total);
    if (!s) s = dpfl__dataset_alloc(all, (int32_t)total, shape->c, shape->h, shape->w, src->n, src->path[0], err);
    if (!s && src->nabsent) {
        if (!(all->absent = dpfl_alloc((size_t)src->n, err))) s = DPFL_ENOMEM;
        else memcpy(all->absent, src->absent, (size_t)src->n);
    }
    int32_t i = 0;
    for (int32_t f = 0; f < src->n && !s; f++) {
        const int32_t m = src->absent[f] ? o->source_rows[f] : part[f].n;
        if (src->absent[f]) memset(all->x + (size_t)i * all->dim, 0, (size_t)m * (size_t)all->dim * sizeof(float));
        else memcpy(all->x + (size_t)i * all->dim, part[f].x, (size_t)m * (size_t)all->dim * sizeof(float));
        for (int32_t r = 0; r < m; r++, i++) {
            all->y[i] = src->absent[f] ? 0 : part[f].y[r];
            all->group[i] = f;
        }
    }
    for (int32_t f = 0; f < src->n; f++) dpfl_dataset_free(&part[f]);
    free(part);
    if (s) dpfl_dataset_free(all);
    return s;
}

/* "DIR" (MNIST's file names, plain or .gz: train-* the data, t10k-* a test set when present), "IMAGES,LABELS", or
 * several folders (idx_folders).  *has_test says whether test was filled from DIR's t10k files. */
static dpfl_status idx_read(const char *spec, const char *key, const dpfl_file_options *o, const dpfl_dataset *hint, dpfl_dataset *all,
                            dpfl_dataset *test, int *has_test, dpfl_error *err)
{
    *has_test = 0;
    const char *comma = strchr(spec, ',');
    struct stat st;
    int pair = 0;
    if (comma && !strchr(comma + 1, ',')) { /* two items: IMAGES,LABELS when the first is a file */
        char first[DPFL__PATH_MAX];
        snprintf(first, sizeof first, "%.*s", (int)(comma - spec), spec);
        pair = stat(first, &st) == 0 && S_ISREG(st.st_mode);
    }
    if (comma && !pair) {
        paths src;
        dpfl_status s = list_sources(spec, key, 1, o->source_rows != NULL, &src, err);
        if (!s) s = idx_folders(&src, o, hint, all, err);
        paths_free(&src);
        return s;
    }
    if (comma) {
        char img[DPFL__PATH_MAX];
        size_t n = (size_t)(comma - spec);
        if (n >= sizeof img || strchr(comma + 1, ','))
            return dpfl_fail(err, DPFL_EINVAL, "data.dataset: 'idx:' takes a folder or IMAGES,LABELS, got 'idx:%s'",
                             spec);
        memcpy(img, spec, n);
        img[n] = '\0';
        return dpfl_idx_load(img, comma + 1, all, err);
    }
    if (stat(spec, &st) != 0 || !S_ISDIR(st.st_mode))
        return dpfl_fail(err, DPFL_EIO, "cannot open IDX folder (%s): %s", spec,
                         errno ? strerror(errno) : "not a folder (give idx:FOLDER or idx:IMAGES,LABELS)");
    dpfl_status s = idx_train_pair(spec, all, err);
    if (s) return s;
    char img[DPFL__PATH_MAX + 64], lab[DPFL__PATH_MAX + 64];
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", spec);
    const char *ext = access(img, R_OK) == 0 ? "" : ".gz";
    snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte%s", spec, ext);
    snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte%s", spec, ext);
    if (access(img, R_OK) == 0 || access(lab, R_OK) == 0) {
        if ((s = dpfl_idx_load(img, lab, test, err))) {
            dpfl_dataset_free(all);
            return s;
        }
        *has_test = 1;
    }
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ splitting */

/* train and test from all: each group's rows shuffled by its own stream, the last round(m * frac) to test.
 * Datasets without groups are one group.  Groups carry over. */
dpfl_status dpfl__split_sources(const dpfl_dataset *all, double frac, uint64_t seed, int32_t first, dpfl_dataset *train,
                         dpfl_dataset *test, const char *what, dpfl_error *err)
{
    int32_t G = all->groups > 0 ? all->groups : 1;
    int32_t *off = calloc((size_t)G + 1, sizeof *off), *idx = malloc((size_t)all->n * sizeof *idx);
    int32_t *ntest = calloc((size_t)G, sizeof *ntest);
    dpfl_status s = off && idx && ntest ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", what);
    int64_t tot_te = 0;
    if (!s) {
        for (int32_t i = 0; i < all->n; i++) off[(all->group ? all->group[i] : 0) + 1]++;
        for (int32_t g = 0; g < G; g++) off[g + 1] += off[g];
        int32_t *pos = malloc((size_t)G * sizeof *pos);
        if (!pos) s = dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", what);
        for (int32_t g = 0; g < G && !s; g++) pos[g] = off[g];
        for (int32_t i = 0; i < all->n && !s; i++) idx[pos[all->group ? all->group[i] : 0]++] = i;
        free(pos);
        dpfl_rng root;
        dpfl_rng_init_seed(&root, seed);
        for (int32_t g = 0; g < G && !s; g++) {
            int32_t m = off[g + 1] - off[g];
            dpfl_rng rg;
            dpfl_rng_derive(&root, &rg, 0x6f776e64u /* "ownd" */, (uint64_t)first + (uint64_t)g, 0);
            dpfl_rng_shuffle(&rg, idx + off[g], (size_t)m);
            ntest[g] = (int32_t)llround(m * frac);
            if (ntest[g] >= m && m > 0) ntest[g] = m - 1; /* every source keeps a training row */
            tot_te += ntest[g];
        }
    }
    if (!s && frac > 0 && tot_te == 0)
        s = dpfl_fail(err, DPFL_EINVAL, "data.test_fraction: %g of %d rows holds out no test row (%s)", frac, all->n,
                      what);
    int32_t groups = all->groups;
    if (!s) s = dpfl__dataset_alloc(train, all->n - (int32_t)tot_te, all->c, all->h, all->w, groups, what, err);
    if (!s && tot_te > 0) s = dpfl__dataset_alloc(test, (int32_t)tot_te, all->c, all->h, all->w, groups, what, err);
    if (!s && all->absent) {
        if (!(train->absent = dpfl_alloc((size_t)groups, err)) || (tot_te > 0 && !(test->absent = dpfl_alloc((size_t)groups, err))))
            s = DPFL_ENOMEM;
        else {
            memcpy(train->absent, all->absent, (size_t)groups);
            if (tot_te > 0) memcpy(test->absent, all->absent, (size_t)groups);
        }
    }
    if (!s) {
        int32_t itr = 0, ite = 0;
        for (int32_t g = 0; g < G; g++)
            for (int32_t k = off[g]; k < off[g + 1]; k++) {
                int to_test = k >= off[g + 1] - ntest[g];
                dpfl_dataset *d = to_test ? test : train;
                int32_t i = to_test ? ite++ : itr++, src = idx[k];
                memcpy(d->x + (size_t)i * d->dim, all->x + (size_t)src * all->dim, (size_t)all->dim * sizeof(float));
                d->y[i] = all->y[src];
                if (groups > 0) d->group[i] = all->group[src];
            }
    }
    free(off);
    free(idx);
    free(ntest);
    if (s) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
    }
    return s;
}

/* The whole of spec as one dataset (groups = sources for CSV); test filled when an IDX folder has t10k files. */
static dpfl_status read_spec(const char *spec, const char *key, const dpfl_file_options *o, const dpfl_dataset *hint, dpfl_dataset *all,
                             dpfl_dataset *test, int *has_test, dpfl_error *err)
{
    *has_test = 0;
    if (!dpfl_dataset_is_files(spec) || !spec[4])
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not csv:FILES, idx:FILES or npy:FILES", key, spec);
    if (spec[0] == 'i') return idx_read(spec + 4, key, o, hint, all, test, has_test, err);
    if (spec[0] == 'n') return dpfl__npy_read(spec + 4, all, test, has_test, err);
    paths src;
    dpfl_status s = list_sources(spec + 4, key, 0, o->source_rows != NULL, &src, err);
    if (s) return s;
    s = csv_read_all(&src, o, all, err);
    paths_free(&src);
    return s;
}

static int32_t max_label(const dpfl_dataset *d)
{
    int32_t m = -1;
    for (int32_t i = 0; i < d->n; i++)
        if (d->y[i] > m) m = d->y[i];
    return m;
}

dpfl_status dpfl_dataset_load_files(const char *spec, const dpfl_file_options *opt, uint64_t seed, dpfl_dataset *train,
                                    dpfl_dataset *test, dpfl_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    dpfl_file_options o;
    if (opt) o = *opt;
    else dpfl_file_options_default(&o);
    if (o.first_source < 0) return dpfl_fail(err, DPFL_EINVAL, "first_source: %d is negative", o.first_source);
    if (!(o.test_fraction >= 0 && o.test_fraction < 1))
        return dpfl_fail(err, DPFL_EINVAL, "data.test_fraction: must be in [0, 1), got %g", o.test_fraction);
    dpfl_dataset all, t2;
    int has_test = 0, own_test = 0;
    memset(&t2, 0, sizeof t2);
    memset(&all, 0, sizeof all);
    const int separate = o.test && *o.test;
    dpfl_status s = DPFL_OK;
    if (separate) { /* first: it gives the shape when none of the training files is here */
        dpfl_file_options ot = o; /* the test files are all here: no counts, no absent files */
        ot.source_rows = NULL;
        ot.nsource_rows = 0;
        s = read_spec(o.test, "data.test", &ot, NULL, test, &t2, &own_test, err);
        dpfl_dataset_free(&t2);
    }
    dpfl_dataset t3;
    memset(&t3, 0, sizeof t3);
    if (!s) s = read_spec(spec, "data.dataset", &o, separate ? test : NULL, &all, separate ? &t3 : test, &has_test, err);
    if (!s && separate && has_test)
        s = dpfl_fail(err, DPFL_EINVAL, "data.test: %s already holds a test set (t10k files); remove data.test",
                      spec);
    dpfl_dataset_free(&t3);
    if (s) {
        dpfl_dataset_free(test);
        return s;
    }
    if (!s && !separate && !has_test) { /* hold out test_fraction of each source */
        if (o.test_fraction == 0) s = dpfl_fail(err, DPFL_EINVAL, "data.test_fraction: 0 leaves no test set; give "
                                                                   "data.test or a fraction in (0, 1)");
        else s = dpfl__split_sources(&all, o.test_fraction, seed, o.first_source, train, test, spec, err);
        dpfl_dataset_free(&all);
    } else if (!s) {
        *train = all;
        memset(&all, 0, sizeof all);
    }
    dpfl_dataset_free(&all);
    if (!s && (test->dim != train->dim || test->c != train->c || test->h != train->h))
        s = dpfl_fail(err, DPFL_EFORMAT, "the test set's examples have %d values, the training set's %d (data.test)",
                      test->dim, train->dim);
    if (!s && test->group && test->groups != train->groups) { /* per-source test sets only when they match */
        dpfl_free(test->group);
        dpfl_free(test->absent);
        test->group = NULL;
        test->absent = NULL;
        test->groups = 0;
    }
    if (!s) {
        int32_t a = max_label(train), b = max_label(test), k = (a > b ? a : b) + 1;
        if (o.classes > 0 && k > o.classes)
            s = dpfl_fail(err, DPFL_EFORMAT, "a label is %d (%s), but data.classes = %d", k - 1, spec, o.classes);
        else if (o.classes > 0) k = o.classes;
        else if (train->absent)
            s = dpfl_fail(err, DPFL_EINVAL, "data.classes: needed when a file of data.dataset is not here (%s)", spec);
        if (!s && k < 2)
            s = dpfl_fail(err, DPFL_EFORMAT, "every label is 0 (%s): a classifier needs 2 classes or more", spec);
        train->classes = test->classes = k;
    }
    if (s) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
    }
    return s;
}

dpfl_status dpfl_dataset_source_path(const char *spec, int32_t k, char *buf, size_t len, dpfl_error *err)
{
    if (!dpfl_dataset_is_files(spec)) return dpfl_fail(err, DPFL_EINVAL, "data.dataset: '%s' has no files by source", spec);
    paths src;
    dpfl_status s = list_sources(spec + 4, "data.dataset", spec[0] == 'i', 1, &src, err);
    if (s) return s;
    if (k < 0 || k >= src.n) s = dpfl_fail(err, DPFL_EINVAL, "data.dataset: no source #%d in '%s'", k, spec);
    else snprintf(buf, len, "%s", src.path[k]);
    paths_free(&src);
    return s;
}

int32_t dpfl_dataset_absent_count(const dpfl_dataset *d)
{
    int32_t n = 0;
    for (int32_t g = 0; d->absent && g < d->groups; g++) n += d->absent[g];
    return n;
}

dpfl_status dpfl_dataset_standardize_values(dpfl_dataset *d, const double *mean, int32_t nmean, const double *sd,
                                            int32_t nsd, dpfl_error *err)
{
    if ((nmean != 1 && nmean != d->dim) || (nsd != 1 && nsd != d->dim))
        return dpfl_fail(err, DPFL_EINVAL, "data.feature_mean / feature_std: give 1 value or one per feature (%d); "
                         "got %d and %d", d->dim, nmean, nsd);
    for (int32_t j = 0; j < nsd; j++)
        if (!(sd[j] > 0) || !isfinite(sd[j]) || !isfinite(mean[j < nmean ? j : 0]))
            return dpfl_fail(err, DPFL_EINVAL, "data.feature_std: value %d is %g; it must be finite and > 0", j + 1,
                             sd[j]);
    for (int32_t i = 0; i < d->n; i++) {
        float *x = d->x + (size_t)i * d->dim;
        for (int32_t j = 0; j < d->dim; j++)
            x[j] = (float)((x[j] - mean[nmean == 1 ? 0 : j]) / sd[nsd == 1 ? 0 : j]);
    }
    return DPFL_OK;
}
