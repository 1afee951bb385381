/* dpfl run: the run driver -- everything `dpfl train` does after parsing: load the data, partition it, train
 * round by round on the simulation (dpfl/fl.h), charge the ledger (dpfl/accounting.h) before each release, and
 * write the run folder (config.ini, metrics.jsonl, checkpoint.bin, summary.json, model.bin) atomically -- and what a
 * binding without the C headers needs around it.  Reference: McMahan et al. 2017 (FedAvg), for the run it drives. */
#ifndef DPFL_RUN_H
#define DPFL_RUN_H

#include "dpfl/fl.h"
#include "dpfl/transport.h"

#include <signal.h>

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* ------------------------------------------------------------------------------------------ run driver */
/* What the run driver tells a caller after each released round (dpfl_run_options.on_round): the round's figures,
 * all already in metrics.jsonl (metrics_line is that line, valid during the call). */
typedef struct {
    int32_t round, rounds;        /* the round released (from 1); fl.rounds */
    int32_t participants;         /* clients that took part */
    double train_loss;
    double test_accuracy, test_loss; /* NAN when the round was not evaluated */
    double record_epsilon;        /* record-level guarantee so far (rPDP-FL: the largest over the records); NAN off */
    double client_epsilon;        /* client-level (DP-FedAvg), NAN when off or not private (median clipping) */
    double wall_seconds;          /* since the run started (all sessions) */
    const char *metrics_line;     /* the round's line of metrics.jsonl (one JSON object, no newline) */
} dpfl_run_round;
/* Called after round r's checkpoint and metrics line are written; a nonzero return stops the run there (the run
 * folder is complete for its rounds so far, and a resume continues it). */
typedef int (*dpfl_run_round_fn)(void *ctx, const dpfl_run_round *r);

typedef struct {
    const char *out_dir; /* created if absent */
    int quiet;           /* no progress line */
    int resume;          /* continue from out_dir/checkpoint.bin */
    int force;           /* replace a previous run in out_dir (its files are removed first); without it (or resume)
                            a non-empty out_dir is an error */
    dpfl_run_round_fn on_round; /* NULL: none */
    void *on_round_ctx;
    /* The data as the caller's arrays instead of data.dataset's files (NULL: the config's dataset): checked, then
     * used in place (dpfl_dataset_from_caller: test NULL holds out data.test_fraction of each source, into copies;
     * data.normalize = standard works on copies).  The caller's arrays stay unchanged.  data.dataset must then be
     * "memory:NAME", which config.ini records: a resume needs the same arrays again. */
    const dpfl_dataset *train, *test;
    volatile sig_atomic_t *stop; /* NULL, or a flag (a signal handler may set it) read between rounds: nonzero
                                    stops the run after the round in progress -- an interrupted run */
} dpfl_run_options;

/* Everything `dpfl train` does after parsing: load data, partition, train, write the run directory.  An
 * interrupted run (opt->stop) still returns DPFL_OK and writes what a finished one does for the rounds it completed:
 * summary.json (with "interrupted": true), model.bin and checkpoint.bin, so that it can be reported, evaluated,
 * exported, and continued bit-identically with opt->resume.  The library installs no signal handler. */
dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err);
/* dpfl_run with the round's clients reached through t (NULL: the in-process worker threads). */
dpfl_status dpfl_run_with_transport(const dpfl_config *cfg, const dpfl_run_options *opt, const dpfl_transport *t,
                                    dpfl_error *err);

/* For bindings that cannot declare the C structs (python/dpfl, src/run/binding.c): a config on the heap -- the
 * defaults, then the INI file at ini_path when not NULL (dpfl_config_load); change it with dpfl_config_set -- and
 * its release.  *out is NULL on failure. */
dpfl_status dpfl_config_create(const char *ini_path, dpfl_config **out, dpfl_error *err);
void dpfl_config_destroy(dpfl_config *c);
/* Text the library malloc'd for a binding (dpfl_config_to_ini), released. */
void dpfl_text_free(char *text);
/* sizeof / offsetof for the run driver's structs a binding passes (dpfl_run_options, dpfl_run_round,
 * dpfl_dataset), like dpfl_abi_layout (dpfl/abi.h); -1 for a type or field not listed. */
long dpfl_run_abi_layout(const char *type, const char *field);
/* A model file (model.bin, dpfl_model_save) as the .npz of dpfl_model_export_npz (PyTorch state_dict names),
 * the model rebuilt from the spec and shape the file stores. */
dpfl_status dpfl_model_file_export_npz(const char *model_path, const char *npz_path, dpfl_error *err);

#pragma GCC visibility pop

#endif
