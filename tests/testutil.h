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

/* The suites run from the root of a dpfl checkout: unless DPFL_DATA names another data folder, they use the
 * checkout's data/ (heart-disease/, cache/mnist/), as `make test` does.  The library itself never looks in the
 * current directory (include/dpfl/data.h). */
#include <stdlib.h>
__attribute__((constructor)) static void dpfl_test_data_folder(void)
{
    const char *e = getenv("DPFL_DATA");
    if (!e || !*e) setenv("DPFL_DATA", "data", 1);
}

/* |got - want| <= rel * max(|want|, tiny) */
/* Test-only hook (src/mech/noise.c built with -DDPFL_TEST_HOOKS, linked into the test binaries alone): divides every
 * floating-point Gaussian noise std while the accountants charge the full noise. */
extern double dpfl_test_noise_divisor;

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
