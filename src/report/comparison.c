/* The comparison section of dpfl report's page for several runs: one table of their headline numbers and their
 * accuracy, loss and epsilon curves overlaid, each run's curves from its own metrics.jsonl. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Several runs: one table and the accuracy, loss and epsilon curves overlaid. */
dpfl_status rp_comparison(rp_page *c, const rp_run *runs, int n, dpfl_error *err)
{
    rp_buf *b = c->b;
    rp_buf_puts(b, "<section id=\"comparison\">\n<h2>Comparison</h2>\n<table class=\"num\"><tr><th>run</th>"
                   "<th>dataset</th><th>model</th><th>clients</th><th>rounds</th><th>test accuracy</th>"
                   "<th>test loss</th><th>record ε</th><th>δ</th><th>client ε</th><th>client δ</th><th>private</th>"
                   "</tr>\n");
    for (int i = 0; i < n; i++) {
        const cJSON *s = runs[i].summary;
        char id[32];
        rp_anchor(id, sizeof id, i);
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
            rp_fmt_num(v, sizeof v, rp_num(s, keys[k]));
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
        rp_plot p = rp_plot_init(k == 0   ? "Accuracy per round: global model, held-out test set"
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
        st = rp_figure(c, &p, k < 2 ? "From each run's <code>metrics.jsonl</code> (covered by its guarantee)."
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
