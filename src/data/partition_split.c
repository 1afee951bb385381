/* Partitions that use each training example at most once (disjoint; complete except where noted). */
#include "partition_internal.h"

#include <stdlib.h>
#include <string.h>

/* Shuffle, cut into K near-equal runs. Disjoint and complete. */
static dpfl_status split_iid(const dpfl_dataset *d, int32_t K, dpfl_rng *rng, dpfl_partition *p, dpfl_error *err)
{
    dpfl_status s = dpfl__part_alloc(p, K, d->n, err);
    if (s) return s;
    for (int32_t i = 0; i < d->n; i++) p->index[i] = i;
    dpfl_rng_shuffle(rng, p->index, (size_t)d->n);
    for (int32_t k = 0; k <= K; k++) p->offset[k] = (int32_t)((int64_t)k * d->n / K);
    return DPFL_OK;
}

/* McMahan et al.: examples sorted by label (random order within a label) cut into K*S near-equal shards,
 * S random shards dealt to each client. Disjoint and complete. */
static dpfl_status split_shards(const dpfl_dataset *d, int32_t K, int32_t S, dpfl_rng *rng, dpfl_partition *p,
                                dpfl_error *err)
{
    int32_t *off = NULL, *sorted = NULL, *deal = NULL;
    int64_t ns = (int64_t)K * S;
    dpfl_status s = dpfl__by_class(d, rng, &off, &sorted, err);
    if (!s) s = dpfl__part_alloc(p, K, d->n, err);
    if (!s && !(deal = dpfl_alloc((size_t)ns * sizeof *deal, err))) s = DPFL_ENOMEM;
    if (!s) {
        for (int64_t j = 0; j < ns; j++) deal[j] = (int32_t)j;
        dpfl_rng_shuffle(rng, deal, (size_t)ns);
        int32_t m = 0;
        for (int32_t k = 0; k < K; k++) {
            p->offset[k] = m;
            for (int32_t j = 0; j < S; j++) {
                int64_t sh = deal[(int64_t)k * S + j];
                int32_t a = (int32_t)(sh * d->n / ns), b = (int32_t)((sh + 1) * d->n / ns);
                memcpy(p->index + m, sorted + a, (size_t)(b - a) * sizeof(int32_t));
                m += b - a;
            }
        }
        p->offset[K] = m;
    }
    dpfl_free(off);
    dpfl_free(sorted);
    dpfl_free(deal);
    return s;
}

/* Each class is divided among the clients in proportions ~ Dir(beta) (the usual label-skew recipe, e.g.
 * Wang et al. FedMA); redrawn while some client would be empty. Disjoint and complete. */
static dpfl_status split_dirichlet(const dpfl_dataset *d, int32_t K, double beta, dpfl_rng *rng,
                                   dpfl_partition *p, dpfl_error *err)
{
    int32_t C = d->classes, *off = NULL, *idx = NULL;
    int64_t *cnt = malloc((size_t)C * (size_t)K * sizeof *cnt), *size = malloc((size_t)K * sizeof *size);
    double *w = malloc((size_t)K * sizeof *w);
    dpfl_status s = cnt && size && w ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (dirichlet partition)");
    if (!s) s = dpfl__by_class(d, rng, &off, &idx, err);
    int ok = 0;
    for (int attempt = 0; attempt < 100 && !s && !ok; attempt++) {
        memset(size, 0, (size_t)K * sizeof *size);
        for (int32_t c = 0; c < C; c++) {
            double sum = 0;
            for (int32_t k = 0; k < K; k++) sum += w[k] = dpfl_rng_gamma(rng, beta);
            if (!(sum > 0)) w[dpfl_rng_below(rng, (uint64_t)K)] = 1; /* all weights underflowed: one client */
            int64_t *ck = cnt + (size_t)c * K;
            int32_t m = off[c + 1] - off[c];
            if (m > 0)
                dpfl__apportion(m, w, K, ck);
            else
                memset(ck, 0, (size_t)K * sizeof *ck);
            for (int32_t k = 0; k < K; k++) size[k] += ck[k];
        }
        ok = 1;
        for (int32_t k = 0; k < K; k++) ok &= size[k] > 0;
    }
    if (!s && !ok)
        s = dpfl_fail(err, DPFL_EINVAL, "data.beta: with beta = %g, 100 draws each left some of the %d "
                      "clients empty; raise data.beta or lower data.clients", beta, K);
    if (!s) s = dpfl__part_alloc(p, K, d->n, err);
    if (!s) {
        for (int32_t k = 0; k < K; k++) p->offset[k + 1] = p->offset[k] + (int32_t)size[k];
        for (int32_t k = 0; k < K; k++) size[k] = p->offset[k]; /* now: per-client write cursors */
        for (int32_t c = 0; c < C; c++) {
            const int32_t *src = idx + off[c];
            for (int32_t k = 0; k < K; k++)
                for (int64_t i = 0; i < cnt[(size_t)c * K + k]; i++) p->index[size[k]++] = *src++;
        }
    }
    free(cnt);
    free(size);
    free(w);
    dpfl_free(off);
    dpfl_free(idx);
    return s;
}

/* PrivateFL: client k holds classes k, k+1, ..., k+N-1 (mod C), so with K a multiple of C every class has
 * K*N/C holders; each class's examples are split evenly among its holders. Disjoint; complete when every
 * class has a holder (K*N >= C). */
static dpfl_status split_classes(const dpfl_dataset *d, int32_t K, int32_t N, dpfl_rng *rng, dpfl_partition *p,
                                 dpfl_error *err)
{
    int32_t C = d->classes, *off = NULL, *idx = NULL;
    int32_t *holders = calloc((size_t)C, sizeof *holders), *seen = calloc((size_t)C, sizeof *seen);
    dpfl_status s = holders && seen ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (classes partition)");
    if (!s) s = dpfl__by_class(d, rng, &off, &idx, err);
    int64_t total = 0;
    if (!s) {
        for (int32_t k = 0; k < K; k++)
            for (int32_t j = 0; j < N; j++) holders[(k + j) % C]++;
        for (int32_t c = 0; c < C && !s; c++) {
            int32_t m = off[c + 1] - off[c];
            if (holders[c] > 0) total += m;
            if (holders[c] > m)
                s = dpfl_fail(err, DPFL_EINVAL, "data.clients: class %d has %d examples for %d holders; use "
                              "fewer clients or data.classes_per_client", c, m, holders[c]);
        }
    }
    if (!s) s = dpfl__part_alloc(p, K, total, err);
    if (!s) {
        int32_t m = 0;
        for (int32_t k = 0; k < K; k++) {
            p->offset[k] = m;
            for (int32_t j = 0; j < N; j++) {
                int32_t c = (k + j) % C, h = seen[c]++, cm = off[c + 1] - off[c];
                int32_t a = (int32_t)((int64_t)h * cm / holders[c]), b = (int32_t)((int64_t)(h + 1) * cm / holders[c]);
                memcpy(p->index + m, idx + off[c] + a, (size_t)(b - a) * sizeof(int32_t));
                m += b - a;
            }
        }
        p->offset[K] = m;
    }
    free(holders);
    free(seen);
    dpfl_free(off);
    dpfl_free(idx);
    return s;
}

/* One client per source group, examples in file order. Disjoint and complete. */
static dpfl_status split_natural(const dpfl_dataset *d, int32_t K, dpfl_partition *p, dpfl_error *err)
{
    dpfl_status s = dpfl__part_alloc(p, K, d->n, err);
    if (s) return s;
    int32_t m = 0;
    for (int32_t k = 0; k < K; k++) {
        p->offset[k] = m;
        for (int32_t i = 0; i < d->n; i++)
            if (d->group[i] == k) p->index[m++] = i;
    }
    p->offset[K] = m;
    if (m != d->n) return dpfl_fail(err, DPFL_EINVAL, "partition: %d examples have a source id outside 0..%d",
                                    d->n - m, K - 1);
    return DPFL_OK;
}

dpfl_status dpfl__partition_split(const dpfl_dataset *train, const dpfl_partition_spec *sp, dpfl_rng *rng,
                                  dpfl_partition *p, dpfl_error *err)
{
    switch (sp->kind) {
    case DPFL_PART_IID: return split_iid(train, sp->clients, rng, p, err);
    case DPFL_PART_SHARDS: return split_shards(train, sp->clients, sp->shards, rng, p, err);
    case DPFL_PART_DIRICHLET: return split_dirichlet(train, sp->clients, sp->beta, rng, p, err);
    case DPFL_PART_CLASSES: return split_classes(train, sp->clients, sp->classes_per_client, rng, p, err);
    case DPFL_PART_NATURAL: return split_natural(train, sp->clients, p, err);
    }
    return dpfl_fail(err, DPFL_EINVAL, "partition: unknown kind %d", (int)sp->kind);
}
