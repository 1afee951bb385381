/* The run driver behind `dpfl train`: data, partition, model, rounds, and the run directory
 * (config.ini, metrics.jsonl, summary.json, model.bin). */
#include "run_internal.h"
#include "dpfl/mech.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PURPOSE_INIT = 3, PURPOSE_PARTITION = 4 };

static dpfl_status make_dirs(const char *path, dpfl_error *err)
{
    char buf[1024];
    if (strlen(path) >= sizeof buf) return dpfl_fail(err, DPFL_EINVAL, "output directory path too long (%s)", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return dpfl_fail(err, DPFL_EIO, "cannot create directory (%s): %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return dpfl_fail(err, DPFL_EIO, "cannot create directory (%s): %s", buf, strerror(errno));
    return DPFL_OK;
}

static dpfl_status partition_spec(const dpfl_config *c, dpfl_partition_spec *sp, dpfl_error *err)
{
    memset(sp, 0, sizeof *sp);
    if (!strcmp(c->partition, "iid")) sp->kind = DPFL_PART_IID;
    else if (!strcmp(c->partition, "shards")) sp->kind = DPFL_PART_SHARDS;
    else if (!strcmp(c->partition, "dirichlet")) sp->kind = DPFL_PART_DIRICHLET;
    else if (!strcmp(c->partition, "classes")) sp->kind = DPFL_PART_CLASSES;
    else if (!strcmp(c->partition, "natural")) sp->kind = DPFL_PART_NATURAL;
    else return dpfl_fail(err, DPFL_EINVAL, "data.partition: unknown '%s'", c->partition);
    sp->clients = c->clients;
    sp->shards = c->shards;
    sp->beta = c->beta;
    sp->classes_per_client = c->classes_per_client;
    sp->samples_per_client = c->samples_per_client;
    sp->test_per_client = c->test_per_client;
    return DPFL_OK;
}

static void json_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* metrics.jsonl: what the guarantee covers -- the released model's accuracy on the held-out test set, and values
 * computed from public settings or from privatized estimates (epsilon, noise std, adaptive clip). */
static cJSON *round_json(const dpfl_round_metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", m->round);
    json_num(o, "test_accuracy", m->test_accuracy);
    json_num(o, "test_loss", m->test_loss);
    return o;
}

/* diagnostics.jsonl: computed from the clients' raw data, updates or batches and covered by NO epsilon (training
 * loss, clip fractions, exact Poisson batch totals, V_c and U_s of the raw updates, participation counts, client
 * test sets, timing).  For debugging a run, never for publication as if it were private. */
static cJSON *diagnostics_json(const dpfl_round_metrics *m, int cdp, int rdp, int64_t comm)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", m->round);
    cJSON_AddBoolToObject(o, "private", 0);
    cJSON_AddNumberToObject(o, "clients", m->clients);
    cJSON_AddNumberToObject(o, "examples", (double)m->examples);
    json_num(o, "train_loss", m->train_loss);
    if (isfinite(m->client_acc_mean)) {
        json_num(o, "client_accuracy_mean", m->client_acc_mean);
        json_num(o, "client_accuracy_std", m->client_acc_std);
    }
    if (cdp) {
        cJSON_AddNumberToObject(o, "replied", m->replied);
        json_num(o, "update_clip_fraction", m->update_clip_fraction);
        json_num(o, "between_client_variance", m->between_client_variance);
        json_num(o, "update_scale", m->update_scale);
        cJSON_AddNumberToObject(o, "communication", (double)comm);
    }
    if (rdp) json_num(o, "clip_fraction", m->clip_fraction);
    json_num(o, "wall_seconds", m->wall_seconds);
    return o;
}

static void progress(const dpfl_round_metrics *m, int32_t rounds, double acc)
{
    double per = m->wall_seconds / m->round, eta = per * (rounds - m->round);
    fprintf(stderr, "\rround %d/%d  test acc %s%.4f  ETA %dm%02ds   ", m->round, rounds, isfinite(acc) ? "" : "-",
            isfinite(acc) ? acc : 0.0, (int)(eta / 60), (int)fmod(eta, 60));
    fflush(stderr);
}

/* delta against the number of units it protects: a mechanism that publishes one of n records at random is
 * (0, 1/n)-DP, so delta >= 1/n promises nothing (and the accountant happily answers epsilon = 0).  Refused unless
 * [run] allow_large_delta = yes; a delta above 1/(10 n) is allowed with a warning (kept for summary.json). */
static dpfl_status check_one_delta(const dpfl_config *cfg, const char *key, double delta, int64_t n, const char *unit,
                                   int quiet, char (*warn)[256], int *nwarn, dpfl_error *err)
{
    if (n <= 0) return DPFL_OK;
    if (delta >= 1.0 / (double)n && strcmp(cfg->allow_large_delta, "yes"))
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
    if (!strcmp(cfg->rdp_enabled, "yes")) {
        st = check_one_delta(cfg, "record_dp.delta", cfg->rdp_delta, records, "training records", quiet, warn, nwarn, err);
        if (!st && !strcmp(cfg->rdp_e2e, "yes")) /* the e2e client-level guarantee uses the same delta */
            st = check_one_delta(cfg, "record_dp.delta (e2e, client level)", cfg->rdp_delta, clients, "clients", quiet,
                                 warn, nwarn, err);
    }
    if (!st && !strcmp(cfg->cdp_enabled, "yes"))
        st = check_one_delta(cfg, "client_dp.delta", cfg->cdp_delta, clients, "clients", quiet, warn, nwarn, err);
    return st;
}

dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err)
{
    dpfl_status st;
    if ((st = dpfl_config_validate(cfg, err))) return st;
    dpfl_rng root;
    uint64_t seed = 0;
    if (cfg->seed[0]) {
        seed = strtoull(cfg->seed, NULL, 10);
        dpfl_rng_init_seed(&root, seed);
    } else if ((st = dpfl_rng_init_os(&root, err))) {
        return st;
    }
    dpfl_dataset train = {0}, test = {0};
    dpfl_partition part = {0};
    dpfl_model model = {0};
    dpfl_sim *sim = NULL;
    float *global = NULL;
    FILE *metrics = NULL, *diag = NULL;
    char *ini = NULL, *ckpt_line = NULL;
    char path[1100];
    dpfl_ledger ledger = {0}, trial = {0};
    dpfl_record_report report = {0};
    int64_t *steps = NULL;
    double *per_client = NULL, t_start = dpfl_now(), wall0 = 0, ceps = 0;
    int rdp_on = 0, cdp_on = 0, stopped_early = 0, cprivate = 1;
    int64_t comm = 0;
    run_state rs = {0};
    dpfl_round_metrics last_eval = {0};
    char warnings[4][256];
    int nwarn = 0;

    if ((st = make_dirs(opt->out_dir, err))) return st;
    if ((st = dpfl_dataset_load(cfg->dataset, cfg->data_dir, seed, &train, &test, err))) goto done;
    if (!strcmp(cfg->normalize, "standard")) {
        /* published per-dataset constants: computing them from the training data would itself be a release */
        const double mean = !strcmp(cfg->dataset, "mnist") ? 0.1307 : 0.2860;
        const double sd = !strcmp(cfg->dataset, "mnist") ? 0.3081 : 0.3530;
        for (size_t i = 0; i < (size_t)train.n * (size_t)train.dim; i++) train.x[i] = (float)((train.x[i] - mean) / sd);
        for (size_t i = 0; i < (size_t)test.n * (size_t)test.dim; i++) test.x[i] = (float)((test.x[i] - mean) / sd);
    }
    dpfl_partition_spec spec;
    if ((st = partition_spec(cfg, &spec, err))) goto done;
    dpfl_rng prng;
    dpfl_rng_derive(&root, &prng, 0, 0, PURPOSE_PARTITION);
    if ((st = dpfl_partition_make(&train, &test, &spec, &prng, &part, err))) goto done;
    if ((st = check_deltas(cfg, train.n, part.clients, opt->quiet, warnings, &nwarn, err))) goto done;
    if ((st = dpfl_model_create(cfg->arch, train.c, train.h, train.w, train.classes, &model, err))) goto done;
    if (!(global = dpfl_alloc(model.nparam * sizeof(float), err))) {
        st = DPFL_ENOMEM;
        goto done;
    }
    dpfl_rng irng;
    dpfl_rng_derive(&root, &irng, 0, 0, PURPOSE_INIT);
    dpfl_model_init(&model, global, &irng);

    ini = dpfl_config_to_ini(cfg);
    if (!ini) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        goto done;
    }
    char sha[65];
    dpfl_sha256_hex(ini, strlen(ini), sha);
    snprintf(path, sizeof path, "%s/config.ini", opt->out_dir);
    /* always the config this process runs (a resume may have changed rounds, threads or eval_every), so that
     * config_sha256 in summary.json is the hash of the file beside it */
    if ((st = dpfl_file_write_text(path, ini, strlen(ini), err))) goto done;
    if ((st = dpfl_sim_create(cfg, &model, &train, &test, &part, &root, global, &sim, err))) goto done;
    if ((st = dpfl_ledger_init(&ledger, part.clients, err))) goto done;
    rdp_on = !strcmp(cfg->rdp_enabled, "yes");
    cdp_on = !strcmp(cfg->cdp_enabled, "yes");
    rs.record_z = cfg->rdp_noise;
    rs.client_z = cfg->cdp_noise;
    rs.S = cfg->cdp_clip;
    if (opt->resume) {
        if ((st = fl_checkpoint_load(opt->out_dir, global, model.nparam, &ledger, &rs, sim, &ckpt_line, err))) goto done;
        wall0 = rs.wall;
    } else {
        if (rdp_on && rs.record_z == 0.0 &&
            (st = dpfl_record_calibrate(&part, cfg, cfg->rounds, cfg->rdp_target_epsilon, &rs.record_z, err)))
            goto done;
        if (cdp_on && rs.client_z == 0.0 && strcmp(cfg->cdp_strategy, "median")) {
            /* the smallest z whose R rounds, sampled as configured, stay within the target */
            dpfl_event ev = fl_client_round_event(cfg, part.clients, 1.0, 1);
            ev.count = cfg->rounds;
            dpfl_calibrate_opts co = {0};
            co.accountant = !strcmp(cfg->cdp_accountant, "pld") ? DPFL_ACC_PLD : DPFL_ACC_RDP;
            co.tol = 1e-4;
            if ((st = dpfl_calibrate_noise(&ev, 1, cfg->cdp_target_epsilon, cfg->cdp_delta, &co, &rs.client_z, err)))
                goto done;
            if (!strcmp(cfg->sampling, "fixed")) rs.client_z *= 2.0; /* the event carries z / 2 (replace-one) */
        }
    }
    if (rdp_on && !strcmp(cfg->rdp_secure, "yes")) {
        if (!dpfl_mech_discrete_in_range(model.nparam, rs.record_z)) {
            st = dpfl_fail(err, DPFL_EINVAL, "record_dp.secure_mode: noise %g on %zu parameters exceeds the exact "
                                             "sampler's range (sigma^2 <= 2^62 grid units)", rs.record_z, model.nparam);
            goto done;
        }
    }
    if (rdp_on) dpfl_sim_set_record_noise(sim, rs.record_z);
    if (cdp_on) {
        /* every round's noise split is checked before the first release (adaptive clipping: 2 sigma_b > z) */
        for (int32_t r = cfg->rounds; r > ledger.rounds; r--)
            if ((st = dpfl_sim_set_client_noise(sim, r, dpfl_round_client_noise(cfg, r, rs.client_z), err))) goto done;
        dpfl_sim_set_update_clip(sim, rs.S);
    }
    dpfl_record_accounting ra = {rs.record_z, !strcmp(cfg->rdp_sampler, "poisson"), cfg->batch, cfg->rdp_delta,
                                 !strcmp(cfg->rdp_accountant, "pld"), !strcmp(cfg->rdp_secure, "yes")};
    if (!(steps = malloc((size_t)part.clients * sizeof *steps)) ||
        (rdp_on && part.clients <= 1000 && !ra.pld && !(per_client = malloc((size_t)part.clients * sizeof *per_client))) ||
        (st = dpfl_ledger_init(&trial, part.clients, err))) {
        if (!st) st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
        goto done;
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", opt->out_dir);
    if (opt->resume && (st = fl_metrics_truncate(path, ledger.rounds, ckpt_line, err))) goto done;
    if (!(metrics = fopen(path, opt->resume ? "a" : "w"))) {
        st = dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
        goto done;
    }
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", opt->out_dir);
    if (opt->resume && (st = fl_metrics_truncate(path, ledger.rounds, "", err))) goto done;
    if (!(diag = fopen(path, opt->resume ? "a" : "w"))) {
        st = dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
        goto done;
    }

    const int show = !opt->quiet && isatty(2);
    dpfl_round_metrics m = {0};
    last_eval.test_accuracy = last_eval.test_loss = last_eval.client_acc_mean = NAN;
    if (rdp_on && (st = dpfl_ledger_record_epsilon(&ledger, &part, &ra, &report, NULL, err))) goto done;
    if (cdp_on && (st = fl_client_epsilon(cfg, &ledger, &ceps, &cprivate, err))) goto done;
    for (int32_t r = ledger.rounds + 1; r <= cfg->rounds; r++) {
        const int32_t *sampled;
        int32_t ms = dpfl_sim_sample(sim, r, &sampled);
        for (int32_t i = 0; i < ms; i++) steps[i] = dpfl_sim_client_steps(sim, sampled[i]);
        dpfl_record_report next = report;
        double next_ceps = ceps;
        const double zt = dpfl_round_client_noise(cfg, r, rs.client_z);
        if (cdp_on && (st = dpfl_sim_set_client_noise(sim, r, zt, err))) goto done;
        /* charged: the multiplier recomputed from the noises the round will draw (update sum and quantile count) */
        dpfl_event cev = fl_client_round_event(cfg, part.clients, cdp_on ? dpfl_sim_client_release_noise(sim) : zt, r);
        /* charge a copy first: a round that would exceed a budget is never run, let alone released */
        if ((st = dpfl_ledger_copy(&trial, &ledger, err))) goto done;
        dpfl_ledger_charge(&trial, sampled, ms, steps);
        if (cdp_on && (st = dpfl_ledger_charge_client(&trial, &cev, err))) goto done;
        if (rdp_on) {
            if ((st = dpfl_ledger_record_epsilon(&trial, &part, &ra, &next, per_client, err))) goto done;
            if (cfg->rdp_target_epsilon > 0 && next.epsilon > cfg->rdp_target_epsilon) {
                stopped_early = 1;
                break;
            }
        }
        if (cdp_on) {
            if ((st = fl_client_epsilon(cfg, &trial, &next_ceps, &cprivate, err))) goto done;
            if (cprivate && cfg->cdp_target_epsilon > 0 && next_ceps > cfg->cdp_target_epsilon) {
                stopped_early = 1;
                break;
            }
        }
        if ((st = dpfl_sim_train(sim, r, &m, err))) goto done;
        if ((st = dpfl_ledger_copy(&ledger, &trial, err))) goto done;
        report = next;
        ceps = next_ceps;
        rs.examples += m.examples;
        rs.S = cdp_on ? dpfl_sim_update_clip(sim) : rs.S;
        comm += ms;
        if (r % cfg->eval_every == 0 || r == cfg->rounds) {
            dpfl_sim_evaluate(sim, &m);
            last_eval = m;
        }
        m.wall_seconds += wall0;
        rs.wall = m.wall_seconds;
        cJSON *o = round_json(&m);
        if (cdp_on) {
            json_num(o, "update_clip", m.update_clip);
            json_num(o, "update_noise_std", m.update_noise_std);
            if (cprivate) json_num(o, "client_epsilon", ceps);
            else cJSON_AddStringToObject(o, "client_epsilon", "not private");
        }
        if (rdp_on) {
            json_num(o, "epsilon", report.epsilon);
            json_num(o, "noise_std", m.noise_std);
            if (!strcmp(cfg->rdp_e2e, "yes")) {
                double ce, cn;
                if ((st = fl_e2e_client_epsilon(cfg, &part, &ledger, rs.record_z, cdp_on ? rs.client_z : 0.0, &ce, &cn, err))) {
                    cJSON_Delete(o);
                    goto done;
                }
                json_num(o, "client_epsilon", ce);
            }
            if (per_client)
                cJSON_AddItemToObject(o, "epsilon_per_client", cJSON_CreateDoubleArray(per_client, part.clients));
        }
        char *line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!line) {
            st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (metrics)");
            goto done;
        }
        /* persist the ledger with the model it paid for (and this line), then release */
        if ((st = fl_checkpoint_save(opt->out_dir, global, model.nparam, &ledger, &rs, sim, line, err))) {
            free(line);
            goto done;
        }
        if (fprintf(metrics, "%s\n", line) < 0 || fflush(metrics) != 0) {
            free(line);
            st = dpfl_fail(err, DPFL_EIO, "cannot write (%s/metrics.jsonl)", opt->out_dir);
            goto done;
        }
        free(line);
        cJSON *d = diagnostics_json(&m, cdp_on, rdp_on, comm);
        char *dline = cJSON_PrintUnformatted(d);
        cJSON_Delete(d);
        if (!dline || fprintf(diag, "%s\n", dline) < 0 || fflush(diag) != 0) {
            free(dline);
            st = dpfl_fail(err, DPFL_EIO, "cannot write (%s/diagnostics.jsonl)", opt->out_dir);
            goto done;
        }
        free(dline);
        if (show) progress(&m, cfg->rounds, last_eval.test_accuracy);
    }
    if (show) fputc('\n', stderr);
    if (!isfinite(last_eval.test_accuracy) || last_eval.round != ledger.rounds) { /* stopped early or resumed */
        dpfl_sim_evaluate(sim, &m);
        m.round = ledger.rounds;
        last_eval = m;
    }

    snprintf(path, sizeof path, "%s/model.bin", opt->out_dir);
    if ((st = dpfl_model_save(&model, global, path, err))) goto done;
    cJSON *sum = cJSON_CreateObject();
    json_num(sum, "test_accuracy", last_eval.test_accuracy);
    json_num(sum, "test_loss", last_eval.test_loss);
    cJSON_AddNumberToObject(sum, "rounds", ledger.rounds);
    cJSON_AddNumberToObject(sum, "rounds_planned", cfg->rounds);
    cJSON_AddBoolToObject(sum, "stopped_at_budget", stopped_early);
    /* values no epsilon covers (raw data, exact batch totals, participation, client test sets, timing): kept apart */
    cJSON *np = cJSON_AddObjectToObject(sum, "not_private");
    cJSON_AddStringToObject(np, "note", "diagnostics computed from raw data: covered by no epsilon; do not publish");
    cJSON_AddNumberToObject(np, "examples", (double)rs.examples);
    if (cdp_on) cJSON_AddNumberToObject(np, "communication", (double)comm);
    if (isfinite(last_eval.client_acc_mean)) {
        json_num(np, "client_accuracy_mean", last_eval.client_acc_mean);
        json_num(np, "client_accuracy_std", last_eval.client_acc_std);
    }
    cJSON_AddNumberToObject(np, "wall_seconds", wall0 + (dpfl_now() - t_start));
    if (rdp_on) {
        cJSON_AddStringToObject(sum, "unit", "record");
        json_num(sum, "epsilon", report.epsilon);
        cJSON_AddNumberToObject(sum, "delta", cfg->rdp_delta);
        cJSON_AddStringToObject(sum, "accountant", cfg->rdp_accountant);
        cJSON_AddStringToObject(sum, "sampler", cfg->rdp_sampler);
        cJSON_AddStringToObject(sum, "adjacency", ra.poisson ? "add-remove" : "replace-one");
        cJSON_AddNumberToObject(sum, "noise", rs.record_z);
        cJSON_AddNumberToObject(sum, "clip", cfg->rdp_clip);
        cJSON_AddStringToObject(sum, "noise_kind", !strcmp(cfg->rdp_secure, "yes")
                                                       ? "discrete Gaussian, exact (secure mode; RDP at integer orders)"
                                                       : "Gaussian, floating point (ziggurat on ChaCha20)");
        if (cfg->rdp_noise == 0.0) cJSON_AddStringToObject(sum, "noise_calibrated_for", "target_epsilon over all rounds");
        cJSON_AddNumberToObject(sum, "worst_client", report.worst_client);
        cJSON_AddNumberToObject(sum, "worst_client_q", report.worst_q);
        cJSON_AddNumberToObject(sum, "worst_client_steps", (double)report.worst_steps);
        cJSON_AddNumberToObject(sum, "worst_client_n", (double)report.worst_n);
        cJSON_AddNumberToObject(sum, "worst_client_batch", (double)report.worst_batch);
        if (report.order > 0) cJSON_AddNumberToObject(sum, "order", report.order);
        if (!strcmp(cfg->rdp_e2e, "yes")) {
            double ce, cn;
            if ((st = fl_e2e_client_epsilon(cfg, &part, &ledger, rs.record_z, cdp_on ? rs.client_z : 0.0, &ce, &cn, err))) {
                cJSON_Delete(sum);
                goto done;
            }
            json_num(sum, cdp_on ? "client_epsilon_e2e" : "client_epsilon", ce);
            cJSON_AddNumberToObject(sum, "client_delta", cfg->rdp_delta);
            cJSON_AddNumberToObject(sum, "client_noise", cn);
            cJSON_AddStringToObject(sum, "client_adjacency",
                                    !strcmp(cfg->sampling, "fixed") ? "replace-one" : "zero-out");
        }
    }
    if (cdp_on) {
        cJSON_AddBoolToObject(sum, "private", cprivate);
        if (cprivate) {
            json_num(sum, "client_epsilon", ceps);
        } else {
            cJSON_AddStringToObject(sum, "client_epsilon", "none: median clipping is not differentially private");
        }
        cJSON_AddNumberToObject(sum, "client_delta", cfg->cdp_delta);
        cJSON_AddNumberToObject(sum, "client_q", fl_client_rate_accounted(cfg, part.clients, ledger.rounds > 0 ? ledger.rounds : 1));
        cJSON_AddStringToObject(sum, "client_sampler", cfg->sampling);
        cJSON_AddStringToObject(sum, "client_adjacency_accounted",
                                !strcmp(cfg->sampling, "fixed") ? "replace-one" : "add-remove");
        cJSON_AddNumberToObject(sum, "client_rounds_charged", ledger.rounds);
        cJSON_AddNumberToObject(sum, "client_noise", rs.client_z);
        cJSON_AddStringToObject(sum, "client_accountant", cfg->cdp_accountant);
        cJSON_AddStringToObject(sum, "clip_strategy", cfg->cdp_strategy);
        if (!strcmp(cfg->cdp_strategy, "adaptive")) { /* the two noises whose combination was charged */
            cJSON_AddNumberToObject(sum, "update_noise", dpfl_sim_update_noise(sim));
            cJSON_AddNumberToObject(sum, "quantile_noise", dpfl_sim_quantile_noise(sim));
        }
        cJSON_AddNumberToObject(sum, "update_clip", rs.S);
    }
    if (nwarn) {
        cJSON *w = cJSON_AddArrayToObject(sum, "warnings");
        for (int i = 0; i < nwarn; i++) cJSON_AddItemToArray(w, cJSON_CreateString(warnings[i]));
    }
    cJSON_AddStringToObject(sum, "config_sha256", sha);
    if (cfg->seed[0]) {
        cJSON_AddNumberToObject(sum, "seed", (double)seed);
        cJSON_AddStringToObject(sum, "randomness", "reproducible mode (fixed seed) - not for deployment: every "
                                                   "epsilon above holds only if the seed is secret");
    } else {
        cJSON_AddNullToObject(sum, "seed");
        cJSON_AddStringToObject(sum, "randomness", "OS entropy (ChaCha20)");
    }
    cJSON_AddStringToObject(sum, "dataset", cfg->dataset);
    cJSON_AddStringToObject(sum, "model", model.spec);
    cJSON_AddNumberToObject(sum, "parameters", (double)model.nparam);
    cJSON_AddNumberToObject(sum, "clients", part.clients);
    cJSON_AddStringToObject(sum, "dpfl_version", DPFL_VERSION);
    char *text = cJSON_Print(sum);
    cJSON_Delete(sum);
    snprintf(path, sizeof path, "%s/summary.json", opt->out_dir);
    if (!text) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        goto done;
    }
    size_t tl = strlen(text);
    char *withnl = realloc(text, tl + 2);
    if (withnl) {
        text = withnl;
        text[tl] = '\n';
        text[tl + 1] = '\0';
    }
    st = dpfl_file_write_text(path, text, strlen(text), err);
    free(text);
    if (!st && !opt->quiet) {{
        fprintf(stderr, "dpfl: %d rounds%s, test accuracy %.4f, %.1f s; run written to %s\n", ledger.rounds,
                stopped_early ? " (stopped before exceeding the privacy budget)" : "", last_eval.test_accuracy,
                wall0 + (dpfl_now() - t_start), opt->out_dir);
        /* a fixed seed makes every noise draw reproducible: the guarantee then holds only while the seed is secret */
        const char *seedcaveat = cfg->seed[0] ? "; holds only if the seed is secret (fixed seed: reproducible mode, "
                                                "not for deployment)"
                                              : "";
        if (rdp_on)
            fprintf(stderr, "dpfl: record-level (%.4g, %g)-DP, worst client, %s accountant, %s sampler%s\n",
                    report.epsilon, cfg->rdp_delta, cfg->rdp_accountant, cfg->rdp_sampler, seedcaveat);
        if (cdp_on && cprivate)
            fprintf(stderr, "dpfl: client-level (%.4g, %g)-DP, %s client sampling, %s accountant%s\n", ceps,
                    cfg->cdp_delta, cfg->sampling, cfg->cdp_accountant, seedcaveat);
        if (cdp_on && !cprivate)
            fprintf(stderr, "dpfl: client level: NOT differentially private (median clipping)\n");
    }
    }
done:
    if (metrics) fclose(metrics);
    if (diag) fclose(diag);
    dpfl_ledger_free(&ledger);
    dpfl_ledger_free(&trial);
    free(steps);
    free(per_client);
    free(ckpt_line);
    dpfl_sim_free(sim);
    dpfl_free(global);
    free(ini);
    dpfl_model_free(&model);
    dpfl_partition_free(&part);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    return st;
}
