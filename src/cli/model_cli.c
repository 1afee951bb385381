#include "model_cli.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cli_model_open(const char *arg, cli_model *cm)
{
    memset(cm, 0, sizeof *cm);
    dpfl_config_defaults(&cm->cfg);
    struct stat sb;
    size_t len = strlen(arg);
    while (len > 1 && arg[len - 1] == '/') len--;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(cm->model_path, sizeof cm->model_path, "%.*s/model.bin", (int)len, arg);
        snprintf(cm->config_path, sizeof cm->config_path, "%.*s/config.ini", (int)len, arg);
    } else {
        snprintf(cm->model_path, sizeof cm->model_path, "%s", arg);
        const char *slash = strrchr(arg, '/');
        if (slash) snprintf(cm->config_path, sizeof cm->config_path, "%.*s/config.ini", (int)(slash - arg + 1), arg);
        else snprintf(cm->config_path, sizeof cm->config_path, "config.ini");
    }
    dpfl_error err;
    if (dpfl_model_file_read_all(cm->model_path, cm->spec, sizeof cm->spec, &cm->params, &cm->nparam, cm->shape,
                                 &cm->std, &err))
        return cli_error("%s", err.msg);
    if (stat(cm->config_path, &sb) == 0) {
        if (dpfl_config_load(&cm->cfg, cm->config_path, &err)) {
            cli_model_close(cm);
            return cli_error("%s (the run's config beside %s)", err.msg, cm->model_path);
        }
        cm->have_config = 1;
    }
    return 0;
}

void cli_model_close(cli_model *cm)
{
    dpfl_free(cm->params);
    cm->params = NULL;
    dpfl_input_standardization_free(&cm->std);
}

/* train and test standardized as the model file records (loaded raw first) */
static int load_recorded(const cli_model *cm, dpfl_config *c2, uint64_t seed, const char *name, dpfl_dataset *train,
                         dpfl_dataset *test)
{
    dpfl_error err;
    c2->data.normalize = DPFL_NORM_NONE;
    if (dpfl_config_load_data(c2, seed, train, test, &err)) return cli_error("%s", err.msg);
    const dpfl_input_standardization *s = &cm->std;
    if (dpfl_dataset_standardize_as(train, s->mean, s->std, s->n, &err) ||
        dpfl_dataset_standardize_as(test, s->mean, s->std, s->n, &err)) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
        return cli_error("model %s was trained on standardized inputs and %s does not fit them: %s", cm->model_path,
                         name, err.msg);
    }
    return 0;
}

/* train and test standardized (standard) as the run's config says: the published constants of the dataset the
 * model was trained on (whatever --data names), or the run's own data.feature_mean / feature_std */
static int load_configured(const char *cmd, const cli_model *cm, dpfl_config *c2, uint64_t seed, const char *name,
                           int standard, dpfl_dataset *train, dpfl_dataset *test)
{
    const dpfl_config *cfg = cm->have_config ? &cm->cfg : NULL;
    const char *run_data = cfg ? cfg->data.dataset : NULL;
    const char *constants = run_data && !dpfl_dataset_is_files(run_data) ? run_data : !run_data ? name : NULL;
    const int published = standard && constants && !dpfl_dataset_is_files(constants);
    if (standard && !published && !(cfg && cfg->data.feature_mean.n))
        return cli_usage_error(cmd, "--normalize standard: %s has no published constants and no run config with "
                                    "data.feature_mean / feature_std", name);
    c2->data.normalize = standard && !published ? DPFL_NORM_STANDARD : DPFL_NORM_NONE;
    dpfl_error err;
    if (dpfl_config_load_data(c2, seed, train, test, &err)) return cli_error("%s", err.msg);
    if (published && (dpfl_dataset_standardize(constants, train, &err) || dpfl_dataset_standardize(constants, test, &err))) {
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
        return cli_error("%s", err.msg);
    }
    return 0;
}

int cli_model_dataset(const char *cmd, const cli_model *cm, const cli_data_opts *o, dpfl_dataset *train,
                      dpfl_dataset *test, const char **name, int *standardized)
{
    const dpfl_config *cfg = cm->have_config ? &cm->cfg : NULL;
    const char *run_data = cfg ? cfg->data.dataset : NULL;
    *name = o->data ? o->data : run_data;
    if (!*name)
        return cli_usage_error(cmd, "%s has no config.ini beside it: give the dataset with --data", cm->model_path);
    /* the run's [data] section (its csv: columns, header, test set, constants ...) with the options over it */
    static dpfl_config c2; /* big: not on the stack */
    if (cfg) c2 = *cfg;
    else dpfl_config_defaults(&c2);
    if (o->data) { /* through the key, so that the dataset's kind and files are typed as a config file's are */
        char assignment[sizeof c2.data.dataset + 16];
        dpfl_error e = {{0}};
        if (strlen(o->data) >= sizeof c2.data.dataset) return cli_usage_error(cmd, "--data: too long");
        snprintf(assignment, sizeof assignment, "data.dataset=%s", o->data);
        if (dpfl_config_set(&c2, assignment, &e)) { /* the key's reason, said of --data */
            const char *key = "data.dataset (--set): ";
            return cli_usage_error(cmd, "--data: %s", strncmp(e.msg, key, strlen(key)) ? e.msg : e.msg + strlen(key));
        }
        c2.data.source_rows.n = 0; /* other files: the run's row counts do not apply */
    }
    if (o->data_dir) snprintf(c2.data.data_dir, sizeof c2.data.data_dir, "%s", o->data_dir);
    uint64_t seed = cfg && cfg->run.seed.given ? cfg->run.seed.value : 0; /* without run.seed: loaded with 0 */
    const char *seed_s = o->seed;
    if (seed_s) {
        char *end;
        seed = strtoull(seed_s, &end, 10);
        if (end == seed_s || *end || seed_s[0] == '-') return cli_usage_error(cmd, "--seed: '%s' is not a seed", seed_s);
    }
    /* the standardization model.bin records (since version 3), else the run's config's */
    const int recorded = cm->std.n >= 0;
    int standard = recorded ? cm->std.n > 0 : cfg && cfg->data.normalize == DPFL_NORM_STANDARD;
    if (o->normalize) {
        if (!strcmp(o->normalize, "standard")) standard = 1;
        else if (!strcmp(o->normalize, "none")) standard = 0;
        else return cli_usage_error(cmd, "--normalize: '%s' is not none or standard", o->normalize);
    }
    int rc = standard && recorded && cm->std.n > 0 ? load_recorded(cm, &c2, seed, *name, train, test)
                                                   : load_configured(cmd, cm, &c2, seed, *name, standard, train, test);
    if (rc) return rc;
    if (dpfl_dataset_absent_count(train)) {
        int32_t k = dpfl_dataset_absent_count(train);
        dpfl_dataset_free(train);
        dpfl_dataset_free(test);
        return cli_error("data.dataset: %d of its files are not here (data.source_rows); give the data to use with "
                         "--data", k);
    }
    *standardized = standard;
    return 0;
}

int cli_model_build(const cli_model *cm, const dpfl_dataset *d, int32_t classes, const char *dname, dpfl_model *m)
{
    dpfl_error err;
    if (dpfl_model_create(cm->spec, d->c, d->h, d->w, classes, m, &err))
        return cli_error("model %s does not fit dataset %s (%dx%dx%d, %d classes): %s", cm->model_path, dname,
                         (int)d->c, (int)d->h, (int)d->w, (int)classes, err.msg);
    if (m->nparam != cm->nparam) {
        cli_error("model %s does not fit dataset %s (%dx%dx%d, %d classes): '%s' has %zu parameters there, the file "
                  "%zu", cm->model_path, dname, (int)d->c, (int)d->h, (int)d->w, (int)classes, cm->spec, m->nparam,
                  cm->nparam);
        dpfl_model_free(m);
        return 1;
    }
    return 0;
}

int cli_model_build_stored(const cli_model *cm, dpfl_model *m, int32_t *classes)
{
    if (!cm->shape[0]) return -1;
    /* the logits are the classes, but for the 1 logit of a 2-class model */
    const int32_t tries[2] = {cm->shape[3], cm->shape[3] == 1 ? 2 : 0};
    dpfl_error err;
    for (int i = 0; i < 2 && tries[i]; i++) {
        if (dpfl_model_create(cm->spec, cm->shape[0], cm->shape[1], cm->shape[2], tries[i], m, &err)) continue;
        if (m->nparam == cm->nparam && m->out_dim == cm->shape[3]) {
            *classes = tries[i];
            return 0;
        }
        dpfl_model_free(m);
    }
    return cli_error("model %s: '%s' for input %dx%dx%d and %d outputs (stored in the file) does not have the file's "
                     "%zu parameters", cm->model_path, cm->spec, (int)cm->shape[0], (int)cm->shape[1],
                     (int)cm->shape[2], (int)cm->shape[3], cm->nparam);
}
