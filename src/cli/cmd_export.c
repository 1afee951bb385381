/* dpfl export MODEL.bin|RUN_DIR [--format npz] [-o OUT.npz] [--force] [--data DATASET] */
#include "args.h"
#include "cli.h"
#include "model_cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* the .npz of m (model cm) at out; frees m */
static int write_npz(const cli_model *cm, dpfl_model *m, int32_t classes, const char *out)
{
    dpfl_error err;
    int rc = 0;
    if (dpfl_model_export_npz(m, cm->params, classes, &cm->std, out, &err)) rc = cli_error("%s", err.msg);
    else fprintf(stderr, "dpfl: %s (%zu parameters) exported to %s\n", cm->spec, cm->nparam, out);
    dpfl_model_free(m);
    return rc;
}

/* write the model at arg as an .npz archive at out (NULL: beside it), shaped as model.bin says (or by the data
 * `from` names) */
static int export_model(const char *arg, cli_data_opts from, const char *format, const char *out, int force)
{
    if (strcmp(format, "npz")) return cli_usage_error("export", "--format: '%s' is not a format (npz is)", format);
    cli_model cm;
    int rc = cli_model_open(arg, &cm);
    if (rc) return rc;
    char outbuf[1200];
    if (!out) {
        size_t len = strlen(cm.model_path);
        if (len > 4 && !strcmp(cm.model_path + len - 4, ".bin")) len -= 4;
        snprintf(outbuf, sizeof outbuf, "%.*s.npz", (int)len, cm.model_path);
        out = outbuf;
    }
    struct stat sb;
    if (!force && stat(out, &sb) == 0) {
        cli_model_close(&cm);
        return cli_error("%s exists: use --force to replace it, or -o for another file", out);
    }
    dpfl_model m;
    int32_t classes = 0;
    /* the shape stored in model.bin, unless --data names the data to shape it by (or the file predates it) */
    if (!from.data && (rc = cli_model_build_stored(&cm, &m, &classes)) >= 0) {
        if (!rc) rc = write_npz(&cm, &m, classes, out);
        cli_model_close(&cm);
        return rc;
    }
    dpfl_dataset train, test;
    const char *dname;
    int standardized;
    from.normalize = "none"; /* only the shape matters */
    if ((rc = cli_model_dataset("export", &cm, &from, &train, &test, &dname, &standardized))) {
        cli_model_close(&cm);
        return rc;
    }
    classes = train.classes > test.classes ? train.classes : test.classes;
    if (!(rc = cli_model_build(&cm, &test, classes, dname, &m))) {
        rc = write_npz(&cm, &m, classes, out);
    }
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    cli_model_close(&cm);
    return rc;
}

int cli_export(int argc, char **argv)
{
    const char *format = "npz", *out = NULL;
    cli_data_opts d = {0};
    int force = 0;
    cli_opt o[] = {
        {.name = "--format", .type = CLI_STRING, .out = &format, .value = "npz", .help = "the format (npz is the only one)"},
        {.name = "--out", .alias = "-o", .type = CLI_STRING, .out = &out, .value = "FILE",
         .help = "the archive (default: model.npz beside model.bin: MODEL.bin with .npz for .bin);\n"
                 "written atomically, an existing file only replaced with --force"},
        {.name = "--force", .type = CLI_FLAG, .out = &force, .help = "replace an existing archive"},
        {.name = "--data", .type = CLI_STRING, .out = &d.data, .value = "DATASET",
         .help = "the dataset that fixes the input shape (needed only for a model.bin written before\n"
                 "dpfl stored the shape in it)"},
        {.name = "--data-dir", .type = CLI_STRING, .out = &d.data_dir, .value = "DIR",
         .help = "where that dataset is read (as for dpfl eval)"},
        {.name = "--seed", .type = CLI_STRING, .out = &d.seed, .value = "N",
         .help = "the seed it is read with (as for dpfl eval)"},
    };
    cli_command cmd = {
        .name = "export",
        .usage = "dpfl export MODEL.bin|RUN_DIR [--format npz] [-o OUT.npz] [--force] [--data DATASET]\n"
                 "                  [--data-dir DIR] [--seed N]",
        .about = "Writes the parameters of a trained model (the model.bin of dpfl train: the global model) as a NumPy .npz\n"
                 "archive that numpy.load reads without dpfl: an uncompressed ZIP of .npy arrays ('<f4', C order), one per\n"
                 "parameter tensor, named and shaped as the state_dict of the equivalent PyTorch nn.Sequential, with dpfl's\n"
                 "layer indices (a Flatten dpfl puts before the first Linear after image input is a layer):\n"
                 "  <i>.weight, <i>.bias   Linear (out, in) and (out,); Conv2d (out, in, k, k) and (out,)\n"
                 "  0.scale, 0.shift       a PrivateFL input transform's global copy: (C,) per channel, (C, H, W) per pixel\n"
                 "  dpfl_spec              the architecture spec, a 0-d unicode string: str(npz['dpfl_spec'])\n"
                 "  dpfl_input_shape       C, H, W of one example (int32); dpfl_classes: the number of classes (int32)\n"
                 "Inputs are NCHW and flattened channel-major, as in dpfl; logits = x @ weight.T + bias for Linear.  The\n"
                 "input shape and classes are stored in model.bin: no data is read (a model trained on CSV files exports\n"
                 "where the files are not).  A model.bin written before dpfl stored them takes the shape from the dataset\n"
                 "of the run's config.ini (beside model.bin), or --data.\n",
        .after = "The bytes depend only on the model (fixed ZIP timestamps).\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "MODEL.bin or RUN_DIR",
        .min_args = 1,
        .max_args = 1,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    rc = export_model(cmd.arg.v[0], d, format, out, force);
    cli_done(&cmd);
    return rc;
}
