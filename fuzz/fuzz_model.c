/* model.bin (src/nn/model_io.c, dpfl_model_load) for two small architectures, and dpfl_model_file_read (what dpfl eval
 * and dpfl export open a model with: any spec, any size).  Byte 0: bit 0 set writes the
 * rest of the input as the whole file; clear wraps it as the payload of a well-formed dpfl_file (magic "DPFM",
 * version 1, correct length and CRC-32).  Bit 1 picks the model: logreg or a small MLP on 2x2 inputs. */
#include "dpfl/nn.h"
#include "fuzz_common.h"

static dpfl_model models[2];
static float *params[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const specs[2] = {"logreg", "mlp:4-3-2"};
    for (int i = 0; i < 2; i++) {
        dpfl_error err;
        if (dpfl_model_create(specs[i], 1, 2, 2, 2, &models[i], &err) != DPFL_OK) {
            fprintf(stderr, "fuzz_model: %s\n", err.msg);
            abort();
        }
        params[i] = calloc(models[i].nparam, sizeof(float));
        if (!params[i]) abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int mode = data[0], which = (mode >> 1) & 1;
    const char *path = fuzz_path("model.bin");
    if (mode & 1) fuzz_write(path, data + 1, size - 1, 0);
    else fuzz_write_dpfl_file(path, 0x4D465044u /* "DPFM" */, 1u, data + 1, size - 1);
    dpfl_error err = {{0}};
    if (dpfl_model_load(&models[which], params[which], path, &err) != DPFL_OK && !err.msg[0]) abort();
    char spec[128];
    float *p = NULL;
    size_t n = 0;
    err.msg[0] = '\0';
    if (dpfl_model_file_read(path, spec, sizeof spec, &p, &n, &err) != DPFL_OK) {
        if (!err.msg[0] || p) abort();
    } else if (strlen(spec) >= sizeof spec || n * sizeof(float) > size || (n && !p)) {
        abort();
    } else {
        volatile float sum = 0; /* every parameter readable */
        for (size_t i = 0; i < n; i++) sum += p[i];
        (void)sum;
    }
    dpfl_free(p);
    return 0;
}
