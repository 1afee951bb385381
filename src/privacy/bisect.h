/* The one bisection of the privacy calibrations and inversions (not public).  A bracket [lo, hi] whose ends lie on
 * the two sides of a monotone test; the end on the test's passing side is the caller's answer, so it always
 * satisfies the target (the safe side: a noise never below what the target needs, a rate never above). */
#ifndef DPFL_PRIVACY_BISECT_H
#define DPFL_PRIVACY_BISECT_H
#include "dpfl/core.h"

/* *ok = 1 if x passes (e.g. epsilon with x in place <= target); a status stops the bisection. */
typedef dpfl_status (*dpfl_bisect_test)(const void *ctx, double x, int *ok, dpfl_error *err);

typedef struct {
    int good_hi;    /* 1: hi passes and lo does not; 0: lo passes and hi does not */
    int integer;    /* integer bracket: midpoints rounded down, stop at hi - lo <= 1 (rel_tol, abs_tol unused) */
    double rel_tol; /* stop at hi - lo <= rel_tol * hi ... */
    double abs_tol; /* ... or at hi - lo <= abs_tol */
    int max_halvings; /* and after this many halvings (0: no limit) */
} dpfl_bisect_opts;

/* Halve [*lo, *hi] (lo < hi, one passing end as o->good_hi says) until the tolerance, each midpoint taking the
 * place of the end on its side; the passing end stays passing.  Only the test's status fails it. */
dpfl_status dpfl_bisect(dpfl_bisect_test test, const void *ctx, double *lo, double *hi, const dpfl_bisect_opts *o,
                        dpfl_error *err);

#endif
