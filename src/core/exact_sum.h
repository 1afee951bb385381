/* An order-independent exact sum of float vectors (see exact_sum.c): what the server of a round adds its clients'
 * updates into, so that the sum's bits depend on the set of updates alone, not on the order in which they arrive. */
#ifndef DPFL_CORE_EXACT_SUM_H
#define DPFL_CORE_EXACT_SUM_H

#include "dpfl/core.h"

#include <stddef.h>
#include <stdint.h>

__extension__ typedef __int128 dpfl_xsum_int;

/* The grid every term is truncated onto (2^-DPFL_XSUM_FRAC_BITS), the largest term magnitude that is summed
 * (larger and non-finite terms make their coordinate NaN), and the most terms one sum takes (so that no sum of
 * terms can overflow the 128-bit accumulator). */
#define DPFL_XSUM_FRAC_BITS 56
#define DPFL_XSUM_MAX_TERM 0x1p46
#define DPFL_XSUM_MAX_TERMS (INT64_C(1) << 24)

typedef struct {
    dpfl_xsum_int *v; /* per coordinate: the sum of the truncated terms, in units of the grid (or the NaN mark) */
    size_t n;
    int64_t terms;    /* vectors added since the last zero */
} dpfl_xsum;

dpfl_status dpfl_xsum_init(dpfl_xsum *x, size_t n, dpfl_error *err);
void dpfl_xsum_free(dpfl_xsum *x);
void dpfl_xsum_zero(dpfl_xsum *x);
/* x += trunc(scale * u) per coordinate (scale * u in double, truncated toward zero onto the grid);
 * DPFL_EINVAL once the sum holds DPFL_XSUM_MAX_TERMS vectors */
dpfl_status dpfl_xsum_add(dpfl_xsum *x, const float *u, double scale, dpfl_error *err);
/* out[i] = the exact sum of coordinate i divided by div, rounded to float (div = 1: the sum rounded once) */
void dpfl_xsum_result(const dpfl_xsum *x, double div, float *out);
/* the term a value adds (trunc toward zero onto the grid), as a double: |dpfl_xsum_term(t)| <= |t| */
double dpfl_xsum_term(double t);
/* bytes the sum holds */
size_t dpfl_xsum_bytes(const dpfl_xsum *x);

#endif
