/* Distributed DP's client-side encoding (Kairouz, Liu, Steinke, "The Distributed Discrete Gaussian Mechanism",
 * ICML 2021; Agarwal, Kairouz, Liu, "The Skellam Mechanism", NeurIPS 2021), the pieces before the noise and the
 * secure sum (src/mech/ddp_encode.c):
 *   rotate   randomized Hadamard transform with signs from a shared public seed of the round, so that a clipped
 *            vector's mass is spread evenly over the coordinates (its inverse for the server)
 *   round    conditional randomized rounding to integers, repeated until the rounded vector's L2 norm is within
 *            the bound that the accountant is given
 *   wrap     values modulo 2^bits for secure aggregation, and the centred decoding of a sum.
 * The mechanism that uses them (plan, encoding, decoding) is include/dpfl/ddp.h; the noise is dpfl_poisson_table
 * (core.h), the accountant dpfl_event_skellam (privacy.h). */
#ifndef DPFL_DDP_ENCODE_H
#define DPFL_DDP_ENCODE_H

#include "dpfl/core.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* x (d values, d a power of two) <- H D x / sqrt(d) (inverse = 0) or D H x / sqrt(d) (inverse = 1), H the
 * Walsh-Hadamard matrix and D the diagonal of random signs drawn from a ChaCha20 stream keyed by seed (public,
 * one per round, the same for every client).  Orthogonal: the inverse undoes the forward exactly up to rounding. */
dpfl_status dpfl_ddp_rotate(double *x, size_t d, const uint8_t seed[32], int inverse, dpfl_error *err);

/* The L2 bound that conditional rounding enforces for a vector of norm <= c in d dimensions (Kairouz, Liu,
 * Steinke 2021, conditional randomized rounding): min(c^2 + d/4 + sqrt(2 ln(1/beta)) (c + sqrt(d)/2),
 * (c + sqrt(d))^2), square-rooted.  A rounding passes it with probability >= 1 - beta. */
double dpfl_ddp_rounding_bound(double c, size_t d, double beta);

/* out[i] = floor(x[i]) + Bernoulli(x[i] - floor(x[i])) (unbiased), drawn again until ||out||_2 <= bound; an error
 * after max_tries draws (the bound fails only with probability beta per draw). */
dpfl_status dpfl_ddp_round(dpfl_rng *r, const double *x, size_t d, double bound, int max_tries, int64_t *out,
                           int *tries, dpfl_error *err);

/* out[i] = v[i] mod 2^bits (1 <= bits <= 32); and the centred decoding of a sum modulo 2^bits: values in
 * [-2^(bits-1), 2^(bits-1)). */
void dpfl_ddp_wrap(const int64_t *v, size_t d, int bits, uint32_t *out);
void dpfl_ddp_unwrap(const uint32_t *v, size_t d, int bits, int64_t *out);

#pragma GCC visibility pop

#endif
