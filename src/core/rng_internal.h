/* Internal to the library and its tests. */
#ifndef DPFL_RNG_INTERNAL_H
#define DPFL_RNG_INTERNAL_H

#include "core/cpu.h"
#include "core/parallel.h"
#include "dpfl/core.h"

/* dpfl_rng_add_gaussian_chunked computed by the portable code alone, never the vector code: the tests check that
 * both give the same bits. */
void dpfl_rng_add_gaussian_chunked_portable(dpfl_rng *r, float *x, size_t n, double sigma, float scale,
                                            int nthreads);

/* dpfl_rng_add_gaussian_chunked(r, x, n, sigma, scale, t) with its chunks run on the threads of par (t =
 * dpfl_par_size(par)) instead of the noise helpers: the same bits.  For callers whose pool has just worked and is
 * still awake (a workspace after its gradient), so that no third set of threads competes for the cores. */
DPFL_HIDDEN void dpfl_rng_add_gaussian_par(dpfl_rng *r, float *x, size_t n, double sigma, float scale, dpfl_par *par);

#endif
