/* summary.json's record_budgets (rPDP-FL, record_dp.budgets): the levels with their budgets, rates and epsilons so
 * far, how many records opted out or were filtered out, and the distributions of budgets and epsilons over all
 * records and per client (Liu et al., rPDP-FL; the ledger itself: rpdp_plan.c). */
#include "accounting/accounting.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double quantile_sorted(const double *v, int64_t n, double q)
{
    if (n == 0) return NAN;
    double x = q * (double)(n - 1);
    int64_t i = (int64_t)floor(x);
    return i + 1 < n ? v[i] + (x - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void add_dist(cJSON *o, const char *name, double *v, int64_t n)
{
    cJSON *d = cJSON_AddObjectToObject(o, name);
    if (n == 0) return;
    qsort(v, (size_t)n, sizeof *v, fl_cmp_double);
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += v[i] / (double)n;
    cJSON_AddNumberToObject(d, "min", v[0]);
    cJSON_AddNumberToObject(d, "median", quantile_sorted(v, n, 0.5));
    cJSON_AddNumberToObject(d, "max", v[n - 1]);
    cJSON_AddNumberToObject(d, "mean", mean);
}

/* Counts and distributions over a set of records (all, or one client's); rec_eps[i]: record i's epsilon.  Every
 * value here follows from public settings (budgets, levels, rounds); under the filter, which records were filtered
 * out depends on their gradient norms: fl_rpdp_filtered_out, reported in not_private. */
static void add_records(cJSON *o, const fl_rpdp_records *rec, const fl_rpdp_levels *L, const double *rec_eps, const int32_t *idx, int64_t m, double *tb, double *te, double *tp,
                        double *over_max)
{
    int64_t unused = 0, dropped = 0, opted = 0, over = 0, used = 0;
    for (int64_t j = 0; j < m; j++) {
        int64_t i = idx ? idx[j] : j;
        int32_t l = rec->level[i];
        tb[j] = rec->budget[i];
        double e = rec_eps[i];
        te[j] = e;
        if (e > rec->budget[i]) over++;
        if (e - rec->budget[i] > *over_max) *over_max = e - rec->budget[i];
        if (l == FL_RPDP_DROPPED) dropped++;
        else if (!(L->lv[l].p > 0)) unused++;
        else {
            if (L->lv[l].opted_out) opted++;
            tp[used++] = L->lv[l].p;
        }
    }
    cJSON_AddNumberToObject(o, "records", (double)m);
    cJSON_AddNumberToObject(o, "unused", (double)unused);
    cJSON_AddNumberToObject(o, "dropped", (double)dropped);
    cJSON_AddNumberToObject(o, "opted_out", (double)opted);
    cJSON_AddNumberToObject(o, "over_budget", (double)over);
    add_dist(o, "budget", tb, m);
    add_dist(o, "epsilon", te, m);
    add_dist(o, "p", tp, used);
}

/* summary.json's per-record histograms (what `dpfl report` draws): every record's own budget and its realized
 * epsilon counted over one set of log-spaced bins (records that were never charged, epsilon 0, apart), and the
 * share of its budget each record used, epsilon_i / budget_i, over 20 bins of [0, 1]. */
#define RPDP_HIST_BINS 24
#define RPDP_USED_BINS 20
static void add_histograms(cJSON *o, const fl_rpdp_records *rec, const double *rec_eps)
{
    double lo = INFINITY, hi = 0;
    for (int64_t i = 0; i < rec->n; i++) {
        const double v[2] = {rec->budget[i], rec_eps[i]};
        for (int j = 0; j < 2; j++)
            if (v[j] > 0 && isfinite(v[j])) lo = fmin(lo, v[j]), hi = fmax(hi, v[j]);
    }
    if (!(hi > 0)) return;
    if (!(hi > lo * (1 + 1e-9))) lo /= 1.1, hi *= 1.1; /* one value: one bin around it */
    double edges[RPDP_HIST_BINS + 1], nb[RPDP_HIST_BINS] = {0}, ne[RPDP_HIST_BINS] = {0};
    double used[RPDP_USED_BINS] = {0}, used_edges[RPDP_USED_BINS + 1];
    int64_t zero = 0, above = 0;
    const double step = log(hi / lo) / RPDP_HIST_BINS;
    for (int k = 0; k <= RPDP_HIST_BINS; k++) edges[k] = k == RPDP_HIST_BINS ? hi : lo * exp(step * k);
    for (int k = 0; k <= RPDP_USED_BINS; k++) used_edges[k] = (double)k / RPDP_USED_BINS;
    for (int64_t i = 0; i < rec->n; i++) {
        const double v[2] = {rec->budget[i], rec_eps[i]};
        double *count[2] = {nb, ne};
        for (int j = 0; j < 2; j++) {
            if (!(v[j] > 0 && isfinite(v[j]))) {
                zero += j == 1;
                continue;
            }
            int k = (int)floor(log(v[j] / lo) / step);
            count[j][k < 0 ? 0 : k >= RPDP_HIST_BINS ? RPDP_HIST_BINS - 1 : k] += 1;
        }
        if (!(rec->budget[i] > 0)) continue;
        double f = rec_eps[i] / rec->budget[i];
        if (f > 1) above++;
        else used[f >= 1 ? RPDP_USED_BINS - 1 : (int)floor(f * RPDP_USED_BINS)] += 1;
    }
    cJSON *h = cJSON_AddObjectToObject(o, "histogram");
    cJSON_AddStringToObject(h, "what", "records per bin (log-spaced edges): each record's own budget, and the "
                                       "epsilon it realized; records never charged (epsilon 0) apart");
    cJSON_AddItemToObject(h, "edges", cJSON_CreateDoubleArray(edges, RPDP_HIST_BINS + 1));
    cJSON_AddItemToObject(h, "budget", cJSON_CreateDoubleArray(nb, RPDP_HIST_BINS));
    cJSON_AddItemToObject(h, "epsilon", cJSON_CreateDoubleArray(ne, RPDP_HIST_BINS));
    cJSON_AddNumberToObject(h, "epsilon_zero", (double)zero);
    cJSON *u = cJSON_AddObjectToObject(o, "budget_used");
    cJSON_AddStringToObject(u, "what", "records per bin of epsilon_i / budget_i, the share of its own budget each "
                                       "record used; above_1 counts records over their budget");
    cJSON_AddItemToObject(u, "edges", cJSON_CreateDoubleArray(used_edges, RPDP_USED_BINS + 1));
    cJSON_AddItemToObject(u, "records", cJSON_CreateDoubleArray(used, RPDP_USED_BINS));
    cJSON_AddNumberToObject(u, "above_1", (double)above);
}

/* What the plan is: budgets, policy, bound, its noise and what it was calibrated for, the round it composes. */
static void add_plan(cJSON *o, const fl_rpdp_levels *L, const fl_rpdp_filter *f, const dpfl_config *cfg)
{
    cJSON_AddStringToObject(o, "budgets", dpfl_config_choice(cfg, "record_dp.budgets"));
    cJSON_AddStringToObject(o, "policy", dpfl_config_choice(cfg, "record_dp.budget_policy"));
    cJSON_AddStringToObject(o, "bound", f->on ? "filter" : dpfl_config_choice(cfg, "record_dp.two_stage_bound"));
    cJSON_AddNumberToObject(o, "noise", L->mech.z);
    if (f->on) {
        cJSON_AddStringToObject(o, "noise_calibrated_for", "budget_max with gradient norm C at every step of the "
                                                           "planned rounds (individual Renyi filter)");
        cJSON_AddNumberToObject(o, "filter_order", f->alpha);
        cJSON_AddNumberToObject(o, "filter_conversion", f->conv);
    } else {
        cJSON_AddStringToObject(o, "noise_calibrated_for", "budget_max at p = 1 over the planned rounds");
    }
    cJSON_AddNumberToObject(o, "budget_max", cfg->record_dp.budget_max);
    cJSON_AddNumberToObject(o, "planned_rounds", L->planned_rounds);
    cJSON_AddNumberToObject(o, "client_rate", fl_rpdp_params(&L->mech, cfg, 0).lambda);
    cJSON_AddNumberToObject(o, "local_steps", (double)L->mech.steps);
    cJSON_AddNumberToObject(o, "delta", cfg->record_dp.delta);
    if (L->fit_ok) cJSON_AddNumberToObject(o, "scf_r2", L->fit.r2);
}

/* the levels with records: budget, rate, records, rounds charged, epsilon so far (eps[k]), opted out */
static void add_levels(cJSON *o, const fl_rpdp_levels *L, const double *eps)
{
    cJSON *lvs = cJSON_AddArrayToObject(o, "levels");
    for (int32_t k = 0; k < L->nlevels; k++) {
        if (L->lv[k].records == 0) continue;
        cJSON *l = cJSON_CreateObject();
        cJSON_AddNumberToObject(l, "budget", L->lv[k].budget);
        cJSON_AddNumberToObject(l, "p", L->lv[k].p);
        cJSON_AddNumberToObject(l, "records", (double)L->lv[k].records);
        cJSON_AddNumberToObject(l, "rounds", L->lv[k].rounds);
        cJSON_AddNumberToObject(l, "epsilon", eps[k]);
        cJSON_AddBoolToObject(l, "opted_out", L->lv[k].opted_out);
        cJSON_AddItemToArray(lvs, l);
    }
}

dpfl_status fl_rpdp_report(const fl_rpdp *rp, const dpfl_config *cfg, const dpfl_partition *part, cJSON *o,
                           double *eps_max, dpfl_error *err)
{
    const fl_rpdp_records *rec = &rp->rec;
    double *eps = malloc((size_t)rp->levels.nlevels * sizeof *eps), mx;
    if (!eps_max) eps_max = &mx;
    double *tb = malloc((size_t)rec->n * sizeof *tb), *te = malloc((size_t)rec->n * sizeof *te),
           *tp = malloc((size_t)rec->n * sizeof *tp), *re = malloc((size_t)rec->n * sizeof *re);
    dpfl_status st = DPFL_OK;
    if (!eps || !tb || !te || !tp || !re) st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (budget report)");
    if (!st) st = rp->filter.on ? fl_rpdp_max_epsilon(rp, cfg, eps_max, err)
                                : fl_rpdp_epsilons(&rp->levels, cfg, eps, eps_max, err);
    if (!st && rp->filter.on) eps[0] = *eps_max;
    for (int64_t i = 0; !st && i < rec->n; i++) { /* each record's epsilon so far */
        if (!rp->filter.on) re[i] = rec->level[i] >= 0 ? eps[rec->level[i]] : 0.0;
        else if (i > 0 && rp->filter.cap[i] == rp->filter.cap[i - 1]) re[i] = re[i - 1]; /* the same event */
        else st = fl_rpdp_filter_epsilon(rp, cfg, i, &re[i], err);
    }
    if (!st && o) {
        double over_max = -INFINITY;
        add_plan(o, &rp->levels, &rp->filter, cfg);
        add_records(o, rec, &rp->levels, re, NULL, rec->n, tb, te, tp, &over_max);
        cJSON_AddNumberToObject(o, "epsilon_minus_budget_max", over_max);
        add_histograms(o, rec, re);
        add_levels(o, &rp->levels, eps);
        if (part->clients <= 1000) {
            cJSON *pc = cJSON_AddArrayToObject(o, "per_client");
            for (int32_t c = 0; c < part->clients; c++) {
                cJSON *cl = cJSON_CreateObject();
                double om = -INFINITY;
                add_records(cl, rec, &rp->levels, re, part->index + part->offset[c],
                            part->offset[c + 1] - part->offset[c], tb, te, tp, &om);
                cJSON_AddNumberToObject(cl, "expected_batch", rec->denom[c]);
                cJSON_AddItemToArray(pc, cl);
            }
        }
    }
    free(eps);
    free(tb);
    free(te);
    free(tp);
    free(re);
    return st;
}

int64_t fl_rpdp_filtered_out(const fl_rpdp_levels *L, const fl_rpdp_records *rec, const int32_t *idx, int64_t m)
{
    int64_t out = 0;
    for (int64_t j = 0; j < m; j++) {
        const int64_t i = idx ? idx[j] : j;
        const int32_t l = rec->level[i];
        out += l >= 0 && L->lv[l].p > 0 && !L->lv[l].opted_out && !(rec->p[i] > 0);
    }
    return out;
}
