/* Shared test includes: cmocka plus a relative-tolerance assertion. */
#ifndef DPFL_TESTUTIL_H
#define DPFL_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* |got - want| <= rel * max(|want|, tiny) */
#define assert_close(got, want, rel)                                                                   \
    do {                                                                                               \
        double g_ = (got), w_ = (want), r_ = (rel);                                                    \
        double tol_ = r_ * (fabs(w_) > 1e-300 ? fabs(w_) : 1e-300);                                    \
        if (!(fabs(g_ - w_) <= tol_)) {                                                                \
            print_error("%s = %.10g, expected %.10g (rel tol %g)\n", #got, g_, w_, r_);                \
            fail();                                                                                    \
        }                                                                                              \
    } while (0)
#endif
