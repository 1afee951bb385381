/* The [data] section: data.dataset typed when it is read (its kind, a list's entries; join --data's replacement of
 * one entry); made into datasets: the named dataset or your own files (the spec handed whole to the data module),
 * then the standardization asked for (published constants for the image datasets, the config's given constants for
 * your own data); and the partition among clients the section asks for. */
#include "config_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static dpfl_status standardize_given(const dpfl_data_config *dc, dpfl_dataset *train, dpfl_dataset *test,
                                     dpfl_error *err)
{
    const dpfl_number_list *m = &dc->feature_mean, *sd = &dc->feature_std;
    dpfl_status s = dpfl_dataset_standardize_values(train, m->v, m->n, sd->v, sd->n, err);
    if (!s) s = dpfl_dataset_standardize_values(test, m->v, m->n, sd->v, sd->n, err);
    return s;
}

void dpfl_config_partition_spec(const dpfl_config *c, dpfl_partition_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->kind = c->data.partition;
    sp->clients = c->data.clients;
    sp->shards = c->data.shards;
    sp->beta = c->data.beta;
    sp->classes_per_client = c->data.classes_per_client;
    sp->samples_per_client = c->data.samples_per_client;
    sp->test_per_client = c->data.test_per_client;
}

dpfl_status dpfl_config_load_data(const dpfl_config *cfg, uint64_t seed, dpfl_dataset *train, dpfl_dataset *test,
                                  dpfl_error *err)
{
    const dpfl_data_config *dc = &cfg->data;
    dpfl_status s;
    if (dpfl_dataset_is_files(dc->dataset)) {
        dpfl_file_options o;
        dpfl_file_options_default(&o);
        o.label = dc->label_column;
        o.features = dc->feature_columns;
        o.header = dc->header == DPFL_HEADER_YES ? 1 : dc->header == DPFL_HEADER_NO ? 0 : -1;
        o.drop_missing = dc->missing == DPFL_MISSING_DROP;
        o.test = dc->test;
        o.test_fraction = dc->test_fraction;
        o.classes = dc->classes;
        int32_t rows[DPFL_NUMBER_LIST_MAX]; /* whole numbers in [1, INT32_MAX]: checked when the key was read */
        for (int32_t i = 0; i < dc->source_rows.n; i++) rows[i] = (int32_t)dc->source_rows.v[i];
        if (dc->source_rows.n) {
            o.source_rows = rows;
            o.nsource_rows = dc->source_rows.n;
        }
        s = dpfl_dataset_load_files(dc->dataset, &o, seed, train, test, err);
        if (!s && dc->normalize == DPFL_NORM_STANDARD) s = standardize_given(dc, train, test, err);
    } else {
        s = dpfl_dataset_load(dc->dataset, dc->data_dir, seed, train, test, err);
        if (!s && dc->normalize == DPFL_NORM_STANDARD && !(s = dpfl_dataset_standardize(dc->dataset, train, err)))
            s = dpfl_dataset_standardize(dc->dataset, test, err);
    }
    if (s) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
    }
    return s;
}

void fl_dataset_type(dpfl_data_config *d, int named)
{
    dpfl_dataset_files *f = &d->files;
    memset(f, 0, sizeof *f);
    if (named >= 0) {
        DPFL_ASSERT(named < DPFL_DATASET_CSV);
        d->kind = (dpfl_dataset_kind)named;
        return;
    }
    d->kind = !strncmp(d->dataset, "csv:", 4)   ? DPFL_DATASET_CSV
              : !strncmp(d->dataset, "idx:", 4) ? DPFL_DATASET_IDX
              : !strncmp(d->dataset, "npy:", 4) ? DPFL_DATASET_NPY
                                                : DPFL_DATASET_MEMORY;
    DPFL_ASSERT(d->kind != DPFL_DATASET_MEMORY || dpfl_dataset_is_memory(d->dataset));
    if (d->kind == DPFL_DATASET_MEMORY) return;
    f->patterns = strpbrk(d->dataset, "*?[") != NULL;
    char *out = f->entry; /* each entry and its '\0' take no more room than it and its comma (or the prefix) did */
    for (const char *p = d->dataset + 4; *p; f->n++) {
        const char *comma = strchr(p, ',');
        const size_t n = comma ? (size_t)(comma - p) : strlen(p);
        memcpy(out, p, n);
        out[n] = '\0';
        out += n + 1;
        p = comma ? comma + 1 : p + n;
    }
}

int dpfl_config_own_data(const dpfl_config *c) { return c->data.kind >= DPFL_DATASET_CSV; }

dpfl_status dpfl_config_replace_dataset_file(dpfl_config *c, int32_t k, const char *path, const char *who,
                                             dpfl_error *err)
{
    dpfl_data_config *d = &c->data;
    DPFL_ASSERT(d->kind == DPFL_DATASET_CSV || d->kind == DPFL_DATASET_IDX || d->kind == DPFL_DATASET_NPY);
    if (k >= d->files.n)
        return dpfl_fail(err, DPFL_EINVAL, "%s: --client %d, but data.dataset lists %d files", who, k, d->files.n);
    char buf[sizeof d->dataset];
    size_t len = (size_t)snprintf(buf, sizeof buf, "%.4s", d->dataset);
    const char *e = d->files.entry;
    for (int32_t i = 0; i < d->files.n && len < sizeof buf; e += strlen(e) + 1, i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "," : "", i == k ? path : e);
    if (len >= sizeof buf)
        return dpfl_fail(err, DPFL_EINVAL, "%s: the list with '%s' in it is too long", who, path);
    memcpy(d->dataset, buf, len + 1);
    fl_dataset_type(d, -1);
    return DPFL_OK;
}

dpfl_status dpfl_config_infer_clients(dpfl_config *c, int *inferred, dpfl_error *err)
{
    *inferred = 0;
    size_t k = 0;
    while (k < FL_CONFIG_NKEYS && strcmp(fl_config_keys[k].key, "clients")) k++;
    DPFL_ASSERT(k < FL_CONFIG_NKEYS && !strcmp(fl_config_keys[k].section, "data"));
    if (c->data.partition != DPFL_PART_NATURAL || c->user_set[k] || c->data.kind != DPFL_DATASET_CSV) return DPFL_OK;
    /* the sources of the list, as the data module reads them (globs and folders expanded) */
    char path[8];
    int32_t n = 0;
    dpfl_error e;
    while (n < 1000000 && dpfl_dataset_source_path(c->data.dataset, n, path, sizeof path, &e) == DPFL_OK) n++;
    if (n == 0) return DPFL_OK; /* no file: the data load says so */
    (void)err;
    if (c->data.clients != n) *inferred = 1;
    c->data.clients = n;
    return DPFL_OK;
}

int dpfl_config_scale_hint(const dpfl_config *c, const dpfl_dataset *train, char *msg, size_t cap)
{
    if (c->data.normalize != DPFL_NORM_NONE || c->data.kind != DPFL_DATASET_CSV || train->n < 1) return 0;
    const int64_t dim = (int64_t)train->c * train->h * train->w;
    int64_t worst = -1;
    double worst_mag = 0;
    for (int64_t j = 0; j < dim; j++) { /* each feature's root mean square over the rows that are here */
        double ss = 0;
        int64_t rows = 0;
        for (int64_t i = 0; i < train->n; i++) {
            if (train->absent && train->group && train->absent[train->group[i]]) continue;
            const double v = train->x[i * dim + j];
            ss += v * v;
            rows++;
        }
        const double rms = rows ? sqrt(ss / (double)rows) : 0;
        if (rms > worst_mag) {
            worst_mag = rms;
            worst = j;
        }
    }
    if (worst < 0 || !(worst_mag > 10)) return 0;
    snprintf(msg, cap, "data: feature %lld of the CSV files is far from unit scale (root mean square %.3g) and "
                       "data.normalize = none: gradient steps on raw features often train to chance; set "
                       "data.normalize = standard with public data.feature_mean and data.feature_std",
             (long long)worst, worst_mag);
    return 1;
}

/* n doubles: from v (1 or n of them) */
static double *expand(const dpfl_number_list *v, int32_t n, dpfl_error *err)
{
    double *out = dpfl_alloc((size_t)n * sizeof *out, err);
    if (out)
        for (int32_t j = 0; j < n; j++) out[j] = v->v[v->n == 1 ? 0 : j];
    return out;
}

dpfl_status dpfl_config_input_standardization(const dpfl_config *cfg, int32_t c, int32_t h, int32_t w,
                                              dpfl_input_standardization *s, dpfl_error *err)
{
    const dpfl_data_config *dc = &cfg->data;
    *s = (dpfl_input_standardization){.n = 0};
    if (dc->normalize != DPFL_NORM_STANDARD) return DPFL_OK;
    double mean[3], sd[3];
    int32_t n = 0;
    if (dpfl_dataset_is_files(dc->dataset) || dpfl_dataset_is_memory(dc->dataset)) { /* own data: given constants */
        const dpfl_number_list *m = &dc->feature_mean, *d = &dc->feature_std;
        const int32_t dim = c * h * w;
        if ((m->n != 1 && m->n != dim) || (d->n != 1 && d->n != dim))
            return dpfl_fail(err, DPFL_EINVAL, "data.feature_mean / feature_std: give 1 value or one per feature (%d); "
                             "got %d and %d", (int)dim, (int)m->n, (int)d->n);
        n = m->n == 1 && d->n == 1 ? 1 : dim;
        if (!(s->mean = expand(m, n, err)) || !(s->std = expand(d, n, err))) {
            dpfl_input_standardization_free(s);
            return DPFL_ENOMEM;
        }
        s->n = n;
        return DPFL_OK;
    }
    dpfl_status st = dpfl_dataset_standard_constants(dc->dataset, c, mean, sd, &n, err);
    if (st) return st;
    if (!(s->mean = dpfl_alloc(sizeof mean, err)) || !(s->std = dpfl_alloc(sizeof sd, err))) {
        dpfl_input_standardization_free(s);
        return DPFL_ENOMEM;
    }
    memcpy(s->mean, mean, sizeof mean);
    memcpy(s->std, sd, sizeof sd);
    s->n = n;
    return DPFL_OK;
}
