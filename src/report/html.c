/* dpfl_report_html: the report page of one or several runs.  Everything the page shows comes from the run's own
 * files: metrics.jsonl (covered by the guarantee), diagnostics.jsonl and summary.json's not_private (covered by no
 * epsilon, and labelled so next to every plot and table that uses them), summary.json's privacy report and
 * config.ini.  The meanings of the numbers are docs/privacy.md's, shortened.  This file: the page (its head, one
 * section per run); the plots are run_plots.c's, the tables summary_tables.c's, the several-run comparison
 * comparison.c's. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void rp_fmt_num(char *out, size_t len, double v)
{
    if (!isfinite(v)) snprintf(out, len, "n/a");
    else snprintf(out, len, "%.6g", v);
}

void rp_anchor(char *out, size_t len, int i)
{
    snprintf(out, len, "run-%d", i + 1);
}

/* the run's heading, its privacy statement, where its randomness came from and its warnings */
static void run_statement(rp_buf *b, const rp_run *r, const cJSON *sum, const char *id)
{
    rp_buf_printf(b, "<section class=\"run\" id=\"%s\">\n<h2>", id);
    rp_buf_html(b, r->name);
    rp_buf_puts(b, "</h2>\n<p class=\"path\">");
    rp_buf_html(b, r->dir);
    rp_buf_puts(b, "</p>\n");
    const int private = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "private"));
    rp_buf_printf(b, "<p class=\"statement %s\"><strong>%s</strong> ", private ? "private" : "not-private",
                  private ? "Differentially private:" : "Not differentially private:");
    /* the statement without a head that repeats the banner's ("NOT differentially private: neither ...") */
    const char *statement = rp_str(sum, "privacy");
    static const char repeat[] = "NOT differentially private: ";
    if (statement && !private && !strncmp(statement, repeat, sizeof repeat - 1)) statement += sizeof repeat - 1;
    rp_buf_html(b, statement);
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
}

/* the headline: accuracy, loss, rounds, dataset, model, clients */
static void run_headline(rp_buf *b, const cJSON *sum)
{
    char v[4][64];
    rp_fmt_num(v[0], sizeof v[0], rp_num(sum, "test_accuracy"));
    rp_fmt_num(v[1], sizeof v[1], rp_num(sum, "test_loss"));
    rp_fmt_num(v[2], sizeof v[2], rp_num(sum, "rounds"));
    rp_fmt_num(v[3], sizeof v[3], rp_num(sum, "rounds_planned"));
    rp_buf_printf(b, "<p class=\"headline\">Test accuracy <strong>%s</strong>, test loss %s after %s of %s round%s",
                  v[0], v[1], v[2], v[3], rp_num(sum, "rounds_planned") == 1 ? "" : "s");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "stopped_at_budget")))
        rp_buf_puts(b, " (stopped before passing the privacy budget)");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "interrupted")))
        rp_buf_puts(b, " (interrupted: <code>dpfl train --resume</code> continues it)");
    rp_buf_puts(b, "; ");
    rp_buf_html(b, rp_str(sum, "dataset") ? rp_str(sum, "dataset") : "?");
    rp_buf_puts(b, ", ");
    rp_buf_html(b, rp_str(sum, "model") ? rp_str(sum, "model") : "?");
    rp_fmt_num(v[0], sizeof v[0], rp_num(sum, "clients"));
    rp_buf_printf(b, ", %s clients.</p>\n", v[0]);
}

/* summary.json's privacy report: its keys, and its PriFedSync, rPDP-FL and not-private parts */
static void run_privacy_report(rp_buf *b, const cJSON *sum)
{
    rp_buf_puts(b, "<h3>Privacy report (summary.json)</h3>\n<p>Covered by the guarantee: the released model after "
                   "every round and what is computed from it alone (its accuracy on the held-out test set), and "
                   "values computed from public settings or private estimates (<code>metrics.jsonl</code> and these "
                   "keys).  Every ε is in nats and an upper bound unless marked asymptotic; δ must be well below 1/n "
                   "of the unit it protects.</p>\n");
    static const char *const skip_top[] = {"privacy", NULL};
    rp_key_table(b, sum, skip_top);
    rp_reproduce_line(b, sum);
    const cJSON *fdp = cJSON_GetObjectItemCaseSensitive(sum, "federated_fdp");
    if (fdp) {
        rp_buf_puts(b, "<h4>Federated f-DP (PriFedSync, <code>federated_fdp</code>)</h4>\n");
        rp_key_table(b, fdp, NULL);
    }
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(sum, "record_budgets");
    if (rb) {
        rp_buf_puts(b, "<h4>Per-record budgets (rPDP-FL, <code>record_budgets</code>)</h4>\n");
        rp_key_table(b, rb, NULL);
        rp_levels_table(b, rb);
    }
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(sum, "not_private");
    if (np) {
        rp_buf_puts(b, "<h3>Not private (summary.json <code>not_private</code>)</h3>\n<p class=\"warn\">");
        rp_buf_html(b, rp_str(np, "note") ? rp_str(np, "note") : "covered by no epsilon");
        rp_buf_puts(b, ".</p>\n");
        static const char *const skip_np[] = {"note", NULL};
        rp_key_table(b, np, skip_np);
    }
}

static dpfl_status run_section(rp_page *c, const rp_run *r, int idx, dpfl_error *err)
{
    rp_buf *b = c->b;
    const cJSON *sum = r->summary;
    char id[32];
    rp_anchor(id, sizeof id, idx);
    run_statement(b, r, sum, id);
    run_headline(b, sum);
    const int private = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "private"));
    rp_buf_puts(b, "<div class=\"plots\">\n");
    dpfl_status st = rp_run_plots(c, r, err);
    if (st) return st;
    rp_buf_puts(b, "</div>\n");
    if (!private && !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(sum, "epsilon")))
        rp_buf_puts(b, "<p class=\"note\">No ε plot: this run reports no privacy guarantee.</p>\n");

    run_privacy_report(b, sum);
    rp_buf_puts(b, "<h3>Resolved config (config.ini)</h3>\n<pre class=\"config\">");
    rp_buf_html(b, r->config_text);
    rp_buf_puts(b, "</pre>\n</section>\n");
    return DPFL_OK;
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
        rp_anchor(id, sizeof id, i);
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
    rp_page c = {.b = &page, .err = err};
    if (!st) st = rp_plotter_open(&c.pl, gnuplot, err);
    if (!st) {
        page_head(&page, runs, nruns);
        if (nruns > 1) st = rp_comparison(&c, runs, nruns, err);
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
