/* What dpfl eval and dpfl export share: a trained model named by its file or its run directory, the run's config
 * when there is one, and the dataset that fixes the model's input shape. */
#ifndef DPFL_CLI_MODEL_CLI_H
#define DPFL_CLI_MODEL_CLI_H
#include "dpfl/data.h"
#include "dpfl/fl.h"
#include "dpfl/nn.h"

typedef struct {
    char model_path[1100];  /* RUN_DIR/model.bin, or the file given */
    char config_path[1100]; /* config.ini beside it */
    int have_config;        /* 1: config_path exists and was loaded into cfg */
    dpfl_config cfg;
    char spec[128];         /* the architecture the file was saved with */
    float *params;
    size_t nparam;
    int32_t shape[4];       /* in_c, in_h, in_w, logits the model was built for; 0s: a file older than that */
    dpfl_input_standardization std; /* the standardization its inputs had (std.n = -1: not recorded in the file) */
} cli_model;

/* Open MODEL.bin or RUN_DIR (then RUN_DIR/model.bin) and the config.ini in the model file's folder, if any.
 * Returns 0, or prints the error and returns the exit status. */
int cli_model_open(const char *arg, cli_model *cm);
void cli_model_close(cli_model *cm);

/* Where the data comes from: the options given (NULL when absent) over the run's config. */
typedef struct {
    const char *data;      /* --data: a dataset name for dpfl_dataset_load */
    const char *data_dir;  /* --data-dir */
    const char *seed;      /* --seed */
    const char *normalize; /* --normalize none|standard */
} cli_data_opts;

/* Load the dataset (its train and test splits) the model is evaluated on or shaped by, standardized as the run
 * was (data.normalize = standard: with the constants of the run's dataset, whatever --data names).  *name gets the
 * dataset's name.  Returns 0 or the exit status (error printed). */
int cli_model_dataset(const char *cmd, const cli_model *cm, const cli_data_opts *o, dpfl_dataset *train,
                      dpfl_dataset *test, const char **name, int *standardized);

/* Build the model of cm's spec for examples shaped like d with `classes` classes and check that it has the file's
 * number of parameters.  Returns 0 or the exit status (error printed, naming the file and the dataset). */
int cli_model_build(const cli_model *cm, const dpfl_dataset *d, int32_t classes, const char *dname, dpfl_model *m);
/* Build the model of cm's spec from the shape stored in its file (no data needed); *classes gets its classes.
 * Returns 0, or -1 when the file predates stored shapes, or the exit status (error printed). */
int cli_model_build_stored(const cli_model *cm, dpfl_model *m, int32_t *classes);
#endif
