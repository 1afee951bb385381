/* dpfl report RUN_DIR [RUN_DIR...] [-o report.html] */
#include "args.h"
#include "cli.h"
#include "dpfl/report.h"

#include <stdlib.h>
#include <string.h>

static void help(void)
{
    printf("usage: dpfl report RUN_DIR [RUN_DIR...] [-o FILE.html]\n\n"
           "Writes one self-contained HTML page (inline SVG plots; no script, nothing fetched) about one or several\n"
           "run directories of dpfl train: per run, accuracy and loss per round (the global model, and the clients'\n"
           "mean and spread where the run has them), epsilon per round against its target with its delta, clip\n"
           "fractions and noise std, client participation, per-record budget and realized-epsilon histograms (rPDP-FL\n"
           "runs) and PrivateFL's EMD where present, the privacy statement and what each number of summary.json\n"
           "means, the values no epsilon covers kept apart, and the resolved config.  Several runs are also\n"
           "overlaid for comparison.\n\n"
           "  -o, --out FILE   the page (default: RUN_DIR/report.html for one run, report.html for several);\n"
           "                   written atomically\n\n"
           "The plots are drawn by gnuplot (Debian package gnuplot-nox; DPFL_GNUPLOT names another program).\n");
}

int cli_report(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    const char *out = NULL;
    const char **dirs = calloc((size_t)argc, sizeof *dirs);
    if (!dirs) return cli_error("out of memory");
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) {
            if (i + 1 >= argc) {
                free(dirs);
                return cli_usage_error("report", "%s needs a file name", argv[i]);
            }
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            free(dirs);
            return cli_usage_error("report", "unknown option '%s'", argv[i]);
        } else {
            dirs[n++] = argv[i];
        }
    }
    if (n == 0) {
        free(dirs);
        return cli_usage_error("report", "missing RUN_DIR");
    }
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
    }
    dpfl_error err;
    int plots = 0;
    dpfl_status st = dpfl_report_html(dirs, n, out, NULL, &plots, &err);
    free(dirs);
    if (st) return cli_error("%s", err.msg);
    fprintf(stderr, "dpfl: report of %d run%s (%d plots) written to %s\n", n, n == 1 ? "" : "s", plots, out);
    return 0;
}
