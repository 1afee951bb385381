/* dpfl report: the page of real runs (record level, client level, rPDP-FL, not private) has each plot and the runs'
 * own numbers, is self-contained, overlays several runs; errors name the file and leave the output alone; the
 * rPDP-FL histograms in summary.json count every record in its bin; the progress line of dpfl train on a terminal
 * shows epsilon and the ETA; and the page opened in headless Chromium renders its plots with no console error
 * (a blank page, a script error and hidden plots are each caught by that check).
 *
 * Needs gnuplot (the plots) and chromium (the browser check): without them those tests say so and are skipped.
 * `test_report --check PAGE.html N` runs the browser check alone on any page that should show N plots. */
#define _GNU_SOURCE
#include "testutil.h"
#include "core/numtext.h"
#include "dpfl/run.h"
#include "dpfl/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pty.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char root[64]; /* the runs of this suite: root/{dp,cdp,rpdp,plain} */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

__attribute__((noinline)) static char *read_text(const char *path)
{
    char *s = NULL;
    dpfl_error err;
    if (dpfl_file_read_all(path, &s, NULL, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
    return s;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Is prog (no '/') an executable in PATH? */
static int in_path(const char *prog)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        char full[PATH_MAX];
        snprintf(full, sizeof full, "%.*s/%s", (int)n, p, prog);
        if (n && access(full, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

static int have_gnuplot(void)
{
    const char *g = getenv("DPFL_GNUPLOT");
    return g && *g ? access(g, X_OK) == 0 || in_path(g) : in_path("gnuplot");
}

#define NEED_GNUPLOT()                                                                                               \
    do {                                                                                                             \
        if (!have_gnuplot()) {                                                                                       \
            printf("test_report: SKIP %s: gnuplot not found (scripts/setup.sh installs gnuplot-nox)\n", __func__);   \
            skip();                                                                                                  \
        }                                                                                                            \
    } while (0)

static const char *chromium(void)
{
    const char *c = getenv("DPFL_CHROMIUM"); /* another browser (a path or a name in PATH) */
    if (c && *c) return access(c, X_OK) == 0 || (!strchr(c, '/') && in_path(c)) ? c : NULL;
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (in_path(names[i])) return names[i];
    return NULL;
}

/* ---------------------------------------------------------------- the runs */
static void train(const char *name, const char *ini)
{
    char cfgpath[128], out[128];
    snprintf(cfgpath, sizeof cfgpath, "%s/%s.ini", root, name);
    snprintf(out, sizeof out, "%s/%s", root, name);
    write_text(cfgpath, ini);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    dpfl_run_options o = {.out_dir = out, .quiet = 1};
    if (dpfl_config_load(&cfg, cfgpath, &err) || dpfl_run(&cfg, &o, &err)) {
        print_error("run %s: %s\n", name, err.msg);
        fail();
    }
}

static const char *DP_INI = "[data]\ndataset = synthetic\npartition = iid\nclients = 4\ntest_per_client = 50\n\n"
                            "[model]\narch = mlp:20-12-10\n\n[fl]\nrounds = 4\nsampling = all\nlocal_steps = 2\n"
                            "batch = 20\nlr = 0.1\n\n[record_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.0\n"
                            "target_epsilon = 50\ndelta = 1e-5\n\n[run]\nseed = 3\neval_every = 1\n";

static int make_runs(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dpfl_test_report_XXXXXX");
    if (!mkdtemp(root)) return -1;
    train("dp", DP_INI);
    train("cdp", "[data]\ndataset = synthetic\npartition = iid\nclients = 10\n\n[model]\narch = mlp:20-12-10\n\n"
                 "[fl]\nrounds = 4\nsampling = poisson\nclient_rate = 0.5\nlocal_steps = 2\nbatch = 20\nlr = 0.1\n\n"
                 "[client_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.2\ntarget_epsilon = 40\ndelta = 1e-3\n\n"
                 "[run]\nseed = 4\neval_every = 2\nallow_large_delta = yes\nemd = yes\n");
    train("plain", "[data]\ndataset = synthetic\npartition = iid\nclients = 3\n\n[model]\narch = mlp:20-12-10\n\n"
                   "[fl]\nrounds = 3\nsampling = all\nlocal_steps = 2\nbatch = 20\nlr = 0.1\n\n[run]\nseed = 5\n");
    /* rPDP-FL on the heart-disease centres: examples/rpdp_heart.ini, 3 rounds */
    char out[128];
    snprintf(out, sizeof out, "%s/rpdp", root);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    dpfl_run_options o = {.out_dir = out, .quiet = 1};
    if (dpfl_config_load(&cfg, "examples/rpdp_heart.ini", &err) || dpfl_config_set(&cfg, "fl.rounds=3", &err) ||
        dpfl_config_set(&cfg, "run.eval_every=1", &err) || dpfl_run(&cfg, &o, &err)) {
        fprintf(stderr, "rpdp run: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int remove_runs(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : -1;
}

static char *report(const char *const *names, int n, const char *out, int *plots)
{
    const char *dirs[8];
    static char paths[8][128];
    for (int i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", root, names[i]);
        dirs[i] = paths[i];
    }
    char path[160];
    snprintf(path, sizeof path, "%s/%s", root, out);
    dpfl_error err;
    if (dpfl_report_html(dirs, n, path, NULL, plots, &err)) {
        print_error("report: %s\n", err.msg);
        fail();
    }
    return read_text(path);
}

/* A figure whose plot has the aria-label (its title). */
static int has_plot(const char *html, const char *title)
{
    char want[256];
    snprintf(want, sizeof want, "<svg class=\"plot\" role=\"img\" aria-label=\"%s", title);
    return strstr(html, want) != NULL;
}

static cJSON *summary_of(const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s/summary.json", root, name);
    char *t = read_text(path);
    cJSON *s = cJSON_Parse(t);
    free(t);
    assert_non_null(s);
    return s;
}

/* ---------------------------------------------------------------- the page */
static void each_run_has_its_plots_and_numbers(void **state)
{
    (void)state;
    NEED_GNUPLOT();
    static const char *const common[] = {"Accuracy per round", "Loss per round", "Client participation per round"};
    const char *names[] = {"dp", "cdp", "rpdp", "plain"};
    for (int r = 0; r < 4; r++) {
        int plots = -1;
        char out[64];
        snprintf(out, sizeof out, "%s.html", names[r]);
        char *html = report(&names[r], 1, out, &plots);
        assert_int_equal(count(html, "<svg "), plots);
        for (size_t k = 0; k < sizeof common / sizeof common[0]; k++)
            if (!has_plot(html, common[k])) {
                print_error("%s: no plot '%s'\n", names[r], common[k]);
                fail();
            }
        /* epsilon and clipping exactly where the run is private */
        assert_int_equal(has_plot(html, "Privacy loss ε per round"), r != 3);
        assert_int_equal(has_plot(html, "Clipping and noise per round"), r != 3);
        assert_int_equal(has_plot(html, "Per-record budget and realized ε"), r == 2);
        assert_int_equal(has_plot(html, "Share of its own budget each record used"), r == 2);
        /* every sampled client replied: one participation line, not two drawn over each other */
        assert_true(count(html, "clients sampled (all replied)") > 0);
        assert_int_equal(count(html, "clients that replied"), 0);
        /* PrivateFL's EMD only where asked for (run.emd = yes) or the input transform ran (run.emd = auto) */
        assert_int_equal(has_plot(html, "EMD between the clients"), r == 1);
        assert_int_equal(plots, r == 2 ? 7 : r == 3 ? 3 : r == 1 ? 6 : 5);
        /* the privacy statement in words, and the resolved config, as the run wrote them */
        cJSON *sum = summary_of(names[r]);
        const char *privacy = cJSON_GetObjectItemCaseSensitive(sum, "privacy")->valuestring;
        char words[200];
        const int priv = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "private"));
        static const char head[] = "NOT differentially private: "; /* the banner says it; not twice */
        if (!priv && !strncmp(privacy, head, sizeof head - 1)) privacy += sizeof head - 1;
        snprintf(words, sizeof words, "%.60s", privacy);
        assert_non_null(strstr(html, words));
        assert_null(strstr(html, "private:</strong> NOT differentially private"));
        assert_non_null(strstr(html, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "private"))
                                         ? "<strong>Differentially private:</strong>"
                                         : "<strong>Not differentially private:</strong>"));
        assert_non_null(strstr(html, "[record_dp]\nenabled = "));
        cJSON_Delete(sum);
        free(html);
    }
    /* the targets and the clients' spread are drawn, in the legend of the plot */
    const char *dp = "dp";
    char *html = report(&dp, 1, "dp.html", NULL);
    assert_non_null(strstr(html, "record-level target ε = 50"));
    assert_non_null(strstr(html, "record level, worst client (δ = 1e-05)"));
    assert_non_null(strstr(html, "test sets: mean ± std"));
    assert_non_null(strstr(html, "dpfl account --noise 1 --q "));
    free(html);
    const char *cdp = "cdp";
    html = report(&cdp, 1, "cdp.html", NULL);
    assert_non_null(strstr(html, "client-level target ε = 40"));
    assert_non_null(strstr(html, "client updates clipped (fraction)"));
    free(html);
    const char *rp = "rpdp";
    html = report(&rp, 1, "rpdp.html", NULL);
    assert_non_null(strstr(html, "largest record budget = 5"));
    assert_non_null(strstr(html, "largest record ε_i (δ = 0.001)"));
    free(html);
}

/* No script, no external style sheet, image, frame or font, nothing fetched: only the SVG namespaces. */
static void page_is_self_contained(void **state)
{
    (void)state;
    NEED_GNUPLOT();
    const char *names[] = {"dp", "cdp", "rpdp", "plain"};
    int plots;
    char *html = report(names, 4, "all.html", &plots);
    static const char *const banned[] = {"<script", "<link", "<img", "<iframe", "<object", "<embed", " src=",
                                         "@import", "url(http", "url(//"};
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
        if (strstr(html, banned[i])) {
            print_error("the page has '%s'\n", banned[i]);
            fail();
        }
    int urls = count(html, "http://") + count(html, "https://");
    int ns = count(html, "http://www.w3.org/2000/svg") + count(html, "http://www.w3.org/1999/xlink");
    assert_int_equal(urls, ns);
    /* every SVG id is unique in the page (each plot's ids carry its own prefix) */
    int ids = 0;
    for (const char *p = html; (p = strstr(p, " id='")); p += 5) {
        const char *q = strchr(p + 5, '\'');
        char id[128];
        snprintf(id, sizeof id, " id='%.*s'", (int)(q - p - 5), p + 5);
        assert_int_equal(count(html, id), 1);
        ids++;
    }
    assert_true(ids > 10 * plots);
    free(html);
}

static void several_runs_are_overlaid(void **state)
{
    (void)state;
    NEED_GNUPLOT();
    const char *names[] = {"dp", "cdp", "rpdp", "plain"};
    int plots;
    char *html = report(names, 4, "all.html", &plots);
    assert_int_equal(plots, 5 + 6 + 7 + 3 + 3);
    assert_int_equal(count(html, "<svg "), plots);
    assert_true(has_plot(html, "Accuracy per round: global model, held-out test set"));
    assert_true(has_plot(html, "Test loss per round: global model, held-out test set"));
    /* the comparison epsilon plot has each private run's curve, named */
    const char *cmp = strstr(html, "aria-label=\"Privacy loss ε per round (upper bounds, nats)");
    assert_non_null(cmp);
    const char *end = strstr(cmp, "</svg>");
    char *plot = strndup(cmp, (size_t)(end - cmp));
    assert_non_null(strstr(plot, "dp: record level (δ = 1e-05)"));
    assert_non_null(strstr(plot, "cdp: client level (δ = 0.001)"));
    assert_non_null(strstr(plot, "rpdp: record level (δ = 0.001)"));
    assert_null(strstr(plot, "plain: record level"));
    free(plot);
    for (int i = 0; i < 4; i++) {
        char row[128];
        snprintf(row, sizeof row, "<tr><td><a href=\"#run-%d\">%s</a></td>", i + 1, names[i]);
        assert_non_null(strstr(html, row));
    }
    free(html);
}

/* ---------------------------------------------------------------- the rPDP-FL histograms in summary.json */
static double sum_array(const cJSON *a)
{
    double s = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) s += e->valuedouble;
    return s;
}

/* ThreeLevels: each level's records are counted in the bin holding its budget and in the bin holding its realized
 * epsilon; every record once in each histogram; the share of the budget used is in [0.95, 1] at the plan's end. */
static void budget_histograms_count_every_record_in_its_bin(void **state)
{
    (void)state;
    cJSON *sum = summary_of("rpdp");
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(sum, "record_budgets");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(rb, "histogram");
    const cJSON *edges = cJSON_GetObjectItemCaseSensitive(h, "edges"), *hb = cJSON_GetObjectItemCaseSensitive(h, "budget"),
                *he = cJSON_GetObjectItemCaseSensitive(h, "epsilon");
    const double records = cJSON_GetObjectItemCaseSensitive(rb, "records")->valuedouble;
    const int bins = cJSON_GetArraySize(hb);
    assert_int_equal(cJSON_GetArraySize(edges), bins + 1);
    assert_int_equal(cJSON_GetArraySize(he), bins);
    assert_true(records > 400);
    assert_true(sum_array(hb) == records);
    assert_true(sum_array(he) + cJSON_GetObjectItemCaseSensitive(h, "epsilon_zero")->valuedouble == records);
    double *want_b = calloc((size_t)bins, sizeof *want_b), *want_e = calloc((size_t)bins, sizeof *want_e);
    const cJSON *lv;
    int levels = 0;
    cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(rb, "levels"))
    {
        const double v[2] = {cJSON_GetObjectItemCaseSensitive(lv, "budget")->valuedouble,
                             cJSON_GetObjectItemCaseSensitive(lv, "epsilon")->valuedouble};
        double *want[2] = {want_b, want_e};
        for (int j = 0; j < 2; j++) {
            int k = 0;
            while (k + 1 < bins && v[j] >= cJSON_GetArrayItem(edges, k + 1)->valuedouble) k++;
            want[j][k] += cJSON_GetObjectItemCaseSensitive(lv, "records")->valuedouble;
        }
        levels++;
    }
    assert_int_equal(levels, 3);
    for (int k = 0; k < bins; k++) {
        assert_true(cJSON_GetArrayItem(hb, k)->valuedouble == want_b[k]);
        assert_true(cJSON_GetArrayItem(he, k)->valuedouble == want_e[k]);
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(rb, "budget_used"), *ur = cJSON_GetObjectItemCaseSensitive(u, "records");
    assert_true(sum_array(ur) + cJSON_GetObjectItemCaseSensitive(u, "above_1")->valuedouble == records);
    const int ub = cJSON_GetArraySize(ur);
    assert_true(cJSON_GetArrayItem(ur, ub - 1)->valuedouble == records); /* the plan spends ~all of every budget */
    assert_true(cJSON_GetObjectItemCaseSensitive(u, "above_1")->valuedouble == 0);
    free(want_b);
    free(want_e);
    cJSON_Delete(sum);
}

/* ---------------------------------------------------------------- errors */
static void expect_error(const char *dir, const char *gnuplot, dpfl_status code, const char *const *says)
{
    char out[160];
    snprintf(out, sizeof out, "%s/kept.html", root);
    write_text(out, "the previous page\n");
    dpfl_report_options opt = {gnuplot};
    dpfl_error err;
    const char *dirs[1] = {dir};
    dpfl_status st = dpfl_report_html(dirs, 1, out, &opt, NULL, &err);
    if (st != code) {
        print_error("%s: status %d, expected %d (%s)\n", dir, st, code, st ? err.msg : "");
        fail();
    }
    for (int i = 0; says[i]; i++)
        if (!strstr(err.msg, says[i])) {
            print_error("'%s' does not say '%s'\n", err.msg, says[i]);
            fail();
        }
    assert_null(strchr(err.msg, '\n'));
    char *t = read_text(out);
    assert_string_equal(t, "the previous page\n"); /* the output is left as it was */
    free(t);
}

static void copy_run(const char *from, const char *to)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s/%s && cp -r %s/%s %s/%s", root, to, root, from, root, to);
    assert_int_equal(system(cmd), 0);
}

static void errors_name_the_file_and_leave_the_output(void **state)
{
    (void)state;
    char dir[160], path[200];
    snprintf(dir, sizeof dir, "%s/no_such_run", root);
    expect_error(dir, NULL, DPFL_EIO, (const char *[]){"cannot open run directory", "no_such_run", NULL});

    copy_run("dp", "broken");
    snprintf(dir, sizeof dir, "%s/broken", root);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    unlink(path);
    expect_error(dir, NULL, DPFL_EIO, (const char *[]){"broken/summary.json", "dpfl train --resume", NULL});
    write_text(path, "{\"rounds\": 4, \"private\": tr");
    expect_error(dir, NULL, DPFL_EFORMAT, (const char *[]){"corrupt run file", "broken/summary.json", NULL});

    copy_run("dp", "broken");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *m = read_text(path);
    char *second = strchr(m, '\n') + 1;
    second[10] = '\0'; /* line 2 cut short */
    write_text(path, m);
    free(m);
    expect_error(dir, NULL, DPFL_EFORMAT, (const char *[]){"broken/metrics.jsonl:2", NULL});
    unlink(path);
    expect_error(dir, NULL, DPFL_EIO, (const char *[]){"broken/metrics.jsonl", NULL});

    copy_run("dp", "broken");
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
    write_text(path, "{\"round\": 1}\n[1, 2]\n");
    expect_error(dir, NULL, DPFL_EFORMAT, (const char *[]){"broken/diagnostics.jsonl:2", NULL});

    copy_run("dp", "broken");
    snprintf(path, sizeof path, "%s/config.ini", dir);
    write_text(path, "[fl]\nrounds = many\n");
    expect_error(dir, NULL, DPFL_EFORMAT, (const char *[]){"broken/config.ini", NULL});

    snprintf(path, sizeof path, "%s/dp/summary.json", root);
    expect_error(path, NULL, DPFL_EIO, (const char *[]){"not a run directory", "summary.json", NULL});

    /* gnuplot missing (a path, or a name not in PATH), or failing */
    snprintf(dir, sizeof dir, "%s/dp", root);
    expect_error(dir, "/nonexistent/gnuplot", DPFL_EIO,
                 (const char *[]){"gnuplot not found", "/nonexistent/gnuplot", "gnuplot-nox", NULL});
    expect_error(dir, "dpfl-no-such-gnuplot", DPFL_EIO, (const char *[]){"gnuplot not found", "gnuplot-nox", NULL});
    expect_error(dir, "false", DPFL_EIO, (const char *[]){"gnuplot failed", NULL});
    /* nothing left behind in the output's folder */
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", root);
    assert_int_not_equal(system(cmd), 0);
}

/* The command: one line "dpfl: error: ..." naming the directory, non-zero exit; the default output file. */
static void command_line(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    char cmd[600], path[200];
    snprintf(path, sizeof path, "%s/cli.err", root);
    snprintf(cmd, sizeof cmd, "%s/dpfl report %s/missing_run 2> %s", b ? b : "build", root, path);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) != 0);
    char *e = read_text(path);
    assert_int_equal(count(e, "\n"), 1);
    assert_true(!strncmp(e, "dpfl: error: cannot open run directory (", 40));
    assert_non_null(strstr(e, "missing_run"));
    free(e);
    snprintf(cmd, sizeof cmd, "%s/dpfl report 2> %s", b ? b : "build", path);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    if (!have_gnuplot()) {
        printf("test_report: SKIP the default output file: gnuplot not found (scripts/setup.sh installs gnuplot-nox)\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "%s/dpfl report %s/plain/ 2> %s", b ? b : "build", root, path);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/plain/report.html", root);
    assert_int_equal(access(path, R_OK), 0);
    /* dpfl train --force replaces the run and the report of the old one */
    snprintf(cmd, sizeof cmd, "%s/dpfl train %s/plain.ini --out %s/plain --force --quiet 2>/dev/null", b ? b : "build",
             root, root);
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(access(path, R_OK), 0);
}

/* ---------------------------------------------------------------- the progress line */
/* dpfl train on a terminal: the last progress line says the round, the epsilon so far against the target (the
 * noise is given, so the target is a stop rule and the ETA an upper bound), elapsed time and ETA. */
static void progress_line_shows_epsilon_and_eta(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    char bin[256], cfg[160], out[160];
    snprintf(bin, sizeof bin, "%s/dpfl", b ? b : "build");
    snprintf(cfg, sizeof cfg, "%s/dp.ini", root);
    snprintf(out, sizeof out, "%s/tty", root);
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(bin, bin, "train", cfg, "--out", out, "--force", (char *)NULL);
        _exit(127);
    }
    char text[65536];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(master, text + n, sizeof text - 1 - n);
        if (r > 0) n += (size_t)r;
        else if (r < 0 && errno == EINTR) continue;
        else break; /* EIO: the child closed the terminal */
    }
    text[n] = '\0';
    close(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the last "round 4/4" segment between carriage returns */
    char *last = NULL;
    for (char *p = text; (p = strstr(p, "round 4/4")); p++) last = p;
    assert_non_null(last);
    last[strcspn(last, "\r\n\033")] = '\0';
    /* epsilon of the last round, from metrics.jsonl */
    char path[200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    char *m = read_text(path), *line = m, *nl;
    while ((nl = strchr(line, '\n')) && nl[1]) line = nl + 1;
    cJSON *o = cJSON_Parse(line);
    char want[64];
    const double eps = cJSON_GetObjectItemCaseSensitive(o, "epsilon")->valuedouble;
    snprintf(want, sizeof want, "  eps %s/50  ", dpfl_num_up(eps, 3).s); /* rounded up: never below the epsilon */
    assert_true(strtod(dpfl_num_up(eps, 3).s, NULL) >= eps);
    if (!strstr(last, want) || !strstr(last, "test acc 0.") || !strstr(last, " elapsed, ETA <= ")) {
        print_error("progress line '%s' lacks '%s', the accuracy or the ETA\n", last, want);
        fail();
    }
    cJSON_Delete(o);
    free(m);
}

/* ---------------------------------------------------------------- the browser check */
/* A PNG (8-bit RGB or RGBA, not interlaced) as RGB. */
static int png_read(const char *path, int *w, int *h, unsigned char **rgb)
{
    char *buf;
    size_t len;
    if (dpfl_file_read_all(path, &buf, &len, NULL)) return -1;
    const unsigned char *p = (const unsigned char *)buf;
    if (len < 8 || memcmp(p, "\x89PNG\r\n\x1a\n", 8)) return free(buf), -1;
    size_t off = 8, zlen = 0;
    *w = *h = 0;
    unsigned char *z = malloc(len), type = 0;
    int depth = 0, inter = 1;
    while (off + 12 <= len) {
        uint32_t n = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 | (uint32_t)p[off + 2] << 8 | p[off + 3];
        const unsigned char *c = p + off + 4, *d = c + 4;
        if (off + 12 + n > len) break;
        if (!memcmp(c, "IHDR", 4)) {
            *w = (int)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
            *h = (int)((uint32_t)d[4] << 24 | (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7]);
            depth = d[8];
            type = d[9];
            inter = d[12];
        } else if (!memcmp(c, "IDAT", 4)) {
            memcpy(z + zlen, d, n);
            zlen += n;
        }
        off += 12 + n;
    }
    int bpp = type == 6 ? 4 : type == 2 ? 3 : 0;
    if (depth != 8 || !bpp || inter || *w <= 0 || *h <= 0) return free(buf), free(z), -1;
    size_t stride = (size_t)*w * bpp;
    uLongf rawlen = (uLongf)((stride + 1) * (size_t)*h);
    unsigned char *raw = malloc(rawlen);
    int bad = uncompress(raw, &rawlen, z, zlen) != Z_OK || rawlen != (stride + 1) * (size_t)*h;
    free(z);
    free(buf);
    if (bad) return free(raw), -1;
    unsigned char *img = malloc(stride * (size_t)*h);
    for (int y = 0; y < *h; y++) {
        unsigned char f = raw[(size_t)y * (stride + 1)], *src = raw + (size_t)y * (stride + 1) + 1;
        unsigned char *row = img + (size_t)y * stride, *up = y ? row - stride : NULL;
        for (size_t x = 0; x < stride; x++) {
            int a = x >= (size_t)bpp ? row[x - bpp] : 0, bb = up ? up[x] : 0,
                c = up && x >= (size_t)bpp ? up[x - bpp] : 0, pred = 0;
            switch (f) {
            case 1: pred = a; break;
            case 2: pred = bb; break;
            case 3: pred = (a + bb) / 2; break;
            case 4: {
                int pp = a + bb - c, pa = abs(pp - a), pb = abs(pp - bb), pc = abs(pp - c);
                pred = pa <= pb && pa <= pc ? a : pb <= pc ? bb : c;
                break;
            }
            default: break;
            }
            row[x] = (unsigned char)(src[x] + pred);
        }
    }
    free(raw);
    *rgb = malloc((size_t)*w * (size_t)*h * 3);
    for (size_t i = 0; i < (size_t)*w * (size_t)*h; i++) memcpy(*rgb + 3 * i, img + (size_t)bpp * i, 3);
    free(img);
    return 0;
}

/* Open the page in headless Chromium: 0 if it renders with no console message, at least want_svgs <svg> elements
 * in the rendered DOM, enough non-background pixels and enough colored ones (the curves); else 1 and why. */
static int browser_check(const char *page, int want_svgs, char *why, size_t len)
{
    const char *chrome = chromium();
    char dir[64] = "/tmp/dpfl_test_chrome_XXXXXX", full[PATH_MAX], cmd[3 * PATH_MAX], path[PATH_MAX];
    if (!chrome || !mkdtemp(dir) || !realpath(page, full)) {
        snprintf(why, len, "cannot set up the browser check (%s)", chrome ? page : "chromium not found");
        return 1;
    }
    const char *flags = "--headless --disable-gpu --no-sandbox --hide-scrollbars --no-first-run "
                        "--enable-logging=stderr --v=0 --window-size=1280,4000";
    int rc1, rc2, bad = 0;
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s --user-data-dir=%s/profile --screenshot=%s/shot.png 'file://%s' "
                              ">/dev/null 2>%s/shot.log", chrome, flags, dir, dir, full, dir);
    rc1 = system(cmd);
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s --user-data-dir=%s/profile --dump-dom 'file://%s' >%s/dom.html "
                              "2>%s/dom.log", chrome, flags, dir, full, dir, dir);
    rc2 = system(cmd);
    why[0] = '\0';
    if (rc1 != 0 || rc2 != 0) {
        snprintf(why, len, "chromium failed (status %d, %d; logs in %s)", rc1, rc2, dir);
        return 1;
    }
    /* any console message (the page has no script: an error, a warning or a log line are all wrong) */
    static const char *const logs[] = {"shot.log", "dom.log"};
    for (int i = 0; i < 2 && !bad; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, logs[i]);
        char *log = read_text(path), *hit = strstr(log, ":CONSOLE");
        if (!hit) hit = strstr(log, "Uncaught");
        if (hit) {
            char *start = hit;
            while (start > log && start[-1] != '\n') start--;
            snprintf(why, len, "console message: %.*s", (int)strcspn(start, "\n"), start);
            bad = 1;
        }
        free(log);
    }
    /* the plots in the rendered DOM */
    snprintf(path, sizeof path, "%s/dom.html", dir);
    char *dom = read_text(path);
    int svgs = count(dom, "<svg ") + count(dom, "<svg>");
    free(dom);
    if (!bad && svgs < want_svgs) {
        snprintf(why, len, "%d <svg> elements rendered, expected %d", svgs, want_svgs);
        bad = 1;
    }
    /* the screenshot: not blank, and colored curves drawn */
    int w = 0, h = 0;
    unsigned char *rgb;
    snprintf(path, sizeof path, "%s/shot.png", dir);
    if (!bad && png_read(path, &w, &h, &rgb)) {
        snprintf(why, len, "no readable screenshot (%.400s)", path);
        bad = 1;
    } else if (!bad) {
        long ink = 0, color = 0;
        const unsigned char *bg = rgb; /* the top-left pixel: the page's background */
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
            const unsigned char *q = rgb + 3 * i;
            int d = abs(q[0] - bg[0]) + abs(q[1] - bg[1]) + abs(q[2] - bg[2]);
            int mx = q[0] > q[1] ? (q[0] > q[2] ? q[0] : q[2]) : (q[1] > q[2] ? q[1] : q[2]);
            int mn = q[0] < q[1] ? (q[0] < q[2] ? q[0] : q[2]) : (q[1] < q[2] ? q[1] : q[2]);
            ink += d > 48;
            color += mx - mn > 30;
        }
        free(rgb);
        double share = (double)ink / ((double)w * h);
        if (share < 0.02) snprintf(why, len, "blank page: %.2f%% non-background pixels", 100 * share), bad = 1;
        else if (color < 30000) snprintf(why, len, "no plots drawn: %ld colored pixels", color), bad = 1;
        else snprintf(why, len, "%d plots, %.1f%% ink, %ld colored pixels", svgs, 100 * share, color);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) bad = 1;
    return bad;
}

/* s with the first `from` (if `all`, every one) replaced by `to`. */
static char *replace(const char *s, const char *from, const char *to, int all)
{
    size_t n = strlen(s), lf = strlen(from), lt = strlen(to);
    char *out = malloc(n + (size_t)count(s, from) * (lt + 1) + 1), *o = out;
    for (const char *p = s;;) {
        const char *q = strstr(p, from);
        if (!q) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, lt);
        o += lt;
        p = q + lf;
        if (!all) {
            strcpy(o, p);
            break;
        }
    }
    return out;
}

static void browser_renders_the_report(void **state)
{
    (void)state;
    NEED_GNUPLOT();
    if (!chromium()) {
        printf("test_report: SKIP browser check: chromium not found (scripts/setup.sh installs it)\n");
        skip();
    }
    const char *names[] = {"dp", "cdp", "rpdp", "plain"};
    int plots;
    char *html = report(names, 4, "all.html", &plots), why[512], path[200];
    snprintf(path, sizeof path, "%s/all.html", root);
    if (browser_check(path, plots, why, sizeof why)) {
        print_error("the report fails the browser check: %s\n", why);
        fail();
    }
    printf("test_report: browser check of %s: %s\n", path, why);
    /* the check can fail: an empty body, a script error, plots hidden */
    char *body = strstr(html, "<body>") + 6, *end = strstr(html, "</body>");
    char *blank = malloc(strlen(html) + 1);
    memcpy(blank, html, (size_t)(body - html));
    strcpy(blank + (body - html), end);
    char *broken[3] = {blank, replace(html, "<body>", "<body><script>undefined_function()</script>", 0),
                       replace(html, "<svg class=\"plot\"", "<svg style=\"display:none\" class=\"plot\"", 1)};
    const char *caught[3] = {"blank page", "console message", "no plots drawn"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/broken%d.html", root, i);
        write_text(path, broken[i]);
        if (!browser_check(path, i == 0 ? 0 : plots, why, sizeof why) || !strstr(why, caught[i])) {
            print_error("broken page %d passed the browser check or for another reason: %s\n", i, why);
            fail();
        }
        free(broken[i]);
    }
    /* and fewer plots than expected */
    snprintf(path, sizeof path, "%s/all.html", root);
    assert_int_equal(browser_check(path, plots + 1, why, sizeof why), 1);
    assert_non_null(strstr(why, "<svg> elements rendered"));
    free(html);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--check")) { /* test_report --check PAGE.html N */
        char why[512];
        int bad = browser_check(argv[2], atoi(argv[3]), why, sizeof why);
        printf("%s: %s: %s\n", argv[2], bad ? "FAILED" : "ok", why);
        return bad;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_run_has_its_plots_and_numbers),
        cmocka_unit_test(page_is_self_contained),
        cmocka_unit_test(several_runs_are_overlaid),
        cmocka_unit_test(budget_histograms_count_every_record_in_its_bin),
        cmocka_unit_test(errors_name_the_file_and_leave_the_output),
        cmocka_unit_test(command_line),
        cmocka_unit_test(progress_line_shows_epsilon_and_eta),
        cmocka_unit_test(browser_renders_the_report),
    };
    return cmocka_run_group_tests(tests, make_runs, remove_runs);
}
