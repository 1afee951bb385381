/* dpfl export MODEL.bin|RUN_DIR [--format npz] [-o OUT.npz] [--force] [--data DATASET] */
#include "args.h"
#include "cli.h"
#include "model_cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static void help(void)
{
    printf("usage: dpfl export MODEL.bin|RUN_DIR [--format npz] [-o OUT.npz] [--force] [--data DATASET]\n"
           "                  [--data-dir DIR] [--seed N]\n\n"
           "Writes the parameters of a trained model (the model.bin of dpfl train: the global model) as a NumPy .npz\n"
           "archive that numpy.load reads without dpfl: an uncompressed ZIP of .npy arrays ('<f4', C order), one per\n"
           "parameter tensor, named and shaped as the state_dict of the equivalent PyTorch nn.Sequential, with dpfl's\n"
           "layer indices (a Flatten dpfl puts before the first Linear after image input is a layer):\n"
           "  <i>.weight, <i>.bias   Linear (out, in) and (out,); Conv2d (out, in, k, k) and (out,)\n"
           "  0.scale, 0.shift       a PrivateFL input transform's global copy: (C,) per channel, (C, H, W) per pixel\n"
           "  dpfl_spec              the architecture spec, a 0-d unicode string: str(npz['dpfl_spec'])\n"
           "  dpfl_input_shape       C, H, W of one example (int32); dpfl_classes: the number of classes (int32)\n"
           "Inputs are NCHW and flattened channel-major, as in dpfl; logits = x @ weight.T + bias for Linear.  The\n"
           "architecture's input size comes from the dataset of the run's config.ini (beside model.bin), or --data.\n\n"
           "  --format npz      the format (npz is the only one)\n"
           "  -o, --out FILE    the archive (default: model.npz beside model.bin: MODEL.bin with .npz for .bin);\n"
           "                    written atomically, an existing file only replaced with --force\n"
           "  --data DATASET    the dataset that fixes the input shape (needed without a config.ini)\n"
           "  --data-dir DIR, --seed N   where and how that dataset is read (as for dpfl eval)\n\n"
           "The bytes depend only on the model (fixed ZIP timestamps).\n");
}

int cli_export(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    const char *arg = NULL, *format = "npz", *out = NULL;
    cli_data_opts o = {0};
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char **val = !strcmp(argv[i], "--data")                            ? &o.data
                           : !strcmp(argv[i], "--data-dir")                      ? &o.data_dir
                           : !strcmp(argv[i], "--seed")                          ? &o.seed
                           : !strcmp(argv[i], "--format")                        ? &format
                           : !strcmp(argv[i], "-o") || !strcmp(argv[i], "--out") ? &out
                                                                                 : NULL;
        if (val) {
            if (i + 1 >= argc) return cli_usage_error("export", "%s needs a value", argv[i]);
            *val = argv[++i];
        } else if (!strcmp(argv[i], "--force")) {
            force = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("export", "unknown option '%s'", argv[i]);
        } else if (arg) {
            return cli_usage_error("export", "more than one model given ('%s')", argv[i]);
        } else {
            arg = argv[i];
        }
    }
    if (!arg) return cli_usage_error("export", "missing MODEL.bin or RUN_DIR");
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
    dpfl_dataset train, test;
    const char *dname;
    int standardized;
    o.normalize = "none"; /* only the shape matters */
    if ((rc = cli_model_dataset("export", &cm, &o, &train, &test, &dname, &standardized))) {
        cli_model_close(&cm);
        return rc;
    }
    dpfl_model m;
    const int32_t classes = train.classes > test.classes ? train.classes : test.classes;
    if (!(rc = cli_model_build(&cm, &test, classes, dname, &m))) {
        dpfl_error err;
        if (dpfl_model_export_npz(&m, cm.params, classes, out, &err)) rc = cli_error("%s", err.msg);
        else fprintf(stderr, "dpfl: %s (%zu parameters) exported to %s\n", cm.spec, cm.nparam, out);
        dpfl_model_free(&m);
    }
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    cli_model_close(&cm);
    return rc;
}
