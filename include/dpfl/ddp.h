/* Distributed DP (DDP) as a mechanism (src/mech/ddp.c): what each client does to its update before secure
 * aggregation, what the server does to the modular sum it learns, and the plan that fixes every constant of a run.
 *
 *   client:  clip the update to L2 <= S; pad to d = 2^k; divide by the grid step gamma; rotate (randomized
 *            Hadamard, the round's public seed); round to integers conditionally (L2 <= d2); add Skellam noise of
 *            variance mu / t; wrap modulo 2^bits                                           -> secure aggregation
 *   server:  the sum modulo 2^bits of the clients that survived; centred decoding; inverse rotation; times gamma
 *
 * The secure aggregation threshold t of a round with n clients is max(2, ceil((1 - f) n)), f the tolerated
 * dropout fraction, and a round is released only with t or more survivors, so every released sum carries Skellam
 * noise of total variance >= mu: the accountant's event is dpfl_event_skellam(q, d1, d2, mu) under zero-out
 * adjacency (a client's data replaced by data whose update is zero; it still takes part and adds its noise). */
#ifndef DPFL_DDP_H
#define DPFL_DDP_H

#include "dpfl/core.h"
#include "dpfl/privacy.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

typedef struct {
    size_t P, d;      /* update floats; padded dimension, the power of two >= P */
    double clip;      /* S: L2 bound of an update, in the model's units */
    double gamma;     /* grid step: an update is divided by gamma before rounding (r = S / gamma) */
    double beta;      /* conditional rounding: probability that one unconditional rounding exceeds d2 */
    double d2, d1;    /* L2 and L1 sensitivities in grid units: the rounding bound and the L1 bound it implies */
    double z;         /* noise multiplier sqrt(mu) / d2 (about the Gaussian z of the same noise in model units) */
    double mu;        /* Skellam variance that every released round's sum carries at least (grid units^2) */
    double tolerated_dropout; /* f */
    int bits;         /* sums modulo 2^bits */
} dpfl_ddp_plan;

/* The plan for P floats clipped to S, noise multiplier z, rounding inflation d2 / r - 1 = inflation (e.g. 0.01:
 * the rounding adds 1% to the sensitivity), tolerated dropout fraction f in [0, 0.5).  bits = 0 chooses the smallest
 * modulus in [8, 32] whose overflow bound (dpfl_ddp_overflow_bound) at cohort_max clients is <= 1e-9; an error
 * names the parameters when none is. */
dpfl_status dpfl_ddp_plan_make(size_t P, double clip, double z, double inflation, int bits, int32_t cohort_max,
                               double tolerated_dropout, dpfl_ddp_plan *out, dpfl_error *err);
/* Secure aggregation threshold for a round of n clients (n >= 2): max(2, ceil((1 - f) n)). */
int32_t dpfl_ddp_threshold(const dpfl_ddp_plan *p, int32_t n);
/* Each client's Skellam variance in a round of n clients: mu / threshold(n). */
double dpfl_ddp_client_variance(const dpfl_ddp_plan *p, int32_t n);
/* The Poisson table each client of a round of n draws its Skellam share from: a Skellam of variance v is the
 * difference of two Poisson(v / 2) draws, so lambda = dpfl_ddp_client_variance / 2.  *table (NULL or a previous
 * round's) is kept while its lambda is the one needed, else freed and replaced (NULL on an error). */
dpfl_status dpfl_ddp_noise_table(const dpfl_ddp_plan *p, int32_t n, dpfl_poisson_table **table, dpfl_error *err);
/* The round's accounting event (zero-out; q the client's probability of being in the round). */
dpfl_event dpfl_ddp_event(const dpfl_ddp_plan *p, double q);
/* An upper bound on the probability that some coordinate of the sum of `clients` rounded vectors plus Skellam
 * noise of total variance mu_total leaves [-2^(bits-1), 2^(bits-1)) and wraps: each rounded vector's coordinates
 * are within d2, the noise's tails by the Chernoff bound exp(mu (cosh t - 1) - t a), a union over the d
 * coordinates and both signs. */
double dpfl_ddp_overflow_bound(const dpfl_ddp_plan *p, int32_t clients, double mu_total);

/* One client's encoding.  u: P floats (not modified); seed: the round's public rotation seed; noise: a Poisson
 * table of lambda = client variance / 2 (NULL: no noise, for tests only); r: the client's private stream;
 * work: d doubles, iwork: d int64, out: d values < 2^bits.  *norm (may be NULL) = ||u|| before clipping (not
 * finite: u was not, and zero was encoded in its place), *tries = roundings drawn. */
dpfl_status dpfl_ddp_encode(const dpfl_ddp_plan *p, const float *u, const uint8_t seed[32],
                            const dpfl_poisson_table *noise, dpfl_rng *r, double *work, int64_t *iwork, uint32_t *out,
                            double *norm, int *tries, dpfl_error *err);
/* The server's decoding of a modular sum: out[i] = scale * gamma * (inverse rotation of the centred sum)[i], i < P. */
dpfl_status dpfl_ddp_decode(const dpfl_ddp_plan *p, const uint32_t *sum, const uint8_t seed[32], int64_t *iwork,
                            double *work, float scale, float *out, dpfl_error *err);

#pragma GCC visibility pop

#endif
