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

/* Client k's j-th class (choice[k N + j]): uniform among the classes it does not hold yet that have the most free
 * holder places (places[c], decremented), and the holder's weight wt ~ U(0.4, 0.6). */
static dpfl_status cr_draw_class(int32_t k, int32_t j, int32_t K, int32_t N, int32_t C, int64_t *places,
                                 int32_t *choice, double *wt, dpfl_rng *rng, dpfl_error *err)
{
    int32_t *mine = choice + (size_t)k * N;
    int64_t most = 0;
    int32_t ties = 0;
    for (int32_t c = 0; c < C; c++) {
        int held = 0;
        for (int32_t i = 0; i < j; i++) held |= mine[i] == c;
        if (held || places[c] < most || places[c] == 0) continue;
        if (places[c] > most) most = places[c], ties = 0;
        ties++;
    }
    if (!ties)
        return dpfl_fail(err, DPFL_EINVAL, "data.classes_per_client: client %d cannot get %d distinct classes "
                         "with free places (%d clients, %d classes)", k, N, K, C);
    int32_t pick = (int32_t)dpfl_rng_below(rng, (uint64_t)ties), c = 0;
    for (;; c++) {
        int held = 0;
        for (int32_t i = 0; i < j; i++) held |= mine[i] == c;
        if (!held && places[c] == most && pick-- == 0) break;
    }
    mine[j] = c;
    places[c]--;
    wt[(size_t)k * N + j] = 0.4 + 0.2 * dpfl_rng_uniform(rng);
    return DPFL_OK;
}

/* cnt[i] for every holder i of class c (in client order): class c's m examples in proportion to the weights
 * (largest remainder); who, hw, take: scratch of KN entries. */
static dpfl_status cr_class_counts(int32_t c, int32_t m, size_t KN, const int32_t *choice, const double *wt,
                                   int32_t *who, double *hw, int64_t *take, int64_t *cnt, dpfl_error *err)
{
    int32_t h = 0;
    for (size_t i = 0; i < KN; i++)
        if (choice[i] == c) who[h] = (int32_t)i, hw[h++] = wt[i];
    if (h > m)
        return dpfl_fail(err, DPFL_EINVAL, "data.clients: class %d has %d examples for %d holders; use fewer "
                         "clients or data.classes_per_client", c, m, h);
    if (h == 0) return DPFL_OK;
    dpfl__apportion(m, hw, h, take);
    for (int32_t i = 0; i < h; i++) cnt[who[i]] = take[i];
    return DPFL_OK;
}

/* The partition itself: client k takes cnt[k N + j] examples of its class choice[k N + j], the next unplaced ones
 * of that class (off, idx: the examples by class; next: C entries of scratch). */
static void cr_fill(dpfl_partition *p, int32_t K, int32_t N, int32_t C, const int64_t *cnt, const int32_t *choice,
                    const int32_t *off, const int32_t *idx, int32_t *next)
{
    for (int32_t k = 0; k < K; k++) {
        int64_t n = 0;
        for (int32_t j = 0; j < N; j++) n += cnt[(size_t)k * N + j];
        p->offset[k + 1] = p->offset[k] + (int32_t)n;
    }
    for (int32_t c = 0; c < C; c++) next[c] = off[c];
    for (int32_t k = 0; k < K; k++) {
        int32_t m = p->offset[k];
        for (int32_t j = 0; j < N; j++) {
            int32_t c = choice[(size_t)k * N + j];
            for (int64_t i = 0; i < cnt[(size_t)k * N + j]; i++) p->index[m++] = idx[next[c]++];
        }
    }
}

/* PrivateFL exactly as its paper states it (Yang et al. 2023, sec. 5, following pFedHN, Shamsian et al. 2021): every
 * client chooses N distinct classes at random, each class getting the same number of holders N K / C (when C does not
 * divide N K, a random N K mod C classes get one more): client after client takes, N times, a class drawn uniformly
 * among those it does not hold yet that have the most free holder places.  Each holder of class c then gets a weight
 * p ~ U(0.4, 0.6), and class c's examples (shuffled) are split among its holders in proportion p / sum p (largest
 * remainder, so every example is placed).  The authors' published code draws the classes this way but splits
 * each class evenly among its holders (p = 1 / holders).  Disjoint; complete when every class has a holder
 * (N K >= C). */
static dpfl_status split_classes_random(const dpfl_dataset *d, int32_t K, int32_t N, dpfl_rng *rng, dpfl_partition *p,
                                        dpfl_error *err)
{
    const int32_t C = d->classes;
    const size_t KN = (size_t)K * N;
    int32_t *off = NULL, *idx = NULL;
    int64_t *places = calloc((size_t)C, sizeof *places), *cnt = calloc(KN, sizeof *cnt), *take = NULL;
    int32_t *choice = malloc(KN * sizeof *choice), *order = malloc((size_t)C * sizeof *order);
    double *wt = malloc(KN * sizeof *wt), *hw = malloc(KN * sizeof *hw);
    int32_t *who = malloc(KN * sizeof *who);
    take = malloc(KN * sizeof *take);
    dpfl_status s = places && cnt && choice && order && wt && hw && who && take
                        ? DPFL_OK
                        : dpfl_fail(err, DPFL_ENOMEM, "out of memory (classes-random partition)");
    if (!s) s = dpfl__by_class(d, rng, &off, &idx, err);
    if (!s) {
        for (int32_t c = 0; c < C; c++) order[c] = c;
        dpfl_rng_shuffle(rng, order, (size_t)C);
        for (int32_t c = 0; c < C; c++) places[order[c]] = (int64_t)(KN / (size_t)C) + ((size_t)c < KN % (size_t)C);
    }
    for (int32_t k = 0; k < K && !s; k++)
        for (int32_t j = 0; j < N && !s; j++) s = cr_draw_class(k, j, K, N, C, places, choice, wt, rng, err);
    for (int32_t c = 0; c < C && !s; c++) /* class c among its holders, in client order */
        s = cr_class_counts(c, off[c + 1] - off[c], KN, choice, wt, who, hw, take, cnt, err);
    int64_t total = 0;
    for (size_t i = 0; !s && i < KN; i++) total += cnt[i];
    if (!s) s = dpfl__part_alloc(p, K, total, err);
    if (!s) cr_fill(p, K, N, C, cnt, choice, off, idx, order); /* order reused: the next example of each class */
    free(places), free(cnt), free(choice), free(order), free(wt), free(hw), free(who), free(take);
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
    case DPFL_PART_CLASSES_RANDOM: return split_classes_random(train, sp->clients, sp->classes_per_client, rng, p, err);
    case DPFL_PART_DIRICHLET_CLIENT: break; /* partition_client_mix.c */
    }
    return dpfl_fail(err, DPFL_EINVAL, "partition: unknown kind %d", (int)sp->kind);
}
