/* Budget files of `dpfl scf --budgets FILE` (src/privacy/budgets.c, dpfl_budgets_read, which cmd_scf.c calls):
 * the input is the file.  Every value read must be finite and > 0. */
#include "dpfl/privacy.h"
#include "fuzz_common.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("budgets.txt");
    fuzz_write(path, data, size, 0);
    double *v;
    size_t n;
    dpfl_error err = {{0}};
    if (dpfl_budgets_read(path, &v, &n, &err) != DPFL_OK) {
        if (!err.msg[0] || v || n) abort();
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!(v[i] > 0) || isinf(v[i])) abort();
    free(v);
    return 0;
}
