/* dpfl subcommands.  Each takes argv after the subcommand name (argv[0] is the subcommand) and returns the
 * process exit status; errors are printed by cli_error as one line "dpfl: error: ...". */
#ifndef DPFL_CLI_H
#define DPFL_CLI_H
#include "dpfl/core.h"
#include "dpfl/run.h"

#include <signal.h>

#include "args.h"

int cli_train(int argc, char **argv);
int cli_data(int argc, char **argv);
int cli_account(int argc, char **argv);
/* dpfl account --event FILE (account_event.c) */
int cli_account_event(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
int cli_fdp(int argc, char **argv);
int cli_scf(int argc, char **argv);
int cli_e2e(int argc, char **argv);
int cli_audit(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_join(int argc, char **argv);
int cli_keygen(int argc, char **argv);
/* cmd_train.c: the number of ranks mpirun started (1 outside mpirun); mpi_train.c: dpfl train across them */
int cli_mpi_size(void);
/* Ctrl-C / SIGTERM stop the run after the round in progress (src/cli/stop.c): installs the handlers, which print
 * how to continue (resume_how: the command) and set the flag returned (for dpfl_run_options.stop). */
volatile sig_atomic_t *cli_stop_catch(const char *resume_how);
/* 0, or 128 + the signal that stopped the run (the shell's code for a process ended by it). */
int cli_stop_status(void);
int cli_mpi_train(const dpfl_config *cfg, const dpfl_run_options *opt);
/* cmd_train.c: 1 if `--set kv` may change a resumed run (fl.rounds, run.threads, run.eval_every) */
int cli_train_resumable_set(const char *kv);

/* config_cli.c: the defaults, the config file at path, --unset (may be NULL) and --set over it, with a note on
 * stderr for each key of the file a --set dropped; with resume only fl.rounds, run.threads, run.eval_every may be
 * set.  0, or the exit status after printing the error. */
int cli_config_read(dpfl_config *cfg, const char *path, const cli_strings *unsets, const cli_strings *sets,
                    int resume);
/* config_cli.c: "dpfl: warning: ..." on stderr when cfg's own CSV features are far from unit scale and
 * data.normalize = none (reads the files once more; says nothing when they cannot be read) */
void cli_scale_hint(const dpfl_config *cfg);
/* config_cli.c: the config of a run command (`dpfl train`, `dpfl serve`, cmd naming it in errors): CONFIG.ini, or
 * --resume RUN_DIR's config.ini with RUN_DIR as the output folder (then neither --out nor --force, and a resume's
 * fl.rounds checked against a calibrated noise), read with the --unset and --set values over it; *out (NULL: runs/
 * and the config file's name up to its first dot, kept in paths) the output folder.  0, or the exit status after
 * printing the error. */
typedef struct {
    char config[1100], out[512];
} cli_run_paths;
int cli_run_config(const char *cmd, const char *config_path, const char *resume, const cli_strings *unsets,
                   const cli_strings *sets, const char **out, int force, dpfl_config *cfg, cli_run_paths *paths);

/* The command line main() was given.  Where ZeroMQ or OpenMPI is built in, the dpfl binary links neither: its
 * cli_serve, cli_join, cli_keygen and cli_mpi_train (front.c) run this whole command line again in dpfl-deploy,
 * the dpfl that links them (cmd_net.c, mpi_train.c). */
extern char **cli_main_argv;

/* Print "dpfl: error: <msg>" on stderr and return 1 (or 2 for usage errors). */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
