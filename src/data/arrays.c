/* A run's data from the caller's own arrays (dpfl/data.h dpfl_dataset_from_caller): what a program that holds its
 * data in memory -- Python's dpfl.arrays over NumPy arrays -- passes to dpfl_run instead of a dataset name.  The
 * checks are the file loaders' (so everything downstream may rely on finite features and labels in range), the
 * held-out test set is csv: files' (the same shuffle, so arrays equal to a CSV file's content train the same
 * model), and the arrays are shared rather than copied where nothing needs to change them.
 * Reference: the data pipeline of McMahan et al. 2017 (FedAvg, natural per-client partitions: "source" = client). */
#include "internal.h"

#include <math.h>
#include <string.h>

int dpfl_dataset_is_memory(const char *name)
{
    return name && !strncmp(name, "memory:", 7) && name[7] != '\0';
}

/* d (called `what`: "train" or "test") is well formed; *max_label gets its largest label. */
static dpfl_status check(const dpfl_dataset *d, const char *what, int32_t classes, int32_t *max_label,
                         dpfl_error *err)
{
    if (d->n < 1) return dpfl_fail(err, DPFL_EINVAL, "no examples in %s: n = %d", what, d->n);
    if (d->c < 1 || d->h < 1 || d->w < 1)
        return dpfl_fail(err, DPFL_EINVAL, "bad example shape of %s.x: %d x %d x %d (each at least 1)", what, d->c,
                         d->h, d->w);
    const int64_t dim = (int64_t)d->c * d->h * d->w;
    if (dim > INT32_MAX || (int64_t)d->n * dim > (int64_t)1 << 40)
        return dpfl_fail(err, DPFL_EINVAL, "%s.x is too large: %d examples of %lld values", what, d->n,
                         (long long)dim);
    if (!d->x || !d->y) return dpfl_fail(err, DPFL_EINVAL, "no data in %s: x and y must not be NULL", what);
    if (d->groups < 0 || (d->groups > 0) != (d->group != NULL))
        return dpfl_fail(err, DPFL_EINVAL, "%s.group: groups = %d and group %s given", what, d->groups,
                         d->group ? "is" : "is not");
    int32_t m = -1;
    for (int32_t i = 0; i < d->n; i++) {
        if (d->y[i] < 0) return dpfl_fail(err, DPFL_EINVAL, "%s.y[%d] = %d is negative (labels are 0, 1, ...)", what, i,
                                          d->y[i]);
        if (classes > 0 && d->y[i] >= classes)
            return dpfl_fail(err, DPFL_EINVAL, "%s.y[%d] = %d, but data.classes = %d", what, i, d->y[i], classes);
        if (d->y[i] > m) m = d->y[i];
        if (d->group && (d->group[i] < 0 || d->group[i] >= d->groups))
            return dpfl_fail(err, DPFL_EINVAL, "%s.group[%d] = %d is not in [0, %d)", what, i, d->group[i], d->groups);
    }
    const size_t len = (size_t)d->n * (size_t)dim;
    for (size_t j = 0; j < len; j++)
        if (!isfinite(d->x[j]))
            return dpfl_fail(err, DPFL_EINVAL, "%s.x[%zu] (example %zu, feature %zu) is %g: features must be finite",
                             what, j, j / (size_t)dim, j % (size_t)dim, (double)d->x[j]);
    *max_label = m;
    return DPFL_OK;
}

/* The fields of a dataset that describe the caller's arrays (no absent sources), sharing them. */
static dpfl_dataset view(const dpfl_dataset *d)
{
    dpfl_dataset v = {.n = d->n, .c = d->c, .h = d->h, .w = d->w, .dim = d->c * d->h * d->w, .x = d->x, .y = d->y,
                      .groups = d->group ? d->groups : 0, .group = d->group};
    return v;
}

static dpfl_status copy_of(const dpfl_dataset *v, dpfl_dataset *out, const char *what, dpfl_error *err)
{
    dpfl_status s = dpfl__dataset_alloc(out, v->n, v->c, v->h, v->w, v->groups, what, err);
    if (s) return s;
    memcpy(out->x, v->x, (size_t)v->n * (size_t)v->dim * sizeof(float));
    memcpy(out->y, v->y, (size_t)v->n * sizeof(int32_t));
    if (v->groups > 0) memcpy(out->group, v->group, (size_t)v->n * sizeof(int32_t));
    return DPFL_OK;
}

dpfl_status dpfl_dataset_from_caller(const dpfl_dataset *train, const dpfl_dataset *test, int32_t classes,
                                     double test_fraction, uint64_t seed, int copy, dpfl_dataset *out_train,
                                     dpfl_dataset *out_test, int *borrowed, dpfl_error *err)
{
    memset(out_train, 0, sizeof *out_train);
    memset(out_test, 0, sizeof *out_test);
    *borrowed = 0;
    if (!train) return dpfl_fail(err, DPFL_EINVAL, "no training arrays given");
    int32_t a = -1, b = -1;
    dpfl_status s = check(train, "train", classes, &a, err);
    if (!s && test) s = check(test, "test", classes, &b, err);
    if (s) return s;
    if (test && (test->c != train->c || test->h != train->h || test->w != train->w))
        return dpfl_fail(err, DPFL_EINVAL, "test.x's examples are %d x %d x %d, train.x's %d x %d x %d", test->c,
                         test->h, test->w, train->c, train->h, train->w);
    const int32_t k = classes > 0 ? classes : (a > b ? a : b) + 1;
    if (k < 2) return dpfl_fail(err, DPFL_EINVAL, "every label is 0 (train.y): a classifier needs 2 classes or more");
    const dpfl_dataset tv = view(train);
    if (!test) {
        if (!(test_fraction > 0 && test_fraction < 1))
            return dpfl_fail(err, DPFL_EINVAL, "data.test_fraction: %g holds out no test set from the arrays; give "
                                               "test arrays or a fraction in (0, 1)", test_fraction);
        s = dpfl__split_sources(&tv, test_fraction, seed, 0, out_train, out_test, "arrays", err);
    } else if (copy) {
        const dpfl_dataset sv = view(test);
        if (!(s = copy_of(&tv, out_train, "train arrays", err))) s = copy_of(&sv, out_test, "test arrays", err);
        if (s) dpfl_dataset_free(out_train);
    } else {
        *out_train = tv;
        *out_test = view(test);
        *borrowed = 1;
    }
    if (s) return s;
    if (out_test->group && out_test->groups != out_train->groups) { /* per-source test sets only when they match */
        if (*borrowed) out_test->group = NULL;
        else dpfl_free(out_test->group);
        out_test->group = NULL;
        out_test->groups = 0;
    }
    out_train->classes = out_test->classes = k;
    return DPFL_OK;
}
