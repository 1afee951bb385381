/* Internals of dpfl_report_html: a growing text buffer, a run directory read into memory, plots drawn by
 * gnuplot, and the page's parts (html.c the page, run_plots.c one run's plots, summary_tables.c its tables,
 * comparison.c several runs side by side). */
#ifndef DPFL_REPORT_INTERNAL_H
#define DPFL_REPORT_INTERNAL_H
#include "dpfl/config.h"
#include "dpfl/report.h"

#include <stddef.h>

/* ---------------------------------------------------------------- text buffer (buf.c) */
typedef struct {
    char *s;
    size_t len, cap;
    int oom; /* an allocation failed: later appends do nothing, rp_buf_ok says so */
} rp_buf;

void rp_buf_add(rp_buf *b, const char *s, size_t n);
void rp_buf_puts(rp_buf *b, const char *s);
void rp_buf_printf(rp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s with & < > " ' as HTML entities */
void rp_buf_html(rp_buf *b, const char *s);
int rp_buf_ok(const rp_buf *b, dpfl_error *err);
void rp_buf_free(rp_buf *b);

/* ---------------------------------------------------------------- a run directory (load.c) */
struct cJSON;
typedef struct {
    struct cJSON **row;
    size_t n;
} rp_rows;

typedef struct {
    const char *dir;
    char name[256];           /* the directory's last component (the legend in comparisons) */
    struct cJSON *summary;    /* summary.json */
    char *config_text;        /* config.ini as written */
    dpfl_config cfg;          /* config.ini parsed */
    rp_rows metrics, diag;    /* metrics.jsonl, diagnostics.jsonl: one object per line */
} rp_run;

/* Read and check every file of a run directory; errors name the file (and the line of a .jsonl file). */
dpfl_status rp_run_load(rp_run *r, const char *dir, dpfl_error *err);
void rp_run_free(rp_run *r);

/* A series of (x, y) over rounds: rows[i][key] (key "a.b": the member b of the object a) where it is a number. */
typedef struct {
    double *x, *y, *lo, *hi; /* lo/hi: a band (mean -/+ std, or min-max); NULL when none */
    size_t n;
} rp_xy;
/* *out gets the rows whose `key` is a number (with `band`: the rows whose key is a number, lo/hi = y -/+ band). */
dpfl_status rp_series(const rp_rows *rows, const char *key, const char *band, rp_xy *out, dpfl_error *err);
/* Per round: the mean and (lo, hi) = mean -/+ std (spread 0) or (min, max) (spread 1) over the numbers in the
 * object or array rows[i][key] (client_train_loss, epsilon_per_client), rows with at least two of them. */
dpfl_status rp_series_spread(const rp_rows *rows, const char *key, int minmax, rp_xy *out, dpfl_error *err);
void rp_xy_free(rp_xy *s);
/* The number at summary path "a.b.c" (NAN if absent or not a number). */
double rp_num(const struct cJSON *o, const char *path);
const char *rp_str(const struct cJSON *o, const char *path);

/* ---------------------------------------------------------------- plots (gnuplot.c) */
enum { RP_LINES, RP_LINESPOINTS, RP_POINTS, RP_BAND, RP_HLINE, RP_BARS };
typedef struct {
    char title[160];
    const rp_xy *xy;   /* RP_HLINE: none (value), RP_BARS: x..lo (left edge), x..hi (right edge), y (height) */
    double value;      /* RP_HLINE */
    int style, y2, dashed;
    int color;         /* gnuplot linetype (1-8), 0: the next one */
} rp_series_spec;

#define RP_MAX_SERIES 24
typedef struct {
    const char *title, *xlabel, *ylabel, *y2label;
    int logx, logy;
    double ymin, ymax, y2min, y2max; /* NAN: automatic */
    rp_series_spec s[RP_MAX_SERIES];
    int ns;
} rp_plot;

rp_series_spec *rp_plot_add(rp_plot *p, int style, const rp_xy *xy, const char *title);
/* Number of series with data (horizontal lines do not count). */
int rp_plot_has_data(const rp_plot *p);

typedef struct {
    const char *gnuplot;
    char dir[256]; /* a temporary directory for the data files, script and SVG */
    int count;     /* plots drawn so far: the prefix that keeps their SVG ids unique */
} rp_plotter;

dpfl_status rp_plotter_open(rp_plotter *pl, const char *gnuplot, dpfl_error *err);
void rp_plotter_close(rp_plotter *pl);
/* Draw p with gnuplot and append its SVG (ids prefixed, no XML prologue) to out. */
dpfl_status rp_plot_svg(rp_plotter *pl, const rp_plot *p, rp_buf *out, dpfl_error *err);

/* ---------------------------------------------------------------- the page (html.c and the files below) */
typedef struct {
    rp_plotter pl;
    rp_buf *b;
    dpfl_error *err;
    int plots; /* figures written */
} rp_page;

/* v with 6 significant digits, "n/a" when not finite (html.c) */
void rp_fmt_num(char *out, size_t len, double v);
/* The id of run i's section, "run-<i+1>" (html.c). */
void rp_anchor(char *out, size_t len, int i);

/* run_plots.c: an empty plot with its title and y label (limits automatic) */
rp_plot rp_plot_init(const char *title, const char *ylabel);
/* A plot with its caption (HTML written by the caller, never taken from a run) as a <figure>; nothing when no
 * series has data. */
dpfl_status rp_figure(rp_page *c, const rp_plot *p, const char *caption);
/* Every plot of one run, in the page's order. */
dpfl_status rp_run_plots(rp_page *c, const rp_run *r, dpfl_error *err);

/* summary_tables.c: every scalar member of o (but the names in the NULL-ended skip) as a row: key, value, what it
 * means */
void rp_key_table(rp_buf *b, const struct cJSON *o, const char *const *skip);
/* The `dpfl account` command that recomputes the record-level epsilon from the reported worst client (nothing for
 * per-record budgets or a summary without the keys it needs). */
void rp_reproduce_line(rp_buf *b, const struct cJSON *sum);
/* rPDP-FL: the budget levels and the distributions of budget, realized epsilon and rate over the records. */
void rp_levels_table(rp_buf *b, const struct cJSON *rb);

/* comparison.c: several runs, one table and their accuracy, loss and epsilon curves overlaid */
dpfl_status rp_comparison(rp_page *c, const rp_run *runs, int n, dpfl_error *err);
#endif
