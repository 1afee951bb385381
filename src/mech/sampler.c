/* Batch and client samplers.  Every draw comes from the caller's ChaCha20 stream, so a seeded run is reproducible
 * and an unseeded one unpredictable; what they sample is what the events of dpsgd.c and round.c charge.
 * Cross-device cohorts: PrivateFL (Yang et al. 2023), Table 11 -- each client takes part in exactly r rounds. */
#include "dpfl/mech.h"

#include <math.h>

int32_t dpfl_mech_poisson_batch(dpfl_rng *r, const int32_t *idx, int32_t n, double q, int32_t *out)
{
    int32_t b = 0;
    for (int32_t i = 0; i < n; i++)
        if (dpfl_rng_bernoulli(r, q)) out[b++] = idx[i];
    return b;
}

int32_t dpfl_mech_poisson_batch_rates(dpfl_rng *r, const int32_t *idx, int32_t n, const double *p, int32_t *out)
{
    int32_t b = 0;
    for (int32_t i = 0; i < n; i++)
        if (dpfl_rng_bernoulli(r, p[idx[i]])) out[b++] = idx[i]; /* p = 0: never in, and no draw */
    return b;
}

/* partial Fisher-Yates over a copy: the first B entries are a uniform B-subset (in random order) */
static void partial_shuffle(dpfl_rng *r, int32_t *a, int32_t n, int32_t B)
{
    for (int32_t i = 0; i < B; i++) {
        int32_t j = i + (int32_t)dpfl_rng_below(r, (uint64_t)(n - i));
        int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

int32_t dpfl_mech_fixed_batch(dpfl_rng *r, const int32_t *idx, int32_t n, int32_t B, int32_t *out)
{
    DPFL_ASSERT(B >= 0 && B <= n);
    for (int32_t i = 0; i < n; i++) out[i] = idx[i];
    partial_shuffle(r, out, n, B);
    return B;
}

static void sort_ascending(int32_t *a, int32_t m) /* insertion sort: m is a round's clients */
{
    for (int32_t i = 1; i < m; i++) {
        int32_t v = a[i], j = i - 1;
        while (j >= 0 && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

dpfl_mech_clients dpfl_mech_clients_make(dpfl_client_sampling kind, int32_t K, double rate, int32_t m)
{
    dpfl_mech_clients d = {kind, K, rate, m, 1.0, (double)K};
    if (kind == DPFL_SAMPLE_POISSON) {
        d.q = rate;
        d.denom = rate * K;
    } else if (kind == DPFL_SAMPLE_FIXED) {
        d.q = (double)m / K;
        d.denom = (double)m;
    } else if (kind == DPFL_SAMPLE_CROSS_DEVICE) {
        d.m = (int32_t)fmax(1.0, fmin((double)K, round(rate * K))); /* config validation: rate K divides K */
        d.rate = (double)d.m / K;
        d.q = 1.0; /* no amplification: who takes part is a shuffle, not independent sampling */
        d.denom = (double)d.m;
    }
    return d;
}

int32_t dpfl_mech_clients_pass(const dpfl_mech_clients *d)
{
    return d->kind == DPFL_SAMPLE_CROSS_DEVICE && d->m > 0 ? d->K / d->m : 1;
}

int64_t dpfl_mech_clients_stream(const dpfl_mech_clients *d, int32_t round)
{
    const int32_t E = dpfl_mech_clients_pass(d);
    return (int64_t)((round - 1) / E) * E + 1;
}

int dpfl_mech_clients_charged(const dpfl_mech_clients *d, int32_t round)
{
    return (round - 1) % dpfl_mech_clients_pass(d) == 0;
}

int64_t dpfl_mech_clients_releases(const dpfl_mech_clients *d, int32_t rounds)
{
    const int32_t E = dpfl_mech_clients_pass(d);
    return rounds <= 0 ? 0 : ((int64_t)rounds + E - 1) / E;
}

int32_t dpfl_mech_clients_max_cohort(dpfl_client_sampling kind, int32_t K, double max_rate)
{
    const double mean = max_rate * K;
    return kind == DPFL_SAMPLE_POISSON ? (int32_t)fmin(K, ceil(mean + 7 * sqrt(mean) + 2)) : K;
}

/* Round `round`'s cohort: the pass's permutation of the K clients (a full Fisher-Yates shuffle, the same for every
 * round of the pass: r is the pass's stream), cohort (round - 1) mod E of it, in ascending order. */
static int32_t cohort(dpfl_rng *r, const dpfl_mech_clients *d, int32_t round, int32_t *out)
{
    const int32_t K = d->K, m = d->m, E = dpfl_mech_clients_pass(d);
    DPFL_ASSERT(m >= 1 && K % m == 0 && round >= 1);
    for (int32_t k = 0; k < K; k++) out[k] = k;
    partial_shuffle(r, out, K, K - 1);
    const int32_t first = ((round - 1) % E) * m;
    for (int32_t i = 0; i < m; i++) out[i] = out[first + i];
    sort_ascending(out, m);
    return m;
}

int32_t dpfl_mech_sample_clients_ran(dpfl_rng *r, dpfl_client_sampling kind, int32_t K, double rate, int32_t m,
                                     int32_t round, int32_t *out, dpfl_mech_clients *ran)
{
    const dpfl_mech_clients d = dpfl_mech_clients_make(kind, K, rate, m);
    if (ran) *ran = d;
    if (kind == DPFL_SAMPLE_CROSS_DEVICE) return cohort(r, &d, round, out);
    return dpfl_mech_sample_clients(r, kind, K, rate, m, out);
}

int32_t dpfl_mech_sample_clients(dpfl_rng *r, dpfl_client_sampling kind, int32_t K, double rate, int32_t m,
                                 int32_t *out)
{
    int32_t c = 0;
    switch (kind) {
    case DPFL_SAMPLE_ALL:
        for (int32_t k = 0; k < K; k++) out[c++] = k;
        return c;
    case DPFL_SAMPLE_POISSON:
        for (int32_t k = 0; k < K; k++)
            if (dpfl_rng_bernoulli(r, rate)) out[c++] = k;
        return c;
    case DPFL_SAMPLE_FIXED:
        DPFL_ASSERT(m >= 0 && m <= K);
        for (int32_t k = 0; k < K; k++) out[k] = k;
        partial_shuffle(r, out, K, m);
        sort_ascending(out, m);
        return m;
    case DPFL_SAMPLE_CROSS_DEVICE: { /* without a round: the first cohort of a pass */
        const dpfl_mech_clients d = dpfl_mech_clients_make(kind, K, rate, m);
        return cohort(r, &d, 1, out);
    }
    }
    return 0;
}
