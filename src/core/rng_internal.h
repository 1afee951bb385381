/* Internal to the library and its tests. */
#ifndef DPFL_RNG_INTERNAL_H
#define DPFL_RNG_INTERNAL_H

#include "dpfl/core.h"

/* dpfl_rng_add_gaussian_chunked computed by the portable code alone, never the vector code: the tests check that
 * both give the same bits. */
void dpfl_rng_add_gaussian_chunked_portable(dpfl_rng *r, float *x, size_t n, double sigma, float scale,
                                            int nthreads);

#endif
