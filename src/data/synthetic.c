/* Synthetic classification for tests: class c has mean sep * u_c (u_c a random unit vector) and unit
 * Gaussian noise, so sep is the distance of each mean from the origin.  Labels are balanced (i mod classes)
 * and the examples are shuffled. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_synthetic(int32_t n, int32_t dim, int32_t classes, double sep, uint64_t seed, dpfl_dataset *out,
                           dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (n <= 0) return dpfl_fail(err, DPFL_EINVAL, "synthetic data (n): must be > 0, got %d", n);
    if (dim <= 0) return dpfl_fail(err, DPFL_EINVAL, "synthetic data (dim): must be > 0, got %d", dim);
    if (classes < 2) return dpfl_fail(err, DPFL_EINVAL, "synthetic data (classes): must be >= 2, got %d", classes);
    if (!(sep >= 0) || !isfinite(sep))
        return dpfl_fail(err, DPFL_EINVAL, "synthetic data (sep): must be finite and >= 0, got %g", sep);
    dpfl_status s = dpfl__dataset_alloc(out, n, 1, 1, dim, 0, "synthetic", err);
    if (s) return s;
    double *mean = malloc((size_t)classes * (size_t)dim * sizeof *mean);
    int32_t *perm = malloc((size_t)n * sizeof *perm);
    if (!mean || !perm) {
        free(mean);
        free(perm);
        dpfl_dataset_free(out);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (synthetic data of %d x %d)", n, dim);
    }
    dpfl_rng root, r;
    dpfl_rng_init_seed(&root, seed);
    dpfl_rng_derive(&root, &r, 0x73796e74u /* "synt" */, 0, 0);
    for (int32_t c = 0; c < classes; c++) {
        double *m = mean + (size_t)c * dim, norm = 0;
        for (int32_t j = 0; j < dim; j++) {
            m[j] = dpfl_rng_gaussian(&r);
            norm += m[j] * m[j];
        }
        norm = sqrt(norm);
        for (int32_t j = 0; j < dim; j++) m[j] *= norm > 0 ? sep / norm : 0;
    }
    for (int32_t i = 0; i < n; i++) perm[i] = i % classes;
    dpfl_rng_shuffle(&r, perm, (size_t)n);
    for (int32_t i = 0; i < n; i++) {
        const double *m = mean + (size_t)perm[i] * dim;
        float *x = out->x + (size_t)i * dim;
        for (int32_t j = 0; j < dim; j++) x[j] = (float)(m[j] + dpfl_rng_gaussian(&r));
        out->y[i] = perm[i];
    }
    out->classes = classes;
    free(mean);
    free(perm);
    return DPFL_OK;
}
