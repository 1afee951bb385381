/* PriFedSync's non-IID CIFAR clients (Zheng et al., "Federated f-Differential Privacy", sec. 4.2, after Hsu, Qi &
 * Brown 2019): every client draws its own class mix and then its own examples from it, independently of the other
 * clients.  For client k:
 *   1. q_k ~ Dir(beta) over the classes (those present in the training set);
 *   2. n_k ~ Multinomial(q_k, samples_per_client), and n_k[c] training examples of class c drawn without
 *      replacement (within the client; clients may share examples);
 *   3. likewise m_k ~ Multinomial(q_k, test_per_client) test examples, drawn from the test set.
 * So a client's test set follows the same class proportions q_k its training set was drawn from, not the counts
 * that came out of the draw. */
#include "partition_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cnt (C) ~ Multinomial(q, n): n categorical draws from the cumulative weights cum (C, cum[C-1] = 1), each the
 * first class c with u < cum[c] (binary search). */
static void multinomial(dpfl_rng *rng, const double *cum, int32_t C, int32_t n, int64_t *cnt)
{
    memset(cnt, 0, (size_t)C * sizeof *cnt);
    for (int32_t i = 0; i < n; i++) {
        double u = dpfl_rng_uniform(rng);
        int32_t lo = 0, hi = C - 1;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (u < cum[mid]) hi = mid;
            else lo = mid + 1;
        }
        cnt[lo]++;
    }
}

/* Appends cnt[c] examples of each class c, drawn without replacement from the class pools (off, idx: as
 * dpfl__by_class gives them; the pools are reordered in place, which leaves every later draw uniform), to dst. */
static dpfl_status draw(const int64_t *cnt, int32_t C, const int32_t *off, int32_t *idx, dpfl_rng *rng, int32_t *dst,
                        int32_t k, const char *key, const char *set, dpfl_error *err)
{
    for (int32_t c = 0; c < C; c++) {
        int32_t *pool = idx + off[c], m = off[c + 1] - off[c];
        if (cnt[c] > m)
            return dpfl_fail(err, DPFL_EINVAL, "%s: client %d draws %lld examples of class %d but the %s set has %d",
                             key, k, (long long)cnt[c], c, set, m);
        for (int32_t i = 0; i < cnt[c]; i++) { /* partial Fisher-Yates */
            int32_t j = i + (int32_t)dpfl_rng_below(rng, (uint64_t)(m - i));
            int32_t t = pool[i];
            pool[i] = pool[j];
            pool[j] = t;
            *dst++ = pool[i];
        }
    }
    return DPFL_OK;
}

dpfl_status dpfl__partition_client_mix(const dpfl_dataset *train, const dpfl_dataset *test,
                                       const dpfl_partition_spec *sp, dpfl_rng *rng, dpfl_partition *p, dpfl_error *err)
{
    const int32_t K = sp->clients, C = train->classes, s = sp->samples_per_client;
    const int32_t t = test ? sp->test_per_client : 0;
    int32_t *off = NULL, *idx = NULL, *toff = NULL, *tidx = NULL;
    double *cum = malloc((size_t)C * sizeof *cum);
    int64_t *cnt = malloc((size_t)C * sizeof *cnt);
    int32_t *present = calloc((size_t)C, sizeof *present);
    dpfl_status r = cum && cnt && present ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (partition)");
    if (!r && (int64_t)K * t > INT32_MAX)
        r = dpfl_fail(err, DPFL_EINVAL, "data.test_per_client: %d clients x %d test examples is more than 2^31 "
                      "indices", K, t);
    if (!r) r = dpfl__by_class(train, NULL, &off, &idx, err);
    if (!r && t > 0) r = dpfl__by_class(test, NULL, &toff, &tidx, err);
    if (!r) r = dpfl__part_alloc(p, K, (int64_t)K * s, err);
    if (!r && t > 0) {
        p->test_offset = dpfl_calloc((size_t)K + 1, sizeof(int32_t), err);
        p->test_index = dpfl_alloc((size_t)K * (size_t)t * sizeof(int32_t), err);
        if (!p->test_offset || !p->test_index) r = DPFL_ENOMEM;
    }
    for (int32_t c = 0; !r && c < C; c++) present[c] = off[c + 1] > off[c];
    for (int32_t k = 0; k < K && !r; k++) {
        double sum = 0;
        for (int32_t c = 0; c < C; c++) sum += cum[c] = present[c] ? dpfl_rng_gamma(rng, sp->beta) : 0;
        if (!(sum > 0)) { /* every weight underflowed (tiny beta): one present class */
            int32_t c;
            do c = (int32_t)dpfl_rng_below(rng, (uint64_t)C);
            while (!present[c]);
            cum[c] = sum = 1;
        }
        double acc = 0;
        int32_t last = 0; /* the last class with weight: its cumulative weight is exactly 1 */
        for (int32_t c = 0; c < C; c++) {
            if (cum[c] > 0) last = c;
            cum[c] = (acc += cum[c]) / sum;
        }
        for (int32_t c = last; c < C; c++) cum[c] = 1.0;
        multinomial(rng, cum, C, s, cnt);
        p->offset[k] = k * s;
        r = draw(cnt, C, off, idx, rng, p->index + (size_t)k * s, k, "data.samples_per_client", "training", err);
        if (!r && t > 0) {
            multinomial(rng, cum, C, t, cnt);
            r = draw(cnt, C, toff, tidx, rng, p->test_index + (size_t)k * t, k, "data.test_per_client", "test", err);
            p->test_offset[k + 1] = (k + 1) * t;
        }
    }
    if (!r) p->offset[K] = K * s;
    free(cum);
    free(cnt);
    free(present);
    dpfl_free(off);
    dpfl_free(idx);
    dpfl_free(toff);
    dpfl_free(tidx);
    return r;
}
