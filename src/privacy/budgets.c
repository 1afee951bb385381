/* Per-record privacy budgets: files (`dpfl scf --budgets`, record_dp.budget_file: one epsilon per line) and the
 * rPDP-FL paper's generated privacy-preference distributions. */
#include "dpfl/privacy.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The whole file as text (NUL-terminated; a file with NUL bytes is not a budget file). */
static dpfl_status read_text(const char *path, char **buf, size_t *len, dpfl_error *err)
{
    dpfl_status s = dpfl_file_read_all(path, buf, len, err);
    if (s) return s;
    if (memchr(*buf, '\0', *len)) {
        free(*buf);
        return dpfl_fail(err, DPFL_EFORMAT, "not a text file (%s): contains NUL bytes", path);
    }
    return DPFL_OK;
}

dpfl_status dpfl_budgets_read(const char *path, double **v, size_t *n, dpfl_error *err)
{
    *v = NULL;
    *n = 0;
    char *buf;
    size_t len;
    dpfl_status s = read_text(path, &buf, &len, err);
    if (s) return s;
    size_t cap = 0;
    long ln = 0;
    for (char *p = buf; !s && p < buf + len;) {
        char *eol = strchr(p, '\n'), *next = eol ? eol + 1 : buf + len;
        if (eol) *eol = '\0';
        ln++;
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p == '\0' || *p == '#') {
            p = next;
            continue;
        }
        char *end;
        errno = 0;
        double b = strtod(p, &end);
        const int parsed = end != p;
        while (*end == ' ' || *end == '\t' || *end == '\r') end++;
        if (!parsed || *end != '\0' || !(b > 0) || isinf(b)) {
            s = dpfl_fail(err, DPFL_EFORMAT, "%s line %ld: '%.40s' is not a positive number", path, ln, p);
            break;
        }
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            double *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) {
                s = dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
                break;
            }
            *v = nv;
            cap = nc;
        }
        (*v)[(*n)++] = b;
        p = next;
    }
    free(buf);
    if (s) {
        free(*v);
        *v = NULL;
        *n = 0;
    }
    return s;
}

static double clip_to(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

void dpfl_budgets_generate(dpfl_pref_dist kind, size_t n, double lo, double hi, int shuffle, dpfl_rng *r,
                           double *out)
{
    switch (kind) {
    case DPFL_PREF_THREELEVELS: {
        const size_t n1 = (size_t)llround(0.7 * (double)n), n2 = (size_t)llround(0.2 * (double)n);
        for (size_t i = 0; i < n; i++) out[i] = clip_to(i < n1 ? 0.1 : i < n1 + n2 ? 1.0 : 5.0, lo, hi);
        for (size_t i = n; shuffle && i > 1; i--) { /* Fisher-Yates */
            size_t j = (size_t)dpfl_rng_below(r, (uint64_t)i);
            double t = out[i - 1];
            out[i - 1] = out[j];
            out[j] = t;
        }
        return;
    }
    case DPFL_PREF_MIXGAUSS:
        for (size_t i = 0; i < n; i++) {
            double u = dpfl_rng_uniform(r), g = dpfl_rng_gaussian(r);
            out[i] = clip_to(u < 0.7 ? 0.1 + 0.05 * g : u < 0.9 ? 1.0 + 0.1 * g : 5.0 + 0.5 * g, lo, hi);
        }
        return;
    case DPFL_PREF_PARETO:
        for (size_t i = 0; i < n; i++) {
            double u = 1.0 - dpfl_rng_uniform(r); /* (0, 1] */
            out[i] = clip_to(pow(u, -0.25) - 1.0 + 0.1, lo, hi);
        }
        return;
    }
}

/* One "id,epsilon" row (id: a record index); 1 when it parses. */
static int parse_row(const char *p, long long *id, double *b)
{
    char *end;
    errno = 0;
    *id = strtoll(p, &end, 10);
    if (end == p || errno) return 0;
    while (*end == ' ' || *end == '\t') end++;
    if (*end != ',') return 0;
    p = end + 1;
    *b = strtod(p, &end);
    if (end == p) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    return *end == '\0';
}

dpfl_status dpfl_budgets_read_records(const char *path, size_t n, double *out, dpfl_error *err)
{
    char *buf;
    size_t len;
    dpfl_status s = read_text(path, &buf, &len, err);
    if (s) return s;
    /* the first line that is neither blank nor a comment decides the format */
    int csv = 0;
    for (char *p = buf; p < buf + len;) {
        char *eol = memchr(p, '\n', (size_t)(buf + len - p)), *next = eol ? eol + 1 : buf + len;
        while (p < next && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        if (p < next && *p != '\n' && *p != '#') {
            csv = memchr(p, ',', (size_t)(next - p)) != NULL;
            break;
        }
        p = next;
    }
    if (!csv) {
        free(buf);
        double *v;
        size_t m;
        if ((s = dpfl_budgets_read(path, &v, &m, err))) return s;
        if (m != n) {
            free(v);
            return dpfl_fail(err, DPFL_EINVAL, "%s: %zu budgets for %zu training records (one per record, in the "
                                               "dataset's order, or record_id,epsilon rows)", path, m, n);
        }
        memcpy(out, v, n * sizeof *out);
        free(v);
        return DPFL_OK;
    }
    uint8_t *seen = calloc(n ? n : 1, 1);
    if (!seen) {
        free(buf);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
    }
    long ln = 0, rows = 0;
    int first = 1;
    for (char *p = buf; !s && p < buf + len;) {
        char *eol = strchr(p, '\n'), *next = eol ? eol + 1 : buf + len;
        if (eol) *eol = '\0';
        ln++;
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p == '\0' || *p == '#') {
            p = next;
            continue;
        }
        long long id;
        double b;
        if (!parse_row(p, &id, &b)) {
            if (first && !(*p >= '0' && *p <= '9')) { /* a header row */
                first = 0;
                p = next;
                continue;
            }
            s = dpfl_fail(err, DPFL_EFORMAT, "%s line %ld: '%.40s' is not record_id,epsilon", path, ln, p);
        } else if (id < 0 || (unsigned long long)id >= n) {
            s = dpfl_fail(err, DPFL_EINVAL, "%s line %ld: record %lld is not in 0..%zu (the training set's indices)",
                          path, ln, id, n - 1);
        } else if (!(b > 0) || isinf(b)) {
            s = dpfl_fail(err, DPFL_EFORMAT, "%s line %ld: budget '%.40s' is not a positive number", path, ln, p);
        } else if (seen[id]++) {
            s = dpfl_fail(err, DPFL_EINVAL, "%s line %ld: record %lld has a budget already", path, ln, id);
        } else {
            out[id] = b;
            rows++;
        }
        first = 0;
        p = next;
    }
    for (size_t i = 0; !s && i < n; i++)
        if (!seen[i])
            s = dpfl_fail(err, DPFL_EINVAL, "%s: record %zu has no budget (%ld of %zu records given)", path, i, rows, n);
    free(seen);
    free(buf);
    return s;
}
