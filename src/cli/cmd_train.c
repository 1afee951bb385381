/* dpfl train CONFIG.ini [--set section.key=value]... [--out DIR] [--quiet]
 * dpfl train --resume RUN_DIR [--set fl.rounds=N] ... */
#include "args.h"
#include "cli.h"
#include "dpfl/fl.h"

#include <stdlib.h>
#include <string.h>

static void help(void)
{
    printf("usage: dpfl train CONFIG.ini [--set section.key=value]... [--out DIR] [--force] [--quiet]\n"
           "       dpfl train --resume RUN_DIR [--set fl.rounds=N] [--set run.threads=N] [--quiet]\n\n"
           "Trains a model across simulated clients and writes a run directory (default runs/<config name>):\n"
           "config.ini (resolved), metrics.jsonl (one object per round), summary.json, model.bin, and\n"
           "checkpoint.bin (model + privacy ledger, written before each round is released).\n"
           "--resume continues a killed or finished run from its last checkpoint with the run's own config;\n"
           "only fl.rounds, run.threads and run.eval_every may be changed then.  An existing non-empty run\n"
           "directory is refused unless --force (the previous run's files are removed first) or --resume.\n\n"
           "Privacy budgets: with [record_dp] / [client_dp] noise = 0 and target_epsilon > 0, the noise is\n"
           "calibrated before training so that all fl.rounds rounds fit the target.  With noise > 0 and\n"
           "target_epsilon > 0, target_epsilon is a stop rule: the run stops before the first round whose\n"
           "release would exceed it (that round is never trained), and summary.json says stopped_at_budget.\n\n"
           "Config keys (INI sections and keys; --set overrides any of them):\n");
    dpfl_config_print_keys(stdout);
}

int cli_mpi_size(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v ? atoi(v) : 1;
}

int cli_train(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    const char *config_path = NULL, *out = NULL, *resume = NULL;
    int quiet = 0, force = 0;
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    /* first pass: find the config file, so that --set applies on top of it regardless of order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--out")) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--resume")) {
            if (i + 1 >= argc) return cli_usage_error("train", "--resume needs a run directory");
            resume = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "--force")) continue;
        if (argv[i][0] == '-') return cli_usage_error("train", "unknown option '%s'", argv[i]);
        if (config_path) return cli_usage_error("train", "more than one config file given ('%s')", argv[i]);
        config_path = argv[i];
    }
    char resume_cfg[1100];
    if (resume) {
        if (config_path) return cli_usage_error("train", "give either CONFIG.ini or --resume RUN_DIR, not both");
        snprintf(resume_cfg, sizeof resume_cfg, "%s/config.ini", resume);
        config_path = resume_cfg;
        out = resume;
    }
    if (!config_path) return cli_usage_error("train", "missing CONFIG.ini");
    if (dpfl_config_load(&cfg, config_path, &err)) return cli_error("%s", err.msg);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) return cli_usage_error("train", "--set needs section.key=value");
            if (resume && strncmp(argv[i + 1], "fl.rounds=", 10) && strncmp(argv[i + 1], "run.threads=", 12) &&
                strncmp(argv[i + 1], "run.eval_every=", 15))
                return cli_error("--set %s: a resumed run keeps its config; only fl.rounds, run.threads and "
                                 "run.eval_every may change", argv[i + 1]);
            if (dpfl_config_set(&cfg, argv[++i], &err)) return cli_error("%s", err.msg);
        } else if (!strcmp(argv[i], "--out")) {
            if (i + 1 >= argc) return cli_usage_error("train", "--out needs a directory");
            if (resume) return cli_usage_error("train", "--out cannot be used with --resume");
            out = argv[++i];
        } else if (!strcmp(argv[i], "--resume")) {
            i++;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--force")) {
            if (resume) return cli_usage_error("train", "--force cannot be used with --resume");
            force = 1;
        }
    }
    char outbuf[512];
    if (!out) {
        const char *base = strrchr(config_path, '/');
        base = base ? base + 1 : config_path;
        size_t n = strcspn(base, ".");
        snprintf(outbuf, sizeof outbuf, "runs/%.*s", (int)n, base);
        out = outbuf;
    }
    dpfl_run_options opt = {out, quiet, resume != NULL, force};
    if (cli_mpi_size() > 1) return cli_mpi_train(&cfg, &opt); /* under mpirun: clients over the ranks */
    if (dpfl_run(&cfg, &opt, &err)) return cli_error("%s", err.msg);
    return 0;
}
