/* Errors as values, and the one place the library may stop the process: a broken internal invariant. */
#include "dpfl/core.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_fail(dpfl_error *err, dpfl_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *dpfl_status_name(dpfl_status s)
{
    switch (s) {
    case DPFL_OK: return "ok";
    case DPFL_EINVAL: return "invalid argument";
    case DPFL_EIO: return "i/o error";
    case DPFL_EFORMAT: return "malformed file";
    case DPFL_ENOMEM: return "out of memory";
    case DPFL_ENOTPRIVATE: return "not differentially private";
    case DPFL_ENUM: return "numerical failure";
    }
    return "unknown error";
}

void dpfl_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "dpfl: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}

void *dpfl_alloc(size_t bytes, dpfl_error *err)
{
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    if (posix_memalign(&p, 64, rounded) != 0) {
        dpfl_fail(err, DPFL_ENOMEM, "out of memory (allocating %zu bytes)", bytes);
        return NULL;
    }
    return p;
}

void *dpfl_calloc(size_t n, size_t size, dpfl_error *err)
{
    if (size && n > SIZE_MAX / size) {
        dpfl_fail(err, DPFL_ENOMEM, "allocation size overflow (%zu x %zu)", n, size);
        return NULL;
    }
    void *p = dpfl_alloc(n * size, err);
    if (p) memset(p, 0, n * size);
    return p;
}

void dpfl_free(void *p) { free(p); }
