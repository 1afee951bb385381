/* A node of a run (node.h): the set-up every process that trains clients shares -- data, partition, model,
 * simulation, noise (configured, calibrated to the targets, planned by rPDP-FL, or the checkpoint's on a resume)
 * and the ledger.  dpfl train's run adds its files (run.c). */
#include "run_internal.h"

#define DPFL_PATH_MSG 512
#include "fl/sim_internal.h"
#include "core/file.h"
#include "dpfl/mech.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PURPOSE_INIT = 3, PURPOSE_PARTITION = 4, PURPOSE_BUDGETS = 7 };

/* delta against the number of units it protects: a mechanism that publishes one of n records at random is
 * (0, 1/n)-DP, so delta >= 1/n promises nothing (and the accountant happily answers epsilon = 0).  The one condition
 * the literature agrees on is delta < 1/n (Dwork & Roth 2014, after Def. 2.4: a delta of the order of 1/n is
 * dangerous); the customary choice sits just below it (delta = 1e-5 for MNIST's 60,000 records, Abadi et al. 2016:
 * n delta = 0.6), so that is not warned about.  delta >= 1/n is refused unless [run] allow_large_delta = yes, and
 * then warned about (the warning is kept for summary.json). */
static dpfl_status check_one_delta(const dpfl_config *cfg, const char *key, double delta, int64_t n, const char *unit,
                                   int quiet, run_warnings *w, dpfl_error *err)
{
    if (n <= 0 || delta < 1.0 / (double)n) return DPFL_OK;
    const char *what = strcmp(unit, "clients") ? "record" : "client";
    if (!cfg->run.allow_large_delta)
        return dpfl_fail(err, DPFL_EINVAL,
                         "%s: %g is not below 1/n = %.3g (n = %lld %s): such a delta allows publishing a whole %s; "
                         "use delta < 1/n (e.g. %.3g), or set [run] allow_large_delta = yes",
                         key, delta, 1.0 / (double)n, (long long)n, unit, what, 0.1 / (double)n);
    if (w->n < 4) {
        snprintf(w->text[w->n], sizeof w->text[0], "%s = %g is not below 1/n = %.3g (n = %lld %s; [run] "
                 "allow_large_delta = yes): such a delta allows publishing a whole %s", key, delta, 1.0 / (double)n,
                 (long long)n, unit, what);
        if (!quiet) fprintf(stderr, "dpfl: warning: %s\n", w->text[w->n]);
        w->n++;
    }
    return DPFL_OK;
}

static dpfl_status check_deltas(const dpfl_config *cfg, int64_t records, int32_t clients, int quiet, run_warnings *w,
                                dpfl_error *err)
{
    dpfl_status st = DPFL_OK;
    if (cfg->record_dp.enabled) {
        st = check_one_delta(cfg, "record_dp.delta", cfg->record_dp.delta, records, "training records", quiet, w, err);
        if (!st && cfg->record_dp.e2e) /* the e2e client-level guarantee uses the same delta */
            st = check_one_delta(cfg, "record_dp.delta (e2e, client level)", cfg->record_dp.delta, clients, "clients", quiet, w,
                                 err);
    }
    if (!st && cfg->client_dp.enabled)
        st = check_one_delta(cfg, "client_dp.delta", cfg->client_dp.delta, clients, "clients", quiet, w, err);
    return st;
}

static void source_path(const dpfl_config *cfg, int32_t g, char *path, size_t len)
{
    dpfl_error e2;
    if (dpfl_dataset_source_path(cfg->data.dataset, g, path, len, &e2)) snprintf(path, len, "source #%d", g);
}

dpfl_status fl_node_data_here(const fl_node *n, int32_t k, const char *who, dpfl_error *err)
{
    const dpfl_dataset *d = &n->in.train;
    const dpfl_partition *part = &n->in.part;
    if (!d->absent) return DPFL_OK;
    for (int32_t i = part->offset[k]; i < part->offset[k + 1]; i++)
        if (d->absent[d->group[part->index[i]]]) {
            char path[DPFL_PATH_MSG];
            source_path(n->in.cfg, d->group[part->index[i]], path, sizeof path);
            return dpfl_fail(err, DPFL_EIO, "cannot open data file (%s): %s trains client %d, whose records are in it",
                             path, who, k);
        }
    return DPFL_OK;
}

/* The caller's arrays (s->train): checked and used in place, or copied where normalization must change them. */
static dpfl_status load_arrays(run_inputs *in, const run_setup *s, dpfl_error *err)
{
    const dpfl_data_config *dc = &in->cfg->data;
    if (!dpfl_dataset_is_memory(dc->dataset))
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset: '%s' names files, but the run was given arrays; set "
                                           "data.dataset = memory:NAME (config.ini records it)", dc->dataset);
    if (dc->test[0] || dc->source_rows.n)
        return dpfl_fail(err, DPFL_EINVAL, "data.%s: the run's data are arrays, not files%s",
                         dc->test[0] ? "test" : "source_rows", dc->test[0] ? "; give the test set as arrays too" : "");
    const int standard = dc->normalize == DPFL_NORM_STANDARD;
    dpfl_status st = dpfl_dataset_from_caller(s->train, s->test, dc->classes, dc->test_fraction, in->seed, standard,
                                              &in->train, &in->test, &in->borrowed, err);
    if (!st && standard &&
        !(st = dpfl_dataset_standardize_values(&in->train, dc->feature_mean.v, dc->feature_mean.n, dc->feature_std.v,
                                               dc->feature_std.n, err)))
        st = dpfl_dataset_standardize_values(&in->test, dc->feature_mean.v, dc->feature_mean.n, dc->feature_std.v,
                                             dc->feature_std.n, err);
    return st;
}

/* Data, partition and the initial model (normalization with published constants only). */
static dpfl_status setup_data_model(run_inputs *in, run_state *rs, run_warnings *w, const run_setup *s,
                                    dpfl_error *err)
{
    const dpfl_config *cfg = in->cfg;
    dpfl_status st;
    if ((st = s->train ? load_arrays(in, s, err) : dpfl_config_load_data(cfg, in->seed, &in->train, &in->test, err)))
        return st;
    const int32_t nabsent = dpfl_dataset_absent_count(&in->train);
    if (nabsent && !s->absent_ok && !(s->transport && s->transport->clients_hold_data)) {
        char path[DPFL_PATH_MSG] = "?";
        for (int32_t g = 0; g < in->train.groups; g++)
            if (in->train.absent[g]) {
                source_path(cfg, g, path, sizeof path);
                break;
            }
        return dpfl_fail(err, DPFL_EIO, "cannot open data file (%s): %d of the %d files are not here; training every "
                         "client needs them all (only dpfl serve, which trains none, and dpfl join --client K, which "
                         "trains K, run without the others')", path, nabsent, in->train.groups);
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
    if (s->resume) {
        if ((st = fl_checkpoint_peek(s->dir, &saved, err))) return st;
        dpfl_rng_init_key(&prng, saved.partition_key, in->root.seeded);
    } else if (s->partition_key) {
        dpfl_rng_init_key(&prng, s->partition_key, in->root.seeded);
    } else {
        dpfl_rng_derive(&in->root, &prng, 0, 0, PURPOSE_PARTITION);
    }
    memcpy(rs->partition_key, prng.key, 32);
    if ((st = dpfl_partition_make(&in->train, &in->test, &spec, &prng, &in->part, err))) return st;
    dpfl_partition_digest(&in->part, rs->partition_digest);
    if (s->resume && memcmp(saved.partition_digest, rs->partition_digest, 32))
        return dpfl_fail(err, DPFL_EINVAL, "resume (%s): the client partition differs from the checkpoint's (the [data] "
                                           "settings or the dataset files changed); resume with the run's own config.ini",
                         s->dir);
    fl_config_digest(cfg, rs->config_digest); /* a resume compares it once the checkpoint is read (setup_noise) */
    /* delta's 1/n rule counts records (train.n), not the partition's slots, which replication repeats */
    if ((st = check_deltas(cfg, in->train.n, in->part.clients, s->quiet, w, err))) return st;
    int32_t copies = 1; /* record-level DP charges a replicated record in each of its clients; twice in one: refused */
    if (cfg->record_dp.enabled && (st = dpfl_record_copies(&in->part, &copies, err))) return st;
    if (cfg->data.kind == DPFL_DATASET_HEART && (cfg->record_dp.enabled || cfg->client_dp.enabled)) {
        /* FLamby's preprocessing, kept for the rPDP-FL reproduction: say what the epsilon does not cover */
        snprintf(w->text[w->n], sizeof w->text[0], "data: heart's features are z-scored with each "
                 "centre's own training statistics (FLamby's preprocessing), which no epsilon covers; csv: files with "
                 "public constants avoid it (examples/own_csv.ini)");
        if (!s->quiet) fprintf(stderr, "dpfl: warning: %s\n", w->text[w->n]);
        w->n++;
    }
    if (fl_rpdp_configured(cfg) && cfg->record_dp.budgets == DPFL_BUDGETS_CLASS && w->n < 4) {
        /* a record's budget is its label's: its rate, its level's count and its client's divisor follow the label */
        snprintf(w->text[w->n], sizeof w->text[0], "record_dp.budgets = class takes every label as public: the "
                 "levels' record counts are the class counts, and no epsilon covers a record's label");
        if (!s->quiet) fprintf(stderr, "dpfl: warning: %s\n", w->text[w->n]);
        w->n++;
    }
    char mspec[300];
    dpfl_config_model_spec(cfg, mspec, sizeof mspec);
    if ((st = dpfl_model_create(mspec, in->train.c, in->train.h, in->train.w, in->train.classes, &in->model, err)))
        return st;
    if (!(in->global = dpfl_alloc(in->model.nparam * sizeof(float), err))) return DPFL_ENOMEM;
    dpfl_rng irng;
    dpfl_rng_derive(&in->root, &irng, 0, 0, PURPOSE_INIT);
    dpfl_model_init(&in->model, in->global, &irng);
    return DPFL_OK;
}

/* The smallest client-level z whose rounds stay within client_dp.target_epsilon: the event the aggregation mode
 * releases (dpfl_server_client_event, the mode's own event()), probed at a multiplier it accepts (1, else the next
 * smaller power of two: adaptive clipping refuses a z >= 2 sigma_b, which would leave nothing of the noise for the
 * update sum), and the calibrated event multiplier converted back by the event's multiplier per unit of the
 * mechanism's (fixed-size client sampling is analysed replace-one: z / 2). */
static dpfl_status calibrate_client_noise(const dpfl_config *cfg, const dpfl_server *server, int32_t clients,
                                          double *z, dpfl_error *err)
{
    dpfl_status st;
    dpfl_event ev;
    double probe = 1.0;
    while ((st = dpfl_server_client_event(server, 1, probe, &ev, err)) == DPFL_EINVAL && probe > 0x1p-20)
        probe *= 0.5;
    if (st) return st;
    const double event_per_unit = ev.z / probe;
    ev.count = fl_client_releases(cfg, clients, cfg->fl.rounds); /* cross-device: participations */
    dpfl_calibrate_opts co = {0};
    co.accountant = (cfg->client_dp.accountant == DPFL_ACC_PLD) ? DPFL_ACC_PLD : DPFL_ACC_RDP;
    co.tol = 1e-4;
    if ((st = dpfl_calibrate_noise(&ev, 1, cfg->client_dp.target_epsilon, cfg->client_dp.delta, &co, z, err)))
        return st;
    *z /= event_per_unit;
    return DPFL_OK;
}

/* The noise multipliers: from the checkpoint on a resume, else configured or calibrated to the targets. */
static dpfl_status setup_noise(run_inputs *in, run_acct *a, const run_setup *s, dpfl_error *err)
{
    const dpfl_config *cfg = in->cfg;
    dpfl_status st;
    a->rs.record_z = cfg->record_dp.noise;
    a->rs.client_z = cfg->client_dp.noise;
    a->rs.S = cfg->client_dp.clip;
    const int budgets = fl_rpdp_configured(cfg);
    if (s->resume) {
        a->rpdp.on = budgets; /* the checkpoint's budgets block fills it */
        a->rpdp.rec.n = in->train.n;
        a->rpdp.filter.on = budgets && cfg->record_dp.budget_policy == DPFL_POLICY_FILTER;
        if ((st = fl_checkpoint_load(s->dir, in->global, in->model.nparam, &a->ledger, &a->rs,
                                     in->clients, dpfl_server_control(in->server),
                                     budgets ? &a->rpdp : NULL, s->ckpt_line, err)))
            return st;
        uint8_t now[32]; /* after the checkpoint's own checks, which name the key they refuse */
        fl_config_digest(cfg, now);
        if (memcmp(a->rs.config_digest, now, 32))
            return dpfl_fail(err, DPFL_EINVAL, "resume (%s): the config differs from the checkpoint's in a key other "
                                               "than fl.rounds, run.threads, run.eval_every, fl.client_state_max_mb and "
                                               "data.data_dir (the steps already charged would be accounted under "
                                               "settings they did not run with); resume with the run's own config.ini",
                         s->dir);
        if (budgets) { /* the round the simulation runs, at the checkpoint's noise */
            const dpfl_mech_rpdp design = dpfl_record_dp_design(in->record_dp);
            fl_rpdp_set_design(&a->rpdp.levels, &design);
            if ((st = fl_rpdp_rates(&a->rpdp, &in->part, err))) return st;
        }
        if ((st = dpfl_server_restore_ledger(in->server, &a->ledger, err))) return st;
    } else if (budgets) {
        dpfl_rng brng; /* the budgets' own stream: generated budgets never shift the other draws */
        dpfl_rng_derive(&in->root, &brng, 0, 0, PURPOSE_BUDGETS);
        const dpfl_mech_rpdp design = dpfl_record_dp_design(in->record_dp); /* the round it runs; z calibrated */
        if ((st = fl_rpdp_plan(&a->rpdp, cfg, &design, &in->train, &in->part, &brng, err))) return st;
        a->rs.record_z = a->rpdp.levels.mech.z;
    } else {
        if (in->rdp_on && a->rs.record_z == 0.0 &&
            (st = dpfl_record_calibrate(&in->part, cfg, cfg->fl.rounds, cfg->record_dp.target_epsilon, &a->rs.record_z, err)))
            return st;
        if (in->cdp_on && a->rs.client_z == 0.0 && (cfg->client_dp.clip_strategy != DPFL_CLIP_MEDIAN) &&
            (st = calibrate_client_noise(cfg, in->server, in->part.clients, &a->rs.client_z, err)))
            return st;
    }
    if (in->rdp_on && cfg->record_dp.secure_mode && !dpfl_mech_discrete_in_range(in->model.nparam, a->rs.record_z))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.secure_mode: noise %g on %zu parameters exceeds the exact "
                                           "sampler's range (sigma^2 <= 2^62 grid units)", a->rs.record_z,
                         in->model.nparam);
    if (in->rdp_on) dpfl_record_dp_set_noise(in->record_dp, a->rs.record_z);
    if (budgets) dpfl_record_dp_set_rates(in->record_dp, a->rpdp.rec.p, a->rpdp.rec.denom);
    if (budgets && a->rpdp.filter.on)
        dpfl_record_dp_set_filter(in->record_dp, a->rpdp.filter.spent, a->rpdp.filter.cap, a->rpdp.filter.alpha);
    if (in->cdp_on) {
        /* every round's noise split is checked before the first release (adaptive clipping: 2 sigma_b > z) */
        for (int32_t r = cfg->fl.rounds; r > a->ledger.rounds; r--)
            if ((st = dpfl_server_set_noise(in->server, r, dpfl_round_client_noise(cfg, r, a->rs.client_z), err)))
                return st;
        dpfl_server_set_update_clip(in->server, a->rs.S);
    }
    a->ra = dpfl_record_dp_accounting(in->record_dp); /* the mechanism the clients run, not a copy of settings */
    return DPFL_OK;
}


dpfl_status fl_setup_node(fl_node *n, const run_setup *s, dpfl_error *err)
{
    const dpfl_config *cfg = s->cfg;
    run_inputs *in = &n->in;
    run_acct *a = &n->acct;
    dpfl_status st;
    in->cfg = cfg;
    a->g.cprivate = 1;
    a->g.ledger_eps = NAN;
    if ((st = setup_data_model(in, &a->rs, &n->warn, s, err))) return st;
    if ((st = dpfl_sim_create(cfg, &in->model, &in->train, &in->test, &in->part, &in->root, in->global, &in->sim, err)))
        return st;
    in->clients = dpfl_sim_clients(in->sim);
    in->record_dp = dpfl_sim_record_dp(in->sim);
    in->server = dpfl_sim_server(in->sim);
    if (s->transport) fl_sim_set_transport(in->sim, s->transport);
    if ((st = dpfl_ledger_init(&a->ledger, in->part.clients, err))) return st;
    in->rdp_on = cfg->record_dp.enabled;
    in->cdp_on = cfg->client_dp.enabled;
    if ((st = setup_noise(in, a, s, err))) return st;
    if ((in->rdp_on && !a->rpdp.on && in->part.clients <= 1000 && !a->ra.pld &&
         !(a->g.per_client = malloc((size_t)in->part.clients * sizeof *a->g.per_client))) ||
        (st = dpfl_ledger_init(&a->trial, in->part.clients, err)))
        return st ? st : dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    if (a->rpdp.on) {
        if ((st = fl_rpdp_max_epsilon(&a->rpdp, cfg, &a->g.report.epsilon, err))) return st;
    } else if (in->rdp_on && (st = fl_record_guarantee(cfg, &in->part, &a->ra, a->rs.record_z, &a->ledger, &a->g.report,
                                                       NULL, &a->g.ledger_eps, err))) {
        return st;
    }
    if (in->cdp_on && (st = fl_client_epsilon(cfg, &a->ledger, &a->g.ceps, &a->g.cprivate, err))) return st;
    return DPFL_OK;
}

dpfl_status fl_node_setup(fl_node *n, const dpfl_config *cfg, const uint8_t partition_key[32], dpfl_error *err)
{
    memset(n, 0, sizeof *n);
    n->in.cfg = cfg;
    dpfl_status st;
    if (cfg->run.seed.given) {
        n->in.seed = cfg->run.seed.value;
        dpfl_rng_init_seed(&n->in.root, n->in.seed);
    } else if ((st = dpfl_rng_init_os(&n->in.root, err))) { /* this process's own noise, from its own entropy */
        return st;
    }
    const run_setup s = {.cfg = cfg, .quiet = 1, .partition_key = partition_key, .absent_ok = 1};
    return fl_setup_node(n, &s, err);
}

void fl_node_free(fl_node *n)
{
    dpfl_ledger_free(&n->acct.ledger);
    dpfl_ledger_free(&n->acct.trial);
    fl_rpdp_free(&n->acct.rpdp);
    free(n->acct.g.per_client);
    dpfl_sim_free(n->in.sim);
    dpfl_free(n->in.global);
    dpfl_model_free(&n->in.model);
    dpfl_partition_free(&n->in.part);
    if (n->in.borrowed) { /* the caller's arrays */
        memset(&n->in.train, 0, sizeof n->in.train);
        memset(&n->in.test, 0, sizeof n->in.test);
    }
    dpfl_dataset_free(&n->in.train);
    dpfl_dataset_free(&n->in.test);
}
