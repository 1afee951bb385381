/* Distributed DP as a mechanism (include/dpfl/ddp.h): the plan, the client's encoding, the server's decoding and
 * the overflow bound.  The pieces (rotation, conditional rounding, wrap) are ddp_encode.c; the noise is the Poisson
 * table (core/poisson_table.c); the secure sum is secagg.c. */
#include "dpfl/ddp.h"
#include "dpfl/ddp_encode.h"

#include <math.h>
#include <string.h>

#define DDP_BETA 1e-3
#define DDP_MAX_TRIES 1000
#define DDP_OVERFLOW_TARGET 1e-9

static double skellam_tail(double a, double mu) /* P(X >= a), X ~ Skellam of variance mu, by Chernoff */
{
    if (a <= 0) return 1.0;
    const double x = a / mu;
    return exp(fmin(0.0, mu * (sqrt(1 + x * x) - 1) - a * asinh(x)));
}

double dpfl_ddp_overflow_bound(const dpfl_ddp_plan *p, int32_t clients, double mu_total)
{
    const double a = ldexp(1.0, p->bits - 1) - (double)clients * floor(p->d2);
    if (a <= 1) return 1.0;
    /* overflow: a sum >= 2^(b-1) or < -2^(b-1), i.e. noise >= a or <= -(a + 1) */
    return fmin(1.0, 2.0 * (double)p->d * skellam_tail(a, mu_total));
}

dpfl_status dpfl_ddp_plan_make(size_t P, double clip, double z, double inflation, int bits, int32_t cohort_max,
                               double tolerated_dropout, dpfl_ddp_plan *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (P == 0 || P > ((size_t)1 << 30))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP: %zu parameters (1 .. 2^30 supported)", P);
    if (!(clip > 0) || isinf(clip))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP needs a finite update clip > 0 (client_dp.clip = %g)", clip);
    if (!(z > 0) || isinf(z))
        return dpfl_fail(err, DPFL_EINVAL, "distributed DP needs a noise multiplier > 0 (z = %g)", z);
    if (!(inflation > 0 && inflation <= 1))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.ddp_inflation (%g) must be in (0, 1]", inflation);
    if (!(tolerated_dropout >= 0 && tolerated_dropout < 0.5))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.ddp_tolerated_dropout (%g) must be in [0, 0.5): secure "
                                           "aggregation needs a threshold above half the round", tolerated_dropout);
    if (bits != 0 && (bits < 8 || bits > 32))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.ddp_bits (%d) must be 0 (choose) or in [8, 32]", bits);
    if (cohort_max < 2) cohort_max = 2;
    size_t d = 1;
    while (d < P) d <<= 1;
    /* r = S / gamma: the smallest with rounding_bound(r) <= (1 + inflation) r (the ratio falls as r grows) */
    double lo = 1e-3, hi = 1e15;
    for (int i = 0; i < 200 && hi / lo > 1 + 1e-12; i++) {
        double mid = sqrt(lo * hi);
        if (dpfl_ddp_rounding_bound(mid, d, DDP_BETA) <= (1 + inflation) * mid) hi = mid;
        else lo = mid;
    }
    out->P = P;
    out->d = d;
    out->clip = clip;
    out->gamma = clip / hi;
    out->beta = DDP_BETA;
    out->d2 = dpfl_ddp_rounding_bound(hi, d, DDP_BETA);
    out->d1 = dpfl_skellam_l1_bound(out->d2, d);
    out->z = z;
    out->mu = (z * out->d2) * (z * out->d2);
    out->tolerated_dropout = tolerated_dropout;
    if (bits) {
        out->bits = bits;
        return DPFL_OK;
    }
    /* the noise of a full cohort, every client adding mu / threshold */
    for (int b = 8; b <= 32; b++) {
        out->bits = b;
        double mu_round = dpfl_ddp_client_variance(out, cohort_max) * cohort_max;
        if (dpfl_ddp_overflow_bound(out, cohort_max, mu_round) <= DDP_OVERFLOW_TARGET) return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "distributed DP: no modulus up to 2^32 keeps the sum of %d clients from "
                                       "wrapping (grid %g, L2 %g, noise variance %g); lower client_dp.ddp_inflation or "
                                       "the noise", cohort_max, out->gamma, out->d2, out->mu);
}

int32_t dpfl_ddp_threshold(const dpfl_ddp_plan *p, int32_t n)
{
    int32_t t = (int32_t)ceil((1 - p->tolerated_dropout) * n - 1e-9);
    return t < 2 ? 2 : t > n ? n : t;
}

double dpfl_ddp_client_variance(const dpfl_ddp_plan *p, int32_t n)
{
    return p->mu / dpfl_ddp_threshold(p, n < 2 ? 2 : n);
}

dpfl_status dpfl_ddp_noise_table(const dpfl_ddp_plan *p, int32_t n, dpfl_poisson_table **table, dpfl_error *err)
{
    const double lambda = dpfl_ddp_client_variance(p, n) / 2; /* Skellam(v) = Poisson(v / 2) - Poisson(v / 2) */
    if (*table && dpfl_poisson_table_lambda(*table) == lambda) return DPFL_OK;
    dpfl_poisson_table_free(*table);
    *table = NULL;
    return dpfl_poisson_table_make(lambda, table, err);
}

dpfl_event dpfl_ddp_event(const dpfl_ddp_plan *p, double q)
{
    return dpfl_event_skellam(q, p->d1, p->d2, p->mu, 1);
}

dpfl_status dpfl_ddp_encode(const dpfl_ddp_plan *p, const float *u, const uint8_t seed[32],
                            const dpfl_poisson_table *noise, dpfl_rng *r, double *work, int64_t *iwork, uint32_t *out,
                            double *norm, int *tries, dpfl_error *err)
{
    double ss = 0;
    for (size_t i = 0; i < p->P; i++) ss += (double)u[i] * u[i];
    const double nrm = sqrt(ss);
    if (norm) *norm = nrm;
    /* clipped to S (the client's job: the server never sees the update) and divided by the grid step; an update that
     * is not finite (diverged local training) is sent as zero: any vector within the clip keeps the guarantee */
    const double s = (nrm > p->clip ? p->clip / nrm : 1.0) / p->gamma;
    for (size_t i = 0; i < p->P; i++) work[i] = isfinite(nrm) ? u[i] * s : 0.0;
    for (size_t i = p->P; i < p->d; i++) work[i] = 0;
    dpfl_status st = dpfl_ddp_rotate(work, p->d, seed, 0, err);
    if (st) return st;
    if ((st = dpfl_ddp_round(r, work, p->d, p->d2, DDP_MAX_TRIES, iwork, tries, err))) return st;
    if (noise) dpfl_poisson_table_add_skellam(noise, r, iwork, p->d);
    dpfl_ddp_wrap(iwork, p->d, p->bits, out);
    return DPFL_OK;
}

dpfl_status dpfl_ddp_decode(const dpfl_ddp_plan *p, const uint32_t *sum, const uint8_t seed[32], int64_t *iwork,
                            double *work, float scale, float *out, dpfl_error *err)
{
    dpfl_ddp_unwrap(sum, p->d, p->bits, iwork);
    for (size_t i = 0; i < p->d; i++) work[i] = (double)iwork[i];
    dpfl_status st = dpfl_ddp_rotate(work, p->d, seed, 1, err);
    if (st) return st;
    const double g = p->gamma * scale;
    for (size_t i = 0; i < p->P; i++) out[i] = (float)(work[i] * g);
    return DPFL_OK;
}
