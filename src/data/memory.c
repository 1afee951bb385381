/* A dataset from the caller's own arrays, for programs that embed libdpfl and hold their data in memory (no file,
 * no INI config): copied into a dpfl_dataset after the checks the file loaders make, so that everything downstream
 * (partitions, the simulation, evaluation) can rely on labels in range and finite features. */
#include "internal.h"

#include <math.h>
#include <string.h>

dpfl_status dpfl_dataset_from_arrays(const float *x, const int32_t *y, int32_t n, int32_t c, int32_t h, int32_t w,
                                     int32_t classes, dpfl_dataset *out, dpfl_error *err)
{
    static const char *what = "dpfl_dataset_from_arrays";
    memset(out, 0, sizeof *out);
    if (!x || !y) return dpfl_fail(err, DPFL_EINVAL, "no data (%s): x and y must not be NULL", what);
    if (n < 1) return dpfl_fail(err, DPFL_EINVAL, "no examples (%s): n = %d", what, n);
    if (c < 1 || h < 1 || w < 1)
        return dpfl_fail(err, DPFL_EINVAL, "bad example shape (%s): %d x %d x %d (each at least 1)", what, c, h, w);
    if (classes < 2 || classes > 1000000)
        return dpfl_fail(err, DPFL_EINVAL, "bad number of classes (%s): %d (2 to 1000000)", what, classes);
    for (int32_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= classes)
            return dpfl_fail(err, DPFL_EINVAL, "label out of range (%s): y[%d] = %d, classes = %d", what, i, y[i],
                             classes);
    dpfl_status s = dpfl__dataset_alloc(out, n, c, h, w, 0, what, err);
    if (s) return s;
    const size_t len = (size_t)n * (size_t)out->dim;
    for (size_t j = 0; j < len; j++)
        if (!isfinite(x[j])) {
            dpfl_status e = dpfl_fail(err, DPFL_EINVAL, "feature not finite (%s): x[%zu] (example %zu, feature %zu) = %g",
                                      what, j, j / (size_t)out->dim, j % (size_t)out->dim, (double)x[j]);
            dpfl_dataset_free(out);
            return e;
        }
    memcpy(out->x, x, len * sizeof(float));
    memcpy(out->y, y, (size_t)n * sizeof(int32_t));
    out->classes = classes;
    return DPFL_OK;
}
