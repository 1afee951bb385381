/* The [data] section made into datasets: the named dataset or your own files, then the standardization asked
 * for (published constants for the image datasets, the config's given constants for your own data); and the
 * partition among clients the section asks for. */
#include "dpfl/fl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "a, b, c" into v[0..*n) (at most cap values). */
static dpfl_status number_list(const char *s, const char *key, double *v, int32_t cap, int32_t *n, dpfl_error *err)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x))
            return dpfl_fail(err, DPFL_EINVAL, "data.%s: value %d is not a number ('%.20s')", key, *n + 1, p);
        if (*n == cap) return dpfl_fail(err, DPFL_EINVAL, "data.%s: more than %d values", key, cap);
        v[(*n)++] = x;
        while (*end == ' ') end++;
        if (*end == ',') end++;
        else if (*end) return dpfl_fail(err, DPFL_EINVAL, "data.%s: expected ',' after value %d", key, *n);
        p = end;
        while (*p == ' ') p++;
    }
    if (*n == 0) return dpfl_fail(err, DPFL_EINVAL, "data.%s: no value", key);
    return DPFL_OK;
}

static dpfl_status standardize_given(const dpfl_data_config *dc, dpfl_dataset *train, dpfl_dataset *test,
                                     dpfl_error *err)
{
    double mean[96], sd[96];
    int32_t nm, ns;
    dpfl_status s = number_list(dc->feature_mean, "feature_mean", mean, 96, &nm, err);
    if (!s) s = number_list(dc->feature_std, "feature_std", sd, 96, &ns, err);
    if (!s) s = dpfl_dataset_standardize_values(train, mean, nm, sd, ns, err);
    if (!s) s = dpfl_dataset_standardize_values(test, mean, nm, sd, ns, err);
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
        o.header = dc->header == 1 ? 1 : dc->header == 2 ? 0 : -1;
        o.drop_missing = dc->missing == 1;
        o.test = dc->test;
        o.test_fraction = dc->test_fraction;
        o.classes = dc->classes;
        double rows[128];
        int32_t nrows = 0, irows[128];
        s = dc->source_rows[0] ? number_list(dc->source_rows, "source_rows", rows, 128, &nrows, err) : DPFL_OK;
        for (int32_t i = 0; i < nrows && !s; i++) {
            if (!(rows[i] >= 1 && rows[i] <= INT32_MAX && rows[i] == floor(rows[i])))
                s = dpfl_fail(err, DPFL_EINVAL, "data.source_rows: value %d (%g) is not a row count >= 1", i + 1, rows[i]);
            irows[i] = (int32_t)rows[i];
        }
        if (nrows) {
            o.source_rows = irows;
            o.nsource_rows = nrows;
        }
        if (!s) s = dpfl_dataset_load_files(dc->dataset, &o, seed, train, test, err);
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
