/* Partitions: validation, the shared pieces (labels grouped by class, apportionment, per-client test sets) and
 * dispatch to the recipes in partition_split.c (each example used once), partition_replicate.c (every
 * client gets exactly samples_per_client examples from the training set repeated as often as needed) and
 * partition_client_mix.c (PriFedSync: each client draws its own examples, training and test, from its own mix). */
#include "partition_internal.h"

#include <sodium.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dpfl_partition_free(dpfl_partition *p)
{
    if (!p) return;
    dpfl_free(p->offset);
    dpfl_free(p->index);
    dpfl_free(p->test_offset);
    dpfl_free(p->test_index);
    memset(p, 0, sizeof *p);
}

typedef struct {
    double frac;
    int32_t i;
} frac_item;

static int frac_desc(const void *a, const void *b)
{
    const frac_item *x = a, *y = b;
    if (x->frac != y->frac) return x->frac < y->frac ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

void dpfl__apportion(int64_t total, const double *w, int32_t k, int64_t *out)
{
    double sum = 0;
    for (int32_t i = 0; i < k; i++) sum += w[i];
    DPFL_ASSERT(sum > 0);
    frac_item *f = malloc((size_t)k * sizeof *f);
    int64_t given = 0;
    for (int32_t i = 0; i < k; i++) {
        double q = (double)total * (w[i] / sum);
        out[i] = (int64_t)floor(q);
        if (out[i] > total) out[i] = total;
        given += out[i];
        if (f) {
            f[i].frac = q - floor(q);
            f[i].i = i;
        }
    }
    if (f) qsort(f, (size_t)k, sizeof *f, frac_desc);
    for (int32_t j = 0; given < total; j = (j + 1) % k, given++) out[f ? f[j].i : j]++;
    for (int32_t j = 0; given > total; j = (j + 1) % k)
        if (out[j] > 0) out[j]--, given--;
    free(f);
}

dpfl_status dpfl__by_class(const dpfl_dataset *d, dpfl_rng *rng, int32_t **off, int32_t **idx, dpfl_error *err)
{
    int32_t C = d->classes;
    *off = dpfl_calloc((size_t)C + 1, sizeof(int32_t), err);
    *idx = dpfl_alloc((size_t)d->n * sizeof(int32_t), err);
    if (!*off || !*idx) {
        dpfl_free(*off);
        dpfl_free(*idx);
        *off = *idx = NULL;
        return DPFL_ENOMEM;
    }
    for (int32_t i = 0; i < d->n; i++) (*off)[d->y[i] + 1]++;
    for (int32_t c = 0; c < C; c++) (*off)[c + 1] += (*off)[c];
    int32_t *pos = dpfl_alloc((size_t)C * sizeof(int32_t), err);
    if (!pos) {
        dpfl_free(*off);
        dpfl_free(*idx);
        *off = *idx = NULL;
        return DPFL_ENOMEM;
    }
    memcpy(pos, *off, (size_t)C * sizeof(int32_t));
    for (int32_t i = 0; i < d->n; i++) (*idx)[pos[d->y[i]]++] = i;
    dpfl_free(pos);
    if (rng)
        for (int32_t c = 0; c < C; c++)
            dpfl_rng_shuffle(rng, *idx + (*off)[c], (size_t)((*off)[c + 1] - (*off)[c]));
    return DPFL_OK;
}

dpfl_status dpfl__part_alloc(dpfl_partition *p, int32_t clients, int64_t total, dpfl_error *err)
{
    if (total > INT32_MAX)
        return dpfl_fail(err, DPFL_EINVAL, "partition too large (data.samples_per_client): %lld indices",
                         (long long)total);
    p->clients = clients;
    p->offset = dpfl_calloc((size_t)clients + 1, sizeof(int32_t), err);
    p->index = dpfl_alloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t), err);
    return p->offset && p->index ? DPFL_OK : DPFL_ENOMEM;
}

static dpfl_status check_labels(const dpfl_dataset *d, const char *which, dpfl_error *err)
{
    if (d->classes < 1) return dpfl_fail(err, DPFL_EINVAL, "%s set has no classes (data.dataset)", which);
    for (int32_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= d->classes)
            return dpfl_fail(err, DPFL_EINVAL, "%s label out of range (data.dataset): example %d has label %d, "
                             "classes = %d", which, i, d->y[i], d->classes);
    return DPFL_OK;
}

static dpfl_status check_spec(const dpfl_dataset *train, const dpfl_partition_spec *sp, dpfl_error *err)
{
    if (sp->clients < 1) return dpfl_fail(err, DPFL_EINVAL, "data.clients: must be >= 1, got %d", sp->clients);
    if (sp->samples_per_client < 0)
        return dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: must be >= 0 (0 = no replication), got "
                         "%d", sp->samples_per_client);
    if (sp->test_per_client < 0)
        return dpfl_fail(err, DPFL_EINVAL, "data.test_per_client: must be >= 0, got %d", sp->test_per_client);
    int64_t total = sp->samples_per_client > 0 ? (int64_t)sp->clients * sp->samples_per_client : train->n;
    switch (sp->kind) {
    case DPFL_PART_IID:
        if (sp->samples_per_client == 0 && sp->clients > train->n)
            return dpfl_fail(err, DPFL_EINVAL, "data.clients: %d clients but only %d training examples",
                             sp->clients, train->n);
        return DPFL_OK;
    case DPFL_PART_SHARDS:
        if (sp->shards < 1) return dpfl_fail(err, DPFL_EINVAL, "data.shards: must be >= 1, got %d", sp->shards);
        if ((int64_t)sp->clients * sp->shards > total)
            return dpfl_fail(err, DPFL_EINVAL, "data.shards: %d clients x %d shards = %lld shards but only "
                             "%lld examples", sp->clients, sp->shards, (long long)sp->clients * sp->shards,
                             (long long)total);
        if (sp->samples_per_client > 0 && sp->samples_per_client % sp->shards)
            return dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: %d is not a multiple of "
                             "data.shards = %d", sp->samples_per_client, sp->shards);
        return DPFL_OK;
    case DPFL_PART_DIRICHLET:
        if (!(sp->beta > 0) || !isfinite(sp->beta))
            return dpfl_fail(err, DPFL_EINVAL, "data.beta: must be a finite number > 0, got %g", sp->beta);
        if (sp->samples_per_client == 0 && sp->clients > train->n)
            return dpfl_fail(err, DPFL_EINVAL, "data.clients: %d clients but only %d training examples",
                             sp->clients, train->n);
        return DPFL_OK;
    case DPFL_PART_CLASSES:
        if (sp->classes_per_client < 1 || sp->classes_per_client > train->classes)
            return dpfl_fail(err, DPFL_EINVAL, "data.classes_per_client: must be in 1..%d (the dataset's "
                             "classes), got %d", train->classes, sp->classes_per_client);
        return DPFL_OK;
    case DPFL_PART_DIRICHLET_CLIENT:
        if (!(sp->beta > 0) || !isfinite(sp->beta))
            return dpfl_fail(err, DPFL_EINVAL, "data.beta: must be a finite number > 0, got %g", sp->beta);
        if (sp->samples_per_client < 1)
            return dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: partition dirichlet-client draws each "
                             "client's training examples and needs their number (PriFedSync: 500)");
        return DPFL_OK;
    case DPFL_PART_CLASSES_RANDOM:
        if (sp->classes_per_client < 1 || sp->classes_per_client > train->classes)
            return dpfl_fail(err, DPFL_EINVAL, "data.classes_per_client: must be in 1..%d (the dataset's "
                             "classes), got %d", train->classes, sp->classes_per_client);
        if (sp->samples_per_client > 0)
            return dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: replication is not supported with "
                             "the classes-random partition");
        return DPFL_OK;
    case DPFL_PART_NATURAL:
        if (!train->group || train->groups < 1)
            return dpfl_fail(err, DPFL_EINVAL, "partition: natural needs a dataset with sources (e.g. heart); "
                             "this one has none");
        if (sp->clients != train->groups)
            return dpfl_fail(err, DPFL_EINVAL, "data.clients: natural partition gives one client per source, "
                             "so clients must be %d, got %d", train->groups, sp->clients);
        if (sp->samples_per_client > 0)
            return dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: replication is not supported with "
                             "the natural partition");
        return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "partition: unknown kind %d; valid: iid, shards, dirichlet, classes, "
                     "natural, dirichlet-client, classes-random", (int)sp->kind);
}

/* Test sets that are the test examples of each source group (natural partition). */
static dpfl_status test_by_group(const dpfl_dataset *test, dpfl_partition *p, dpfl_error *err)
{
    int32_t K = p->clients;
    p->test_offset = dpfl_calloc((size_t)K + 1, sizeof(int32_t), err);
    p->test_index = dpfl_alloc((size_t)(test->n > 0 ? test->n : 1) * sizeof(int32_t), err);
    if (!p->test_offset || !p->test_index) return DPFL_ENOMEM;
    int32_t m = 0;
    for (int32_t k = 0; k < K; k++) {
        p->test_offset[k] = m;
        for (int32_t i = 0; i < test->n; i++)
            if (test->group[i] == k) p->test_index[m++] = i;
    }
    p->test_offset[K] = m;
    return DPFL_OK;
}

/* Per-client test sets of t examples drawn without replacement from the test set, with class counts
 * proportional to the client's training labels (largest remainder). */
static dpfl_status test_by_mix(const dpfl_dataset *train, const dpfl_dataset *test, int32_t t, dpfl_rng *rng,
                               dpfl_partition *p, dpfl_error *err)
{
    int32_t K = p->clients, C = train->classes;
    int32_t *toff = NULL, *tidx = NULL;
    double *w = malloc((size_t)C * sizeof *w);
    int64_t *cnt = malloc((size_t)C * sizeof *cnt);
    dpfl_status s = (w && cnt) ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (partition test sets)");
    if (!s) s = dpfl__by_class(test, NULL, &toff, &tidx, err);
    if (!s) {
        p->test_offset = dpfl_calloc((size_t)K + 1, sizeof(int32_t), err);
        p->test_index = dpfl_alloc((size_t)K * (size_t)t * sizeof(int32_t), err);
        if (!p->test_offset || !p->test_index) s = DPFL_ENOMEM;
    }
    for (int32_t k = 0; k < K && !s; k++) {
        memset(w, 0, (size_t)C * sizeof *w);
        for (int32_t i = p->offset[k]; i < p->offset[k + 1]; i++) w[train->y[p->index[i]]] += 1;
        dpfl__apportion(t, w, C, cnt);
        int32_t *dst = p->test_index + (size_t)k * t;
        for (int32_t c = 0; c < C && !s; c++) {
            int32_t *pool = tidx + toff[c], m = toff[c + 1] - toff[c];
            if (cnt[c] > m) {
                s = dpfl_fail(err, DPFL_EINVAL, "data.test_per_client: client %d needs %lld test examples of "
                              "class %d but the test set has %d", k, (long long)cnt[c], c, m);
                break;
            }
            for (int32_t i = 0; i < cnt[c]; i++) { /* partial Fisher-Yates: uniform without replacement */
                int32_t j = i + (int32_t)dpfl_rng_below(rng, (uint64_t)(m - i));
                int32_t tmp = pool[i];
                pool[i] = pool[j];
                pool[j] = tmp;
                *dst++ = pool[i];
            }
        }
        p->test_offset[k + 1] = (k + 1) * t;
    }
    free(w);
    free(cnt);
    dpfl_free(toff);
    dpfl_free(tidx);
    return s;
}

dpfl_status dpfl_partition_make(const dpfl_dataset *train, const dpfl_dataset *test, const dpfl_partition_spec *spec,
                                dpfl_rng *rng, dpfl_partition *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!train || !spec || !rng || train->n < 1)
        return dpfl_fail(err, DPFL_EINVAL, "partition: no training data");
    dpfl_status s = check_labels(train, "training", err);
    if (!s && test) s = check_labels(test, "test", err);
    if (!s && test && test->classes != train->classes)
        s = dpfl_fail(err, DPFL_EINVAL, "train and test sets disagree on the number of classes (data.dataset): "
                      "%d vs %d", train->classes, test->classes);
    if (!s) s = check_spec(train, spec, err);
    if (s) return s;
    const int mix = spec->kind == DPFL_PART_DIRICHLET_CLIENT; /* draws its own test sets */
    if (mix && spec->test_per_client > 0 && (!test || test->n < 1))
        s = dpfl_fail(err, DPFL_EINVAL, "data.test_per_client: %d asked for, but there is no test set",
                      spec->test_per_client);
    else if (mix)
        s = dpfl__partition_client_mix(train, test, spec, rng, out, err);
    else if (spec->samples_per_client > 0)
        s = dpfl__partition_replicate(train, spec, rng, out, err);
    else
        s = dpfl__partition_split(train, spec, rng, out, err);
    if (!s) {
        for (int32_t k = 0; k < out->clients && !s; k++)
            if (dpfl_partition_size(out, k) == 0)
                s = dpfl_fail(err, DPFL_EINVAL, "data.clients: client %d would hold no examples; use fewer "
                              "clients", k);
    }
    if (!s && spec->kind == DPFL_PART_NATURAL && test && test->group && test->groups == train->groups)
        s = test_by_group(test, out, err);
    else if (!s && spec->test_per_client > 0 && !mix) {
        if (!test || test->n < 1)
            s = dpfl_fail(err, DPFL_EINVAL, "data.test_per_client: %d asked for, but there is no test set",
                          spec->test_per_client);
        else
            s = test_by_mix(train, test, spec->test_per_client, rng, out, err);
    }
    if (s) {
        if (s == DPFL_ENOMEM && !strstr(err ? err->msg : "", "memory"))
            dpfl_fail(err, s, "out of memory (partition of %d examples into %d clients)", train->n, spec->clients);
        dpfl_partition_free(out);
    }
    return s;
}

void dpfl_partition_digest(const dpfl_partition *p, uint8_t out[32])
{
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    int32_t k = p->clients, has_test = p->test_offset != NULL;
    crypto_hash_sha256_update(&h, (const unsigned char *)&k, sizeof k);
    crypto_hash_sha256_update(&h, (const unsigned char *)p->offset, (size_t)(k + 1) * sizeof(int32_t));
    crypto_hash_sha256_update(&h, (const unsigned char *)p->index, (size_t)p->offset[k] * sizeof(int32_t));
    crypto_hash_sha256_update(&h, (const unsigned char *)&has_test, sizeof has_test);
    if (has_test) {
        crypto_hash_sha256_update(&h, (const unsigned char *)p->test_offset, (size_t)(k + 1) * sizeof(int32_t));
        crypto_hash_sha256_update(&h, (const unsigned char *)p->test_index, (size_t)p->test_offset[k] * sizeof(int32_t));
    }
    crypto_hash_sha256_final(&h, out);
}
