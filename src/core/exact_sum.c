/* An exact, order-independent sum of float vectors: fixed-point accumulation (the "long accumulator" idea of
 * Kulisch, "Computer Arithmetic and Validity", 2nd ed., de Gruyter 2013, ch. 7; the grid/integer split of Demmel
 * and Nguyen, "Parallel reproducible summation", IEEE Trans. Computers 64(7), 2015).
 *
 * Each term t (scale * u[i], formed in double) is truncated TOWARD ZERO onto the grid 2^-56 and added to a
 * 128-bit integer per coordinate; integer addition is associative, so the sum is the same whatever the order of
 * the terms, and it is rounded to float once, at the end.  Truncation toward zero never increases a term's
 * magnitude, |trunc(t)| <= |t| coordinate by coordinate, so it never increases an update's L2 norm: an update
 * clipped to norm S adds a term of norm <= S, and client-level DP's sensitivity bound S holds for the sum as
 * summed (tests/test_exact_sum.c checks it).  Grid and range: a term of magnitude 2^-32 or more keeps all 24 bits of
 * a float; |t| < 2^46 (larger or non-finite: the coordinate's result is NaN) and at most 2^24 terms keep every
 * partial sum below 2^(46 + 56 + 24) = 2^126 < 2^127. */
#include "exact_sum.h"

#include <math.h>
#include <string.h>

/* a mark no sum of at most DPFL_XSUM_MAX_TERMS in-range terms can reach: the coordinate had a term out of range */
#define XSUM_BAD ((dpfl_xsum_int)1 << 126)
#define XSUM_SCALE 0x1p56 /* 2^DPFL_XSUM_FRAC_BITS */

dpfl_status dpfl_xsum_init(dpfl_xsum *x, size_t n, dpfl_error *err)
{
    memset(x, 0, sizeof *x);
    if (!(x->v = dpfl_alloc((n ? n : 1) * sizeof *x->v, err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (an exact sum of %zu values)", n);
    x->n = n;
    dpfl_xsum_zero(x);
    return DPFL_OK;
}

void dpfl_xsum_free(dpfl_xsum *x)
{
    dpfl_free(x->v);
    memset(x, 0, sizeof *x);
}

void dpfl_xsum_zero(dpfl_xsum *x)
{
    if (x->v) memset(x->v, 0, x->n * sizeof *x->v);
    x->terms = 0;
}

size_t dpfl_xsum_bytes(const dpfl_xsum *x)
{
    return x->n * sizeof *x->v;
}

/* t on the grid, truncated toward zero (C's conversion to an integer type truncates; scaling by a power of two is
 * exact): the common case (|t| < 2^7) in one 64-bit conversion */
static dpfl_xsum_int grid(double t)
{
    const double y = t * XSUM_SCALE;
    if (fabs(y) < 0x1p63) return (dpfl_xsum_int)(int64_t)y;
    return (dpfl_xsum_int)y;
}

double dpfl_xsum_term(double t)
{
    return (double)grid(t) / XSUM_SCALE;
}

dpfl_status dpfl_xsum_add(dpfl_xsum *x, const float *u, double scale, dpfl_error *err)
{
    if (x->terms >= DPFL_XSUM_MAX_TERMS)
        return dpfl_fail(err, DPFL_EINVAL, "exact sum: more than %lld vectors in one sum",
                         (long long)DPFL_XSUM_MAX_TERMS);
    x->terms++;
    dpfl_xsum_int *v = x->v;
    for (size_t i = 0; i < x->n; i++) {
        const double t = scale * (double)u[i];
        if (v[i] == XSUM_BAD) continue;
        if (!(fabs(t) < DPFL_XSUM_MAX_TERM)) v[i] = XSUM_BAD; /* NaN, infinite or out of range */
        else v[i] += grid(t);
    }
    return DPFL_OK;
}

void dpfl_xsum_result(const dpfl_xsum *x, double div, float *out)
{
    for (size_t i = 0; i < x->n; i++) {
        if (x->v[i] == XSUM_BAD) {
            out[i] = NAN;
            continue;
        }
        /* the integer rounded to nearest once (to float, or to double before the division); the scale is a power
         * of two (exact but for results below float's normal range) */
        if (div == 1.0) out[i] = (float)x->v[i] * (float)(1.0 / XSUM_SCALE);
        else out[i] = (float)((double)x->v[i] / XSUM_SCALE / div);
    }
}
