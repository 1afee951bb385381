/* CIFAR binary batches (src/data/cifar.c): dpfl_cifar_load on a folder holding the input as every CIFAR-10 batch
 * file (byte 0 bit 0 clear) or as CIFAR-100's train.bin and test.bin (bit 0 set).  A successful load must give
 * 3 x 32 x 32 examples with pixels in [0, 1] and labels below the class count; a failure must say why. */
#include "dpfl/data.h"
#include "fuzz_common.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int hundred = data[0] & 1;
    const char *names10[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin", "test_batch.bin"};
    const char *names100[] = {"train.bin", "test.bin"};
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s", fuzz_path(hundred ? "c100" : "c10"));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, hundred ? "cifar-100-binary" : "cifar-10-batches-bin");
    mkdir(path, 0755);
    for (int i = 0; i < (hundred ? 2 : 6); i++) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, hundred ? "cifar-100-binary" : "cifar-10-batches-bin",
                 hundred ? names100[i] : names10[i]);
        fuzz_write(path, data + 1, size - 1, 0);
    }
    dpfl_dataset tr, te;
    dpfl_error err = {{0}};
    if (dpfl_cifar_load(dir, hundred, &tr, &te, &err) == DPFL_OK) {
        if (tr.n <= 0 || te.n <= 0 || tr.dim != 3072 || te.dim != 3072) abort();
        for (int64_t i = 0; i < (int64_t)tr.n * 3072; i++)
            if (!(tr.x[i] >= 0.0f && tr.x[i] <= 1.0f)) abort();
        for (int32_t i = 0; i < tr.n; i++)
            if (tr.y[i] < 0 || tr.y[i] >= tr.classes) abort();
        dpfl_dataset_free(&tr), dpfl_dataset_free(&te);
    } else if (!err.msg[0] || strchr(err.msg, '\n')) {
        abort();
    }
    return 0;
}
