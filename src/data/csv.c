/* Numeric comma-separated files: a table reader (missing values as NaN) and the labelled-dataset loader
 * built on it. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void dpfl__table_free(dpfl__table *t)
{
    if (t->names)
        for (int c = 0; c < t->cols; c++) free(t->names[c]);
    free(t->names);
    free(t->v);
    free(t->line);
    memset(t, 0, sizeof *t);
}

static char *trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    *end = '\0';
    return s;
}

static int missing_token(const char *tok)
{
    return *tok == '\0' || !strcmp(tok, "?") || !strcasecmp(tok, "na") || !strcasecmp(tok, "nan") ||
           !strcasecmp(tok, "null");
}

/* Is the line p..eol a header?  yes when a field is neither a number nor a missing value. */
static int looks_like_header(const char *p, const char *eol)
{
    char buf[256];
    while (p <= eol) {
        const char *fe = memchr(p, ',', (size_t)(eol - p));
        if (!fe) fe = eol;
        size_t n = (size_t)(fe - p) < sizeof buf - 1 ? (size_t)(fe - p) : sizeof buf - 1;
        memcpy(buf, p, n);
        buf[n] = '\0';
        char *tok = trim(buf, buf + n), *end;
        if (!missing_token(tok)) {
            errno = 0;
            (void)strtod(tok, &end);
            if (*end != '\0') return 1;
        }
        p = fe + 1;
    }
    return 0;
}

/* The header's fields as names[0..nf). */
static dpfl_status read_names(char *p, char *eol, int nf, dpfl__table *t, const char *path, dpfl_error *err)
{
    t->names = calloc((size_t)nf, sizeof *t->names);
    if (!t->names) return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
    for (int c = 0; c < nf; c++) {
        char *fe = memchr(p, ',', (size_t)(eol - p));
        if (!fe) fe = eol;
        char *tok = trim(p, fe);
        if (tok[0] == '"' && strlen(tok) >= 2 && tok[strlen(tok) - 1] == '"') { /* "name" */
            tok[strlen(tok) - 1] = '\0';
            tok++;
        }
        if (!(t->names[c] = strdup(tok))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
        p = fe + 1;
    }
    return DPFL_OK;
}

static int count_fields(const char *p, const char *end)
{
    int n = 1;
    for (; p < end; p++) n += *p == ',';
    return n;
}

static int blank(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r') return 0;
    return 1;
}

static dpfl_status table_grow(dpfl__table *t, int32_t *cap, const char *path, dpfl_error *err)
{
    int32_t nc = *cap ? *cap * 2 : 256;
    double *v = realloc(t->v, (size_t)nc * (size_t)t->cols * sizeof *v);
    if (v) t->v = v;
    int32_t *l = realloc(t->line, (size_t)nc * sizeof *l);
    if (l) t->line = l;
    if (!v || !l) return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
    *cap = nc;
    return DPFL_OK;
}

dpfl_status dpfl__table_read(const char *path, int has_header, dpfl__table *t, dpfl_error *err)
{
    memset(t, 0, sizeof *t);
    char *buf;
    size_t len;
    dpfl_status s = dpfl_file_read_all(path, &buf, &len, err);
    if (s) return s;
    if (memchr(buf, '\0', len)) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "not a text file (%s): contains NUL bytes", path);
    }
    int32_t cap = 0, lineno = 0;
    int seen_first = 0; /* the first non-blank line has been looked at */
    char *p = buf, *bend = buf + len;
    while (!s && p < bend) {
        char *eol = memchr(p, '\n', (size_t)(bend - p));
        if (!eol) eol = bend;
        lineno++;
        char *next = eol < bend ? eol + 1 : bend;
        if (blank(p, eol)) {
            p = next;
            continue;
        }
        int nf = count_fields(p, eol);
        if (!seen_first) {
            seen_first = 1;
            if (has_header == 1 || (has_header < 0 && looks_like_header(p, eol))) {
                t->cols = nf;
                *eol = '\0';
                if ((s = read_names(p, eol, nf, t, path, err))) break;
                p = next;
                continue;
            }
        }
        if (t->cols == 0) t->cols = nf;
        if (nf != t->cols) {
            s = dpfl_fail(err, DPFL_EFORMAT, "wrong number of columns (%s): line %d has %d, expected %d", path,
                          lineno, nf, t->cols);
            break;
        }
        if (t->rows == cap && (s = table_grow(t, &cap, path, err))) break;
        double *row = t->v + (size_t)t->rows * t->cols;
        char *f = p;
        for (int c = 0; c < nf; c++) {
            char *fe = memchr(f, ',', (size_t)(eol - f));
            if (!fe) fe = eol;
            char *tok = trim(f, fe);
            if (missing_token(tok)) {
                row[c] = NAN;
            } else {
                char *end;
                errno = 0;
                row[c] = strtod(tok, &end);
                if (*end != '\0' || errno == ERANGE || !isfinite(row[c])) {
                    s = dpfl_fail(err, DPFL_EFORMAT, "not a number (%s): line %d, column %d: '%.40s'", path,
                                  lineno, c + 1, tok);
                    break;
                }
            }
            f = fe + 1;
        }
        t->line[t->rows++] = lineno;
        p = next;
    }
    free(buf);
    if (!s && t->rows == 0) s = dpfl_fail(err, DPFL_EFORMAT, "no data rows (%s)", path);
    if (s) dpfl__table_free(t);
    return s;
}

dpfl_status dpfl_csv_load(const char *path, int label_col, int has_header, int drop_missing, dpfl_dataset *out,
                          dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    dpfl__table t;
    dpfl_status s = dpfl__table_read(path, has_header, &t, err);
    if (s) return s;
    int lc = label_col < 0 ? t.cols + label_col : label_col;
    if (lc < 0 || lc >= t.cols || t.cols < 2) {
        s = dpfl_fail(err, DPFL_EINVAL, "label column out of range (%s): column %d of a %d-column file", path,
                      label_col, t.cols);
        dpfl__table_free(&t);
        return s;
    }
    int32_t keep = 0;
    for (int32_t r = 0; r < t.rows && !s; r++) {
        const double *row = t.v + (size_t)r * t.cols;
        int missing = 0;
        for (int c = 0; c < t.cols; c++) missing |= isnan(row[c]);
        if (missing && !drop_missing)
            s = dpfl_fail(err, DPFL_EFORMAT, "missing value (%s): line %d", path, t.line[r]);
        else if (!missing && (row[lc] < 0 || row[lc] != floor(row[lc]) || row[lc] > 1e6))
            s = dpfl_fail(err, DPFL_EFORMAT, "label is not a non-negative integer (%s): line %d: %g", path,
                          t.line[r], row[lc]);
        keep += !missing;
    }
    if (!s && keep == 0) s = dpfl_fail(err, DPFL_EFORMAT, "every row has a missing value (%s)", path);
    if (!s) s = dpfl__dataset_alloc(out, keep, 1, 1, t.cols - 1, 0, path, err);
    if (!s) {
        int32_t i = 0;
        for (int32_t r = 0; r < t.rows; r++) {
            const double *row = t.v + (size_t)r * t.cols;
            int missing = 0;
            for (int c = 0; c < t.cols; c++) missing |= isnan(row[c]);
            if (missing) continue;
            float *x = out->x + (size_t)i * out->dim;
            for (int c = 0, j = 0; c < t.cols; c++)
                if (c != lc) x[j++] = (float)row[c];
            out->y[i] = (int32_t)row[lc];
            if (out->y[i] + 1 > out->classes) out->classes = out->y[i] + 1;
            i++;
        }
    }
    dpfl__table_free(&t);
    return s;
}
