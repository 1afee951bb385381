/* Plots for the report: each drawn by one gnuplot process (SVG terminal) from data files in a temporary
 * directory, its SVG read back and inlined with its element ids made unique. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

rp_series_spec *rp_plot_add(rp_plot *p, int style, const rp_xy *xy, const char *title)
{
    if (p->ns >= RP_MAX_SERIES) return NULL;
    if (style != RP_HLINE && (!xy || xy->n == 0)) return NULL;
    if (style == RP_BAND && (!xy->lo || !xy->hi)) return NULL;
    rp_series_spec *s = &p->s[p->ns++];
    memset(s, 0, sizeof *s);
    s->style = style;
    s->xy = xy;
    s->value = NAN;
    snprintf(s->title, sizeof s->title, "%s", title);
    return s;
}

int rp_plot_has_data(const rp_plot *p)
{
    int n = 0;
    for (int i = 0; i < p->ns; i++) n += p->s[i].style != RP_HLINE && p->s[i].xy && p->s[i].xy->n > 0;
    return n;
}

/* Is prog a file we may run (with a '/') or a program in PATH? */
static int findable(const char *prog)
{
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char full[1100];
        snprintf(full, sizeof full, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog);
        if (access(full, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

static dpfl_status missing(const char *prog, dpfl_error *err)
{
    return dpfl_fail(err, DPFL_EIO, "gnuplot not found (%s): dpfl report draws its plots with gnuplot; install the "
                                    "Debian package gnuplot-nox (scripts/setup.sh does) or set DPFL_GNUPLOT", prog);
}

dpfl_status rp_plotter_open(rp_plotter *pl, const char *gnuplot, dpfl_error *err)
{
    memset(pl, 0, sizeof *pl);
    pl->gnuplot = gnuplot;
    if (!findable(gnuplot)) return missing(gnuplot, err);
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(pl->dir, sizeof pl->dir, "%s/dpfl-report-XXXXXX", tmp);
    if (!mkdtemp(pl->dir)) {
        dpfl_status st = dpfl_fail(err, DPFL_EIO, "cannot create a temporary directory (%s): %s", pl->dir,
                                   strerror(errno));
        pl->dir[0] = '\0';
        return st;
    }
    return DPFL_OK;
}

void rp_plotter_close(rp_plotter *pl)
{
    if (pl->dir[0]) rmdir(pl->dir); /* every file in it is removed after each plot */
    pl->dir[0] = '\0';
}

/* s as a gnuplot single-quoted string (' doubled, line breaks as spaces). */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("''", f);
        else if (*s == '\n' || *s == '\r') fputc(' ', f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

static void gp_range(FILE *f, const char *axis, double lo, double hi)
{
    if (!isfinite(lo) && !isfinite(hi)) return;
    fprintf(f, "set %srange [", axis);
    if (isfinite(lo)) fprintf(f, "%.17g", lo);
    else fputc('*', f);
    fputc(':', f);
    if (isfinite(hi)) fprintf(f, "%.17g", hi);
    else fputc('*', f);
    fputs("]\n", f);
}

/* An upper end for an automatic axis range: the data's maximum (bands and horizontal lines included) plus 5% of
 * the span from the axis minimum (or the data's), so that no curve runs along the frame; NAN without data. */
static double headroom(const rp_plot *p, int y2, double axis_min)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < p->ns; i++) {
        const rp_series_spec *s = &p->s[i];
        if (s->y2 != y2) continue;
        if (s->style == RP_HLINE) {
            if (isfinite(s->value)) lo = fmin(lo, s->value), hi = fmax(hi, s->value);
            continue;
        }
        for (size_t k = 0; k < s->xy->n; k++) {
            const double v[3] = {s->xy->y[k], s->xy->lo ? s->xy->lo[k] : NAN, s->xy->hi ? s->xy->hi[k] : NAN};
            for (int j = 0; j < 3; j++)
                if (isfinite(v[j]) && !(s->style == RP_BARS && j > 0)) lo = fmin(lo, v[j]), hi = fmax(hi, v[j]);
        }
    }
    if (!isfinite(hi)) return NAN;
    if (isfinite(axis_min)) lo = axis_min;
    double span = hi - lo;
    return hi + (span > 0 ? 0.05 * span : fabs(hi) > 0 ? 0.05 * fabs(hi) : 1.0);
}

static dpfl_status write_data(const char *path, const rp_series_spec *s, dpfl_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
    const rp_xy *xy = s->xy;
    for (size_t i = 0; i < xy->n; i++) {
        fprintf(f, "%.17g %.17g", xy->x[i], xy->y[i]);
        if (xy->lo) fprintf(f, " %.17g %.17g", xy->lo[i], xy->hi[i]);
        fputc('\n', f);
    }
    if (fclose(f) != 0) return dpfl_fail(err, DPFL_EIO, "cannot write (%s): %s", path, strerror(errno));
    return DPFL_OK;
}

static dpfl_status write_script(const rp_plotter *pl, const rp_plot *p, const char *script, const char *svg,
                                dpfl_error *err)
{
    FILE *f = fopen(script, "w");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", script, strerror(errno));
    int y2 = 0;
    double xmin = INFINITY, xmax = -INFINITY;
    for (int i = 0; i < p->ns; i++) {
        y2 |= p->s[i].y2;
        const rp_xy *xy = p->s[i].xy;
        for (size_t k = 0; xy && p->s[i].style != RP_HLINE && k < xy->n; k++)
            xmin = fmin(xmin, xy->x[k]), xmax = fmax(xmax, xy->x[k]);
    }
    fputs("reset\nset encoding utf8\nset terminal svg size 720,400 noenhanced font 'sans,12' background '#ffffff'\n",
          f);
    fputs("set output ", f);
    gp_quote(f, svg);
    fputs("\nset title ", f);
    gp_quote(f, p->title);
    fputs("\nset xlabel ", f);
    gp_quote(f, p->xlabel ? p->xlabel : "round");
    if (p->ylabel) {
        fputs("\nset ylabel ", f);
        gp_quote(f, p->ylabel);
    }
    fputs("\nset grid\nset key below\nset border 3\nset tics nomirror\nset style fill transparent solid 0.25 noborder\n",
          f);
    if (y2) {
        fputs("set y2tics\nset border 11\n", f);
        if (p->y2label) {
            fputs("set y2label ", f);
            gp_quote(f, p->y2label);
            fputc('\n', f);
        }
    }
    if (p->logx) fputs("set logscale x\n", f);
    if (p->logy) fputs("set logscale y\n", f);
    else if (!p->logx && isfinite(xmin) && xmax - xmin <= 12) fputs("set xtics 1\n", f); /* whole rounds */
    if (!p->logx && isfinite(xmin) && xmax == xmin) gp_range(f, "x", xmin - 1, xmax + 1);
    gp_range(f, "y", p->ymin, isnan(p->ymax) && !p->logy ? headroom(p, 0, p->ymin) : p->ymax);
    if (y2) gp_range(f, "y2", p->y2min, isnan(p->y2max) ? headroom(p, 1, p->y2min) : p->y2max);
    fputs("plot ", f);
    int first = 1, color = 0;
    for (int i = 0; i < p->ns; i++) {
        const rp_series_spec *s = &p->s[i];
        int lt = s->color ? s->color : (color % 8) + 1;
        if (!s->color) color++;
        if (!first) fputs(", \\\n     ", f);
        first = 0;
        if (s->style == RP_HLINE) {
            fprintf(f, "%.17g", s->value);
        } else {
            char data[320];
            snprintf(data, sizeof data, "%s/d%d.dat", pl->dir, i);
            gp_quote(f, data);
        }
        const char *axes = s->y2 ? " axes x1y2" : "";
        const char *dt = s->dashed ? " dt 2" : "";
        int lines = s->style == RP_LINES && s->xy && s->xy->n > 1;
        switch (s->style) {
        case RP_HLINE: fprintf(f, " with lines lt %d lw 1.5 dt 3%s", lt, axes); break;
        case RP_BAND: fprintf(f, " using 1:3:4 with filledcurves lt %d%s", lt, axes); break;
        case RP_BARS:
            fprintf(f, " using 1:2:3:4:(0):2 with boxxyerror fs transparent solid 0.35 border lt %d lt %d%s", lt, lt,
                    axes);
            break;
        case RP_POINTS: fprintf(f, " using 1:2 with points lt %d pt 7 ps 0.6%s", lt, axes); break;
        default:
            if (lines) fprintf(f, " using 1:2 with lines lt %d lw 1.5%s%s", lt, dt, axes);
            else fprintf(f, " using 1:2 with linespoints lt %d lw 1.5 pt 7 ps 0.5%s%s", lt, dt, axes);
        }
        fputs(" title ", f);
        gp_quote(f, s->title);
    }
    fputs("\nunset output\n", f);
    if (fclose(f) != 0) return dpfl_fail(err, DPFL_EIO, "cannot write (%s): %s", script, strerror(errno));
    return DPFL_OK;
}

/* The first line of gnuplot's messages, for an error. */
static void first_message(const char *log, char *out, size_t len)
{
    char *text = NULL;
    out[0] = '\0';
    if (dpfl_file_read_all(log, &text, NULL, NULL) != DPFL_OK) return;
    char *s = text;
    while (*s == '\n' || *s == ' ') s++;
    /* gnuplot echoes the offending line, then a caret line, then the message: keep the message */
    char *msg = strstr(s, "line ");
    if (msg && strchr(msg, ':')) s = msg;
    size_t n = strcspn(s, "\n");
    snprintf(out, len, "%.*s", (int)(n < 300 ? n : 300), s);
    free(text);
}

static dpfl_status run_gnuplot(const rp_plotter *pl, const char *script, const char *log, dpfl_error *err)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa)) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (spawning gnuplot)");
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {(char *)pl->gnuplot, (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, pl->gnuplot, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc == ENOENT) return missing(pl->gnuplot, err);
    if (rc) return dpfl_fail(err, DPFL_EIO, "cannot run gnuplot (%s): %s", pl->gnuplot, strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return dpfl_fail(err, DPFL_EIO, "cannot wait for gnuplot (%s): %s", pl->gnuplot, strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return DPFL_OK;
    char msg[320];
    first_message(log, msg, sizeof msg);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return missing(pl->gnuplot, err);
    return dpfl_fail(err, DPFL_EIO, "gnuplot failed (%s, %s %d): %s", pl->gnuplot,
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), msg[0] ? msg : "no message");
}

static int starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* gnuplot's SVG from its <svg> element on, every id (and reference to one) prefixed, labelled with the title. */
static void inline_svg(const char *svg, int idx, const char *title, rp_buf *out)
{
    const char *s = strstr(svg, "<svg");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "p%d-", idx);
    rp_buf_puts(out, "<svg class=\"plot\" role=\"img\" aria-label=\"");
    rp_buf_html(out, title);
    rp_buf_puts(out, "\"");
    s += 4;
    static const char *const refs[] = {" id='", " id=\"", "href='#", "href=\"#", "url(#"};
    while (*s) {
        int hit = 0;
        for (size_t k = 0; k < sizeof refs / sizeof refs[0] && !hit; k++) {
            if (starts(s, refs[k])) {
                rp_buf_puts(out, refs[k]);
                rp_buf_puts(out, prefix);
                s += strlen(refs[k]);
                hit = 1;
            }
        }
        if (hit) continue;
        if (starts(s, "<title>Gnuplot</title>")) {
            rp_buf_puts(out, "<title>");
            rp_buf_html(out, title);
            rp_buf_puts(out, "</title>");
            s += strlen("<title>Gnuplot</title>");
            continue;
        }
        size_t n = strcspn(s + 1, " hu<") + 1; /* up to the next place a pattern can start */
        rp_buf_add(out, s, n);
        s += n;
    }
}

dpfl_status rp_plot_svg(rp_plotter *pl, const rp_plot *p, rp_buf *out, dpfl_error *err)
{
    char script[320], svg[320], log[320], data[RP_MAX_SERIES][320];
    snprintf(script, sizeof script, "%s/plot.gp", pl->dir);
    snprintf(svg, sizeof svg, "%s/plot.svg", pl->dir);
    snprintf(log, sizeof log, "%s/gnuplot.log", pl->dir);
    dpfl_status st = DPFL_OK;
    int nd = 0;
    for (int i = 0; i < p->ns && !st; i++, nd++) {
        snprintf(data[i], sizeof data[i], "%s/d%d.dat", pl->dir, i);
        if (p->s[i].style != RP_HLINE) st = write_data(data[i], &p->s[i], err);
    }
    if (!st) st = write_script(pl, p, script, svg, err);
    if (!st) st = run_gnuplot(pl, script, log, err);
    char *text = NULL;
    if (!st) {
        dpfl_error e2;
        if (dpfl_file_read_all(svg, &text, NULL, &e2))
            st = dpfl_fail(err, DPFL_EIO, "gnuplot wrote no plot (%s): %s", pl->gnuplot, e2.msg);
        else if (!strstr(text, "<svg") || !strstr(text, "</svg>"))
            st = dpfl_fail(err, DPFL_EIO, "gnuplot wrote no SVG (%s): is it built with the svg terminal?", pl->gnuplot);
    }
    if (!st) inline_svg(text, pl->count++, p->title, out);
    free(text);
    for (int i = 0; i < nd; i++) unlink(data[i]);
    unlink(script);
    unlink(svg);
    unlink(log);
    return st;
}
