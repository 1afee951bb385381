/* The run checkpoint reader (src/run/checkpoint.c, fl_checkpoint_load), kept thin on purpose: the input becomes
 * <tmpdir>/checkpoint.bin and the loader runs with a small fixed run (4 parameters, 3 clients, no simulation,
 * i.e. fl.client_state = reset).  Byte 0 selects how: bit 0 set writes the rest of the input as the whole file
 * (the dpfl_file header and checksum checks); clear wraps the rest as the payload of a well-formed dpfl_file
 * (magic "DPCK", version FL_CKPT_VERSION - 1 + bit 1: the format before the current one, or the current one;
 * correct length and CRC-32) so the fuzzer
 * reaches the checkpoint layout.  Bit 2 makes the run one with per-record budgets (5 training records), so that
 * the budgets block is read too. */
#include "run/run_internal.h"
#include "fuzz_common.h"

#define NPARAM 4
#define CLIENTS 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int mode = data[0];
    const char *path = fuzz_path("checkpoint.bin");
    if (mode & 1) fuzz_write(path, data + 1, size - 1, 0);
    else fuzz_write_dpfl_file(path, 0x4b435044u /* "DPCK" */, FL_CKPT_VERSION - 1u + ((mode >> 1) & 1), data + 1, size - 1);
    dpfl_error err = {{0}};
    dpfl_ledger l;
    if (dpfl_ledger_init(&l, CLIENTS, &err) != DPFL_OK) abort();
    float params[NPARAM];
    run_state rs;
    char *line = NULL;
    fl_rpdp rp;
    memset(&rp, 0, sizeof rp);
    rp.on = (mode >> 2) & 1;
    rp.rec.n = 5;
    dpfl_status s = fl_checkpoint_load(fuzz_tmpdir(), params, NPARAM, &l, &rs, NULL, NULL, &rp, &line, &err);
    fl_rpdp_free(&rp);
    if (s == DPFL_OK) {
        if (!line) abort();
        free(line);
    } else if (!err.msg[0]) {
        abort();
    }
    dpfl_ledger_free(&l);
    return 0;
}
