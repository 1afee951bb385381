/* dpfl: one command-line tool, one subcommand per task. */
#include "cli.h"
#include "dpfl/data.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

char **cli_main_argv;

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dpfl: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dpfl: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'dpfl %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *what;
} commands[] = {
    /* one row per subcommand */
    {"train", cli_train, "train a model across simulated clients from an INI config"},
    {"data", cli_data, "fetch datasets and describe them (dpfl data fetch / info)"},
    {"account", cli_account, "privacy of T sampled Gaussian steps: epsilon or delta (rdp, pld, gdp)"},
    {"calibrate", cli_calibrate, "smallest noise multiplier meeting a target epsilon"},
    {"fdp", cli_fdp, "PriFedSync weak/strong federated Gaussian DP"},
    {"scf", cli_scf, "rPDP-FL per-record budgets <-> sampling probabilities (SCF)"},
    {"e2e", cli_e2e, "record-level and client-level guarantees of one run"},
    {"audit", cli_audit, "empirical lower bound on epsilon from canaries, beside the claimed epsilon"},
    {"eval", cli_eval, "accuracy and loss of a trained model (model.bin) on a dataset"},
    {"export", cli_export, "write a trained model's parameters as a NumPy .npz (numpy.load, no dpfl needed)"},
    {"report", cli_report, "one self-contained HTML page of plots about one or several run directories"},
    {"serve", cli_serve, "run a training as the server of real client processes (ZeroMQ + CURVE)"},
    {"join", cli_join, "run one client of a served training"},
    {"keygen", cli_keygen, "write a CURVE key pair for serve / join"},
    {NULL, NULL, NULL},
};

/* The text of `dpfl --help`, and of the dpfl(1) man page (scripts/manpage.sh renders it: keep the layout of a
 * first "dpfl VERSION - summary" line, a usage block, paragraphs, and "name:" headings over indented lines). */
static void usage(FILE *f)
{
    fprintf(f,
            "dpfl %s - differentially private federated learning\n\n"
            "usage: dpfl <command> [options]   (dpfl <command> --help for details)\n"
            "       dpfl help [<command>]\n"
            "       dpfl --version\n\n"
            "Trains models across clients that never share their data (federated learning, simulated in one\n"
            "process) and reports, per record and per client, a differential-privacy guarantee that is an upper\n"
            "bound for the mechanism that actually ran; the accountants can also be used on their own.  Bad input\n"
            "gives one line 'dpfl: error: <what> (<where>): <why>' and a non-zero exit status.\n\n"
            "commands:\n",
            DPFL_VERSION);
    for (size_t i = 0; commands[i].name; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(f,
            "\noptions:\n"
            "  --help     this text ('dpfl help COMMAND' is 'dpfl COMMAND --help')\n"
            "  --version  print the version\n\n"
            "environment:\n"
            "  DPFL_DATA       a data folder laid out like a dpfl checkout's data/: heart-disease/ and\n"
            "                  cache/mnist/ ('dpfl data fetch' downloads into its cache/)\n"
            "  XDG_CACHE_HOME  without DPFL_DATA, datasets are downloaded to and read from $XDG_CACHE_HOME/dpfl\n"
            "                  (an absolute path), else ~/.cache/dpfl; never from the current directory\n"
            "  DPFL_PORTABLE   1: the portable code only, not the AVX-512 / AVX2 kernels\n"
            "  DPFL_GNUPLOT    the gnuplot program 'dpfl report' runs (default: gnuplot on the PATH)\n\n"
            "files:\n"
            "  %-24s the installed data folder: heart-disease/ (searched after DPFL_DATA), and\n"
            "  %-24s mnist/ (searched after the cache folder)\n"
            "  %-24s where built with ZeroMQ or OpenMPI: the same tool linked with them, which serve,\n"
            "  %-24s join, keygen and train under mpirun run in (beside dpfl, else in the installed\n"
            "  %-24s libexec/dpfl/)\n",
            dpfl_data_install_dir(), "", "dpfl-deploy", "", "");
}

int main(int argc, char **argv)
{
    cli_main_argv = argv;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("dpfl %s\n", DPFL_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* dpfl help COMMAND = dpfl COMMAND --help */
        char *args[] = {argv[2], "--help", NULL};
        for (size_t i = 0; commands[i].name; i++)
            if (!strcmp(argv[2], commands[i].name)) return commands[i].run(2, args);
        cli_error("unknown command '%s' (see 'dpfl --help' for the list)", argv[2]);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; commands[i].name; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s' (see 'dpfl --help' for the list)", argv[1]);
    return 2;
}
