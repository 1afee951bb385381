/* dpfl report RUN_DIR [RUN_DIR...] [-o report.html] */
#include "args.h"
#include "cli.h"
#include "dpfl/report.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* the page of the n run directories dirs at out (NULL: the default) */
static int report(const char *const *dirs, int n, const char *out)
{
    char outbuf[1100];
    if (!out) {
        if (n == 1) {
            size_t len = strlen(dirs[0]);
            while (len > 1 && dirs[0][len - 1] == '/') len--;
            snprintf(outbuf, sizeof outbuf, "%.*s/report.html", (int)len, dirs[0]);
            out = outbuf;
        } else {
            out = "report.html";
        }
    } else {
        /* -o FOLDER (an existing one, or a name ending in '/'): the page is FOLDER/report.html */
        struct stat sb;
        size_t len = strlen(out);
        if ((stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) || (len && out[len - 1] == '/')) {
            while (len > 1 && out[len - 1] == '/') len--;
            if ((size_t)snprintf(outbuf, sizeof outbuf, "%.*s/report.html", (int)len, out) >= sizeof outbuf)
                return cli_error("-o %s: path too long", out);
            out = outbuf;
        }
    }
    dpfl_error err;
    int plots = 0;
    if (dpfl_report_html(dirs, n, out, NULL, &plots, &err)) return cli_error("%s", err.msg);
    fprintf(stderr, "dpfl: report of %d run%s (%d plots) written to %s\n", n, n == 1 ? "" : "s", plots, out);
    return 0;
}

int cli_report(int argc, char **argv)
{
    const char *out = NULL;
    cli_opt o[] = {
        {.name = "--out", .alias = "-o", .type = CLI_STRING, .out = &out, .value = "FILE",
         .help = "the page (default: RUN_DIR/report.html for one run, report.html for several);\n"
                 "a folder: FOLDER/report.html; written atomically"},
    };
    cli_command cmd = {
        .name = "report",
        .usage = "dpfl report RUN_DIR [RUN_DIR...] [-o FILE.html|FOLDER]",
        .about = "Writes one self-contained HTML page (inline SVG plots; no script, nothing fetched) about one or several\n"
                 "run directories of dpfl train: per run, accuracy and loss per round (the global model, and the clients'\n"
                 "mean and spread where the run has them), epsilon per round against its target with its delta, clip\n"
                 "fractions and noise std, client participation, per-record budget and realized-epsilon histograms (rPDP-FL\n"
                 "runs) and PrivateFL's EMD where present, the privacy statement and what each number of summary.json\n"
                 "means, the values no epsilon covers kept apart, and the resolved config.  Several runs are also\n"
                 "overlaid for comparison.\n",
        .after = "The plots are drawn by gnuplot (Debian package gnuplot-nox; DPFL_GNUPLOT names another program).\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "RUN_DIR",
        .min_args = 1,
        .max_args = -1,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    rc = report(cmd.arg.v, (int)cmd.arg.n, out);
    cli_done(&cmd);
    return rc;
}
