/* The run driver behind `dpfl train`: its node (node.c: data, partition, model, noise, ledger), the run directory's
 * files, then the rounds (run_round.c) and the report (report.c). */
#include "dpfl/run.h"
#include "run_internal.h"

#include "fl/sim_internal.h"
#include "core/file.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* metrics.jsonl and diagnostics.jsonl: new, or cut back to the checkpoint's round on a resume. */
static dpfl_status open_round_files(run_io *io, int resume, int32_t rounds, dpfl_error *err)
{
    char path[1100];
    const char *names[2] = {"metrics.jsonl", "diagnostics.jsonl"};
    FILE **files[2] = {&io->metrics, &io->diag};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", io->dir, names[i]);
        dpfl_status st;
        /* the checkpoint holds the last metrics line (restored if the run died before writing it) */
        if (resume && (st = fl_metrics_truncate(path, rounds, i == 0 ? io->ckpt_line : "", err)))
            return st;
        if (!(*files[i] = fopen(path, resume ? "a" : "w")))
            return dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
    }
    return DPFL_OK;
}

/* The files a run writes (and their temporary names while they are written), and the report `dpfl report RUN_DIR`
 * writes beside them by default (--force removes it with the run it describes). */
static const char *const RUN_FILES[] = {"config.ini", "metrics.jsonl", "diagnostics.jsonl", "summary.json", "model.bin",
                                        "checkpoint.bin", "report.html"};

/* A new run never shares its folder with another run's files: an existing non-empty folder is refused unless
 * force (then, with remove, the previous run's files go first, so that a re-run killed midway cannot leave new
 * metrics beside an old summary) or resume (the same run continues).  Checked before anything else (remove = 0),
 * and claimed only once the data, the model and the noise are set up, so that a run that fails its checks or its
 * calibration leaves no folder behind. */
static dpfl_status claim_run_dir(const dpfl_run_options *opt, int remove, dpfl_error *err)
{
    if (opt->resume) return DPFL_OK;
    DIR *d = opendir(opt->out_dir);
    if (!d) return DPFL_OK; /* created below */
    int nonempty = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) nonempty = 1;
    closedir(d);
    if (!nonempty) return DPFL_OK;
    if (!opt->force)
        return dpfl_fail(err, DPFL_EINVAL, "run folder %s exists and is not empty: use --force to replace the run in "
                                           "it, --resume to continue it, or --out for a new folder", opt->out_dir);
    if (!remove) return DPFL_OK;
    char path[1100];
    for (size_t i = 0; i < sizeof RUN_FILES / sizeof RUN_FILES[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", opt->out_dir, RUN_FILES[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            return dpfl_fail(err, DPFL_EIO, "--force: cannot remove the previous run's %s: %s", path, strerror(errno));
    }
    return DPFL_OK;
}

/* The clients' state files go to RUN_DIR/clients (fl/client_store.c); what the checkpoint does not name there (a
 * round killed before its checkpoint, generations a crash kept, a replaced run's) is removed. */
static dpfl_status client_store(run_ctx *c, dpfl_error *err)
{
    dpfl_clients *cl = c->node.in.clients;
    if (!cl || !dpfl_clients_keep_state(cl) || !dpfl_clients_state_floats(cl)) return DPFL_OK;
    char path[1100];
    snprintf(path, sizeof path, "%s/clients", c->opt->out_dir);
    return fl_store_use_dir(&cl->store, path, err);
}

dpfl_status fl_run_setup(run_ctx *c, dpfl_error *err)
{
    const dpfl_config *cfg = c->node.in.cfg;
    const run_setup s = {.cfg = cfg, .dir = c->opt->out_dir, .resume = c->opt->resume, .quiet = c->opt->quiet,
                         .transport = c->transport, .ckpt_line = &c->io.ckpt_line,
                         .train = c->opt->train, .test = c->opt->test};
    run_io *io = &c->io;
    const run_acct *a = &c->node.acct;
    dpfl_status st;
    io->dir = c->opt->out_dir;
    if ((st = claim_run_dir(c->opt, 0, err)) || (st = fl_setup_node(&c->node, &s, err))) return st;
    /* a checkpoint older than the metrics beside it would release rounds again that its ledger counts once */
    if (c->opt->resume && (st = fl_metrics_check_resume(io->dir, a->ledger.rounds, err))) return st;
    /* a resume reads its clients' state files from here on (an MPI transport's start sends them to the workers) */
    if (c->opt->resume && (st = client_store(c, err))) return st;
    if (c->opt->resume && cfg->fl.rounds < a->ledger.rounds) /* before config.ini is rewritten */
        return dpfl_fail(err, DPFL_EINVAL, "resume (%s): fl.rounds = %d is below the %d rounds the run has released, "
                         "which a resume cannot take back; give fl.rounds > %d to extend the run", io->dir,
                         (int)cfg->fl.rounds, (int)a->ledger.rounds, (int)a->ledger.rounds);
    if (c->opt->resume && cfg->fl.rounds == a->ledger.rounds && !c->opt->quiet)
        fprintf(stderr, "dpfl: note: %s has released all its %d round%s: nothing to train (--set fl.rounds=N with N > "
                "%d extends it)\n", io->dir, (int)a->ledger.rounds, a->ledger.rounds == 1 ? "" : "s",
                (int)a->ledger.rounds);
    c->pr.wall0 = a->rs.wall; /* a resume: the sessions before this one (0 for a new run) */
    if (!(io->ini = dpfl_config_to_ini(cfg))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    dpfl_sha256_hex(io->ini, strlen(io->ini), io->sha);
    const fl_transport *t = c->transport;
    if (t && t->start) { /* a network transport binds and waits for its clients now, before
                          * the folder is made: a deployment whose clients never joined leaves nothing behind */
        const dpfl_transport_setup setup = {cfg, c->node.in.part.clients, c->node.in.model.nparam,
                                            a->rs.partition_key, a->rs.partition_digest, a->ledger.rounds,
                                            dpfl_clients_initial_model(c->node.in.clients), c->node.in.sim};
        if ((st = t->start(t, &setup, err))) return st;
    }
    if ((st = claim_run_dir(c->opt, 1, err)) || (st = dpfl_file_make_dirs(io->dir, 0755, err))) return st;
    char path[1100];
    snprintf(path, sizeof path, "%s/config.ini", io->dir);
    /* always the config this process runs (a resume may have changed rounds, threads or eval_every), so that
     * config_sha256 in summary.json is the hash of the file beside it */
    if ((st = dpfl_file_write_text(path, io->ini, strlen(io->ini), err)) ||
        (st = open_round_files(io, c->opt->resume, a->ledger.rounds, err)) ||
        (!c->opt->resume && (st = client_store(c, err))))
        return st;
    c->pr.last_eval.test_accuracy = c->pr.last_eval.test_loss = c->pr.last_eval.client_acc_mean = NAN;
    c->pr.emd_mean = c->pr.emd_std = NAN;
    c->pr.last_eval.personal_acc_mean = c->pr.last_eval.local_acc_mean = NAN;
    return DPFL_OK;
}

void fl_run_free(run_ctx *c)
{
    if (c->io.metrics) fclose(c->io.metrics);
    if (c->io.diag) fclose(c->io.diag);
    free(c->io.ckpt_line);
    free(c->io.ini);
    fl_node_free(&c->node);
}

/* An interrupted run resumes from its checkpoint: one released round has written it; a new run stopped before its
 * first round writes the set-up's (round 0: the initial model, an empty ledger, the noise). */
static dpfl_status interrupted_checkpoint(const run_ctx *c, dpfl_error *err)
{
    const run_inputs *in = &c->node.in;
    const run_acct *a = &c->node.acct;
    if (a->ledger.rounds > 0 || c->opt->resume) return DPFL_OK;
    return fl_checkpoint_save(c->io.dir, in->global, in->model.nparam, &a->ledger, &a->rs, in->clients,
                              dpfl_server_control(in->server), a->rpdp.on ? &a->rpdp : NULL, "", err);
}

dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err)
{
    return fl_run(cfg, opt, NULL, err);
}

dpfl_status fl_run(const dpfl_config *cfg, const dpfl_run_options *opt, const fl_transport *t, dpfl_error *err)
{
    dpfl_status st;
    if ((st = dpfl_config_validate(cfg, err))) return st;
    if (!opt->resume && (st = dpfl_config_check_ignored(cfg, err))) return st;
    run_ctx *c = calloc(1, sizeof *c);
    if (!c) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    run_inputs *in = &c->node.in;
    in->cfg = cfg;
    c->opt = opt;
    c->transport = t;
    c->pr.t_start = dpfl_now();
    c->pr.started_at = (double)time(NULL);
    if (cfg->run.seed.given) {
        in->seed = cfg->run.seed.value;
        dpfl_rng_init_seed(&in->root, in->seed);
    } else if ((st = dpfl_rng_init_os(&in->root, err))) {
        free(c);
        return st;
    }
    if (!(st = fl_run_setup(c, err))) {
        int stop = 0;
        for (int32_t r = c->node.acct.ledger.rounds + 1; r <= cfg->fl.rounds && !stop && !st; r++) {
            if (opt->stop && *opt->stop) { /* asked to stop: the rounds released so far are the run */
                c->pr.interrupted = 1;
                break;
            }
            st = fl_run_round(c, r, &stop, err);
        }
        if (!opt->quiet && isatty(2)) fputc('\n', stderr);
        if (!st && c->pr.interrupted) st = interrupted_checkpoint(c, err);
        if (!st) st = fl_report_summary(c, err);
        if (!st && !opt->quiet) {
            const run_server_report srv = fl_report_server_of(in->server);
            fl_report_final_lines(in->cfg, &in->part, &srv, &c->node.acct, &c->pr, opt->out_dir);
        }
    }
    if (t && t->finish)
        t->finish(t, in->server ? dpfl_server_ledger(in->server)->rounds : 0, st,
                  st ? err->msg : c->pr.interrupted ? "interrupted" : "");
    fl_run_free(c);
    free(c);
    return st;
}

dpfl_status dpfl_run_with_transport(const dpfl_config *cfg, const dpfl_run_options *opt, const dpfl_transport *t,
                                    dpfl_error *err)
{
    return fl_run(cfg, opt, t, err);
}
