/* Noise for releases: floating-point Gaussian (ziggurat on ChaCha20, chunked so that the bits do not depend on
 * the thread count) and, in secure mode, exact discrete Gaussian noise on a grid (Canonne, Kamath, Steinke 2020).
 *
 * Secure mode: the vector is rounded to the grid g = sens / (1000 sqrt(P)).  Rounding moves each coordinate by at
 * most g/2, so neighbouring rounded vectors differ by at most sens/g + sqrt(P) = 1001 sqrt(P) grid units; the
 * noise is z times that, i.e. z holds for a sensitivity 0.1% above the clip.  The discrete Gaussian's Renyi
 * divergence at integer orders is bounded by the continuous one's (CKS; their tau term is below 1e-300 at these
 * sigmas), so the accountant uses the sampled-Gaussian RDP at integer orders.
 *
 * Counts: an integer-valued query noised with the exact discrete Gaussian and no grid, its own event kind
 * (DPFL_EV_DISCRETE_GAUSSIAN: CKS's 1/(2 z^2)-concentrated DP, unsampled). */
#include "dpfl/mech.h"

#include <math.h>

/* The noise divisor, a deliberately broken mechanism for the tests of `dpfl audit` (tests/test_audit.c): it divides
 * the std of every floating-point Gaussian noise drawn here while every accountant still charges the full noise.
 * It exists only in the copy of this file that the test binaries link (built with -DDPFL_TEST_HOOKS, never part of
 * libdpfl.a, libdpfl.so or the dpfl tool: see the Makefile); there the tests set dpfl_test_noise_divisor.  In the
 * library the divisor is the constant 1: nothing in the environment or the API can change a mechanism's noise. */
#ifdef DPFL_TEST_HOOKS
double dpfl_test_noise_divisor = 1.0;
static double test_noise_divisor(void)
{
    return dpfl_test_noise_divisor > 0 ? dpfl_test_noise_divisor : 1.0;
}
#else
static inline double test_noise_divisor(void)
{
    return 1.0;
}
#endif

void dpfl_mech_gaussian(dpfl_rng *r, float *v, size_t P, double z, double sens, float scale, int threads)
{
    dpfl_rng_add_gaussian_chunked(r, v, P, z > 0 ? z * sens / test_noise_divisor() : 0.0, scale, threads);
}

void dpfl_mech_gaussian_ws(dpfl_nn_ws *ws, dpfl_rng *r, float *v, size_t P, double z, double sens, float scale)
{
    dpfl_nn_ws_add_gaussian(ws, r, v, P, z > 0 ? z * sens / test_noise_divisor() : 0.0, scale);
}

/* sigma^2 = z^2 1001^2 P grid units, rounded UP: the product is formed as z^2 * 1002001 * P (three roundings, each
 * at most 2^-53 relative, and the grid step's own at most ~6 ulps) and raised by a relative 2^-49 before the ceiling,
 * so it is never below the exact value.  (ceil((z 1001 sqrt(P))^2) was not: z = 2500, P = 600,000 gave 512 below
 * the exact 3,757,503,750,000,000,000.) */
double dpfl_mech_discrete_sigma2(size_t P, double z)
{
    double v = z * z * 1002001.0 * (double)P;
    return ceil(v * (1.0 + ldexp(1.0, -49)));
}

/* the grid step of dpfl_mech_discrete_gaussian */
static double grid_step(size_t P, double sens)
{
    return sens / (1000.0 * sqrt((double)P));
}

double dpfl_mech_discrete_std(size_t P, double z, double sens)
{
    return P > 0 ? z * (sens + sqrt((double)P) * grid_step(P, sens)) : 0.0;
}

int dpfl_mech_discrete_in_range(size_t P, double z)
{
    double s2 = dpfl_mech_discrete_sigma2(P, z);
    return isfinite(s2) && s2 <= ldexp(1.0, 62); /* the exact sampler's range */
}

void dpfl_mech_discrete_gaussian(dpfl_rng *r, float *v, size_t P, double z, double sens, float scale)
{
    DPFL_ASSERT(dpfl_mech_discrete_in_range(P, z));
    const double g = grid_step(P, sens);
    const uint64_t s2 = (uint64_t)dpfl_mech_discrete_sigma2(P, z); /* rounded up: never less noise */
    for (size_t i = 0; i < P; i++) {
        int64_t q = llround((double)v[i] / g);
        if (s2 > 0) q += dpfl_rng_discrete_gaussian(r, s2);
        v[i] = (float)(g * (double)q) * scale;
    }
}

dpfl_status dpfl_mech_discrete_gaussian_counts(dpfl_rng *r, int64_t *v, size_t n, double z, double sens, dpfl_event *ev,
                                               dpfl_error *err)
{
    if (!(z >= 0) || isinf(z) || !(sens >= 0) || isinf(sens))
        return dpfl_fail(err, DPFL_EINVAL, "discrete Gaussian: z (%g) and the sensitivity (%g) must be finite and >= 0",
                         z, sens);
    const double want = (z * sens) * (z * sens);
    const double s2 = ceil(want * (1.0 + ldexp(1.0, -49))); /* rounded up, as dpfl_mech_discrete_sigma2 */
    if (!(s2 <= ldexp(1.0, 62)))
        return dpfl_fail(err, DPFL_EINVAL, "discrete Gaussian: variance %g is beyond the exact sampler's 2^62", want);
    for (size_t i = 0; s2 > 0 && i < n; i++) v[i] += dpfl_rng_discrete_gaussian(r, (uint64_t)s2);
    *ev = dpfl_event_noise(DPFL_EV_DISCRETE_GAUSSIAN, z, 1);
    return DPFL_OK;
}
