/* Safe-side rounding of printed privacy numbers (numtext.h). */
#include "core/numtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* %.*g of x, then moved by one unit of x's last printed digit towards dir until the printed value is on x's dir
 * side (once, or twice where decimal-binary conversion lands the step a hair short). */
static dpfl_num_text rounded(double x, int digits, int dir)
{
    dpfl_num_text t;
    digits = digits < 1 ? 1 : digits > 17 ? 17 : digits;
    snprintf(t.s, sizeof t.s, "%.*g", digits, x);
    if (!isfinite(x)) return t;
    for (int i = 0; i < 4; i++) {
        double v = strtod(t.s, NULL);
        if (dir > 0 ? v >= x : v <= x) return t;
        const double unit = pow(10.0, floor(log10(fabs(x))) - (digits - 1)); /* x's last digit (x != 0 here) */
        snprintf(t.s, sizeof t.s, "%.*g", digits, v + dir * unit);
    }
    snprintf(t.s, sizeof t.s, "%.17g", x); /* not reached for finite x; exact as a last resort */
    return t;
}

dpfl_num_text dpfl_num_up(double x, int digits) { return rounded(x, digits, 1); }
dpfl_num_text dpfl_num_down(double x, int digits) { return rounded(x, digits, -1); }
