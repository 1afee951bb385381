/* The run driver behind `dpfl train`: set-up (data, partition, model, noise, ledger, the run directory's files),
 * then the rounds (run_round.c) and the report (report.c). */
#include "run_internal.h"

#define DPFL_PATH_MSG 512
#include "fl/sim_internal.h"
#include "core/file.h"
#include "dpfl/mech.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { PURPOSE_INIT = 3, PURPOSE_PARTITION = 4, PURPOSE_BUDGETS = 7 };

/* delta against the number of units it protects: a mechanism that publishes one of n records at random is
 * (0, 1/n)-DP, so delta >= 1/n promises nothing (and the accountant happily answers epsilon = 0).  Refused unless
 * [run] allow_large_delta = yes; a delta above 1/(10 n) is allowed with a warning (kept for summary.json). */
static dpfl_status check_one_delta(const dpfl_config *cfg, const char *key, double delta, int64_t n, const char *unit,
                                   int quiet, char (*warn)[256], int *nwarn, dpfl_error *err)
{
    if (n <= 0) return DPFL_OK;
    if (delta >= 1.0 / (double)n && !cfg->run.allow_large_delta)
        return dpfl_fail(err, DPFL_EINVAL,
                         "%s: %g is not below 1/n = %.3g (n = %lld %s): such a delta allows publishing a whole %s; "
                         "use delta <= 1/(10 n) = %.3g, or set [run] allow_large_delta = yes",
                         key, delta, 1.0 / (double)n, (long long)n, unit, strcmp(unit, "clients") ? "record" : "client",
                         0.1 / (double)n);
    if (delta > 0.1 / (double)n && *nwarn < 4) {
        snprintf(warn[*nwarn], 256, "%s = %g is above 1/(10 n) = %.3g (n = %lld %s): weaker than the rule delta << 1/n", key, delta,
                 0.1 / (double)n, (long long)n, unit);
        if (!quiet) fprintf(stderr, "dpfl: warning: %s\n", warn[*nwarn]);
        (*nwarn)++;
    }
    return DPFL_OK;
}

static dpfl_status check_deltas(const dpfl_config *cfg, int64_t records, int32_t clients, int quiet,
                                char (*warn)[256], int *nwarn, dpfl_error *err)
{
    dpfl_status st = DPFL_OK;
    if (cfg->record_dp.enabled) {
        st = check_one_delta(cfg, "record_dp.delta", cfg->record_dp.delta, records, "training records", quiet, warn, nwarn, err);
        if (!st && cfg->record_dp.e2e) /* the e2e client-level guarantee uses the same delta */
            st = check_one_delta(cfg, "record_dp.delta (e2e, client level)", cfg->record_dp.delta, clients, "clients", quiet,
                                 warn, nwarn, err);
    }
    if (!st && cfg->client_dp.enabled)
        st = check_one_delta(cfg, "client_dp.delta", cfg->client_dp.delta, clients, "clients", quiet, warn, nwarn, err);
    return st;
}

static void source_path(const dpfl_config *cfg, int32_t g, char *path, size_t len)
{
    dpfl_error e2;
    if (dpfl_dataset_source_path(cfg->data.dataset, g, path, len, &e2)) snprintf(path, len, "source #%d", g);
}

dpfl_status fl_client_data_here(const run_ctx *c, int32_t k, const char *who, dpfl_error *err)
{
    const dpfl_dataset *d = &c->train;
    if (!d->absent) return DPFL_OK;
    for (int32_t i = c->part.offset[k]; i < c->part.offset[k + 1]; i++)
        if (d->absent[d->group[c->part.index[i]]]) {
            char path[DPFL_PATH_MSG];
            source_path(c->cfg, d->group[c->part.index[i]], path, sizeof path);
            return dpfl_fail(err, DPFL_EIO, "cannot open data file (%s): %s trains client %d, whose records are in it",
                             path, who, k);
        }
    return DPFL_OK;
}

/* Data, partition and the initial model (normalization with published constants only). */
static dpfl_status setup_data_model(run_ctx *c, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_status st;
    if ((st = dpfl_config_load_data(cfg, c->seed, &c->train, &c->test, err))) return st;
    const int32_t nabsent = dpfl_dataset_absent_count(&c->train);
    if (nabsent && !c->absent_ok && !(c->transport && c->transport->clients_hold_data)) {
        char path[DPFL_PATH_MSG] = "?";
        for (int32_t g = 0; g < c->train.groups; g++)
            if (c->train.absent[g]) {
                source_path(cfg, g, path, sizeof path);
                break;
            }
        return dpfl_fail(err, DPFL_EIO, "cannot open data file (%s): %d of the %d files are not here; training every "
                         "client needs them all (only dpfl serve, which trains none, and dpfl join --client K, which "
                         "trains K, run without the others')", path, nabsent, c->train.groups);
    }
    if (nabsent && ((cfg->data.partition != DPFL_PART_IID && cfg->data.partition != DPFL_PART_NATURAL) ||
                    cfg->data.test_per_client > 0))
        return dpfl_fail(err, DPFL_EINVAL, "data.%s draws by label, which needs every record's label, and %d files of "
                         "data.dataset are not here; use partition = natural or iid",
                         cfg->data.test_per_client > 0 ? "test_per_client" : "partition", nabsent);
    if (nabsent && cfg->record_dp.budgets == DPFL_BUDGETS_CLASS)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.budgets = class needs every record's label, and %d files of "
                                           "data.dataset are not here", nabsent);
    dpfl_partition_spec spec;
    dpfl_config_partition_spec(cfg, &spec);
    /* The partition is drawn from a stream of its own, whose key the checkpoint keeps: a resumed run (a fresh root
     * key without a seed) redraws exactly the same clients, so every record stays in its ledger slot, and a
     * partition that came out different (data settings or files changed) is refused. */
    dpfl_rng prng;
    run_state saved;
    if (c->opt->resume) {
        if ((st = fl_checkpoint_peek(c->opt->out_dir, &saved, err))) return st;
        dpfl_rng_init_key(&prng, saved.partition_key, c->root.seeded);
    } else if (c->partition_key) {
        dpfl_rng_init_key(&prng, c->partition_key, c->root.seeded);
    } else {
        dpfl_rng_derive(&c->root, &prng, 0, 0, PURPOSE_PARTITION);
    }
    memcpy(c->rs.partition_key, prng.key, 32);
    if ((st = dpfl_partition_make(&c->train, &c->test, &spec, &prng, &c->part, err))) return st;
    dpfl_partition_digest(&c->part, c->rs.partition_digest);
    if (c->opt->resume && memcmp(saved.partition_digest, c->rs.partition_digest, 32))
        return dpfl_fail(err, DPFL_EINVAL, "resume (%s): the client partition differs from the checkpoint's (the [data] "
                                           "settings or the dataset files changed); resume with the run's own config.ini",
                         c->opt->out_dir);
    /* delta's 1/n rule counts records (train.n), not the partition's slots, which replication repeats */
    if ((st = check_deltas(cfg, c->train.n, c->part.clients, c->opt->quiet, c->warnings, &c->nwarn, err))) return st;
    int32_t copies = 1; /* record-level DP charges a replicated record in each of its clients; twice in one: refused */
    if (cfg->record_dp.enabled && (st = dpfl_record_copies(&c->part, &copies, err))) return st;
    if (!strcmp(cfg->data.dataset, "heart") && (cfg->record_dp.enabled || cfg->client_dp.enabled)) {
        /* FLamby's preprocessing, kept for the rPDP-FL reproduction: say what the epsilon does not cover */
        snprintf(c->warnings[c->nwarn], sizeof c->warnings[0], "data: heart's features are z-scored with each "
                 "centre's own training statistics (FLamby's preprocessing), which no epsilon covers; csv: files with "
                 "public constants avoid it (examples/own_csv.ini)");
        if (!c->opt->quiet) fprintf(stderr, "dpfl: warning: %s\n", c->warnings[c->nwarn]);
        c->nwarn++;
    }
    char mspec[300];
    dpfl_config_model_spec(cfg, mspec, sizeof mspec);
    if ((st = dpfl_model_create(mspec, c->train.c, c->train.h, c->train.w, c->train.classes, &c->model, err)))
        return st;
    if (!(c->global = dpfl_alloc(c->model.nparam * sizeof(float), err))) return DPFL_ENOMEM;
    dpfl_rng irng;
    dpfl_rng_derive(&c->root, &irng, 0, 0, PURPOSE_INIT);
    dpfl_model_init(&c->model, c->global, &irng);
    return DPFL_OK;
}

/* The noise multipliers: from the checkpoint on a resume, else configured or calibrated to the targets. */
static dpfl_status setup_noise(run_ctx *c, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_status st;
    c->rs.record_z = cfg->record_dp.noise;
    c->rs.client_z = cfg->client_dp.noise;
    c->rs.S = cfg->client_dp.clip;
    const int budgets = c->rdp_on && cfg->record_dp.budgets != DPFL_BUDGETS_NONE;
    if (c->opt->resume) {
        c->rpdp.on = budgets; /* the checkpoint's budgets block fills it */
        c->rpdp.n = c->train.n;
        c->rpdp.filter = budgets && cfg->record_dp.budget_policy == DPFL_POLICY_FILTER;
        if ((st = fl_checkpoint_load(c->opt->out_dir, c->global, c->model.nparam, &c->ledger, &c->rs, c->sim,
                                     budgets ? &c->rpdp : NULL, &c->ckpt_line, err)))
            return st;
        if (budgets && (st = fl_rpdp_rates(&c->rpdp, &c->part, err))) return st;
        c->wall0 = c->rs.wall;
        if ((st = dpfl_sim_restore_ledger(c->sim, &c->ledger, err))) return st;
    } else if (budgets) {
        dpfl_rng brng; /* the budgets' own stream: generated budgets never shift the other draws */
        dpfl_rng_derive(&c->root, &brng, 0, 0, PURPOSE_BUDGETS);
        if ((st = fl_rpdp_plan(&c->rpdp, cfg, &c->train, &c->part, &brng, err))) return st;
        c->rs.record_z = c->rpdp.z;
    } else {
        if (c->rdp_on && c->rs.record_z == 0.0 &&
            (st = dpfl_record_calibrate(&c->part, cfg, cfg->fl.rounds, cfg->record_dp.target_epsilon, &c->rs.record_z, err)))
            return st;
        if (c->cdp_on && c->rs.client_z == 0.0 && (cfg->client_dp.clip_strategy != DPFL_CLIP_MEDIAN)) {
            /* the smallest z whose R rounds, sampled as configured, stay within the target */
            dpfl_event ev = fl_client_round_event(cfg, c->part.clients, 1.0, 1);
            /* the event's multiplier per unit of the mechanism's (mech/round.c: fixed-size client sampling is
             * analysed replace-one, z / 2): the calibrated event multiplier is converted back by it */
            const double event_per_unit = ev.z;
            if (cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) { /* ddp: the sensitivities do not depend on z (bits: any) */
                dpfl_ddp_plan p;
                if ((st = dpfl_ddp_plan_make(c->model.nparam, cfg->client_dp.clip, 1.0, cfg->client_dp.ddp_inflation, 32,
                                             2, cfg->client_dp.ddp_tolerated_dropout, &p, err)))
                    return st;
                ev = dpfl_ddp_event(&p, fl_client_rate_accounted(cfg, c->part.clients, 1));
            }
            ev.count = cfg->fl.rounds;
            dpfl_calibrate_opts co = {0};
            co.accountant = (cfg->client_dp.accountant == DPFL_ACC_PLD) ? DPFL_ACC_PLD : DPFL_ACC_RDP;
            co.tol = 1e-4;
            if ((st = dpfl_calibrate_noise(&ev, 1, cfg->client_dp.target_epsilon, cfg->client_dp.delta, &co, &c->rs.client_z, err)))
                return st;
            c->rs.client_z /= event_per_unit;
        }
    }
    if (c->rdp_on && cfg->record_dp.secure_mode && !dpfl_mech_discrete_in_range(c->model.nparam, c->rs.record_z))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.secure_mode: noise %g on %zu parameters exceeds the exact "
                                           "sampler's range (sigma^2 <= 2^62 grid units)", c->rs.record_z,
                         c->model.nparam);
    if (c->rdp_on) dpfl_sim_set_record_noise(c->sim, c->rs.record_z);
    if (budgets) dpfl_sim_set_record_rates(c->sim, c->rpdp.p, c->rpdp.denom);
    if (budgets && c->rpdp.filter) dpfl_sim_set_record_filter(c->sim, c->rpdp.spent, c->rpdp.cap, c->rpdp.alpha);
    if (c->cdp_on) {
        /* every round's noise split is checked before the first release (adaptive clipping: 2 sigma_b > z) */
        for (int32_t r = cfg->fl.rounds; r > c->ledger.rounds; r--)
            if ((st = dpfl_sim_set_client_noise(c->sim, r, dpfl_round_client_noise(cfg, r, c->rs.client_z), err)))
                return st;
        dpfl_sim_set_update_clip(c->sim, c->rs.S);
    }
    c->ra = dpfl_sim_record_accounting(c->sim); /* the mechanism the simulation runs, not a copy of its settings */
    return DPFL_OK;
}

/* metrics.jsonl and diagnostics.jsonl: new, or cut back to the checkpoint's round on a resume. */
static dpfl_status open_round_files(run_ctx *c, dpfl_error *err)
{
    char path[1100];
    const char *names[2] = {"metrics.jsonl", "diagnostics.jsonl"};
    FILE **files[2] = {&c->metrics, &c->diag};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", c->opt->out_dir, names[i]);
        dpfl_status st;
        /* the checkpoint holds the last metrics line (restored if the run died before writing it) */
        if (c->opt->resume && (st = fl_metrics_truncate(path, c->ledger.rounds, i == 0 ? c->ckpt_line : "", err)))
            return st;
        if (!(*files[i] = fopen(path, c->opt->resume ? "a" : "w")))
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

dpfl_status fl_run_setup(run_ctx *c, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_status st;
    if (!c->no_files && (st = claim_run_dir(c->opt, 0, err))) return st;
    if ((st = setup_data_model(c, err))) return st;
    if (!(c->ini = dpfl_config_to_ini(cfg))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    dpfl_sha256_hex(c->ini, strlen(c->ini), c->sha);
    if ((st = dpfl_sim_create(cfg, &c->model, &c->train, &c->test, &c->part, &c->root, c->global, &c->sim, err)))
        return st;
    if (c->transport) fl_sim_set_transport(c->sim, c->transport);
    if ((st = dpfl_ledger_init(&c->ledger, c->part.clients, err))) return st;
    c->rdp_on = cfg->record_dp.enabled;
    c->cdp_on = cfg->client_dp.enabled;
    if ((st = setup_noise(c, err))) return st;
    if ((c->rdp_on && !c->rpdp.on && c->part.clients <= 1000 && !c->ra.pld &&
         !(c->per_client = malloc((size_t)c->part.clients * sizeof *c->per_client))) ||
        (st = dpfl_ledger_init(&c->trial, c->part.clients, err)))
        return st ? st : dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    if (!c->no_files) {
        if ((st = claim_run_dir(c->opt, 1, err)) || (st = dpfl_file_make_dirs(c->opt->out_dir, 0755, err))) return st;
        char path[1100];
        snprintf(path, sizeof path, "%s/config.ini", c->opt->out_dir);
        /* always the config this process runs (a resume may have changed rounds, threads or eval_every), so that
         * config_sha256 in summary.json is the hash of the file beside it */
        if ((st = dpfl_file_write_text(path, c->ini, strlen(c->ini), err)) || (st = open_round_files(c, err)))
            return st;
    }
    c->last_eval.test_accuracy = c->last_eval.test_loss = c->last_eval.client_acc_mean = NAN;
    c->emd_mean = c->emd_std = NAN;
    c->last_eval.personal_acc_mean = c->last_eval.local_acc_mean = NAN;
    if (c->rpdp.on) {
        if ((st = fl_rpdp_max_epsilon(&c->rpdp, cfg, &c->report.epsilon, err))) return st;
    } else if (c->rdp_on && (st = fl_record_guarantee(c, &c->ledger, &c->report, NULL, &c->ledger_eps, err))) {
        return st;
    }
    if (c->cdp_on && (st = fl_client_epsilon(cfg, &c->ledger, &c->ceps, &c->cprivate, err))) return st;
    const fl_transport *t = c->transport;
    if (t && t->start) { /* a network transport binds and waits for its clients now */
        const dpfl_transport_setup setup = {cfg, c->part.clients, c->model.nparam, c->rs.partition_key,
                                            c->rs.partition_digest, c->ledger.rounds};
        if ((st = t->start(t, &setup, err))) return st;
    }
    return DPFL_OK;
}

void fl_run_free(run_ctx *c)
{
    if (c->metrics) fclose(c->metrics);
    if (c->diag) fclose(c->diag);
    dpfl_ledger_free(&c->ledger);
    dpfl_ledger_free(&c->trial);
    fl_rpdp_free(&c->rpdp);
    free(c->per_client);
    free(c->ckpt_line);
    dpfl_sim_free(c->sim);
    dpfl_free(c->global);
    free(c->ini);
    dpfl_model_free(&c->model);
    dpfl_partition_free(&c->part);
    dpfl_dataset_free(&c->train);
    dpfl_dataset_free(&c->test);
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
    c->cfg = cfg;
    c->opt = opt;
    c->transport = t;
    c->cprivate = 1;
    c->ledger_eps = NAN;
    c->t_start = dpfl_now();
    c->started_at = (double)time(NULL);
    if (cfg->run.seed.given) {
        c->seed = cfg->run.seed.value;
        dpfl_rng_init_seed(&c->root, c->seed);
    } else if ((st = dpfl_rng_init_os(&c->root, err))) {
        free(c);
        return st;
    }
    if (!(st = fl_run_setup(c, err))) {
        int stop = 0;
        for (int32_t r = c->ledger.rounds + 1; r <= cfg->fl.rounds && !stop && !st; r++) {
            st = fl_run_round(c, r, &stop, err);
        }
        if (!opt->quiet && isatty(2)) fputc('\n', stderr);
        if (!st) st = fl_report_summary(c, err);
        if (!st && !opt->quiet) fl_report_final_lines(c);
    }
    if (t && t->finish) t->finish(t, c->sim ? dpfl_sim_ledger(c->sim)->rounds : 0, st, st ? err->msg : "");
    fl_run_free(c);
    free(c);
    return st;
}

dpfl_status dpfl_run_with_transport(const dpfl_config *cfg, const dpfl_run_options *opt, const dpfl_transport *t,
                                    dpfl_error *err)
{
    return fl_run(cfg, opt, t, err);
}
