/* Privacy numbers printed with few digits, on the safe side: "where dpfl rounds, it rounds towards more privacy
 * loss" (docs/privacy.md), so an epsilon, a delta or a GDP mu is printed rounded up, and a value a user would take
 * back as a setting that must not be exceeded (a safe sampling rate) rounded down; a calibrated noise multiplier
 * rounded up.  JSON output carries full precision and needs none of this. */
#ifndef DPFL_CORE_NUMTEXT_H
#define DPFL_CORE_NUMTEXT_H

#include "core/cpu.h"

typedef struct {
    char s[40];
} dpfl_num_text;

/* x with `digits` significant digits (printf's %g, 1 <= digits <= 17), the printed value >= x (dpfl_num_up) or
 * <= x (dpfl_num_down); inf and nan as %g prints them.  Use as printf("%s", dpfl_num_up(eps, 6).s). */
DPFL_HIDDEN dpfl_num_text dpfl_num_up(double x, int digits);
DPFL_HIDDEN dpfl_num_text dpfl_num_down(double x, int digits);

#endif
