/* Poisson(lambda) by inversion of a 128-bit table, for the large lambda of distributed DP's Skellam noise, where
 * the exact rational sampler (poisson.c) costs O(lambda) draws and a round would need ~10^7 of them per client.
 *
 * The table: weights w_k = pmf(k) / pmf(m) relative to the mode m = floor(lambda), from the recurrences
 * w_{k+1} = w_k lambda / (k + 1) and w_{k-1} = w_k k / lambda in quadruple precision (113-bit significand), over
 * [L, K], the values whose weight is at least 2^-120; the cumulative sums S_k / S_K as 128-bit fixed-point numbers.
 * A draw takes a 128-bit uniform integer u from the CSPRNG and returns the first k with u < C_k (a guide table on
 * the top 12 bits finds the start of the scan).  The output's law differs from Poisson(lambda) in total variation
 * by at most
 *   tails / S_K                                 (the mass outside [L, K], bounded geometrically: beyond K the ratio
 *                                                of consecutive weights is <= lambda / (K + 1) < 1, below L it is
 *                                                <= L / lambda < 1)
 *   + n ((3n + 4) 2^-112 + 2^-127)              (rounding: each w_k carries <= 2 |k - m| relative errors of 2^-113,
 *                                                each partial sum <= n more, the quotient and the fixed-point floor
 *                                                one each; n = K - L + 1 entries)
 * which dpfl_poisson_table_tv reports (about 1e-25 at lambda = 10^6).  The DDP mechanism turns it into an additive
 * delta: a coupling with exact Poisson draws fails with probability <= draws x tv (docs/privacy.md).  The 2^-120
 * cut is far below what any observer could see, and the output is an integer: there is no floating-point value
 * whose low bits could leak anything (the attack of Mironov 2012 needs a continuous output). */
#include "dpfl/core.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SIZEOF_FLOAT128__)
typedef __float128 qreal;
#elif LDBL_MANT_DIG >= 113
typedef long double qreal;
#else
#error "poisson_table.c needs a floating-point type with a 113-bit significand (__float128 or a quad long double)"
#endif

typedef unsigned __int128 u128;

#define GUIDE_BITS 12
#define GUIDE (1u << GUIDE_BITS)
#define LAMBDA_MAX 1e9

struct dpfl_poisson_table {
    double lambda, tv;
    uint64_t first; /* the value of entry 0 (L) */
    size_t n;       /* entries, the last one taking every u above the one before */
    u128 *cdf;      /* cdf[i] = floor(2^128 S_{L+i} / S_K); cdf[n - 1] unused (the catch-all) */
    uint32_t guide[GUIDE];
};

static u128 to_fixed(qreal x) /* floor(2^128 x), 0 <= x; 2^128 - 1 from x >= 1 (a sum rounded up to the total) */
{
    if (x >= 1) return ~(u128)0;
    const qreal two64 = (qreal)18446744073709551616.0;
    qreal a = x * two64;
    uint64_t hi = (uint64_t)a;
    uint64_t lo = (uint64_t)((a - (qreal)hi) * two64);
    return ((u128)hi << 64) | lo;
}

dpfl_status dpfl_poisson_table_make(double lambda, dpfl_poisson_table **out, dpfl_error *err)
{
    *out = NULL;
    if (!(lambda > 0 && lambda <= LAMBDA_MAX))
        return dpfl_fail(err, DPFL_EINVAL, "Poisson table: lambda (%g) must be in (0, %g]", lambda, LAMBDA_MAX);
    const qreal lq = (qreal)lambda, cut = (qreal)ldexp(1.0, -120);
    const uint64_t m = (uint64_t)floor(lambda);
    /* the extent: up from the mode while the weight is >= 2^-120, then down */
    uint64_t K = m, L = m;
    qreal w = 1;
    for (;;) {
        qreal nw = w * lq / (qreal)(K + 1);
        if (nw < cut) break;
        w = nw;
        K++;
    }
    const qreal wK = w;
    w = 1;
    while (L > 0) {
        qreal nw = w * (qreal)L / lq;
        if (nw < cut) break;
        w = nw;
        L--;
    }
    const qreal wL = w;
    const size_t n = (size_t)(K - L + 1);
    dpfl_poisson_table *t = calloc(1, sizeof *t);
    qreal *wt = malloc(n * sizeof *wt);
    if (t) t->cdf = malloc(n * sizeof *t->cdf);
    if (!t || !wt || !t->cdf) {
        if (t) free(t->cdf);
        free(t);
        free(wt);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (Poisson table of %zu entries, lambda %g)", n, lambda);
    }
    wt[m - L] = 1;
    for (uint64_t k = m; k < K; k++) wt[k + 1 - L] = wt[k - L] * lq / (qreal)(k + 1);
    for (uint64_t k = m; k > L; k--) wt[k - 1 - L] = wt[k - L] * (qreal)k / lq;
    qreal S = 0;
    for (size_t i = 0; i < n; i++) {
        S += wt[i];
        wt[i] = S; /* now the partial sums */
    }
    for (size_t i = 0; i < n; i++) t->cdf[i] = i + 1 < n ? to_fixed(wt[i] / S) : ~(u128)0;
    free(wt);
    /* the tails beyond the table, geometric bounds */
    double rho = lambda / (double)(K + 1), tails = (double)wK * rho / (1 - rho);
    if (L > 0) {
        double sig = (double)L / lambda;
        tails += (double)wL * sig / (1 - sig);
    }
    const double dn = (double)n;
    t->tv = tails / (double)S + dn * ((3 * dn + 4) * ldexp(1.0, -112) + ldexp(1.0, -127));
    t->lambda = lambda;
    t->first = L;
    t->n = n;
    size_t i = 0;
    for (uint32_t b = 0; b < GUIDE; b++) { /* guide[b]: the first entry that a u in bucket b can end on */
        const u128 lo = (u128)b << (128 - GUIDE_BITS);
        while (i + 1 < n && t->cdf[i] <= lo) i++;
        t->guide[b] = (uint32_t)i;
    }
    *out = t;
    return DPFL_OK;
}

void dpfl_poisson_table_free(dpfl_poisson_table *t)
{
    if (!t) return;
    free(t->cdf);
    free(t);
}

double dpfl_poisson_table_lambda(const dpfl_poisson_table *t) { return t->lambda; }
double dpfl_poisson_table_tv(const dpfl_poisson_table *t) { return t->tv; }

uint64_t dpfl_poisson_table_draw(const dpfl_poisson_table *t, dpfl_rng *r)
{
    const uint64_t hi = dpfl_rng_u64(r), lo = dpfl_rng_u64(r);
    const u128 u = ((u128)hi << 64) | lo;
    size_t i = t->guide[hi >> (64 - GUIDE_BITS)];
    while (i + 1 < t->n && t->cdf[i] <= u) i++;
    return t->first + i;
}

void dpfl_poisson_table_add_skellam(const dpfl_poisson_table *t, dpfl_rng *r, int64_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t a = dpfl_poisson_table_draw(t, r), b = dpfl_poisson_table_draw(t, r);
        x[i] += (int64_t)a - (int64_t)b;
    }
}
