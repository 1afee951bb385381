/* What a binding without the C headers needs around dpfl_run (dpfl/run.h, python/dpfl/train.py): configs on the heap,
 * the layouts of the run driver's structs it declares again (checked at import, as dpfl_abi_layout checks the
 * accountants'), and a run's model.bin as the PyTorch-named .npz of dpfl export.  Nothing here decides anything:
 * the binding reaches the same parsing, validation and run as the command line.
 * Reference: McMahan et al. 2017 (FedAvg) for the run these wrap; docs/python.md. */
#include "dpfl/run.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_config_create(const char *ini_path, dpfl_config **out, dpfl_error *err)
{
    dpfl_config *c = malloc(sizeof *c);
    *out = NULL;
    if (!c) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (config)");
    dpfl_config_defaults(c);
    dpfl_status st = ini_path ? dpfl_config_load(c, ini_path, err) : DPFL_OK;
    if (st) free(c);
    else *out = c;
    return st;
}

void dpfl_config_destroy(dpfl_config *c)
{
    free(c);
}

void dpfl_text_free(char *text)
{
    free(text);
}

typedef struct {
    const char *type, *field;
    size_t value;
} run_abi_entry;

#define SIZE(T) {#T, NULL, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f)}

static const run_abi_entry table[] = {
    SIZE(dpfl_run_options), FIELD(dpfl_run_options, out_dir), FIELD(dpfl_run_options, quiet),
    FIELD(dpfl_run_options, resume), FIELD(dpfl_run_options, force), FIELD(dpfl_run_options, on_round),
    FIELD(dpfl_run_options, on_round_ctx), FIELD(dpfl_run_options, train), FIELD(dpfl_run_options, test),
    FIELD(dpfl_run_options, stop),
    SIZE(dpfl_run_round), FIELD(dpfl_run_round, round), FIELD(dpfl_run_round, rounds),
    FIELD(dpfl_run_round, participants), FIELD(dpfl_run_round, train_loss), FIELD(dpfl_run_round, test_accuracy),
    FIELD(dpfl_run_round, test_loss), FIELD(dpfl_run_round, record_epsilon), FIELD(dpfl_run_round, client_epsilon),
    FIELD(dpfl_run_round, wall_seconds), FIELD(dpfl_run_round, metrics_line),
    SIZE(dpfl_dataset), FIELD(dpfl_dataset, n), FIELD(dpfl_dataset, c), FIELD(dpfl_dataset, h),
    FIELD(dpfl_dataset, w), FIELD(dpfl_dataset, dim), FIELD(dpfl_dataset, classes), FIELD(dpfl_dataset, x),
    FIELD(dpfl_dataset, y), FIELD(dpfl_dataset, groups), FIELD(dpfl_dataset, group), FIELD(dpfl_dataset, absent),
};

long dpfl_run_abi_layout(const char *type, const char *field)
{
    if (!type) return -1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const run_abi_entry *e = &table[i];
        if (strcmp(e->type, type)) continue;
        if (field ? e->field && !strcmp(e->field, field) : !e->field) return (long)e->value;
    }
    return -1;
}

dpfl_status dpfl_model_file_export_npz(const char *model_path, const char *npz_path, dpfl_error *err)
{
    char spec[512];
    float *params = NULL;
    size_t nparam = 0;
    int32_t shape[4];
    dpfl_input_standardization std;
    dpfl_status st = dpfl_model_file_read_all(model_path, spec, sizeof spec, &params, &nparam, shape, &std, err);
    if (st) return st;
    if (!shape[0]) {
        dpfl_free(params);
        dpfl_input_standardization_free(&std);
        return dpfl_fail(err, DPFL_EFORMAT, "model %s: written before model files stored their input shape; export it "
                                            "with dpfl export --data DATASET", model_path);
    }
    /* the logits are the classes, but for the 1 logit of a 2-class model */
    const int32_t tries[2] = {shape[3], shape[3] == 1 ? 2 : 0};
    st = dpfl_fail(err, DPFL_EFORMAT, "model %s: '%s' for input %dx%dx%d and %d outputs (stored in the file) does not "
                   "have the file's %zu parameters", model_path, spec, shape[0], shape[1], shape[2], shape[3], nparam);
    for (int i = 0; i < 2 && tries[i]; i++) {
        dpfl_model m;
        dpfl_error e2;
        if (dpfl_model_create(spec, shape[0], shape[1], shape[2], tries[i], &m, &e2)) continue;
        if (m.nparam == nparam && m.out_dim == shape[3])
            st = dpfl_model_export_npz(&m, params, tries[i], &std, npz_path, err);
        dpfl_model_free(&m);
        if (st == DPFL_OK) break;
    }
    dpfl_free(params);
    dpfl_input_standardization_free(&std);
    return st;
}
