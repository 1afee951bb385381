/* The run driver behind `dpfl train`: data, partition, model, rounds, and the run directory
 * (config.ini, metrics.jsonl, summary.json, model.bin). */
#include "dpfl/fl.h"

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

static cJSON *round_json(const dpfl_round_metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", m->round);
    cJSON_AddNumberToObject(o, "clients", m->clients);
    cJSON_AddNumberToObject(o, "examples", (double)m->examples);
    json_num(o, "train_loss", m->train_loss);
    json_num(o, "test_accuracy", m->test_accuracy);
    json_num(o, "test_loss", m->test_loss);
    if (isfinite(m->client_acc_mean)) {
        json_num(o, "client_accuracy_mean", m->client_acc_mean);
        json_num(o, "client_accuracy_std", m->client_acc_std);
    }
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
    FILE *metrics = NULL;
    char *ini = NULL;
    char path[1100];

    if ((st = make_dirs(opt->out_dir, err))) return st;
    if ((st = dpfl_dataset_load(cfg->dataset, cfg->data_dir, seed, &train, &test, err))) goto done;
    dpfl_partition_spec spec;
    if ((st = partition_spec(cfg, &spec, err))) goto done;
    dpfl_rng prng;
    dpfl_rng_derive(&root, &prng, 0, 0, PURPOSE_PARTITION);
    if ((st = dpfl_partition_make(&train, &test, &spec, &prng, &part, err))) goto done;
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
    if ((st = dpfl_file_write_text(path, ini, strlen(ini), err))) goto done;
    snprintf(path, sizeof path, "%s/metrics.jsonl", opt->out_dir);
    if (!(metrics = fopen(path, "w"))) {
        st = dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
        goto done;
    }
    if ((st = dpfl_sim_create(cfg, &model, &train, &test, &part, &root, global, &sim, err))) goto done;

    const int show = !opt->quiet && isatty(2);
    dpfl_round_metrics m = {0}, last_eval = {0};
    last_eval.test_accuracy = last_eval.test_loss = NAN;
    for (int32_t r = 1; r <= cfg->rounds; r++) {
        if ((st = dpfl_sim_round(sim, r, &m, err))) goto done;
        if (r % cfg->eval_every == 0 || r == cfg->rounds) {
            dpfl_sim_evaluate(sim, &m);
            last_eval = m;
        }
        cJSON *o = round_json(&m);
        char *line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!line || fprintf(metrics, "%s\n", line) < 0 || fflush(metrics) != 0) {
            free(line);
            st = dpfl_fail(err, DPFL_EIO, "cannot write (%s/metrics.jsonl)", opt->out_dir);
            goto done;
        }
        free(line);
        if (show) progress(&m, cfg->rounds, last_eval.test_accuracy);
    }
    if (show) fputc('\n', stderr);

    snprintf(path, sizeof path, "%s/model.bin", opt->out_dir);
    if ((st = dpfl_model_save(&model, global, path, err))) goto done;
    cJSON *sum = cJSON_CreateObject();
    json_num(sum, "test_accuracy", last_eval.test_accuracy);
    json_num(sum, "test_loss", last_eval.test_loss);
    if (isfinite(last_eval.client_acc_mean)) {
        json_num(sum, "client_accuracy_mean", last_eval.client_acc_mean);
        json_num(sum, "client_accuracy_std", last_eval.client_acc_std);
    }
    cJSON_AddNumberToObject(sum, "rounds", cfg->rounds);
    cJSON_AddNumberToObject(sum, "wall_seconds", m.wall_seconds);
    cJSON_AddStringToObject(sum, "config_sha256", sha);
    if (cfg->seed[0]) {
        cJSON_AddNumberToObject(sum, "seed", (double)seed);
        cJSON_AddStringToObject(sum, "randomness", "reproducible mode (fixed seed) - not for deployment");
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
    if (!st && !opt->quiet)
        fprintf(stderr, "dpfl: %d rounds, test accuracy %.4f, %.1f s; run written to %s\n", cfg->rounds,
                last_eval.test_accuracy, m.wall_seconds, opt->out_dir);
done:
    if (metrics) fclose(metrics);
    dpfl_sim_free(sim);
    dpfl_free(global);
    free(ini);
    dpfl_model_free(&model);
    dpfl_partition_free(&part);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    return st;
}
