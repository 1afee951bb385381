/* NumPy arrays (src/data/npy.c): dpfl_npy_load on an X and a Y .npy file, and dpfl_npz_load on an .npz archive.
 * Input: byte 0 = mode (bit 0: the rest is one .npz archive; else bytes 1-2 = length of X's file, little-endian,
 * clamped, then X's file, then Y's file).  A successful load must give a consistent dataset; a failure must say
 * why (one line). */
#include "dpfl/data.h"
#include "fuzz_common.h"

#include <math.h>

static void check(const dpfl_dataset *d)
{
    if (d->n <= 0 || d->dim != d->c * d->h * d->w || d->dim <= 0) abort();
    for (int64_t i = 0; i < (int64_t)d->n * d->dim; i++)
        if (!isfinite(d->x[i])) abort();
    for (int32_t i = 0; i < d->n; i++)
        if (d->y[i] < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    const int mode = data[0];
    dpfl_dataset a, b;
    dpfl_error err = {{0}};
    dpfl_status st;
    if (mode & 1) {
        const char *z = fuzz_path("a.npz");
        fuzz_write(z, data + 1, size - 1, 0);
        int has = 0;
        st = dpfl_npz_load(z, NULL, NULL, &a, &b, &has, &err);
        if (st == DPFL_OK) {
            check(&a);
            if (has) check(&b), dpfl_dataset_free(&b);
            dpfl_dataset_free(&a);
        }
    } else {
        size_t nx = (size_t)data[1] | (size_t)data[2] << 8;
        data += 3, size -= 3;
        if (nx > size) nx = size;
        const char *x = fuzz_path("x.npy"), *y = fuzz_path("y.npy");
        fuzz_write(x, data, nx, 0);
        fuzz_write(y, data + nx, size - nx, 0);
        st = dpfl_npy_load(x, y, &a, &err);
        if (st == DPFL_OK) check(&a), dpfl_dataset_free(&a);
    }
    if (st != DPFL_OK && (!err.msg[0] || strchr(err.msg, '\n'))) abort();
    return 0;
}
