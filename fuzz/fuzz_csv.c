/* Comma-separated files (src/data/csv.c): dpfl_csv_load, and the UCI heart-disease loader built on the same
 * table reader (src/data/heart.c, dpfl_heart_load: four processed.<centre>.data files).
 * Input: byte 0 = mode.  Bit 0 clear: one CSV file (the rest of the input) loaded with has_header = bit 1,
 * drop_missing = bit 2 and label column = byte 1 as a signed number (negative counts from the end).
 * With bit 3 also set, the same file through the own-data loader (src/data/files.c, "csv:FILE") instead: header
 * = (byte 0 >> 4) % 3 - 1 (auto, no, yes), features "0" when bit 6 is set (else every other column), the label
 * column byte 1 written as a number, a held-out test fraction of 0.3.
 * Bit 0 set: the heart loader on the rest of the input split at '|' into the four centres' files (a missing
 * part is an empty file). */
#include "dpfl/data.h"
#include "fuzz_common.h"

static void check(dpfl_status s, const dpfl_dataset *d, const dpfl_error *err)
{
    if (s == DPFL_OK) {
        if (d->n <= 0 || d->dim <= 0 || d->classes < 1) abort();
    } else if (!err->msg[0]) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const int mode = data[0];
    dpfl_error err = {{0}};
    if (!(mode & 1)) {
        const int label_col = (int8_t)data[1];
        const char *path = fuzz_path("table.csv");
        fuzz_write(path, data + 2, size - 2, 0);
        dpfl_dataset d;
        if (mode & 8) {
            char label[8], spec[4200];
            snprintf(label, sizeof label, "%d", label_col);
            snprintf(spec, sizeof spec, "csv:%s", path);
            dpfl_file_options o;
            dpfl_file_options_default(&o);
            o.header = (mode >> 4) % 3 - 1;
            o.drop_missing = (mode >> 2) & 1;
            o.label = label;
            o.features = (mode & 0x40) ? "0" : NULL;
            o.test_fraction = 0.3;
            dpfl_dataset te;
            dpfl_status s = dpfl_dataset_load_files(spec, &o, 3, &d, &te, &err);
            check(s, &d, &err);
            if (s == DPFL_OK) {
                check(s, &te, &err);
                if (te.dim != d.dim || te.classes != d.classes || d.classes < 2 || d.groups != 1) abort();
                dpfl_dataset_free(&d);
                dpfl_dataset_free(&te);
            }
            return 0;
        }
        dpfl_status s = dpfl_csv_load(path, label_col, (mode >> 1) & 1, (mode >> 2) & 1, &d, &err);
        check(s, &d, &err);
        if (s == DPFL_OK) dpfl_dataset_free(&d);
        return 0;
    }
    static const char *const names[4] = {"processed.cleveland.data", "processed.hungarian.data",
                                         "processed.switzerland.data", "processed.va.data"};
    const uint8_t *p = data + 1, *end = data + size;
    for (int c = 0; c < 4; c++) {
        const uint8_t *bar = p < end ? memchr(p, '|', (size_t)(end - p)) : NULL;
        const uint8_t *stop = bar ? bar : end;
        fuzz_write(fuzz_path(names[c]), p, (size_t)(stop - p), 0);
        p = bar ? bar + 1 : end;
    }
    dpfl_dataset tr, te;
    dpfl_status s = dpfl_heart_load(fuzz_tmpdir(), 7, &tr, &te, &err);
    check(s, &tr, &err);
    if (s == DPFL_OK) {
        check(s, &te, &err);
        if (tr.dim != 13 || tr.groups != 4) abort();
        dpfl_dataset_free(&tr);
        dpfl_dataset_free(&te);
    }
    return 0;
}
