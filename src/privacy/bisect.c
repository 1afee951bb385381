/* The one bisection (bisect.h): each midpoint replaces the end on its side, so the passing end always passes. */
#include "bisect.h"

#include <math.h>

static int narrow_enough(double lo, double hi, const dpfl_bisect_opts *o)
{
    if (o->integer) return hi - lo <= 1;
    return hi - lo <= o->rel_tol * hi || hi - lo <= o->abs_tol;
}

dpfl_status dpfl_bisect(dpfl_bisect_test test, const void *ctx, double *lo, double *hi, const dpfl_bisect_opts *o,
                        dpfl_error *err)
{
    for (int i = 0; !(o->max_halvings > 0 && i >= o->max_halvings) && !narrow_enough(*lo, *hi, o); i++) {
        const double m = o->integer ? *lo + floor((*hi - *lo) / 2) : 0.5 * (*lo + *hi);
        int ok;
        dpfl_status s = test(ctx, m, &ok, err);
        if (s) return s;
        if (ok == o->good_hi)
            *hi = m;
        else
            *lo = m;
    }
    return DPFL_OK;
}
