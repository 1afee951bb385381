/* Per-record privacy budgets: files (`dpfl scf --budgets`, record_dp.budget_file: one epsilon per line) and the
 * rPDP-FL paper's generated privacy-preference distributions. */
#include "dpfl/privacy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_budgets_read(const char *path, double **v, size_t *n, dpfl_error *err)
{
    *v = NULL;
    *n = 0;
    char *buf;
    size_t len;
    dpfl_status s = dpfl_file_read_all(path, &buf, &len, err);
    if (s) return s;
    if (memchr(buf, '\0', len)) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "not a text file (%s): contains NUL bytes", path);
    }
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
