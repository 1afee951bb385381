/* Internal pieces of the PLD accountant (pld.c, pld_lower.c). */
#ifndef DPFL_PLD_INTERNAL_H
#define DPFL_PLD_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

/* The optimistic discretization of one Poisson-subsampled Gaussian step (q = 1: the Gaussian) in direction dir
 * (0 remove, 1 add) on the grid k h, k = k0 .. k0 + m - 1: out[k - k0] gets P-mass whose loss is >= k h (losses
 * only moved down; mass below (k0 - 1/2) h dropped, mass above the top placed on it).  See pld_lower.c. */
void dpfl_pld_lower_pmf(double q, double z, int dir, double h, int64_t k0, size_t m, double *out);
#endif
