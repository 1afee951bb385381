/* Replication for large K (Geyer et al.; the thesis): every client gets exactly s examples, so K*s can exceed
 * the training set (1,000 or 10,000 clients x 600 out of MNIST's 60,000).  Examples come from "streams": a
 * pool of indices (all, or one class) in random order, reshuffled each time it runs out, so the training set is
 * repeated as often as needed and every example is used equally often (up to one).  Only indices are stored. */
#include "partition_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *pool;
    int32_t m, pos;
} stream;

static void stream_init(stream *st, int32_t *pool, int32_t m, dpfl_rng *rng)
{
    st->pool = pool;
    st->m = m;
    st->pos = 0;
    dpfl_rng_shuffle(rng, pool, (size_t)m);
}

static int32_t stream_next(stream *st, dpfl_rng *rng)
{
    if (st->pos == st->m) {
        dpfl_rng_shuffle(rng, st->pool, (size_t)st->m);
        st->pos = 0;
    }
    return st->pool[st->pos++];
}

/* Client k takes need[k*C + c] examples of class c from class c's stream. */
static dpfl_status fill_by_class(const dpfl_dataset *d, int32_t K, int32_t s, const int64_t *need, dpfl_rng *rng,
                                 dpfl_partition *p, dpfl_error *err)
{
    int32_t C = d->classes, *off = NULL, *idx = NULL;
    stream *st = calloc((size_t)C, sizeof *st);
    dpfl_status r = st ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (replicated partition)");
    if (!r) r = dpfl__by_class(d, NULL, &off, &idx, err);
    if (!r) r = dpfl__part_alloc(p, K, (int64_t)K * s, err);
    if (!r) {
        for (int32_t c = 0; c < C; c++) stream_init(&st[c], idx + off[c], off[c + 1] - off[c], rng);
        int32_t m = 0;
        for (int32_t k = 0; k < K && !r; k++) {
            p->offset[k] = m;
            for (int32_t c = 0; c < C; c++) {
                int64_t n = need[(size_t)k * C + c];
                if (n > 0 && st[c].m == 0) {
                    r = dpfl_fail(err, DPFL_EINVAL, "partition: client %d needs class %d, which has no examples",
                                  k, c);
                    break;
                }
                for (int64_t i = 0; i < n; i++) p->index[m++] = stream_next(&st[c], rng);
            }
        }
        p->offset[K] = m;
    }
    free(st);
    dpfl_free(off);
    dpfl_free(idx);
    return r;
}

static dpfl_status rep_iid(const dpfl_dataset *d, int32_t K, int32_t s, dpfl_rng *rng, dpfl_partition *p,
                           dpfl_error *err)
{
    int32_t *pool = dpfl_alloc((size_t)d->n * sizeof *pool, err);
    if (!pool) return DPFL_ENOMEM;
    dpfl_status r = dpfl__part_alloc(p, K, (int64_t)K * s, err);
    if (!r) {
        for (int32_t i = 0; i < d->n; i++) pool[i] = i;
        stream st;
        stream_init(&st, pool, d->n, rng);
        for (int64_t i = 0; i < (int64_t)K * s; i++) p->index[i] = stream_next(&st, rng);
        for (int32_t k = 0; k <= K; k++) p->offset[k] = k * s;
    }
    dpfl_free(pool);
    return r;
}

/* The repeated training set (K*s draws from the all-examples stream) sorted by label, cut into K*S shards of
 * s/S, S random shards per client. */
static dpfl_status rep_shards(const dpfl_dataset *d, int32_t K, int32_t s, int32_t S, dpfl_rng *rng,
                              dpfl_partition *p, dpfl_error *err)
{
    int64_t total = (int64_t)K * s, ns = (int64_t)K * S, len = s / S;
    int32_t C = d->classes;
    int32_t *pool = dpfl_alloc((size_t)d->n * sizeof *pool, err);
    int32_t *sorted = dpfl_alloc((size_t)total * sizeof *sorted, err);
    int32_t *deal = dpfl_alloc((size_t)ns * sizeof *deal, err);
    int64_t *pos = calloc((size_t)C + 1, sizeof *pos);
    dpfl_status r = pool && sorted && deal && pos ? DPFL_OK : DPFL_ENOMEM;
    if (!r) r = dpfl__part_alloc(p, K, total, err);
    if (!r) {
        for (int32_t i = 0; i < d->n; i++) pool[i] = i;
        stream st;
        stream_init(&st, pool, d->n, rng);
        /* draws go to p->index first, then a stable counting sort by label into sorted */
        for (int64_t i = 0; i < total; i++) p->index[i] = stream_next(&st, rng);
        for (int64_t i = 0; i < total; i++) pos[d->y[p->index[i]] + 1]++;
        for (int32_t c = 0; c < C; c++) pos[c + 1] += pos[c];
        for (int64_t i = 0; i < total; i++) sorted[pos[d->y[p->index[i]]]++] = p->index[i];
        for (int64_t j = 0; j < ns; j++) deal[j] = (int32_t)j;
        dpfl_rng_shuffle(rng, deal, (size_t)ns);
        for (int64_t j = 0; j < ns; j++)
            memcpy(p->index + j * len, sorted + (int64_t)deal[j] * len, (size_t)len * sizeof(int32_t));
        for (int32_t k = 0; k <= K; k++) p->offset[k] = k * s;
    }
    dpfl_free(pool);
    dpfl_free(sorted);
    dpfl_free(deal);
    free(pos);
    return r;
}

dpfl_status dpfl__partition_replicate(const dpfl_dataset *train, const dpfl_partition_spec *sp, dpfl_rng *rng,
                                      dpfl_partition *p, dpfl_error *err)
{
    int32_t K = sp->clients, s = sp->samples_per_client, C = train->classes;
    if (sp->kind == DPFL_PART_IID) return rep_iid(train, K, s, rng, p, err);
    if (sp->kind == DPFL_PART_SHARDS) return rep_shards(train, K, s, sp->shards, rng, p, err);
    int64_t *need = calloc((size_t)K * (size_t)C, sizeof *need);
    double *w = malloc((size_t)C * sizeof *w);
    dpfl_status r = need && w ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (replicated partition)");
    if (!r && sp->kind == DPFL_PART_DIRICHLET) {
        /* client mix q_k ~ Dir(beta) over the classes present in the data */
        int32_t *present = calloc((size_t)C, sizeof *present);
        if (!present) r = DPFL_ENOMEM;
        for (int32_t i = 0; present && i < train->n; i++) present[train->y[i]] = 1;
        for (int32_t k = 0; k < K && !r; k++) {
            double sum = 0;
            for (int32_t c = 0; c < C; c++) sum += w[c] = present[c] ? dpfl_rng_gamma(rng, sp->beta) : 0;
            if (!(sum > 0)) {
                int32_t c;
                do c = (int32_t)dpfl_rng_below(rng, (uint64_t)C);
                while (!present[c]);
                w[c] = 1;
            }
            dpfl__apportion(s, w, C, need + (size_t)k * C);
        }
        free(present);
    } else if (!r) { /* CLASSES: s split evenly over classes k .. k+N-1 (mod C) */
        int32_t N = sp->classes_per_client;
        for (int32_t k = 0; k < K; k++)
            for (int32_t j = 0; j < N; j++) need[(size_t)k * C + (k + j) % C] = s / N + (j < s % N);
    }
    if (!r) r = fill_by_class(train, K, s, need, rng, p, err);
    free(need);
    free(w);
    return r;
}
