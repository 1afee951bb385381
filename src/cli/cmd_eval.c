/* dpfl eval MODEL.bin|RUN_DIR [--data DATASET] [--split test|train] [--data-dir DIR] [--seed N] [--json] */
#include "args.h"
#include "cli.h"
#include "model_cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* the accuracy and loss of the model at arg on the data `from` says */
static int eval(const char *arg, const cli_data_opts *from, const char *split, int json)
{
    if (strcmp(split, "test") && strcmp(split, "train"))
        return cli_usage_error("eval", "--split: '%s' is not test or train", split);
    cli_model cm;
    int rc = cli_model_open(arg, &cm);
    if (rc) return rc;
    dpfl_dataset train, test;
    const char *dname;
    int standardized;
    if ((rc = cli_model_dataset("eval", &cm, from, &train, &test, &dname, &standardized))) {
        cli_model_close(&cm);
        return rc;
    }
    const dpfl_dataset *d = strcmp(split, "test") ? &train : &test;
    dpfl_model m;
    double loss = 0, acc = 0;
    dpfl_error err;
    int32_t classes = train.classes > test.classes ? train.classes : test.classes;
    /* the classes the model was trained for (stored in model.bin), though other data may lack the last ones */
    const int32_t stored = cm.shape[3] == 1 ? 2 : cm.shape[3];
    if (stored > classes) classes = stored;
    if (!(rc = cli_model_build(&cm, d, classes, dname, &m))) {
        if (dpfl_evaluate(&m, cm.params, d, dpfl_eval_batch(cm.have_config ? &cm.cfg : NULL), &loss, &acc, &err))
            rc = cli_error("%s (%s on %s)", err.msg, cm.model_path, dname);
        dpfl_model_free(&m);
    }
    if (!rc && json) {
        cJSON *o = cJSON_CreateObject();
        char key[32]; /* summary.json's names: test_accuracy, test_loss (train_... for --split train) */
        snprintf(key, sizeof key, "%s_accuracy", split);
        cJSON_AddNumberToObject(o, key, acc);
        snprintf(key, sizeof key, "%s_loss", split);
        cJSON_AddNumberToObject(o, key, loss);
        cJSON_AddNumberToObject(o, "examples", d->n);
        cJSON_AddStringToObject(o, "dataset", dname);
        cJSON_AddStringToObject(o, "split", split);
        cJSON_AddBoolToObject(o, "standardized", standardized);
        cJSON_AddStringToObject(o, "model", cm.model_path);
        cJSON_AddStringToObject(o, "spec", cm.spec);
        char *s = cJSON_PrintUnformatted(o);
        if (s) puts(s);
        else rc = cli_error("out of memory");
        free(s);
        cJSON_Delete(o);
    } else if (!rc) {
        printf("accuracy %.4f  loss %.4f  examples %d  (%s %s split)\n", acc, loss, (int)d->n, dname, split);
    }
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    cli_model_close(&cm);
    return rc;
}

int cli_eval(int argc, char **argv)
{
    const char *split = "test";
    cli_data_opts d = {0};
    int json = 0;
    cli_opt o[] = {
        {.name = "--data", .type = CLI_STRING, .out = &d.data, .value = "DATASET",
         .help = "any name dpfl train accepts for data.dataset (mnist, fashion-mnist, heart, synthetic)"},
        {.name = "--split", .type = CLI_STRING, .out = &split, .value = "test|train",
         .help = "which split of it (default test)"},
        {.name = "--data-dir", .type = CLI_STRING, .out = &d.data_dir, .value = "DIR",
         .help = "where to look for the dataset (as data.data_dir)"},
        {.name = "--seed", .type = CLI_STRING, .out = &d.seed, .value = "N",
         .help = "the seed the data is loaded with (default: the run's run.seed, else 0)"},
        {.name = "--normalize", .type = CLI_STRING, .out = &d.normalize, .value = "none|standard",
         .help = "the preprocessing (default: as model.bin records it; for a file older than that, the\n"
                 "run's data.normalize, else none)"},
        {.name = "--json", .type = CLI_FLAG, .out = &json,
         .help = "one JSON object: test_accuracy, test_loss (summary.json's names; train_accuracy,\n"
                 "train_loss with --split train), examples, dataset, split, standardized, model, spec"},
    };
    cli_command cmd = {
        .name = "eval",
        .usage = "dpfl eval MODEL.bin|RUN_DIR [--data DATASET] [--split test|train] [--data-dir DIR] [--seed N]\n"
                 "                [--normalize none|standard] [--json]",
        .about = "Prints the accuracy and mean loss of a trained model (the model.bin of dpfl train) on a dataset:\n"
                 "  accuracy 0.9771  loss 0.0733  examples 10000  (mnist test split)\n"
                 "With a run directory, or a model.bin whose folder holds the run's config.ini, the data is read as the\n"
                 "run read it: its data.dataset, data.data_dir and run.seed (which fixes the split of heart and the\n"
                 "synthetic data); the options below override them.  On the run's own test set the numbers are\n"
                 "summary.json's test_accuracy and test_loss, computed by the same code (with --json, to the last digit).\n"
                 "A bare model.bin with no config.ini beside it needs --data.  model.bin stores the model's input shape,\n"
                 "classes and the standardization its inputs had in training (data.normalize = standard: the published\n"
                 "constants or data.feature_mean / feature_std): --data reads only that data, never the run's (which may\n"
                 "be elsewhere), and feeds it standardized as in training, whatever dataset --data names.\n\n"
                 "model.bin holds the global model only, and eval evaluates it, as summary.json's test_accuracy does.  With\n"
                 "a PrivateFL input transform (model.transform) that is the global model behind the global copy of the\n"
                 "transform; each client's own transform stays with the client and is not evaluated.  With PriFedSync's\n"
                 "helper models (fl.personalization = helper) likewise only the global model.\n",
        .after = "The model's architecture comes from the spec stored in model.bin; a dataset whose examples or classes do\n"
                 "not fit it fails naming the file.  A missing, foreign or corrupt model file fails with one line.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "MODEL.bin or RUN_DIR",
        .min_args = 1,
        .max_args = 1,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    rc = eval(cmd.arg.v[0], &d, split, json);
    cli_done(&cmd);
    return rc;
}
