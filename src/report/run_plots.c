/* The plots of one run on dpfl report's page: accuracy, loss, epsilon, clipping and noise, participation, the
 * clients' EMD and rPDP-FL's per-record budgets, each a <figure> whose caption says which file its numbers come from
 * and whether the guarantee covers them (metrics.jsonl: covered; diagnostics.jsonl: covered by no epsilon). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A plot with its caption as a <figure>; nothing when no series has data. */
dpfl_status rp_figure(rp_page *c, const rp_plot *p, const char *caption)
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

rp_plot rp_plot_init(const char *title, const char *ylabel)
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

/* the series of one plot, freed together */
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

static dpfl_status plot_accuracy(rp_page *c, const rp_run *r, dpfl_error *err)
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
    rp_plot p = rp_plot_init("Accuracy per round", "accuracy");
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
    st = rp_figure(c, &p, cap);
    pool_free(&pool);
    return st;
}

static dpfl_status plot_loss(rp_page *c, const rp_run *r, dpfl_error *err)
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
    rp_plot p = rp_plot_init("Loss per round", "cross-entropy loss");
    rp_series_spec *s = rp_plot_add(&p, RP_LINESPOINTS, test, "global model, held-out test set");
    if (s) s->color = 1;
    if ((s = rp_plot_add(&p, RP_LINES, train, "training loss of the round (all participants)"))) s->color = 2;
    if ((s = rp_plot_add(&p, RP_BAND, cl, "clients' mean training loss: mean ± std over clients"))) s->color = 3;
    st = rp_figure(c, &p, "Test loss of the released model (<code>metrics.jsonl</code>, covered); the training losses "
                       "(<code>diagnostics.jsonl</code>: each client's mean local loss of the round, and their spread "
                       "over the clients that trained) are <strong>covered by no ε</strong>.");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_epsilon(rp_page *c, const rp_run *r, dpfl_error *err)
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
    rp_plot p = rp_plot_init("Privacy loss ε per round (upper bounds, nats)", "ε");
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
    st = rp_figure(c, &p, "ε after each released round (<code>metrics.jsonl</code>), in nats: an upper bound on the "
                       "privacy loss of everything released up to that round, for the unit, adjacency, sampler and "
                       "accountant of the privacy report below (docs/privacy.md §5).  Dotted: the targets (with noise "
                       "given, a stop rule: the round that would pass it is never trained).");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_clip_noise(rp_page *c, const rp_run *r, dpfl_error *err)
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
    rp_plot p = rp_plot_init("Clipping and noise per round", "fraction clipped");
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
    st = rp_figure(c, &p, cap);
    pool_free(&pool);
    return st;
}

static dpfl_status plot_participation(rp_page *c, const rp_run *r, dpfl_error *err)
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
    rp_plot p = rp_plot_init("Client participation per round", "clients");
    p.ymin = 0;
    p.y2label = "examples";
    p.y2min = 0;
    /* no line on the frame's top edge, nor on another: the most clients at 80% of the height, the most examples at
     * 90% (with every client every round both are flat); one line when every sampled client replied */
    double top = 0, ytop = 0;
    for (size_t i = 0; i < part->n; i++) top = fmax(top, part->y[i]);
    for (size_t i = 0; i < rep->n; i++) top = fmax(top, rep->y[i]);
    for (size_t i = 0; i < ex->n; i++) ytop = fmax(ytop, ex->y[i]);
    if (top > 0) p.ymax = top / 0.8;
    if (ytop > 0) p.y2max = ytop / 0.9;
    int all_replied = rep->n == part->n;
    for (size_t i = 0; i < part->n && all_replied; i++) all_replied = rep->x[i] == part->x[i] && rep->y[i] == part->y[i];
    rp_series_spec *s;
    if ((s = rp_plot_add(&p, RP_LINESPOINTS, part, all_replied ? "clients sampled (all replied)" : "clients sampled")))
        s->color = 1;
    if (!all_replied && (s = rp_plot_add(&p, RP_LINESPOINTS, rep, "clients that replied"))) s->color = 2, s->dashed = 1;
    if ((s = rp_plot_add(&p, RP_LINES, ex, "examples trained on (right)"))) s->color = 3, s->y2 = 1;
    if (!ex->n) p.y2label = NULL;
    st = rp_figure(c, &p, "Participation counts and exact batch totals (<code>diagnostics.jsonl</code>): "
                       "<strong>covered by no ε</strong> (with Poisson sampling the counts themselves are random and "
                       "depend on the data held).");
    pool_free(&pool);
    return st;
}

static dpfl_status plot_emd(rp_page *c, const rp_run *r, dpfl_error *err)
{
    xy_pool pool = {0};
    rp_xy *emd;
    dpfl_status st = series(&pool, &r->diag, "emd_mean", "emd_std", &emd, err);
    if (!st) {
        rp_plot p = rp_plot_init("EMD between the clients' training-loss distributions", "EMD");
        add_band(&p, emd, 1, "pairwise EMD: mean ± std over client pairs", "pairwise EMD: mean");
        st = rp_figure(c, &p, "PrivateFL's heterogeneity measure at the evaluated rounds: the 1-D Wasserstein-1 "
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

static dpfl_status plot_budgets(rp_page *c, const rp_run *r, dpfl_error *err)
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
        rp_plot p = rp_plot_init(title, "records");
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
        st = rp_figure(c, &p, cap);
    }
    if (!st && used.n) {
        rp_plot p = rp_plot_init("Share of its own budget each record used", "records");
        p.xlabel = "realized ε_i / budget ε_i";
        p.ymin = 0;
        rp_series_spec *s = rp_plot_add(&p, RP_BARS, &used, "records");
        if (s) s->color = 3;
        char cap[300];
        snprintf(cap, sizeof cap, "summary.json <code>record_budgets.budget_used</code>; above 1 (over budget): %.0f.",
                 rp_num(u, "above_1"));
        st = rp_figure(c, &p, cap);
    }
    rp_xy_free(&bud);
    rp_xy_free(&eps);
    rp_xy_free(&used);
    return st;
}

dpfl_status rp_run_plots(rp_page *c, const rp_run *r, dpfl_error *err)
{
    dpfl_status st;
    if ((st = plot_accuracy(c, r, err)) || (st = plot_loss(c, r, err)) || (st = plot_epsilon(c, r, err)) ||
        (st = plot_clip_noise(c, r, err)) || (st = plot_participation(c, r, err)) || (st = plot_emd(c, r, err)) ||
        (st = plot_budgets(c, r, err)))
        return st;
    return DPFL_OK;
}
