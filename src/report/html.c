/* dpfl_report_html: the report page of one or several runs.  Everything the page shows comes from the run's own
 * files: metrics.jsonl (covered by the guarantee), diagnostics.jsonl and summary.json's not_private (covered by no
 * epsilon, and labelled so next to every plot and table that uses them), summary.json's privacy report and
 * config.ini.  The meanings of the numbers are docs/privacy.md's, shortened. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    rp_plotter pl;
    rp_buf *b;
    dpfl_error *err;
    int plots;
} ctx;

/* A plot with its caption as a <figure>; nothing when no series has data. */
static dpfl_status figure(ctx *c, const rp_plot *p, const char *caption)
{
    if (!rp_plot_has_data(p)) return DPFL_OK;
    rp_buf_puts(c->b, "<figure>\n");
    dpfl_status st = rp_plot_svg(&c->pl, p, c->b, c->err);
    if (st) return st;
    rp_buf_puts(c->b, "\n<figcaption>");
    rp_buf_puts(c->b, caption); /* HTML: captions are written here, not taken from the run */
    rp_buf_puts(c->b, "</figcaption>\n</figure>\n");
    c->plots++;
    return DPFL_OK;
}

static rp_plot plot_init(const char *title, const char *ylabel)
{
    rp_plot p;
    memset(&p, 0, sizeof p);
    p.title = title;
    p.ylabel = ylabel;
    p.ymin = p.ymax = p.y2min = p.y2max = NAN;
    return p;
}

/* A band and the mean line through it, in one color. */
static void add_band(rp_plot *p, const rp_xy *xy, int color, const char *band_title, const char *line_title)
{
    rp_series_spec *s = rp_plot_add(p, RP_BAND, xy, band_title);
    if (s) s->color = color;
    if ((s = rp_plot_add(p, RP_LINES, xy, line_title))) s->color = color;
}

static void fmt_num(char *out, size_t len, double v)
{
    if (!isfinite(v)) snprintf(out, len, "n/a");
    else snprintf(out, len, "%.6g", v);
}

/* ---------------------------------------------------------------- plots of one run */
#define NXY 8
typedef struct {
    rp_xy xy[NXY];
    int n;
} xy_pool;

static rp_xy *pool_next(xy_pool *pool)
{
    return pool->n < NXY ? &pool->xy[pool->n++] : NULL;
}

static void pool_free(xy_pool *pool)
{
    for (int i = 0; i < pool->n; i++) rp_xy_free(&pool->xy[i]);
    pool->n = 0;
}

static dpfl_status series(xy_pool *pool, const rp_rows *rows, const char *key, const char *band, rp_xy **out,
                          dpfl_error *err)
{
    if (!(*out = pool_next(pool))) return dpfl_fail(err, DPFL_EINVAL, "too many series in one plot (report)");
    return rp_series(rows, key, band, *out, err);
}

static dpfl_status spread(xy_pool *pool, const rp_rows *rows, const char *key, int minmax, rp_xy **out,
                          dpfl_error *err)
{
    if (!(*out = pool_next(pool))) return dpfl_fail(err, DPFL_EINVAL, "too many series in one plot (report)");
    return rp_series_spread(rows, key, minmax, *out, err);
}

static dpfl_status plot_accuracy(ctx *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *acc, *cl, *pers, *loc;
    dpfl_status st;
    if ((st = series(&pool, &r->metrics, "test_accuracy", NULL, &acc, err)) ||
        (st = series(&pool, &r->diag, "client_accuracy_mean", "client_accuracy_std", &cl, err)) ||
        (st = series(&pool, &r->diag, "personal_accuracy_mean", "personal_accuracy_std", &pers, err)) ||
        (st = series(&pool, &r->diag, "local_accuracy_mean", "local_accuracy_std", &loc, err))) {
        pool_free(&pool);
        return st;
    }
    rp_plot p = plot_init("Accuracy per round", "accuracy");
    rp_series_spec *s = rp_plot_add(&p, RP_LINESPOINTS, acc, "global model, held-out test set");
    if (s) s->color = 1;
    add_band(&p, cl, 2, "global model, clients' test sets: mean ± std", "global model, clients' test sets: mean");
    add_band(&p, pers, 3, "personal models (own helper or transform): mean ± std", "personal models: mean");
    add_band(&p, loc, 4, "fresh local models: mean ± std", "fresh local models: mean");
    int diag = cl->n || pers->n || loc->n;
    char cap[800];
    snprintf(cap, sizeof cap, "The released global model on the held-out test set (<code>metrics.jsonl</code>, "
                              "covered by the guarantee)%s",
             diag ? "; the clients' means and spreads on their own test sets come from <code>diagnostics.jsonl</code>"
                    " and are <strong>covered by no ε</strong>." : ".");
    st = figure(c, &p, cap);
    pool_free(&pool);
    return st;
}

static dpfl_status plot_loss(ctx *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *test, *train, *cl;
    dpfl_status st;
    if ((st = series(&pool, &r->metrics, "test_loss", NULL, &test, err)) ||
        (st = series(&pool, &r->diag, "train_loss", NULL, &train, err)) ||
        (st = spread(&pool, &r->diag, "client_train_loss", 0, &cl, err))) {
        pool_free(&pool);
        return st;
    }
    rp_plot p = plot_init("Loss per round", "cross-entropy loss");
    rp_series_spec *s = rp_plot_add(&p, RP_LINESPOINTS, test, "global model, held-out test set");
    if (s) s->color = 1;
    if ((s = rp_plot_add(&p, RP_LINES, train, "training loss of the round (all participants)"))) s->color = 2;
    if ((s = rp_plot_add(&p, RP_BAND, cl, "clients' mean training loss: mean ± std over clients"))) s->color = 3;
    st = figure(c, &p, "Test loss of the released model (<code>metrics.jsonl</code>, covered); the training losses "
                       "(<code>diagnostics.jsonl</code>: each client's mean local loss of the round, and their spread "
                       "over the clients that trained) are <strong>covered by no ε</strong>.");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_epsilon(ctx *c, const rp_run *r, dpfl_error *err)
{
    const cJSON *sum = r->summary;
    xy_pool pool = {0};
    rp_xy *eps, *per, *ceps, *fdp;
    dpfl_status st;
    if ((st = series(&pool, &r->metrics, "epsilon", NULL, &eps, err)) ||
        (st = spread(&pool, &r->metrics, "epsilon_per_client", 1, &per, err)) ||
        (st = series(&pool, &r->metrics, "client_epsilon", NULL, &ceps, err)) ||
        (st = series(&pool, &r->metrics, "federated_fdp.epsilon", NULL, &fdp, err))) {
        pool_free(&pool);
        return st;
    }
    const int rpdp = cJSON_GetObjectItemCaseSensitive(sum, "record_budgets") != NULL;
    char t[5][160];
    rp_plot p = plot_init("Privacy loss ε per round (upper bounds, nats)", "ε");
    p.ymin = 0;
    double delta = rp_num(sum, "delta"), cdelta = rp_num(sum, "client_delta");
    snprintf(t[0], sizeof t[0], rpdp ? "largest record ε_i (δ = %g)" : "record level, worst client (δ = %g)", delta);
    rp_series_spec *s = rp_plot_add(&p, RP_LINESPOINTS, eps, t[0]);
    if (s) s->color = 1;
    if ((s = rp_plot_add(&p, RP_BAND, per, "record level, min–max over the clients"))) s->color = 1;
    const dpfl_config *cfg = &r->cfg;
    if (eps->n && !rpdp && cfg->record_dp.target_epsilon > 0) {
        snprintf(t[1], sizeof t[1], "record-level target ε = %g", cfg->record_dp.target_epsilon);
        if ((s = rp_plot_add(&p, RP_HLINE, NULL, t[1]))) s->color = 1, s->value = cfg->record_dp.target_epsilon;
    }
    double bmax = rp_num(sum, "record_budgets.budget.max");
    if (eps->n && rpdp && isfinite(bmax)) {
        snprintf(t[1], sizeof t[1], "largest record budget = %g", bmax);
        if ((s = rp_plot_add(&p, RP_HLINE, NULL, t[1]))) s->color = 1, s->value = bmax;
    }
    const int cdp = cfg->client_dp.enabled;
    if (cdp) snprintf(t[2], sizeof t[2], "client level (δ = %g)", cdelta);
    else snprintf(t[2], sizeof t[2], "client level implied by the record noise, e2e (δ = %g)", cdelta);
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, ceps, t[2]))) s->color = 2;
    if (ceps->n && cdp && cfg->client_dp.target_epsilon > 0) {
        snprintf(t[3], sizeof t[3], "client-level target ε = %g", cfg->client_dp.target_epsilon);
        if ((s = rp_plot_add(&p, RP_HLINE, NULL, t[3]))) s->color = 2, s->value = cfg->client_dp.target_epsilon;
    }
    snprintf(t[4], sizeof t[4], "federated f-DP (PriFedSync), any observer keeping p (δ = %g)",
             rp_num(sum, "federated_fdp.delta"));
    if ((s = rp_plot_add(&p, RP_LINES, fdp, t[4]))) s->color = 3, s->dashed = 1;
    st = figure(c, &p, "ε after each released round (<code>metrics.jsonl</code>), in nats: an upper bound on the "
                       "privacy loss of everything released up to that round, for the unit, adjacency, sampler and "
                       "accountant of the privacy report below (docs/privacy.md §5).  Dotted: the targets (with noise "
                       "given, a stop rule: the round that would pass it is never trained).");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_clip_noise(ctx *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *cf, *ucf, *ns, *uns, *uc;
    dpfl_status st;
    if ((st = series(&pool, &r->diag, "clip_fraction", NULL, &cf, err)) ||
        (st = series(&pool, &r->diag, "update_clip_fraction", NULL, &ucf, err)) ||
        (st = series(&pool, &r->metrics, "noise_std", NULL, &ns, err)) ||
        (st = series(&pool, &r->metrics, "update_noise_std", NULL, &uns, err)) ||
        (st = series(&pool, &r->metrics, "update_clip", NULL, &uc, err))) {
        pool_free(&pool);
        return st;
    }
    rp_plot p = plot_init("Clipping and noise per round", "fraction clipped");
    p.ymin = 0;
    p.ymax = 1;
    p.y2label = "noise std, clip";
    p.y2min = 0;
    rp_series_spec *s;
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, cf, "per-example gradients clipped (fraction)"))) s->color = 1;
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, ucf, "client updates clipped (fraction)"))) s->color = 2;
    if ((s = rp_plot_add(&p, RP_LINES, ns, "record-level noise std on each step's clipped sum (right)")))
        s->color = 3, s->y2 = 1, s->dashed = 1;
    if ((s = rp_plot_add(&p, RP_LINES, uns, "client-level noise std on the averaged update (right)")))
        s->color = 4, s->y2 = 1, s->dashed = 1;
    if ((s = rp_plot_add(&p, RP_LINES, uc, "client update clip S (right)"))) s->color = 5, s->y2 = 1, s->dashed = 1;
    int right = ns->n || uns->n || uc->n, left = cf->n || ucf->n;
    if (!right) p.y2label = NULL;
    char cap[600];
    snprintf(cap, sizeof cap, "%s%s", left ? "Clip fractions (<code>diagnostics.jsonl</code>, computed from raw "
                                             "gradients and updates): <strong>covered by no ε</strong>. " : "",
             right ? "Noise std and clip (<code>metrics.jsonl</code>, from public settings or private estimates): "
                     "covered." : "");
    st = figure(c, &p, cap);
    pool_free(&pool);
    return st;
}

static dpfl_status plot_participation(ctx *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *part, *rep, *ex;
    dpfl_status st;
    if ((st = series(&pool, &r->diag, "participants", NULL, &part, err)) ||
        (st = series(&pool, &r->diag, "replied", NULL, &rep, err)) ||
        (st = series(&pool, &r->diag, "examples", NULL, &ex, err))) {
        pool_free(&pool);
        return st;
    }
    rp_plot p = plot_init("Client participation per round", "clients");
    p.ymin = 0;
    p.y2label = "examples";
    p.y2min = 0;
    rp_series_spec *s;
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, part, "clients sampled"))) s->color = 1;
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, rep, "clients that replied"))) s->color = 2, s->dashed = 1;
    if ((s = rp_plot_add(&p, RP_LINES, ex, "examples trained on (right)"))) s->color = 3, s->y2 = 1;
    if (!ex->n) p.y2label = NULL;
    st = figure(c, &p, "Participation counts and exact batch totals (<code>diagnostics.jsonl</code>): "
                       "<strong>covered by no ε</strong> (with Poisson sampling the counts themselves are random and "
                       "depend on the data held).");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_emd(ctx *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *emd;
    dpfl_status st = series(&pool, &r->diag, "emd_mean", "emd_std", &emd, err);
    if (!st) {
        rp_plot p = plot_init("EMD between the clients' training-loss distributions", "EMD");
        add_band(&p, emd, 1, "pairwise EMD: mean ± std over client pairs", "pairwise EMD: mean");
        st = figure(c, &p, "PrivateFL's heterogeneity measure at the evaluated rounds: the 1-D Wasserstein-1 "
                           "distance between two clients' per-round training losses so far, mean and spread over "
                           "client pairs (<code>diagnostics.jsonl</code>, from raw losses: <strong>covered by no "
                           "ε</strong>).");
    }
    pool_free(&pool);
    return st;
}

/* rPDP-FL: bars over summary.json's histogram bins (geometric: log-spaced, halves split at the geometric middle);
 * half 0 fills each bin, 1 its left half, 2 its right half (two histograms side by side over the same bins). */
static dpfl_status bars_from(const cJSON *edges, const cJSON *counts, int geometric, int half, rp_xy *xy,
                             dpfl_error *err)
{
    memset(xy, 0, sizeof *xy);
    int n = cJSON_GetArraySize(counts);
    if (!cJSON_IsArray(edges) || !cJSON_IsArray(counts) || n < 1 || cJSON_GetArraySize(edges) != n + 1) return DPFL_OK;
    xy->x = malloc((size_t)n * sizeof *xy->x);
    xy->y = malloc((size_t)n * sizeof *xy->y);
    xy->lo = malloc((size_t)n * sizeof *xy->lo);
    xy->hi = malloc((size_t)n * sizeof *xy->hi);
    if (!xy->x || !xy->y || !xy->lo || !xy->hi) {
        rp_xy_free(xy);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (report histogram)");
    }
    for (int k = 0; k < n; k++) {
        const cJSON *a = cJSON_GetArrayItem(edges, k), *b = cJSON_GetArrayItem(edges, k + 1),
                    *v = cJSON_GetArrayItem(counts, k);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !cJSON_IsNumber(v) || v->valuedouble <= 0) continue;
        double lo = a->valuedouble, hi = b->valuedouble;
        double mid = geometric ? sqrt(lo * hi) : 0.5 * (lo + hi);
        if (half == 1) hi = mid;
        if (half == 2) lo = mid;
        xy->lo[xy->n] = lo;
        xy->hi[xy->n] = hi;
        xy->x[xy->n] = geometric ? sqrt(lo * hi) : 0.5 * (lo + hi);
        xy->y[xy->n] = v->valuedouble;
        xy->n++;
    }
    return DPFL_OK;
}

static dpfl_status plot_budgets(ctx *c, const rp_run *r, dpfl_error *err)
{
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(r->summary, "record_budgets");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(rb, "histogram"), *u = cJSON_GetObjectItemCaseSensitive(rb, "budget_used");
    if (!rb) return DPFL_OK;
    if (!h) {
        rp_buf_puts(c->b, "<p class=\"note\">This run's summary.json has no per-record histogram (written by an older "
                          "dpfl): see the distributions and levels below.</p>\n");
        return DPFL_OK;
    }
    const cJSON *edges = cJSON_GetObjectItemCaseSensitive(h, "edges");
    rp_xy bud, eps, used;
    dpfl_status st = bars_from(edges, cJSON_GetObjectItemCaseSensitive(h, "budget"), 1, 1, &bud, err);
    if (!st) st = bars_from(edges, cJSON_GetObjectItemCaseSensitive(h, "epsilon"), 1, 2, &eps, err);
    if (!st)
        st = bars_from(cJSON_GetObjectItemCaseSensitive(u, "edges"), cJSON_GetObjectItemCaseSensitive(u, "records"), 0,
                       0, &used, err);
    if (!st) {
        char title[160], cap[600];
        snprintf(title, sizeof title, "Per-record budget and realized ε (%.0f records)", rp_num(rb, "records"));
        rp_plot p = plot_init(title, "records");
        p.xlabel = "ε (log scale)";
        p.logx = 1;
        p.ymin = 0;
        rp_series_spec *s;
        if ((s = rp_plot_add(&p, RP_BARS, &bud, "each record's own budget ε_i"))) s->color = 1;
        if ((s = rp_plot_add(&p, RP_BARS, &eps, "realized ε of each record after the run"))) s->color = 2;
        snprintf(cap, sizeof cap, "rPDP-FL (summary.json <code>record_budgets.histogram</code>; in each bin, left: "
                                  "budgets, right: realized ε): every record is "
                                  "(ε_i, δ)-DP for its own realized ε_i, at most its budget.  Records never charged "
                                  "(realized ε = 0, not drawn): %.0f.  Over budget: %.0f.",
                 rp_num(h, "epsilon_zero"), rp_num(rb, "over_budget"));
        st = figure(c, &p, cap);
    }
    if (!st && used.n) {
        rp_plot p = plot_init("Share of its own budget each record used", "records");
        p.xlabel = "realized ε_i / budget ε_i";
        p.ymin = 0;
        rp_series_spec *s = rp_plot_add(&p, RP_BARS, &used, "records");
        if (s) s->color = 3;
        char cap[300];
        snprintf(cap, sizeof cap, "summary.json <code>record_budgets.budget_used</code>; above 1 (over budget): %.0f.",
                 rp_num(u, "above_1"));
        st = figure(c, &p, cap);
    }
    rp_xy_free(&bud);
    rp_xy_free(&eps);
    rp_xy_free(&used);
    return st;
}

/* ---------------------------------------------------------------- tables */
/* What summary.json's keys mean (docs/privacy.md, README "A run directory"). */
static const char *const MEANING[][2] = {
    {"test_accuracy", "accuracy of the released global model on the held-out test set (last evaluation)"},
    {"test_loss", "its loss on the same test set"},
    {"rounds", "rounds trained, released and charged to the privacy ledger"},
    {"rounds_planned", "fl.rounds"},
    {"stopped_at_budget", "the run stopped before the first round whose release would pass target_epsilon (that "
                          "round was never trained)"},
    {"unit", "what is protected: record = one training example (the client level is in the client_* keys)"},
    {"epsilon", "record-level ε after every released round, in nats: the worst case over records, an upper bound"},
    {"epsilon_from", "federated_fdp: PriFedSync's f-DP bound was smaller than the ledger's, so it is the guarantee"},
    {"epsilon_ledger", "the ledger's ε (the syncs that happened, no amplification), larger than epsilon here"},
    {"epsilon_is", "how to read ε for this run"},
    {"delta", "record-level δ"},
    {"accountant", "how ε was computed: rdp (Rényi DP, tight conversion) or pld (privacy loss distribution)"},
    {"accountant_answered", "the accountant that gave the number (PLD could not answer for the worst client)"},
    {"accountant_fallback", "why"},
    {"sampler", "how each local batch is drawn: poisson (each record with probability q) or fixed (B of n without "
                "replacement)"},
    {"adjacency", "neighbouring datasets: add-remove (one record added or removed) or replace-one (one replaced)"},
    {"noise", "noise multiplier z: the noise std divided by the L2 sensitivity under that adjacency (C for "
              "add-remove, 2C for replace-one)"},
    {"clip", "C: the L2 clip of each per-example gradient"},
    {"noise_kind", "the noise sampler"},
    {"noise_calibrated_for", "z was calibrated before training so that this fits"},
    {"worst_client", "the client whose records have the largest ε"},
    {"worst_client_q", "its per-step sampling rate q = B/n"},
    {"worst_client_steps", "its DP-SGD steps charged (only the rounds it took part in)"},
    {"worst_client_n", "its number of records"},
    {"worst_client_batch", "its batch size B"},
    {"worst_record_copies", "replication: the clients holding the worst record, each charged (worst_client_steps is "
                            "the sum of their steps)"},
    {"order", "the Rényi order where the RDP bound was tightest"},
    {"client_epsilon", "client-level ε (one client's whole data), in nats, an upper bound; null when not private"},
    {"client_epsilon_reason", "why there is no client-level ε"},
    {"client_epsilon_e2e", "the client level implied by the record-level noise (end-to-end, participation visible)"},
    {"client_delta", "client-level δ"},
    {"client_noise", "client-level noise multiplier (of the sum of clipped updates; e2e: of a round)"},
    {"client_adjacency", "client-level neighbouring relation of the e2e guarantee"},
    {"client_q", "client sampling rate accounted"},
    {"client_sampler", "how clients are drawn each round"},
    {"client_adjacency_accounted", "client-level neighbouring relation accounted"},
    {"client_rounds_charged", "rounds charged at client level"},
    {"client_accountant", "client-level accountant"},
    {"clip_strategy", "client update clipping: fixed, per-step, adaptive (private quantile) or median (NOT private)"},
    {"update_noise", "adaptive clipping: the multiplier on the update sum"},
    {"quantile_noise", "adaptive clipping: the noise on the count of unclipped updates"},
    {"update_clip", "S: the client update clip (adaptive: the last round's, from the private estimate)"},
    {"private", "differentially private at every level the run enabled (and at least one)"},
    {"privacy", "the guarantee in words"},
    {"config_sha256", "SHA-256 of config.ini"},
    {"partition_sha256", "which records each client held (kept across resumes)"},
    {"seed", "fixed seed (reproducible mode): the guarantee then holds only while the seed is secret"},
    {"randomness", "where the noise and sampling come from"},
    {"dataset", "dataset"},
    {"model", "model"},
    {"parameters", "model parameters"},
    {"clients", "clients in the federation"},
    {"started_at", "when this session started (a resume starts a new one)"},
    {"dpfl_version", "the dpfl that wrote the run"},
    /* federated_fdp */
    {"mu", "weak federated μ-GDP (PriFedSync): CLT, asymptotic, not a bound"},
    {"mu_strong", "strong federated μ-GDP: CLT, asymptotic, not a bound"},
    {"mu_asymptotic", "the μ values are asymptotic (central limit)"},
    {"epsilon_clt", "ε of the weak μ at δ: asymptotic"},
    {"epsilon_strong_clt", "ε of the strong μ at δ: asymptotic"},
    {"p", "the sync probability"},
    {"batch", "the fixed batch size"},
    {"local_steps", "local steps per round"},
    {"not_reported", "why there is no federated f-DP number"},
    /* record_budgets */
    {"budgets", "where the per-record budgets come from"},
    {"policy", "rpdp (each record its own rate), minimum or dropout (the paper's baselines), filter (Feldman-Zrnic)"},
    {"bound", "the two-stage bound used"},
    {"budget_max", "the largest budget: a record sampled with p = 1 meets it"},
    {"planned_rounds", "rounds the rates were planned for"},
    {"client_rate", "λ: client participation rate charged"},
    {"scf_r2", "R² of the SCF curve fit (first guess only; every rate is checked with the accountant)"},
    {"records", "training records"},
    {"unused", "records whose budget buys nothing (never sampled)"},
    {"dropped", "records dropped by the policy"},
    {"opted_out", "records whose level stopped before passing its budget"},
    {"filtered_out", "records whose Rényi budget was spent"},
    {"over_budget", "records over their budget (0 by construction)"},
    {"epsilon_minus_budget_max", "the largest ε_i − budget_i (≤ 0)"},
    {"filter_order", "the Rényi order of the filter"},
    {"filter_conversion", "the cost of converting that order to (ε, δ)"},
    /* not_private */
    {"note", ""},
    {"examples", "examples trained on (exact Poisson batch totals)"},
    {"communication", "client updates sent, in all"},
    {"client_accuracy_mean", "global model on the clients' own test sets: mean"},
    {"client_accuracy_std", "… and its spread over clients"},
    {"target_accuracy", "fl.target_accuracy"},
    {"client_accuracy_reached_round", "the first evaluated round whose clients' mean reached it (null: never)"},
    {"personal_accuracy_mean", "personal models (helper or own transform) on the clients' test sets: mean"},
    {"personal_accuracy_std", "… and its spread over clients"},
    {"personal_accuracy_reached_round", "the first evaluated round whose personal mean reached target_accuracy"},
    {"local_accuracy_mean", "freshly trained local models on the clients' test sets: mean"},
    {"local_accuracy_std", "… and its spread over clients"},
    {"local_accuracy_reached_round", "the first evaluated round whose local mean reached target_accuracy"},
    {"emd_mean", "PrivateFL's EMD between the clients' training-loss distributions: mean over pairs"},
    {"emd_std", "… and its spread"},
    {"wall_seconds_cumulative", "wall-clock seconds over every session of the run"},
};

static const char *meaning(const char *key)
{
    for (size_t i = 0; i < sizeof MEANING / sizeof MEANING[0]; i++)
        if (!strcmp(MEANING[i][0], key)) return MEANING[i][1];
    return "";
}

static void value_html(rp_buf *b, const cJSON *v)
{
    char num[64];
    if (cJSON_IsNumber(v)) {
        snprintf(num, sizeof num, "%.10g", v->valuedouble);
        rp_buf_puts(b, num);
    } else if (cJSON_IsString(v)) {
        rp_buf_html(b, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        rp_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        rp_buf_puts(b, "null");
    }
}

/* Every scalar member of o as a row: key, value, what it means. */
static void key_table(rp_buf *b, const cJSON *o, const char *const *skip)
{
    rp_buf_puts(b, "<table class=\"keys\">\n<tr><th>key</th><th>value</th><th>what it means</th></tr>\n");
    const cJSON *v;
    cJSON_ArrayForEach(v, o)
    {
        if (cJSON_IsObject(v) || cJSON_IsArray(v)) continue;
        int skipped = 0;
        for (int i = 0; skip && skip[i]; i++) skipped |= !strcmp(skip[i], v->string);
        if (skipped) continue;
        rp_buf_puts(b, "<tr><td><code>");
        rp_buf_html(b, v->string);
        rp_buf_puts(b, "</code></td><td>");
        value_html(b, v);
        rp_buf_puts(b, "</td><td>");
        rp_buf_html(b, meaning(v->string));
        rp_buf_puts(b, "</td></tr>\n");
    }
    rp_buf_puts(b, "</table>\n");
}

/* The command that recomputes the record-level epsilon from the reported worst client (docs/privacy.md §5). */
static void reproduce_line(rp_buf *b, const cJSON *sum)
{
    double z = rp_num(sum, "noise"), q = rp_num(sum, "worst_client_q"), T = rp_num(sum, "worst_client_steps"),
           d = rp_num(sum, "delta");
    const char *sampler = rp_str(sum, "sampler"), *acc = rp_str(sum, "accountant_answered");
    if (!acc) acc = rp_str(sum, "accountant");
    if (!isfinite(z) || !isfinite(q) || !isfinite(T) || !(T >= 1) || !isfinite(d) || !sampler || !acc ||
        cJSON_GetObjectItemCaseSensitive(sum, "record_budgets"))
        return;
    rp_buf_printf(b, "<p>Recompute the %s: <code>dpfl account --noise %.17g ",
                  cJSON_GetObjectItemCaseSensitive(sum, "epsilon_ledger") ? "ledger's ε (epsilon_ledger)"
                                                                         : "record-level ε", z);
    if (!strcmp(sampler, "fixed"))
        rp_buf_printf(b, "--sampler fixed --n %.0f --batch %.0f ", rp_num(sum, "worst_client_n"),
                      rp_num(sum, "worst_client_batch"));
    else
        rp_buf_printf(b, "--q %.17g ", q);
    rp_buf_printf(b, "--steps %.0f --delta %.17g --accountant ", T, d);
    rp_buf_html(b, acc);
    rp_buf_puts(b, "</code></p>\n");
}

static void levels_table(rp_buf *b, const cJSON *rb)
{
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(rb, "levels"), *l;
    int n = cJSON_GetArraySize(lv);
    if (n < 1) return;
    rp_buf_printf(b, "<details><summary>%d budget level%s (records sharing a budget and a sampling rate)</summary>\n"
                     "<table class=\"num\"><tr><th>budget</th><th>p</th><th>records</th><th>rounds</th>"
                     "<th>realized ε</th><th>opted out</th></tr>\n", n, n == 1 ? "" : "s");
    cJSON_ArrayForEach(l, lv)
    {
        char v[5][32];
        fmt_num(v[0], sizeof v[0], rp_num(l, "budget"));
        fmt_num(v[1], sizeof v[1], rp_num(l, "p"));
        fmt_num(v[2], sizeof v[2], rp_num(l, "records"));
        fmt_num(v[3], sizeof v[3], rp_num(l, "rounds"));
        fmt_num(v[4], sizeof v[4], rp_num(l, "epsilon"));
        rp_buf_printf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", v[0], v[1],
                      v[2], v[3], v[4], cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "opted_out")) ? "yes" : "no");
    }
    rp_buf_puts(b, "</table></details>\n");
    rp_buf_puts(b, "<table class=\"num\"><tr><th>over all records</th><th>min</th><th>median</th><th>max</th>"
                   "<th>mean</th></tr>\n");
    static const char *const dist[] = {"budget", "epsilon", "p"};
    for (int i = 0; i < 3; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(rb, dist[i]);
        if (!d) continue;
        char v[4][32];
        fmt_num(v[0], sizeof v[0], rp_num(d, "min"));
        fmt_num(v[1], sizeof v[1], rp_num(d, "median"));
        fmt_num(v[2], sizeof v[2], rp_num(d, "max"));
        fmt_num(v[3], sizeof v[3], rp_num(d, "mean"));
        rp_buf_printf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                      i == 0 ? "budget ε_i" : i == 1 ? "realized ε_i" : "sampling rate p_i (sampled records)", v[0],
                      v[1], v[2], v[3]);
    }
    rp_buf_puts(b, "</table>\n");
}

/* ---------------------------------------------------------------- sections */
static void anchor(char *out, size_t len, int i)
{
    snprintf(out, len, "run-%d", i + 1);
}

static dpfl_status run_section(ctx *c, const rp_run *r, int idx, dpfl_error *err)
{
    rp_buf *b = c->b;
    const cJSON *sum = r->summary;
    char id[32], v[4][64];
    anchor(id, sizeof id, idx);
    rp_buf_printf(b, "<section class=\"run\" id=\"%s\">\n<h2>", id);
    rp_buf_html(b, r->name);
    rp_buf_puts(b, "</h2>\n<p class=\"path\">");
    rp_buf_html(b, r->dir);
    rp_buf_puts(b, "</p>\n");
    const int private = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "private"));
    rp_buf_printf(b, "<p class=\"statement %s\"><strong>%s</strong> ", private ? "private" : "not-private",
                  private ? "Differentially private:" : "Not differentially private:");
    rp_buf_html(b, rp_str(sum, "privacy"));
    rp_buf_puts(b, ".</p>\n");
    const char *randomness = rp_str(sum, "randomness");
    if (randomness) {
        rp_buf_puts(b, "<p class=\"randomness\">Randomness: ");
        rp_buf_html(b, randomness);
        rp_buf_puts(b, ".</p>\n");
    }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(sum, "warnings"), *e;
    if (cJSON_GetArraySize(w) > 0) {
        rp_buf_puts(b, "<ul class=\"warnings\">\n");
        cJSON_ArrayForEach(e, w) if (cJSON_IsString(e))
        {
            rp_buf_puts(b, "<li>Warning: ");
            rp_buf_html(b, e->valuestring);
            rp_buf_puts(b, "</li>\n");
        }
        rp_buf_puts(b, "</ul>\n");
    }
    fmt_num(v[0], sizeof v[0], rp_num(sum, "test_accuracy"));
    fmt_num(v[1], sizeof v[1], rp_num(sum, "test_loss"));
    fmt_num(v[2], sizeof v[2], rp_num(sum, "rounds"));
    fmt_num(v[3], sizeof v[3], rp_num(sum, "rounds_planned"));
    rp_buf_printf(b, "<p class=\"headline\">Test accuracy <strong>%s</strong>, test loss %s after %s of %s rounds",
                  v[0], v[1], v[2], v[3]);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "stopped_at_budget")))
        rp_buf_puts(b, " (stopped before passing the privacy budget)");
    rp_buf_puts(b, "; ");
    rp_buf_html(b, rp_str(sum, "dataset") ? rp_str(sum, "dataset") : "?");
    rp_buf_puts(b, ", ");
    rp_buf_html(b, rp_str(sum, "model") ? rp_str(sum, "model") : "?");
    fmt_num(v[0], sizeof v[0], rp_num(sum, "clients"));
    rp_buf_printf(b, ", %s clients.</p>\n", v[0]);

    rp_buf_puts(b, "<div class=\"plots\">\n");
    dpfl_status st;
    if ((st = plot_accuracy(c, r, err)) || (st = plot_loss(c, r, err)) || (st = plot_epsilon(c, r, err)) ||
        (st = plot_clip_noise(c, r, err)) || (st = plot_participation(c, r, err)) || (st = plot_emd(c, r, err)) ||
        (st = plot_budgets(c, r, err)))
        return st;
    rp_buf_puts(b, "</div>\n");
    if (!private && !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(sum, "epsilon")))
        rp_buf_puts(b, "<p class=\"note\">No ε plot: this run reports no privacy guarantee.</p>\n");

    rp_buf_puts(b, "<h3>Privacy report (summary.json)</h3>\n<p>Covered by the guarantee: the released model after "
                   "every round and what is computed from it alone (its accuracy on the held-out test set), and "
                   "values computed from public settings or private estimates (<code>metrics.jsonl</code> and these "
                   "keys).  Every ε is in nats and an upper bound unless marked asymptotic; δ must be well below 1/n "
                   "of the unit it protects.</p>\n");
    static const char *const skip_top[] = {"privacy", NULL};
    key_table(b, sum, skip_top);
    reproduce_line(b, sum);
    const cJSON *fdp = cJSON_GetObjectItemCaseSensitive(sum, "federated_fdp");
    if (fdp) {
        rp_buf_puts(b, "<h4>Federated f-DP (PriFedSync, <code>federated_fdp</code>)</h4>\n");
        key_table(b, fdp, NULL);
    }
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(sum, "record_budgets");
    if (rb) {
        rp_buf_puts(b, "<h4>Per-record budgets (rPDP-FL, <code>record_budgets</code>)</h4>\n");
        key_table(b, rb, NULL);
        levels_table(b, rb);
    }
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(sum, "not_private");
    if (np) {
        rp_buf_puts(b, "<h3>Not private (summary.json <code>not_private</code>)</h3>\n<p class=\"warn\">");
        rp_buf_html(b, rp_str(np, "note") ? rp_str(np, "note") : "covered by no epsilon");
        rp_buf_puts(b, ".</p>\n");
        static const char *const skip_np[] = {"note", NULL};
        key_table(b, np, skip_np);
    }
    rp_buf_puts(b, "<h3>Resolved config (config.ini)</h3>\n<pre class=\"config\">");
    rp_buf_html(b, r->config_text);
    rp_buf_puts(b, "</pre>\n</section>\n");
    return DPFL_OK;
}

/* Several runs: one table and the accuracy, loss and epsilon curves overlaid. */
static dpfl_status comparison(ctx *c, const rp_run *runs, int n, dpfl_error *err)
{
    rp_buf *b = c->b;
    rp_buf_puts(b, "<section id=\"comparison\">\n<h2>Comparison</h2>\n<table class=\"num\"><tr><th>run</th>"
                   "<th>dataset</th><th>model</th><th>clients</th><th>rounds</th><th>test accuracy</th>"
                   "<th>test loss</th><th>record ε</th><th>δ</th><th>client ε</th><th>client δ</th><th>private</th>"
                   "</tr>\n");
    for (int i = 0; i < n; i++) {
        const cJSON *s = runs[i].summary;
        char id[32];
        anchor(id, sizeof id, i);
        rp_buf_printf(b, "<tr><td><a href=\"#%s\">", id);
        rp_buf_html(b, runs[i].name);
        rp_buf_puts(b, "</a></td><td>");
        rp_buf_html(b, rp_str(s, "dataset") ? rp_str(s, "dataset") : "");
        rp_buf_puts(b, "</td><td>");
        rp_buf_html(b, rp_str(s, "model") ? rp_str(s, "model") : "");
        rp_buf_puts(b, "</td>");
        static const char *const keys[] = {"clients", "rounds", "test_accuracy", "test_loss", "epsilon",
                                           "delta", "client_epsilon", "client_delta"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char v[32];
            fmt_num(v, sizeof v, rp_num(s, keys[k]));
            rp_buf_printf(b, "<td>%s</td>", isfinite(rp_num(s, keys[k])) ? v : "—");
        }
        rp_buf_printf(b, "<td>%s</td></tr>\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "private")) ? "yes" : "no");
    }
    rp_buf_puts(b, "</table>\n<div class=\"plots\">\n");
    rp_xy *acc = calloc((size_t)n * 4, sizeof *acc);
    if (!acc) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (report comparison)");
    rp_xy *loss = acc + n, *eps = acc + 2 * n, *ceps = acc + 3 * n;
    dpfl_status st = DPFL_OK;
    for (int i = 0; i < n && !st; i++) {
        if ((st = rp_series(&runs[i].metrics, "test_accuracy", NULL, &acc[i], err)) ||
            (st = rp_series(&runs[i].metrics, "test_loss", NULL, &loss[i], err)) ||
            (st = rp_series(&runs[i].metrics, "epsilon", NULL, &eps[i], err)) ||
            (st = rp_series(&runs[i].metrics, "client_epsilon", NULL, &ceps[i], err)))
            break;
    }
    char(*names)[192] = calloc((size_t)n * 2, sizeof *names);
    if (!st && !names) st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (report comparison)");
    for (int k = 0; k < 3 && !st; k++) {
        rp_plot p = plot_init(k == 0   ? "Accuracy per round: global model, held-out test set"
                              : k == 1 ? "Test loss per round: global model, held-out test set"
                                       : "Privacy loss ε per round (upper bounds, nats)",
                              k == 0 ? "accuracy" : k == 1 ? "cross-entropy loss" : "ε");
        if (k == 2) p.ymin = 0;
        for (int i = 0; i < n && i < RP_MAX_SERIES / 2; i++) {
            rp_series_spec *s;
            const rp_xy *xy = k == 0 ? &acc[i] : k == 1 ? &loss[i] : &eps[i];
            if (k < 2) {
                if ((s = rp_plot_add(&p, RP_LINESPOINTS, xy, runs[i].name))) s->color = i % 8 + 1;
                continue;
            }
            snprintf(names[2 * i], 192, "%.120s: record level (δ = %g)", runs[i].name, rp_num(runs[i].summary, "delta"));
            snprintf(names[2 * i + 1], 192, "%.120s: client level (δ = %g)", runs[i].name,
                     rp_num(runs[i].summary, "client_delta"));
            if ((s = rp_plot_add(&p, RP_LINESPOINTS, xy, names[2 * i]))) s->color = i % 8 + 1;
            if ((s = rp_plot_add(&p, RP_LINESPOINTS, &ceps[i], names[2 * i + 1]))) s->color = i % 8 + 1, s->dashed = 1;
        }
        st = figure(c, &p, k < 2 ? "From each run's <code>metrics.jsonl</code> (covered by its guarantee)."
                                 : "From each run's <code>metrics.jsonl</code>: solid record level, dashed client "
                                   "level; each with its own unit, adjacency and accountant (see each run's privacy "
                                   "report).");
    }
    for (int i = 0; i < 4 * n; i++) rp_xy_free(&acc[i]);
    free(acc);
    free(names);
    rp_buf_puts(b, "</div>\n</section>\n");
    return st;
}

static const char *STYLE =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:1500px;padding:0 1em;color:#222;background:#fff}"
    "h1{font-size:1.6em}h2{border-bottom:2px solid #ccc;padding-bottom:.2em;margin-top:2em}"
    ".path{color:#666;font-family:monospace;margin-top:-.5em}"
    ".statement{padding:.6em .8em;border-left:6px solid}.private{background:#eef8ee;border-color:#2a8a2a}"
    ".not-private{background:#fbeeee;border-color:#b22}"
    ".warnings li,.warn{color:#8a4b00}.note{color:#555;font-style:italic}"
    ".plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:1em}"
    "figure{margin:0;border:1px solid #ddd;padding:.5em;background:#fff}"
    "figure svg{width:100%;height:auto;display:block}figcaption{font-size:.85em;color:#444;margin-top:.3em}"
    "table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ddd;padding:.25em .5em;"
    "text-align:left;vertical-align:top}th{background:#f4f4f4}table.num td{text-align:right}"
    "table.num td:first-child{text-align:left}"
    "pre.config{background:#f7f7f7;border:1px solid #ddd;padding:.8em;font-size:.85em;overflow-x:auto}"
    "nav li{margin:.2em 0}";

static void page_head(rp_buf *b, const rp_run *runs, int n)
{
    rp_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>dpfl report: ");
    for (int i = 0; i < n; i++) {
        if (i) rp_buf_puts(b, ", ");
        rp_buf_html(b, runs[i].name);
    }
    rp_buf_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>dpfl report: ", STYLE);
    for (int i = 0; i < n; i++) {
        if (i) rp_buf_puts(b, ", ");
        rp_buf_html(b, runs[i].name);
    }
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    rp_buf_printf(b, "</h1>\n<p>Written by dpfl %s on %s from the run director%s below.  Every number comes from the "
                     "run's own files; what each one covers is said next to it (docs/privacy.md has the details).</p>\n"
                     "<nav><ul>\n", DPFL_VERSION, when, n == 1 ? "y" : "ies");
    if (n > 1) rp_buf_puts(b, "<li><a href=\"#comparison\">Comparison</a></li>\n");
    for (int i = 0; i < n; i++) {
        char id[32];
        anchor(id, sizeof id, i);
        rp_buf_printf(b, "<li><a href=\"#%s\">", id);
        rp_buf_html(b, runs[i].name);
        rp_buf_puts(b, "</a> <code>");
        rp_buf_html(b, runs[i].dir);
        rp_buf_puts(b, "</code></li>\n");
    }
    rp_buf_puts(b, "</ul></nav>\n");
}

dpfl_status dpfl_report_html(const char *const *dirs, int nruns, const char *out_path, const dpfl_report_options *opt,
                             int *plots, dpfl_error *err)
{
    if (nruns < 1) return dpfl_fail(err, DPFL_EINVAL, "no run directory given (report)");
    if (!out_path || !*out_path) return dpfl_fail(err, DPFL_EINVAL, "no output file given (report)");
    rp_run *runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (report)");
    dpfl_status st = DPFL_OK;
    int loaded = 0;
    for (; loaded < nruns && !st; loaded++) st = rp_run_load(&runs[loaded], dirs[loaded], err);
    const char *gnuplot = opt && opt->gnuplot ? opt->gnuplot : getenv("DPFL_GNUPLOT");
    if (!gnuplot || !*gnuplot) gnuplot = "gnuplot";
    rp_buf page = {0};
    ctx c = {.b = &page, .err = err};
    if (!st) st = rp_plotter_open(&c.pl, gnuplot, err);
    if (!st) {
        page_head(&page, runs, nruns);
        if (nruns > 1) st = comparison(&c, runs, nruns, err);
        for (int i = 0; i < nruns && !st; i++) st = run_section(&c, &runs[i], i, err);
        rp_buf_puts(&page, "</body>\n</html>\n");
    }
    rp_plotter_close(&c.pl);
    if (!st && !rp_buf_ok(&page, err)) st = DPFL_ENOMEM;
    if (!st) st = dpfl_file_write_text(out_path, page.s, page.len, err);
    if (!st && plots) *plots = c.plots;
    rp_buf_free(&page);
    for (int i = 0; i < loaded; i++) rp_run_free(&runs[i]);
    free(runs);
    return st;
}
