/* Exact sampling of the discrete Gaussian N_Z(0, sigma^2) (Canonne, Kamath, Steinke 2020, Algorithms 1-3):
 * only integer arithmetic and uniform integers from the CSPRNG, so no floating-point rounding can leak through
 * the low-order bits of the noise (Mironov 2012).  sigma^2 is an integer here (callers round it UP).
 *
 * Why every intermediate fits (sigma^2 = s <= 2^62, the largest the callers accept):
 *   t = floor(sqrt(s)) + 1 <= 2^31 + 1, so t^2 < 2^63 and the acceptance denominator D = 2 s t^2 < 2^126;
 *   a discrete Laplace draw y has |y| < 2^63, so |y| t < 2^95 and diff = | |y| t - s | < 2^95;
 *   diff^2 < 2^190 is formed in 256 bits (two 128-bit halves) and divided by D by binary long division, whose
 *   running remainder stays below 2D < 2^127 before each shift.
 * Bernoulli(exp(-x)) for x = Q + R/D is Bernoulli(exp(-1)) Q times and then Bernoulli(exp(-R/D)); the last is
 * CKS Algorithm 1, whose step Bernoulli(gamma / k) is one draw below D k while D k < 2^127, else Bernoulli(R/D)
 * and Bernoulli(1/k) (the previous code formed diff^2 and D k in 128 bits regardless, and they wrapped for large
 * sigma: at sigma^2 ~ 4e18 the tails were 5.5x too heavy, kurtosis 3.65-4.3). */
#include "dpfl/core.h"

typedef unsigned __int128 u128;

/* uniform in [0, n), 1 <= n < 2^127 */
static u128 below128(dpfl_rng *r, u128 n)
{
    if (n <= (u128)UINT64_MAX) return dpfl_rng_below(r, (uint64_t)n);
    u128 limit = ~(u128)0 - (~(u128)0) % n;
    u128 v;
    do v = ((u128)dpfl_rng_u64(r) << 64) | dpfl_rng_u64(r);
    while (v >= limit);
    return v % n;
}

/* Bernoulli(exp(-R/D)) for 0 <= R <= D < 2^127 (CKS Algorithm 1: the number of successive successes of
 * Bernoulli(gamma / k), k = 1, 2, ..., is even with probability exp(-gamma)) */
static int bern_exp_frac(dpfl_rng *r, u128 R, u128 D)
{
    const u128 lim = ((u128)1 << 127) - 1;
    for (uint64_t k = 1;; k++) {
        /* Bernoulli(R / (D k)): one draw below D k while that fits, else Bernoulli(R/D) and Bernoulli(1/k) */
        int ok = D <= lim / k ? below128(r, D * k) < R : below128(r, D) < R && dpfl_rng_below(r, k) == 0;
        if (!ok) return (int)(k & 1);
    }
}

/* Bernoulli(exp(-(Q + R/D))), Q given as a 256-bit number (qhi, qlo) */
static int bern_exp(dpfl_rng *r, u128 qhi, u128 qlo, u128 R, u128 D)
{
    for (u128 i = 0; qhi != 0 || i < qlo; i++) /* stops at the first failure: 1.6 iterations on average */
        if (!bern_exp_frac(r, 1, 1)) return 0;
    return bern_exp_frac(r, R, D);
}

/* discrete Laplace with scale t: P(x) proportional to exp(-|x| / t) (CKS Algorithm 2) */
static int64_t discrete_laplace(dpfl_rng *r, uint64_t t)
{
    for (;;) {
        uint64_t u = dpfl_rng_below(r, t);
        if (!bern_exp_frac(r, u, t)) continue;
        uint64_t v = 0;
        while (bern_exp_frac(r, 1, 1)) v++;
        int neg = (int)(dpfl_rng_u64(r) & 1);
        if (neg && u == 0 && v == 0) continue;
        int64_t z = (int64_t)(u + t * v);
        return neg ? -z : z;
    }
}

static uint64_t isqrt(uint64_t s)
{
    uint64_t x = (uint64_t)__builtin_sqrt((double)s);
    while (x * x > s) x--;
    while ((x + 1) * (x + 1) <= s) x++;
    return x;
}

/* x^2 for x < 2^96 as 256 bits (hi, lo) */
static void square256(u128 x, u128 *hi, u128 *lo)
{
    u128 xh = x >> 64, xl = (uint64_t)x;
    u128 low = xl * xl, cross = 2 * xh * xl; /* xh < 2^32: cross < 2^97 */
    u128 add = cross << 64;
    *hi = xh * xh + (cross >> 64);
    *lo = low + add;
    if (*lo < low) (*hi)++;
}

/* (hi, lo) = q D + rem, D < 2^126: quotient (qhi, qlo) and remainder, by binary long division */
static void divmod256(u128 hi, u128 lo, u128 D, u128 *qhi, u128 *qlo, u128 *rem)
{
    u128 rr = 0;
    *qhi = *qlo = 0;
    for (int bit = 255; bit >= 0; bit--) {
        u128 b = bit >= 128 ? (hi >> (bit - 128)) & 1 : (lo >> bit) & 1;
        rr = (rr << 1) | b; /* rr < 2D < 2^127 before the shift */
        if (rr >= D) {
            rr -= D;
            if (bit >= 128) *qhi |= (u128)1 << (bit - 128);
            else *qlo |= (u128)1 << bit;
        }
    }
    *rem = rr;
}

int64_t dpfl_rng_discrete_gaussian(dpfl_rng *r, uint64_t sigma2)
{
    DPFL_ASSERT(sigma2 >= 1 && sigma2 <= (uint64_t)1 << 62);
    const uint64_t t = isqrt(sigma2) + 1;
    const u128 s = sigma2, D = 2 * s * (u128)t * t;
    for (;;) {
        int64_t y = discrete_laplace(r, t);
        u128 ay = (u128)(y < 0 ? -(u128)y : (u128)y);
        u128 a = ay * t;
        u128 diff = a > s ? a - s : s - a;
        u128 qhi = 0, qlo, rem;
        if (diff >> 64 == 0) { /* diff^2 < 2^128 */
            u128 n = diff * diff;
            qlo = n < D ? 0 : n / D; /* the usual case needs no 128-bit division */
            rem = n < D ? n : n % D;
        } else {
            u128 nhi, nlo;
            square256(diff, &nhi, &nlo);
            divmod256(nhi, nlo, D, &qhi, &qlo, &rem);
        }
        if (bern_exp(r, qhi, qlo, rem, D)) return y;
    }
}
