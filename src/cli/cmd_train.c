/* dpfl train CONFIG.ini [--set section.key=value]... [--out DIR] [--quiet]
 * dpfl train --resume RUN_DIR [--set fl.rounds=N] ... */
#include "args.h"
#include "cli.h"
#include "dpfl/run.h"

#include <stdlib.h>
#include <string.h>

/* what follows the options in the help: the config keys (tools/gen_config_doc.py reads them from there) */
static void help_keys(FILE *f)
{
    fputs("\nConfig keys (INI sections and keys; --set overrides any of them):\n", f);
    dpfl_config_print_keys(f);
}

int cli_train_resumable_set(const char *kv)
{
    return !strncmp(kv, "fl.rounds=", 10) || !strncmp(kv, "run.threads=", 12) || !strncmp(kv, "run.eval_every=", 15);
}

int cli_mpi_size(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v ? atoi(v) : 1;
}

/* the training of the config at config_path (or of the run directory resume) with the --set values over it */
static int train(const char *config_path, const char *resume, const cli_strings *unsets, const cli_strings *sets,
                 const char *out, int quiet, int force)
{
    dpfl_config cfg;
    cli_run_paths paths;
    int rc = cli_run_config("train", config_path, resume, unsets, sets, &out, force, &cfg, &paths);
    if (rc) return rc;
    dpfl_error err;
    if (!resume && !quiet) cli_scale_hint(&cfg);
    dpfl_run_options opt = {.out_dir = out, .quiet = quiet, .resume = resume != NULL, .force = force};
    if (cli_mpi_size() > 1) return cli_mpi_train(&cfg, &opt); /* under mpirun: clients over the ranks */
    char how[1100];
    snprintf(how, sizeof how, "dpfl train --resume %s", out);
    opt.stop = cli_stop_catch(how);
    if (dpfl_run(&cfg, &opt, &err)) return cli_error("%s", err.msg);
    return cli_stop_status();
}

int cli_train(int argc, char **argv)
{
    const char *out = NULL, *resume = NULL;
    cli_strings sets = {NULL, 0}, unsets = {NULL, 0};
    int quiet = 0, force = 0;
    cli_opt o[] = {
        {.name = "--set", .type = CLI_STRINGS, .out = &sets, .value = "section.key=value",
         .help = "override a key of the config (any number of times, applied in order after the file);\n"
                 "a key of the file this makes inapplicable is dropped, with a note (e.g.\n"
                 "--set record_dp.enabled=no drops the file's record_dp keys: a baseline without DP)"},
        {.name = "--unset", .type = CLI_STRINGS, .out = &unsets, .value = "section.key",
         .help = "put a key of the config back to its default, as if the file did not set it\n"
                 "(\"section\" alone: all its keys); applied after the file, before any --set"},
        {.name = "--out", .alias = "-o", .type = CLI_STRING, .out = &out, .value = "DIR",
         .help = "the run directory (default runs/<config name>)"},
        {.name = "--resume", .type = CLI_STRING, .out = &resume, .value = "RUN_DIR",
         .help = "continue the run in RUN_DIR from its last checkpoint, with its own config"},
        {.name = "--force", .type = CLI_FLAG, .out = &force,
         .help = "replace an existing non-empty run directory (its files are removed first)"},
        {.name = "--quiet", .type = CLI_FLAG, .out = &quiet, .help = "no progress lines"},
    };
    cli_command cmd = {
        .name = "train",
        .usage = "dpfl train CONFIG.ini [--set section.key=value]... [--unset section.key]... [--out DIR] [--force]\n"
                 "                  [--quiet]\n"
                 "       dpfl train --resume RUN_DIR [--set fl.rounds=N] [--set run.threads=N] [--quiet]",
        .about = "Trains a model across simulated clients and writes a run directory (default runs/<config name>):\n"
                 "config.ini (resolved), metrics.jsonl (one object per round), summary.json, model.bin, and\n"
                 "checkpoint.bin (model + privacy ledger, written before each round is released).\n"
                 "--resume continues a killed or finished run from its last checkpoint with the run's own config;\n"
                 "only fl.rounds, run.threads and run.eval_every may be changed then: a larger fl.rounds extends a\n"
                 "finished run (the model of a run of that many rounds; refused where the noise was calibrated for\n"
                 "the run's own rounds), one below the rounds released is refused.  An existing non-empty run\n"
                 "directory is refused unless --force (the previous run's files are removed first) or --resume; a\n"
                 "run that fails its checks or its calibration creates nothing.\n"
                 "Ctrl-C (SIGINT) or SIGTERM stops the run after the round in progress: summary.json (marked\n"
                 "\"interrupted\": true), model.bin and checkpoint.bin then hold the last completed round, so report,\n"
                 "eval and export work on it and --resume continues it bit-identically; the exit status is 130\n"
                 "(SIGINT) or 143 (SIGTERM).  A second Ctrl-C quits at once (the last round's checkpoint stays).\n"
                 "Under mpirun the same holds for rank 0, but Open MPI kills every rank 1 s after it passes the\n"
                 "signal on; a run killed there resumes from its last checkpoint all the same.\n\n"
                 "Privacy budgets: with [record_dp] / [client_dp] noise = 0 and target_epsilon > 0, the noise is\n"
                 "calibrated before training so that all fl.rounds rounds fit the target.  With noise > 0 and\n"
                 "target_epsilon > 0, target_epsilon is a stop rule: the run stops before the first round whose\n"
                 "release would exceed it (that round is never trained), and summary.json says stopped_at_budget.\n",
        .more = help_keys,
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "CONFIG.ini",
        .min_args = 0,
        .max_args = 1,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    rc = train(cmd.arg.n ? cmd.arg.v[0] : NULL, resume, &unsets, &sets, out, quiet, force);
    cli_done(&cmd);
    return rc;
}
