/* dpfl train CONFIG.ini [--set section.key=value]... [--out DIR] [--quiet] */
#include "args.h"
#include "cli.h"
#include "dpfl/fl.h"

#include <string.h>

static void help(void)
{
    printf("usage: dpfl train CONFIG.ini [--set section.key=value]... [--out DIR] [--quiet]\n\n"
           "Trains a model across simulated clients and writes a run directory (default runs/<config name>):\n"
           "config.ini (resolved), metrics.jsonl (one object per round), summary.json, model.bin.\n\n"
           "Config keys (INI sections and keys; --set overrides any of them):\n");
    dpfl_config_print_keys(stdout);
}

int cli_train(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    const char *config_path = NULL, *out = NULL;
    int quiet = 0;
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    /* first pass: find the config file, so that --set applies on top of it regardless of order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--out")) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--quiet")) continue;
        if (argv[i][0] == '-') return cli_usage_error("train", "unknown option '%s'", argv[i]);
        if (config_path) return cli_usage_error("train", "more than one config file given ('%s')", argv[i]);
        config_path = argv[i];
    }
    if (!config_path) return cli_usage_error("train", "missing CONFIG.ini");
    if (dpfl_config_load(&cfg, config_path, &err)) return cli_error("%s", err.msg);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) return cli_usage_error("train", "--set needs section.key=value");
            if (dpfl_config_set(&cfg, argv[++i], &err)) return cli_error("%s", err.msg);
        } else if (!strcmp(argv[i], "--out")) {
            if (i + 1 >= argc) return cli_usage_error("train", "--out needs a directory");
            out = argv[++i];
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
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
    dpfl_run_options opt = {out, quiet};
    if (dpfl_run(&cfg, &opt, &err)) return cli_error("%s", err.msg);
    return 0;
}
