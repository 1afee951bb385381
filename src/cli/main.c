/* dpfl: one command-line tool, one subcommand per task. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    {"serve", cli_serve, "run a training as the server of real client processes (ZeroMQ + CURVE)"},
    {"join", cli_join, "run one client of a served training"},
    {"keygen", cli_keygen, "write a CURVE key pair for serve / join"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: dpfl <command> [options]   (dpfl <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; commands[i].name; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n  --version  print the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("dpfl %s\n", DPFL_VERSION);
        return 0;
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
