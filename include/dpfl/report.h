/* dpfl run reports: one self-contained HTML page (inline SVG plots, no script, no external file or network
 * access) about one or several run directories written by dpfl_run (dpfl train).
 *
 * Per run: accuracy and loss per round (the global model; the clients' mean and spread where diagnostics.jsonl
 * has them), epsilon per round against the target and with its delta, clip fractions and noise std, client
 * participation, PrivateFL's EMD and rPDP-FL's per-record budget and realized-epsilon histograms where the run has
 * them, the privacy statement and what each number of summary.json means, the values no epsilon covers kept
 * apart, and the resolved config.ini.  With several runs, the accuracy, loss and epsilon curves are also overlaid.
 *
 * The plots are drawn by gnuplot's SVG terminal (Debian package gnuplot-nox), run once per plot as a subprocess
 * on temporary data files; its SVG is inlined (element ids made unique per plot).  The page is written atomically
 * (dpfl_file_write_text): a failure leaves an existing file at the output path as it was. */
#ifndef DPFL_REPORT_H
#define DPFL_REPORT_H
#include "dpfl/core.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

typedef struct {
    /* gnuplot program, a path or a name looked up in PATH; NULL: $DPFL_GNUPLOT if set, else "gnuplot" */
    const char *gnuplot;
} dpfl_report_options;

/* Write the report of runs[0..nruns) to out_path.  Errors, one line naming the file: a run directory that is
 * missing or lacks one of summary.json, config.ini, metrics.jsonl, diagnostics.jsonl (DPFL_EIO), a file that is
 * not what dpfl writes (DPFL_EFORMAT, with the line for .jsonl files), gnuplot missing or failing (DPFL_EIO).
 * *plots (may be NULL) gets the number of plots (inline <svg> elements) in the page. */
dpfl_status dpfl_report_html(const char *const *runs, int nruns, const char *out_path,
                             const dpfl_report_options *opt, int *plots, dpfl_error *err);

#pragma GCC visibility pop

#endif
