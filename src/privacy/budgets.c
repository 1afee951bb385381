/* Budget files of `dpfl scf --budgets FILE`: one per-record epsilon budget per line. */
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
