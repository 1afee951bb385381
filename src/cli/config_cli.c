/* The config of a command that trains (train, serve, join, audit): the file, then --unset, then each --set in its
 * order, and a note on stderr for each key of the file a --set dropped (include/dpfl/config.h: the command line
 * wins over the file), data.clients inferred from the files of a natural partition; the warning on raw-scale CSV
 * features; and the run folder a --resume names, refused unless it holds a run's config.ini. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cli_config_read(dpfl_config *cfg, const char *path, const cli_strings *unsets, const cli_strings *sets,
                    int resume)
{
    const int quiet_notes = resume; /* a run's own config.ini: its clients were inferred when it started */
    dpfl_config_defaults(cfg);
    dpfl_error err;
    if (dpfl_config_load(cfg, path, &err)) return cli_error("%s", err.msg);
    if (resume && unsets && unsets->n)
        return cli_error("--unset %s: a resumed run keeps its config; only fl.rounds, run.threads and "
                         "run.eval_every may change (with --set)", unsets->v[0]);
    for (size_t i = 0; unsets && i < unsets->n; i++)
        if (dpfl_config_unset(cfg, unsets->v[i], &err)) return cli_error("%s", err.msg);
    for (size_t i = 0; i < sets->n; i++) {
        if (resume && !cli_train_resumable_set(sets->v[i]))
            return cli_error("--set %s: a resumed run keeps its config; only fl.rounds, run.threads and "
                             "run.eval_every may change", sets->v[i]);
        char note[1024];
        if (dpfl_config_set_noted(cfg, sets->v[i], note, sizeof note, &err)) return cli_error("%s", err.msg);
        if (note[0]) fprintf(stderr, "dpfl: note: %s\n", note);
    }
    int inferred = 0;
    if (dpfl_config_infer_clients(cfg, &inferred, &err)) return cli_error("%s", err.msg);
    if (inferred && !quiet_notes)
        fprintf(stderr, "dpfl: note: data.clients = %d: one client per file of data.dataset (partition = natural)\n",
                (int)cfg->data.clients);
    return 0;
}

static int resume_rounds(const dpfl_config *cfg, const char *config_path)
{
    dpfl_config file;
    dpfl_config_defaults(&file);
    dpfl_error err;
    if (dpfl_config_load(&file, config_path, &err)) return cli_error("%s", err.msg);
    if (cfg->fl.rounds <= file.fl.rounds) return 0;
    /* the noise was calibrated so that exactly file.fl.rounds rounds fit the target: more would pass it */
    const char *key = NULL;
    double target = 0;
    if (file.record_dp.enabled && file.record_dp.noise == 0 && file.record_dp.target_epsilon > 0 &&
        file.record_dp.budgets == DPFL_BUDGETS_NONE)
        key = "record_dp.target_epsilon", target = file.record_dp.target_epsilon;
    else if (file.client_dp.enabled && file.client_dp.noise == 0 && file.client_dp.target_epsilon > 0 &&
             file.client_dp.clip_strategy != DPFL_CLIP_MEDIAN)
        key = "client_dp.target_epsilon", target = file.client_dp.target_epsilon;
    if (!key) return 0;
    return cli_error("--resume --set fl.rounds=%d: this run's noise was calibrated so that its %d rounds fit %s = %g, "
                     "and more rounds would pass it; start a new run with fl.rounds = %d instead",
                     (int)cfg->fl.rounds, (int)file.fl.rounds, key, target, (int)cfg->fl.rounds);
}

void cli_scale_hint(const dpfl_config *cfg)
{
    if (cfg->data.normalize != DPFL_NORM_NONE || cfg->data.kind != DPFL_DATASET_CSV) return;
    dpfl_dataset train, test;
    dpfl_error err;
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    if (dpfl_config_load_data(cfg, cfg->run.seed.value, &train, &test, &err)) return; /* the run says what is wrong */
    char msg[512];
    if (dpfl_config_scale_hint(cfg, &train, msg, sizeof msg)) fprintf(stderr, "dpfl: warning: %s\n", msg);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
}

static int resume_config(const char *dir, char *config_path, size_t cap)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) return cli_error("--resume %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return cli_error("--resume %s: not a folder (give the run folder dpfl train wrote)", dir);
    if ((size_t)snprintf(config_path, cap, "%s/config.ini", dir) >= cap) return cli_error("--resume: path too long");
    if (stat(config_path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return cli_error("--resume %s: not a run folder (no config.ini, which dpfl train writes when a run starts); "
                         "start a run with dpfl train CONFIG.ini --out %s", dir, dir);
    return 0;
}

int cli_run_config(const char *cmd, const char *config_path, const char *resume, const cli_strings *unsets,
                   const cli_strings *sets, const char **out, int force, dpfl_config *cfg, cli_run_paths *paths)
{
    if (resume) {
        if (config_path) return cli_usage_error(cmd, "give either CONFIG.ini or --resume RUN_DIR, not both");
        if (*out) return cli_usage_error(cmd, "--out cannot be used with --resume");
        if (force) return cli_usage_error(cmd, "--force cannot be used with --resume");
        int rc = resume_config(resume, paths->config, sizeof paths->config);
        if (rc) return rc;
        config_path = paths->config;
        *out = resume;
    }
    if (!config_path) return cli_usage_error(cmd, "missing CONFIG.ini");
    int rc = cli_config_read(cfg, config_path, unsets, sets, resume != NULL);
    if (!rc && resume) rc = resume_rounds(cfg, config_path);
    if (rc) return rc;
    if (!*out) {
        const char *base = strrchr(config_path, '/');
        base = base ? base + 1 : config_path;
        snprintf(paths->out, sizeof paths->out, "runs/%.*s", (int)strcspn(base, "."), base);
        *out = paths->out;
    }
    return 0;
}
