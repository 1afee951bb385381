/* rPDP-FL in training (record_dp.budgets): each record's budget, the sampling rate it buys and the per-record
 * ledger that keeps every record within its budget.
 *
 *   budgets   from a file, a class table or the paper's generators (privacy/budgets.c), one per training record
 *   policy    rpdp keeps them; minimum puts every record at the smallest; dropout drops the records below the mean
 *             and puts the rest at the mean (the paper's baselines).  Either way no record gets more than its own.
 *   design    the round the simulation runs (dpfl_record_dp_design, mech/rpdp.c): the client sampler's design
 *             (lambda) and the local steps of a participating client (tau); every level's event and accountant
 *             question is built from it (dpfl_mech_rpdp_event / _params), with the noise below
 *   noise     z calibrated so that a record sampled with p = 1 for the planned rounds (record_dp.budget_rounds, or
 *             fl.rounds) meets budget_max (never above)
 *   levels    records share (budget, p, rounds) profiles: the distinct budgets when there are at most FL_RPDP_LEVELS,
 *             else each budget rounded DOWN onto a geometric lattice of FL_RPDP_LEVELS budgets (at most 2.4% of a
 *             record's budget unused at the defaults), so that the ledger and the opt-out checks cost a few hundred
 *             accountant calls, not one per record
 *   rates     p of a level: the largest p whose exact epsilon*(p) over the planned rounds is within the budget,
 *             found by bisection on the exact accountant from the SCF estimate (the paper's curve fit, which alone
 *             can pass the budget: `dpfl scf` shows by how much); a budget below epsilon*(1e-6) is unusable (p = 0,
 *             the record is never sampled)
 *   ledger    every round charges every active level one two-stage round (client rate lambda, tau local steps of
 *             Poisson(p) with noise z C), whether or not its client took part: that is what the lambda
 *             amplification accounts; before a round, a level whose next round would pass its budget opts out
 *             (p = 0 from then on, epsilon frozen).  Within the planned rounds no level opts out (p was chosen for
 *             them); a resumed run given more rounds meets the opt-outs.
 *   division  each step's noisy clipped sum is divided by the client's expected batch sum_i p_i of the plan (a
 *             constant of the run, as Opacus divides by the expected batch size; opt-outs do not change it). */
#include "accounting/accounting.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int fl_rpdp_configured(const dpfl_config *cfg)
{
    return cfg->record_dp.enabled && cfg->record_dp.budgets != DPFL_BUDGETS_NONE;
}

void fl_rpdp_free(fl_rpdp *rp)
{
    free(rp->rec.budget);
    free(rp->rec.level);
    free(rp->rec.p);
    free(rp->rec.denom);
    free(rp->levels.lv);
    free(rp->filter.cap);
    free(rp->filter.spent);
    memset(rp, 0, sizeof *rp);
}

dpfl_status fl_rpdp_alloc(fl_rpdp *rp, int64_t n, int32_t clients, int32_t nlevels, dpfl_error *err)
{
    fl_rpdp_free(rp);
    fl_rpdp_records *rec = &rp->rec;
    rec->n = n;
    rec->clients = clients;
    rp->levels.nlevels = nlevels;
    rec->budget = malloc((size_t)n * sizeof *rec->budget);
    rec->level = malloc((size_t)n * sizeof *rec->level);
    rec->p = calloc((size_t)n, sizeof *rec->p);
    rec->denom = calloc((size_t)clients, sizeof *rec->denom);
    rp->levels.lv = calloc((size_t)(nlevels > 0 ? nlevels : 1), sizeof *rp->levels.lv);
    if (!rec->budget || !rec->level || !rec->p || !rec->denom || !rp->levels.lv) {
        fl_rpdp_free(rp);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-record budgets of %lld records)", (long long)n);
    }
    rp->on = 1;
    return DPFL_OK;
}

void fl_rpdp_set_design(fl_rpdp_levels *L, const dpfl_mech_rpdp *design)
{
    L->mech = dpfl_mech_rpdp_of(&design->clients, design->steps, L->mech.z);
}

dpfl_status fl_rpdp_check_round(const fl_rpdp_levels *L, const dpfl_mech_rpdp *ran, int32_t round, dpfl_error *err)
{
    const dpfl_mech_rpdp *m = &L->mech;
    if (ran->clients.kind != m->clients.kind || ran->clients.q != m->clients.q || ran->steps != m->steps ||
        ran->z != m->z)
        return dpfl_fail(err, DPFL_EINVAL, "per-record budgets: round %d runs client rate %.17g, %lld local steps, "
                                           "noise %.17g; the plan composes rate %.17g, %lld steps, noise %.17g",
                         (int)round, ran->clients.q, (long long)ran->steps, ran->z, m->clients.q, (long long)m->steps,
                         m->z);
    return DPFL_OK;
}

/* the accountant's parameters of `rounds` of the design's rounds (the mechanism's own, mech/rpdp.c) */
dpfl_rpdp_params fl_rpdp_params(const dpfl_mech_rpdp *round, const dpfl_config *cfg, int32_t rounds)
{
    dpfl_rpdp_params pp = dpfl_mech_rpdp_params(round, rounds, cfg->record_dp.delta);
    pp.use_pld = cfg->record_dp.two_stage_bound == DPFL_TWO_STAGE_PLD;
    return pp;
}

dpfl_status fl_rpdp_level_epsilon(const fl_rpdp_levels *L, const dpfl_config *cfg, const fl_rpdp_level *lv,
                                  int32_t rounds, double *eps, dpfl_error *err)
{
    if (rounds <= 0 || !(lv->p > 0)) {
        *eps = 0.0;
        return DPFL_OK;
    }
    const dpfl_rpdp_params pp = fl_rpdp_params(&L->mech, cfg, rounds);
    return dpfl_rpdp_epsilon(&pp, lv->p, eps, err);
}

/* ---------------------------------------------------------------- budgets in */
static dpfl_status read_budgets(const dpfl_config *cfg, const dpfl_dataset *train, dpfl_rng *rng, double *b,
                                dpfl_error *err)
{
    const dpfl_record_dp_config *r = &cfg->record_dp;
    const size_t n = (size_t)train->n;
    switch (r->budgets) {
    case DPFL_BUDGETS_THREELEVELS:
    case DPFL_BUDGETS_MIXGAUSS:
    case DPFL_BUDGETS_PARETO: {
        dpfl_pref_dist d = r->budgets == DPFL_BUDGETS_THREELEVELS ? DPFL_PREF_THREELEVELS
                           : r->budgets == DPFL_BUDGETS_MIXGAUSS  ? DPFL_PREF_MIXGAUSS
                                                                  : DPFL_PREF_PARETO;
        dpfl_budgets_generate(d, n, r->budget_min, r->budget_max, r->budget_shuffle, rng, b);
        return DPFL_OK;
    }
    case DPFL_BUDGETS_FILE: {
        dpfl_error e;
        dpfl_status st = dpfl_budgets_read_records(r->budget_file, n, b, &e);
        if (st) return dpfl_fail(err, st, "record_dp.budget_file: %s", e.msg);
        return DPFL_OK;
    }
    case DPFL_BUDGETS_CLASS: {
        const dpfl_number_list *cb = &r->class_budgets; /* positive numbers: checked when the key was read */
        if (cb->n != train->classes)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.class_budgets: %d budgets for %d classes (one per class, in "
                                               "label order)", (int)cb->n, (int)train->classes);
        for (size_t i = 0; i < n; i++) b[i] = cb->v[train->y[i]];
        return DPFL_OK;
    }
    case DPFL_BUDGETS_NONE: break;
    }
    return dpfl_fail(err, DPFL_EINVAL, "record_dp.budgets: none");
}

/* ---------------------------------------------------------------- levels and rates */
int fl_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Assign levels: each record's effective budget (the policy applied), the levels' budgets (exact, or a geometric
 * lattice), each record's level (the largest not above its budget). */
static dpfl_status assign_levels(fl_rpdp_records *rec, fl_rpdp_levels *L, const dpfl_config *cfg, dpfl_error *err)
{
    const int64_t n = rec->n;
    double *eff = malloc((size_t)n * sizeof *eff), *sorted = malloc((size_t)n * sizeof *sorted);
    if (!eff || !sorted) {
        free(eff);
        free(sorted);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (budgets)");
    }
    double mn = INFINITY, mean = 0;
    for (int64_t i = 0; i < n; i++) {
        mn = fmin(mn, rec->budget[i]);
        mean += rec->budget[i] / (double)n;
    }
    for (int64_t i = 0; i < n; i++) {
        double b = rec->budget[i];
        switch (cfg->record_dp.budget_policy) {
        case DPFL_POLICY_RPDP:
        case DPFL_POLICY_FILTER: eff[i] = b; break; /* the filter has its own plan */
        case DPFL_POLICY_MINIMUM: eff[i] = mn; break;
        case DPFL_POLICY_DROPOUT: eff[i] = b < mean ? -1.0 : mean; break;
        }
        sorted[i] = eff[i];
    }
    qsort(sorted, (size_t)n, sizeof *sorted, fl_cmp_double);
    int32_t distinct = 0;
    double lo = INFINITY, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sorted[i] < 0) continue;
        if (distinct == 0 || sorted[i] != sorted[i - 1]) distinct++;
        lo = fmin(lo, sorted[i]);
        hi = fmax(hi, sorted[i]);
    }
    const int exact = distinct <= FL_RPDP_LEVELS;
    L->nlevels = 0;
    if (exact) {
        for (int64_t i = 0; i < n; i++)
            if (sorted[i] >= 0 && (L->nlevels == 0 || sorted[i] != L->lv[L->nlevels - 1].budget))
                L->lv[L->nlevels++].budget = sorted[i];
    } else { /* geometric lattice from the smallest to the largest budget */
        for (int32_t k = 0; k < FL_RPDP_LEVELS; k++)
            L->lv[k].budget = k == FL_RPDP_LEVELS - 1 ? hi : lo * pow(hi / lo, (double)k / (FL_RPDP_LEVELS - 1));
        L->nlevels = FL_RPDP_LEVELS;
    }
    for (int64_t i = 0; i < n; i++) {
        if (eff[i] < 0) {
            rec->level[i] = FL_RPDP_DROPPED;
            continue;
        }
        /* the largest level <= eff[i] (the lattice's first level is the smallest budget) */
        int32_t a = 0, b = L->nlevels - 1;
        while (a < b) {
            int32_t m = (a + b + 1) / 2;
            if (L->lv[m].budget <= eff[i]) a = m;
            else b = m - 1;
        }
        rec->level[i] = a;
    }
    free(eff);
    free(sorted);
    return DPFL_OK;
}

/* The levels' rates: the SCF fit once, then each level made safe on the exact accountant. */
static dpfl_status level_rates(fl_rpdp_levels *L, const dpfl_config *cfg, dpfl_error *err)
{
    dpfl_status st = DPFL_OK;
    const dpfl_rpdp_params pp = fl_rpdp_params(&L->mech, cfg, L->planned_rounds);
    dpfl_error fe;
    L->fit_ok = dpfl_scf_fit_curve(&pp, &L->fit, &fe) == DPFL_OK && isfinite(L->fit.a) && L->fit.a > 0;
    double eps1;
    if ((st = dpfl_rpdp_epsilon(&pp, 1.0, &eps1, err))) return st;
    double safe = 0.0, eps_safe = 0.0; /* rates rise with the budget: a level's rate is safe for the next */
    for (int32_t k = 0; k < L->nlevels && !st; k++) {
        if ((st = dpfl_rpdp_safe_rate(&pp, L->fit_ok ? &L->fit : NULL, L->lv[k].budget, eps1, safe, eps_safe,
                                      &L->lv[k].p, err)))
            break;
        if (L->lv[k].p > safe) {
            safe = L->lv[k].p;
            st = dpfl_rpdp_epsilon(&pp, safe, &eps_safe, err);
        }
    }
    return st;
}

dpfl_status fl_rpdp_rates(fl_rpdp *rp, const dpfl_partition *part, dpfl_error *err)
{
    fl_rpdp_records *rec = &rp->rec;
    fl_rpdp_levels *L = &rp->levels;
    const fl_rpdp_filter *f = &rp->filter;
    for (int32_t k = 0; k < L->nlevels; k++) L->lv[k].records = 0;
    for (int64_t i = 0; i < rec->n; i++) {
        int32_t l = rec->level[i];
        if (l < FL_RPDP_DROPPED || l >= L->nlevels)
            return dpfl_fail(err, DPFL_EFORMAT, "per-record budgets: record %lld has level %d of %d", (long long)i, l,
                             L->nlevels);
        rec->p[i] = l >= 0 && !L->lv[l].opted_out ? L->lv[l].p : 0.0;
        if (f->on && l >= 0 && f->cap[i] - f->spent[i] < DPFL_FILTER_OUT * f->cap[i])
            rec->p[i] = 0.0; /* spent (client.c) */
        if (l >= 0) L->lv[l].records++;
    }
    double plan_p[FL_RPDP_LEVELS]; /* the plan's rates: opt-outs do not change the divisors */
    DPFL_ASSERT(L->nlevels <= FL_RPDP_LEVELS);
    for (int32_t k = 0; k < L->nlevels; k++) plan_p[k] = L->lv[k].p;
    for (int32_t c = 0; c < part->clients; c++)
        rec->denom[c] = dpfl_mech_rpdp_denom(plan_p, rec->level, part->index + part->offset[c],
                                             part->offset[c + 1] - part->offset[c]);
    return DPFL_OK;
}

/* epsilon of an (alpha, B)-RDP pair is B + conversion_cost(alpha) (the conversion is a property of the two output
 * distributions, so it holds for the filter's adaptive composition); > 0 for delta < 1/e */
static double conversion_cost(double alpha, double delta)
{
    const double zero = 0.0;
    return dpfl_rdp_to_epsilon(&alpha, &zero, 1, delta, DPFL_CONV_TIGHT, NULL);
}

/* The filter's order: the configured one, or (auto) the order that needs the least noise for budget_max
 * (the smallest alpha / (budget_max - cost(alpha))) among those whose conversion costs at most half of the
 * smallest budget, so that every record keeps at least half of its budget to spend. */
static double filter_order(const fl_rpdp_records *rec, const dpfl_config *cfg)
{
    if (cfg->record_dp.filter_order > 0) return cfg->record_dp.filter_order;
    double mn = INFINITY;
    for (int64_t i = 0; i < rec->n; i++) mn = fmin(mn, rec->budget[i]);
    const double delta = cfg->record_dp.delta, top = cfg->record_dp.budget_max;
    double best = 0.0, best_cost = INFINITY;
    for (int k = 0; k <= 4000; k++) { /* alpha from 1.001 to 1e6, 0.35% apart */
        double a = 1.0 + 1e-3 * pow(1e9, k / 4000.0), c = conversion_cost(a, delta);
        if (c > mn / 2 || !(c < top)) continue;
        double cost = a / (top - c);
        if (cost < best_cost) {
            best_cost = cost;
            best = a;
        }
    }
    return best > 0 ? best : 1.0 + 1e6; /* no order leaves half of the smallest budget: the largest */
}

dpfl_status fl_rpdp_filter_setup(fl_rpdp_filter *f, const fl_rpdp_records *rec, const dpfl_config *cfg,
                                 dpfl_error *err)
{
    f->on = 1;
    f->alpha = filter_order(rec, cfg);
    f->conv = conversion_cost(f->alpha, cfg->record_dp.delta);
    free(f->cap);
    free(f->spent);
    f->cap = malloc((size_t)rec->n * sizeof *f->cap);
    f->spent = calloc((size_t)rec->n, sizeof *f->spent);
    if (!f->cap || !f->spent) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-record filter)");
    for (int64_t i = 0; i < rec->n; i++) f->cap[i] = fmax(rec->budget[i] - f->conv, 0.0);
    return DPFL_OK;
}

/* budget_policy = filter: z such that a record with budget_max whose clipped gradient has norm C at every
 * local step of the planned rounds of the design spends exactly its Renyi budget budget_max - conv (the
 * mechanism's noise plan, dpfl_mech_filter_noise); one level at p = 1 (private gradient descent on each client's
 * data), records whose budget does not cover the conversion dropped. */
static dpfl_status filter_plan(fl_rpdp *rp, const dpfl_config *cfg, const dpfl_partition *part, dpfl_error *err)
{
    fl_rpdp_filter *f = &rp->filter;
    fl_rpdp_levels *L = &rp->levels;
    dpfl_status st = fl_rpdp_filter_setup(f, &rp->rec, cfg, err);
    if (st) return st;
    const double top = cfg->record_dp.budget_max - f->conv;
    if (!(top > 0))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.filter_order: converting order %g to delta = %g costs "
                                           "epsilon %g, more than budget_max (%g); raise filter_order",
                         f->alpha, cfg->record_dp.delta, f->conv, cfg->record_dp.budget_max);
    L->mech.z = dpfl_mech_filter_noise(&L->mech, L->planned_rounds, f->alpha, top);
    L->nlevels = 1;
    L->lv[0].budget = cfg->record_dp.budget_max;
    L->lv[0].p = 1.0;
    for (int64_t i = 0; i < rp->rec.n; i++) rp->rec.level[i] = f->cap[i] > 0 ? 0 : FL_RPDP_DROPPED;
    return fl_rpdp_rates(rp, part, err);
}

/* one record in one client: a replicated partition would spend a record's budget several times */
static dpfl_status check_held_once(const dpfl_partition *part, int64_t n, dpfl_error *err)
{
    uint8_t *seen = calloc((size_t)n, 1);
    if (!seen) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (budgets)");
    dpfl_status st = DPFL_OK;
    for (int32_t j = 0; j < part->offset[part->clients] && !st; j++)
        if (seen[part->index[j]]++)
            st = dpfl_fail(err, DPFL_EINVAL, "record_dp.budgets: record %d is held twice (data.samples_per_client "
                                             "replicates records); per-record budgets need each record once",
                           part->index[j]);
    free(seen);
    return st;
}

dpfl_status fl_rpdp_plan(fl_rpdp *rp, const dpfl_config *cfg, const dpfl_mech_rpdp *design, const dpfl_dataset *train,
                         const dpfl_partition *part, dpfl_rng *rng, dpfl_error *err)
{
    dpfl_status st = fl_rpdp_alloc(rp, train->n, part->clients, FL_RPDP_LEVELS, err);
    if (st) return st;
    fl_rpdp_levels *L = &rp->levels;
    L->mech = dpfl_mech_rpdp_of(&design->clients, design->steps, 1.0); /* z: calibrated below */
    if ((st = check_held_once(part, train->n, err))) return st;
    if ((st = read_budgets(cfg, train, rng, rp->rec.budget, err))) return st;
    L->planned_rounds = cfg->record_dp.budget_rounds > 0 ? cfg->record_dp.budget_rounds : cfg->fl.rounds;
    if (cfg->record_dp.budget_policy == DPFL_POLICY_FILTER) return filter_plan(rp, cfg, part, err);
    const dpfl_rpdp_params pp = fl_rpdp_params(&L->mech, cfg, L->planned_rounds);
    if ((st = dpfl_rpdp_calibrate_noise(&pp, cfg->record_dp.budget_max, 1e-3, &L->mech.z, err))) return st;
    /* levels (the policy applied), their rates, the per-record rates and per-client divisors */
    if ((st = assign_levels(&rp->rec, L, cfg, err)) || (st = level_rates(L, cfg, err))) return st;
    return fl_rpdp_rates(rp, part, err);
}

/* ---------------------------------------------------------------- the ledger, round by round */
dpfl_status fl_rpdp_before_round(fl_rpdp *rp, const dpfl_config *cfg, int *changed, dpfl_error *err)
{
    *changed = 0;
    if (rp->filter.on) return DPFL_OK; /* the filter acts inside each step (client.c) */
    fl_rpdp_levels *L = &rp->levels;
    for (int32_t k = 0; k < L->nlevels; k++) {
        fl_rpdp_level *lv = &L->lv[k];
        if (lv->opted_out || !(lv->p > 0) || lv->records == 0 || lv->rounds + 1 <= L->planned_rounds) continue;
        double e;
        dpfl_status st = fl_rpdp_level_epsilon(L, cfg, lv, lv->rounds + 1, &e, err);
        if (st) return st;
        if (e > lv->budget) {
            lv->opted_out = 1;
            *changed = 1;
        }
    }
    if (*changed)
        for (int64_t i = 0; i < rp->rec.n; i++)
            if (rp->rec.level[i] >= 0 && L->lv[rp->rec.level[i]].opted_out) rp->rec.p[i] = 0.0;
    return DPFL_OK;
}

void fl_rpdp_charge(fl_rpdp_levels *L)
{
    for (int32_t k = 0; k < L->nlevels; k++)
        if (!L->lv[k].opted_out && L->lv[k].p > 0 && L->lv[k].records > 0) L->lv[k].rounds++;
}

/* Under the filter, what a record is guaranteed is its cap (Feldman-Zrnic: its losses at alpha never pass it, so the
 * run is (alpha, cap_i)-RDP for it), not the losses it happened to spend: those depend on its data and on the noise
 * drawn, so reporting them as an epsilon would need a privacy odometer.  The event of record i: rdp-filter(alpha,
 * cap_i), once a round has been trained (nothing is released before). */
static int filter_charges(const fl_rpdp_filter *f, int trained, int64_t i)
{
    return f->cap[i] > 0 && trained;
}

/* a round has been charged to the filter's one level */
static int filter_trained(const fl_rpdp *rp) { return rp->levels.lv[0].rounds > 0; }

/* The record with the largest cap (every guarantee grows with the cap), or -1 when none can contribute. */
static int64_t filter_worst(const fl_rpdp_filter *f, int64_t n, int trained)
{
    int64_t w = -1;
    for (int64_t i = 0; i < n; i++)
        if (filter_charges(f, trained, i) && (w < 0 || f->cap[i] > f->cap[w])) w = i;
    return w;
}

/* Record i's epsilon under the filter: the RDP accountant on its event, at most its budget (= cap_i + conv, what the
 * cap was set from); 0 for a record that cannot contribute. */
static dpfl_status filter_epsilon(const fl_rpdp_filter *f, const double *budget, int trained, const dpfl_config *cfg,
                                  int64_t i, double *eps, dpfl_error *err)
{
    *eps = 0.0;
    if (i < 0 || !filter_charges(f, trained, i)) return DPFL_OK;
    dpfl_event ev = dpfl_event_rdp_filter(f->alpha, f->cap[i], 1);
    dpfl_guarantee g;
    dpfl_status st = dpfl_account_epsilon(&ev, 1, cfg->record_dp.delta, DPFL_ACC_RDP, NULL, &g, err);
    if (!st) *eps = fmin(g.epsilon, budget[i]);
    return st;
}

dpfl_status fl_rpdp_filter_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, int64_t i, double *eps, dpfl_error *err)
{
    const int trained = filter_trained(rp);
    return filter_epsilon(&rp->filter, rp->rec.budget, trained, cfg, i, eps, err);
}

/* epsilon rises with p at equal rounds: the active level with the largest p, and every opted-out level */
static dpfl_status levels_max_epsilon(const fl_rpdp_levels *L, const dpfl_config *cfg, double *max, dpfl_error *err)
{
    *max = 0;
    int32_t top = -1;
    for (int32_t k = 0; k < L->nlevels; k++) {
        const fl_rpdp_level *lv = &L->lv[k];
        if (lv->records == 0) continue;
        if (lv->opted_out) {
            double e;
            dpfl_status st = fl_rpdp_level_epsilon(L, cfg, lv, lv->rounds, &e, err);
            if (st) return st;
            if (e > *max) *max = e;
        } else if (top < 0 || lv->p > L->lv[top].p) {
            top = k;
        }
    }
    if (top >= 0) {
        double e;
        dpfl_status st = fl_rpdp_level_epsilon(L, cfg, &L->lv[top], L->lv[top].rounds, &e, err);
        if (st) return st;
        if (e > *max) *max = e;
    }
    return DPFL_OK;
}

dpfl_status fl_rpdp_max_epsilon(const fl_rpdp *rp, const dpfl_config *cfg, double *max, dpfl_error *err)
{
    if (!rp->filter.on) return levels_max_epsilon(&rp->levels, cfg, max, err);
    const int trained = filter_trained(rp);
    return filter_epsilon(&rp->filter, rp->rec.budget, trained, cfg, filter_worst(&rp->filter, rp->rec.n, trained), max,
                          err);
}

/* the level whose records have the largest epsilon: a two-stage event */
static dpfl_status levels_max_event(const fl_rpdp_levels *L, const dpfl_config *cfg, dpfl_run_event *out,
                                    dpfl_error *err)
{
    const dpfl_rpdp_params pp = fl_rpdp_params(&L->mech, cfg, 0);
    double best = -1;
    for (int32_t k = 0; k < L->nlevels; k++) {
        const fl_rpdp_level *lv = &L->lv[k];
        double e;
        if (lv->records == 0) continue;
        dpfl_status st = fl_rpdp_level_epsilon(L, cfg, lv, lv->rounds, &e, err);
        if (st) return st;
        if (e > best) {
            best = e;
            out->events[0] = dpfl_mech_rpdp_event(&L->mech, lv->p, lv->rounds);
        }
    }
    out->accountant = pp.use_pld ? DPFL_ACC_PLD : DPFL_ACC_RDP;
    out->orders = pp.use_pld ? DPFL_ORDERS_DEFAULT : DPFL_ORDERS_RPDP;
    out->epsilon = best > 0 ? best : 0.0;
    return DPFL_OK;
}

dpfl_status fl_rpdp_max_event(const fl_rpdp *rp, const dpfl_config *cfg, dpfl_run_event *out, dpfl_error *err)
{
    DPFL_ASSERT(out->nevents == 1);
    if (!rp->filter.on) return levels_max_event(&rp->levels, cfg, out, err);
    /* the worst record's filter, an RDP statement */
    const fl_rpdp_filter *f = &rp->filter;
    const int trained = filter_trained(rp);
    const int64_t w = filter_worst(f, rp->rec.n, trained);
    if (w >= 0) out->events[0] = dpfl_event_rdp_filter(f->alpha, f->cap[w], 1);
    out->nevents = w >= 0;
    out->accountant = DPFL_ACC_RDP;
    out->orders = DPFL_ORDERS_DEFAULT;
    return filter_epsilon(f, rp->rec.budget, trained, cfg, w, &out->epsilon, err);
}

dpfl_status fl_rpdp_epsilons(const fl_rpdp_levels *L, const dpfl_config *cfg, double *eps, double *max,
                             dpfl_error *err)
{
    *max = 0;
    for (int32_t k = 0; k < L->nlevels; k++) {
        const fl_rpdp_level *lv = &L->lv[k];
        /* equal (p, rounds) give equal epsilon: the levels at p = 1 are one question */
        if (k > 0 && lv->p == L->lv[k - 1].p && lv->rounds == L->lv[k - 1].rounds) {
            eps[k] = eps[k - 1];
        } else {
            dpfl_status st = fl_rpdp_level_epsilon(L, cfg, lv, lv->rounds, &eps[k], err);
            if (st) return st;
        }
        if (lv->records > 0 && eps[k] > *max) *max = eps[k];
    }
    return DPFL_OK;
}
