/* IDX images + labels (src/data/idx.c, dpfl_idx_load), plain and gzip.
 * Input: byte 0 = flags (bit 0: gzip the images file, bit 1: gzip the labels file; the fuzzer can also write a
 * gzip stream of its own, since plain files are written as they are), bytes 1-2 = length of the images file
 * (little-endian, clamped to what is left), then the images file, then the labels file. */
#include "dpfl/data.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    const int flags = data[0];
    size_t ni = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (ni > size) ni = size;
    const char *img = fuzz_path("images"), *lab = fuzz_path("labels");
    fuzz_write(img, data, ni, flags & 1);
    fuzz_write(lab, data + ni, size - ni, flags & 2);
    dpfl_dataset d;
    dpfl_error err = {{0}};
    if (dpfl_idx_load(img, lab, &d, &err) == DPFL_OK) {
        if (d.n <= 0 || d.dim != d.h * d.w || d.classes < 1 || d.classes > 256) abort();
        dpfl_dataset_free(&d);
    } else if (!err.msg[0]) {
        abort(); /* an error must say what went wrong */
    }
    return 0;
}
