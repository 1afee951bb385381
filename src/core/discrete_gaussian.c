/* Exact sampling of the discrete Gaussian N_Z(0, sigma^2) (Canonne, Kamath, Steinke 2020, Algorithms 1-3):
 * only integer arithmetic and uniform integers from the CSPRNG, so no floating-point rounding can leak through
 * the low-order bits of the noise (Mironov 2012).  sigma^2 is an integer here (callers round it UP). */
#include "dpfl/core.h"

typedef unsigned __int128 u128;

/* uniform in [0, n), n >= 1 */
static u128 below128(dpfl_rng *r, u128 n)
{
    if (n <= (u128)UINT64_MAX) return dpfl_rng_below(r, (uint64_t)n);
    u128 limit = ~(u128)0 - (~(u128)0) % n;
    u128 v;
    do v = ((u128)dpfl_rng_u64(r) << 64) | dpfl_rng_u64(r);
    while (v >= limit);
    return v % n;
}

/* Bernoulli(exp(-num/den)) for num/den in [0, 1] */
static int bern_exp_frac(dpfl_rng *r, u128 num, u128 den)
{
    uint64_t k = 1;
    while (below128(r, den * k) < num) k++;
    return (int)(k & 1);
}

/* Bernoulli(exp(-num/den)) for any num/den >= 0 */
static int bern_exp(dpfl_rng *r, u128 num, u128 den)
{
    while (num > den) {
        if (!bern_exp_frac(r, 1, 1)) return 0;
        num -= den;
    }
    return bern_exp_frac(r, num, den);
}

/* discrete Laplace with scale t: P(x) proportional to exp(-|x| / t) */
static int64_t discrete_laplace(dpfl_rng *r, uint64_t t)
{
    for (;;) {
        uint64_t u = dpfl_rng_below(r, t);
        if (!bern_exp(r, u, t)) continue;
        uint64_t v = 0;
        while (bern_exp(r, 1, 1)) v++;
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

int64_t dpfl_rng_discrete_gaussian(dpfl_rng *r, uint64_t sigma2)
{
    DPFL_ASSERT(sigma2 >= 1 && sigma2 <= (uint64_t)1 << 62);
    uint64_t t = isqrt(sigma2) + 1;
    for (;;) {
        int64_t y = discrete_laplace(r, t);
        u128 ay = (u128)(y < 0 ? -y : y);
        u128 a = ay * t, s = sigma2;
        u128 diff = a > s ? a - s : s - a;
        if (bern_exp(r, diff * diff, (u128)2 * s * t * t)) return y;
    }
}
