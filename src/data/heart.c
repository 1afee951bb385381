/* UCI Heart Disease (Janosi, Steinbrunn, Pfisterer, Detrano 1988), four centres, with the preprocessing of
 * FLamby's Fed-Heart-Disease as used by rPDP-FL.  Raw columns (processed.*.data, 14 attributes):
 *   0 age, 1 sex, 2 cp (1-4), 3 trestbps, 4 chol, 5 fbs, 6 restecg (0-2), 7 thalach, 8 exang, 9 oldpeak,
 *   10 slope, 11 ca, 12 thal, 13 num (0-4).
 * Features: age, sex, cp=2, cp=3, cp=4, trestbps, chol, fbs, restecg=1, restecg=2, thalach, exang, oldpeak. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEART_FEATURES 13
#define HEART_CENTRES 4

static const char *const centre_name[HEART_CENTRES] = {"cleveland", "hungarian", "switzerland", "va"};

const char *dpfl_heart_centre_name(int32_t centre)
{
    return centre >= 0 && centre < HEART_CENTRES ? centre_name[centre] : "?";
}

static void features(const double *r, float *x)
{
    int j = 0;
    x[j++] = (float)r[0];
    x[j++] = (float)r[1];
    for (int v = 2; v <= 4; v++) x[j++] = r[2] == v;
    x[j++] = (float)r[3];
    x[j++] = (float)r[4];
    x[j++] = (float)r[5];
    for (int v = 1; v <= 2; v++) x[j++] = r[6] == v;
    x[j++] = (float)r[7];
    x[j++] = (float)r[8];
    x[j++] = (float)r[9];
}

static int row_usable(const double *r)
{
    for (int c = 0; c <= 9; c++)
        if (isnan(r[c])) return 0;
    return !isnan(r[13]);
}

/* Z-score rows [0, ntr) of x and rows [0, nte) of xt with the mean and sd (population) of the train rows.
 * A constant feature (sd 0, e.g. Switzerland's cholesterol, recorded as 0 throughout) is only centred. */
static void zscore(float *x, int32_t ntr, float *xt, int32_t nte)
{
    for (int j = 0; j < HEART_FEATURES; j++) {
        double m = 0, v = 0;
        for (int32_t i = 0; i < ntr; i++) m += x[(size_t)i * HEART_FEATURES + j];
        m /= ntr;
        for (int32_t i = 0; i < ntr; i++) {
            double d = x[(size_t)i * HEART_FEATURES + j] - m;
            v += d * d;
        }
        double sd = sqrt(v / ntr);
        if (sd < 1e-12) sd = 1.0;
        for (int32_t i = 0; i < ntr; i++) {
            float *p = &x[(size_t)i * HEART_FEATURES + j];
            *p = (float)((*p - m) / sd);
        }
        for (int32_t i = 0; i < nte; i++) {
            float *p = &xt[(size_t)i * HEART_FEATURES + j];
            *p = (float)((*p - m) / sd);
        }
    }
}

dpfl_status dpfl_heart_load(const char *dir, uint64_t split_seed, dpfl_dataset *train, dpfl_dataset *test,
                            dpfl_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    dpfl__table tab[HEART_CENTRES] = {{0}};
    int32_t ntr[HEART_CENTRES], nte[HEART_CENTRES], tot_tr = 0, tot_te = 0;
    int32_t *order[HEART_CENTRES] = {NULL};
    dpfl_status s = DPFL_OK;
    char path[4096];
    dpfl_rng root;
    dpfl_rng_init_seed(&root, split_seed);
    for (int c = 0; c < HEART_CENTRES && !s; c++) {
        snprintf(path, sizeof path, "%s/processed.%s.data", dir, centre_name[c]);
        s = dpfl__table_read(path, 0, &tab[c], err);
        if (s) break;
        if (tab[c].cols != 14) {
            s = dpfl_fail(err, DPFL_EFORMAT, "wrong number of columns (%s): %d, expected 14", path, tab[c].cols);
            break;
        }
        order[c] = malloc((size_t)tab[c].rows * sizeof(int32_t));
        if (!order[c]) {
            s = dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
            break;
        }
        int32_t m = 0;
        for (int32_t r = 0; r < tab[c].rows; r++) {
            const double *row = tab[c].v + (size_t)r * 14;
            if (!row_usable(row)) continue;
            if (row[2] < 1 || row[2] > 4 || row[6] < 0 || row[6] > 2 || row[13] < 0) {
                s = dpfl_fail(err, DPFL_EFORMAT, "value out of range (%s): line %d (cp must be 1-4, restecg 0-2, "
                              "num >= 0)", path, tab[c].line[r]);
                break;
            }
            order[c][m++] = r;
        }
        if (s) break;
        if (m < 4) {
            s = dpfl_fail(err, DPFL_EFORMAT, "too few complete rows (%s): %d", path, m);
            break;
        }
        dpfl_rng rc;
        dpfl_rng_derive(&root, &rc, 0x68656172u /* "hear" */, (uint64_t)c, 0);
        dpfl_rng_shuffle(&rc, order[c], (size_t)m);
        ntr[c] = (int32_t)((int64_t)m * 66 / 100); /* 66/34 split as in FLamby: 303 -> 199/104 */
        nte[c] = m - ntr[c];
        tot_tr += ntr[c];
        tot_te += nte[c];
    }
    if (!s) s = dpfl__dataset_alloc(train, tot_tr, 1, 1, HEART_FEATURES, HEART_CENTRES, dir, err);
    if (!s) s = dpfl__dataset_alloc(test, tot_te, 1, 1, HEART_FEATURES, HEART_CENTRES, dir, err);
    if (!s) {
        int32_t itr = 0, ite = 0;
        for (int c = 0; c < HEART_CENTRES; c++) {
            int32_t base_tr = itr, base_te = ite;
            for (int32_t k = 0; k < ntr[c] + nte[c]; k++) {
                const double *row = tab[c].v + (size_t)order[c][k] * 14;
                dpfl_dataset *d = k < ntr[c] ? train : test;
                int32_t i = k < ntr[c] ? itr++ : ite++;
                features(row, d->x + (size_t)i * HEART_FEATURES);
                d->y[i] = row[13] > 0;
                d->group[i] = c;
            }
            zscore(train->x + (size_t)base_tr * HEART_FEATURES, ntr[c], test->x + (size_t)base_te * HEART_FEATURES,
                   nte[c]);
        }
        train->classes = test->classes = 2;
    }
    for (int c = 0; c < HEART_CENTRES; c++) {
        dpfl__table_free(&tab[c]);
        free(order[c]);
    }
    if (s) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
    }
    return s;
}
