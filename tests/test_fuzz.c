/* Regression tests for what the libFuzzer harnesses (fuzz/) found, each with the input that found it, and for
 * the parser limits fixed with them. */
#include "testutil.h"
#include "dpfl/data.h"
#include "dpfl/fl.h"
#include "dpfl/privacy.h"
#include "run/run_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/dpfl-test-fuzz-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, 256, "%s/%s", tmpdir, name);
    return b;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* ------------------------------------------------------------------------------------------ checkpoint.bin */
/* fuzz_checkpoint: a version-1 checkpoint (well-formed file, correct CRC) whose event and line lengths overflow
 * the size check, so that garbage was read as client-level events; two equal ones with counts of -4.7e18 then
 * overflowed int64 (UBSan) when dpfl_ledger_charge_client merged them.  Payload after the
 * harness's mode byte; the harness's run: 4 parameters, 3 clients, no simulation. */
static const uint8_t ckpt_event_overflow[] = {
    0x7e, 0xce, 0x06, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x9a, 0x99, 0x99, 0x99, 0x91, 0x99, 0xf1, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x28, 0xf0, 0x3f, 0x02, 0x88, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0xbf, 0x04, 0x00, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x2b, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* The same attack on the current, explicit format (4): the crafted payload as the head of a format-4 file, and a
 * head claiming 2^62 events; then a well-sized file whose one event has a kind outside the enum.  Each is
 * "malformed", and no event reaches the ledger.  (The format-1 file itself is now refused as an older format.) */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void expect_malformed(const uint8_t *payload, size_t len, uint32_t version, const char *want)
{
    dpfl_error err = {{0}};
    assert_int_equal(dpfl_file_write(tpath("checkpoint.bin"), 0x4b435044u, version, payload, len, &err), DPFL_OK);
    dpfl_ledger l;
    assert_int_equal(dpfl_ledger_init(&l, 3, &err), DPFL_OK);
    float params[4];
    run_state rs;
    char *line = NULL;
    assert_int_equal(fl_checkpoint_load(tmpdir, params, 4, &l, &rs, NULL, NULL, NULL, &line, &err), DPFL_EFORMAT);
    if (!strstr(err.msg, want)) {
        print_error("'%s' does not say '%s'\n", err.msg, want);
        fail();
    }
    assert_null(line);
    assert_int_equal(l.nclient_events, 0);
    dpfl_ledger_free(&l);
}

static void checkpoint_with_bad_events_is_an_error(void **state)
{
    (void)state;
    expect_malformed(ckpt_event_overflow, sizeof ckpt_event_overflow, 1u, "older dpfl");
    expect_malformed(ckpt_event_overflow, sizeof ckpt_event_overflow, 9u, "malformed");
    /* format 9 (8 with the config digest; 7 with the client states in files of their own; 4 with helper-model flags,
     * the budgets block and the Skellam events' sensitivities): head (rounds, clients, nparam, 5 doubles/ints,
     * nevents, line_len, 64 partition bytes, 32 of the config digest) */
    uint8_t p[168 + 16 + 48 + 84 + 16 + 4] = {0}; /* head, params, ledger, one event (84 bytes), state head, no budgets */
    put_le(p, 1, 4);
    put_le(p + 4, 3, 4);
    put_le(p + 8, 4, 8);
    put_le(p + 56, (uint64_t)1 << 62, 8); /* nevents */
    expect_malformed(p, sizeof p, 9u, "malformed");
    put_le(p + 56, 1, 8);
    /* params (16 bytes), participations and steps (48), then one event whose kind is 77 */
    put_le(p + 168 + 16 + 48, 77, 4);
    expect_malformed(p, sizeof p, 9u, "malformed");
    /* the same file with a valid kind (a Gaussian event, count 0) loads: the kind alone made it malformed */
    put_le(p + 168 + 16 + 48, 0, 4);
    dpfl_error err;
    assert_int_equal(dpfl_file_write(tpath("checkpoint.bin"), 0x4b435044u, 9u, p, sizeof p, &err), DPFL_OK);
    dpfl_ledger l;
    assert_int_equal(dpfl_ledger_init(&l, 3, &err), DPFL_OK);
    float params[4];
    run_state rs;
    char *line = NULL;
    assert_int_equal(fl_checkpoint_load(tmpdir, params, 4, &l, &rs, NULL, NULL, NULL, &line, &err), DPFL_OK);
    free(line);
    dpfl_ledger_free(&l);
}

/* The merge itself: equal events whose counts would overflow are refused, whoever charges them. */
static void ledger_refuses_an_overflowing_event_count(void **state)
{
    (void)state;
    dpfl_error err;
    dpfl_ledger l;
    assert_int_equal(dpfl_ledger_init(&l, 2, &err), DPFL_OK);
    dpfl_event ev = dpfl_event_gaussian(1.0, INT64_MAX);
    assert_int_equal(dpfl_ledger_charge_client(&l, &ev, &err), DPFL_OK);
    ev.count = 1;
    assert_int_equal(dpfl_ledger_charge_client(&l, &ev, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "cannot be added"));
    assert_int_equal(l.nclient_events, 1);
    assert_true(l.client_events[0].count == INT64_MAX);
    dpfl_ledger_free(&l);
}

/* ------------------------------------------------------------------------------------------ config */
/* fuzz_config: a --set value with newlines was accepted and written into the resolved config.ini, where it
 * became other keys ("[client_dp]\nenabled = ...") when the run directory's config was read back. */
static const char config_set_newlines[] = "data.data_dir=/tm; comment\n[client_dp]\nenabled = y4es\nclip-_strategyadamwaptive\nnoise = 1.0\nquantile_noise = 0.6\nnoise_schedule = 110:1.0, 5:0.8\n[fl]\nsampling = fixed\nclients_pyer_round = 6\nclients_per_round_schedule = 1:5, 3:2\n[data";

static void config_string_values_must_survive_the_ini_file(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    assert_int_equal(dpfl_config_set(&c, config_set_newlines, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.data_dir (--set): value contains a control character (0x0a"));
    assert_int_equal(dpfl_config_set(&c, "data.data_dir=/tmp/a ;b", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "a ';' after a blank would start a comment"));
    /* fuzz_config, second finding: "[run]\nseed =; " gave seed ";", written back as "seed = ;" (a comment); the
     * seed is an integer now, and a text key still refuses a ';' that would start a comment */
    static const char seed_semicolon[] = "[run]\nseed =; ";
    write_file(tpath("seed.ini"), seed_semicolon, sizeof seed_semicolon - 1);
    assert_int_equal(dpfl_config_load(&c, tpath("seed.ini"), &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "run.seed ("));
    assert_non_null(strstr(err.msg, "seed.ini:2): ';' is not a non-negative integer"));
    assert_int_equal(dpfl_config_set(&c, "model.arch=;x", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "model.arch (--set): a ';' at the start of the value would start a comment"));
    assert_int_equal(dpfl_config_set(&c, "data.data_dir= /tmp/a", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "starts or ends with a blank"));
    /* longer than data_dir's field (lines themselves have no limit) */
    char a[300] = "data.data_dir=";
    memset(a + strlen(a), 'x', 260);
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "value is too long (max 255 characters)"));
    /* the longest allowed value (past inih's old 200-character lines) and an inner ';' round-trip exactly */
    a[14 + 255] = '\0';
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_OK);
    assert_int_equal(dpfl_config_set(&c, "model.arch=mlp:4-2;x", &err), DPFL_OK);
    char *ini = dpfl_config_to_ini(&c);
    assert_non_null(ini);
    write_file(tpath("resolved.ini"), ini, strlen(ini));
    dpfl_config c2;
    dpfl_config_defaults(&c2);
    assert_int_equal(dpfl_config_load(&c2, tpath("resolved.ini"), &err), DPFL_OK);
    assert_string_equal(c2.data.data_dir, a + 14);
    assert_string_equal(c2.model.arch, "mlp:4-2;x");
    free(ini);
}

/* A config line longer than inih's buffer was read in pieces (the value cut, the rest parsed as a line of its own),
 * then refused past 198 characters: now a line of any length is read whole, and a value may continue on indented
 * lines; what the field cannot hold is refused naming the line. */
static void config_long_line_is_read_whole(void **state)
{
    (void)state;
    char text[20000] = "[data]\ndata_dir = ";
    memset(text + strlen(text), 'y', 250);
    strcat(text, "\ndataset = csv:");
    for (int i = 0; i < 400; i++) strcat(text, i ? ", sites/s.csv" : "sites/s.csv"); /* 5,000 characters */
    strcat(text, "\nfeature_mean = 1, 2,\n  3, 4, ; a comment\n\t5\n");
    write_file(tpath("long.ini"), text, strlen(text));
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    if (dpfl_config_load(&c, tpath("long.ini"), &err)) fail_msg("%s", err.msg);
    assert_int_equal(strlen(c.data.data_dir), 250);
    assert_int_equal(strlen(c.data.dataset), 4 + 11 + 399 * 13);
    assert_int_equal(c.data.feature_mean.n, 5);
    assert_true(c.data.feature_mean.v[4] == 5);
    memset(text + 18, 'y', 300); /* data_dir longer than its field */
    write_file(tpath("long.ini"), text, strlen(text));
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, tpath("long.ini"), &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "long.ini:2): value is too long (max 255 characters)"));
}

/* ------------------------------------------------------------------------------------------ IDX */
/* A 16-byte IDX header promising 65,536 images of 4096x4096 made dpfl_idx_load allocate 4 TiB of floats before
 * reading a byte (an "out of memory" error for a truncated file; an allocation failure under the fuzzer). */
static void idx_header_promising_terabytes_is_a_truncation_error(void **state)
{
    (void)state;
    static const uint8_t img[16] = {0, 0, 8, 3, 0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x10, 0};
    static const uint8_t lab[8] = {0, 0, 8, 1, 0, 1, 0, 0};
    write_file(tpath("img"), img, sizeof img);
    write_file(tpath("lab"), lab, sizeof lab);
    dpfl_dataset d;
    dpfl_error err;
    assert_int_equal(dpfl_idx_load(tpath("img"), tpath("lab"), &d, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "truncated IDX file"));
    assert_non_null(strstr(err.msg, "header promises 1099511627776 bytes of pixels, only 0 present"));
    assert_null(d.x);
}

/* ------------------------------------------------------------------------------------------ budget files */
/* dpfl scf --budgets read lines through a 256-byte buffer: a longer line became two budgets. */
static void budgets_long_lines_and_nul_bytes(void **state)
{
    (void)state;
    char text[600] = "1.5";
    memset(text + 3, '0', 400);
    strcpy(text + 403, "7\n  # note\n\n2e-1 \r\n");
    write_file(tpath("budgets.txt"), text, strlen(text));
    double *v;
    size_t n;
    dpfl_error err;
    assert_int_equal(dpfl_budgets_read(tpath("budgets.txt"), &v, &n, &err), DPFL_OK);
    assert_int_equal(n, 2);
    assert_close(v[0], 1.5, 1e-15);
    assert_close(v[1], 0.2, 1e-15);
    free(v);
    write_file(tpath("nul.txt"), "1\0junk\n", 7);
    assert_int_equal(dpfl_budgets_read(tpath("nul.txt"), &v, &n, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "NUL"));
    assert_null(v);
    write_file(tpath("neg.txt"), "1\n\n-2\n", 6);
    assert_int_equal(dpfl_budgets_read(tpath("neg.txt"), &v, &n, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "line 3: '-2' is not a positive number"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checkpoint_with_bad_events_is_an_error),
        cmocka_unit_test(ledger_refuses_an_overflowing_event_count),
        cmocka_unit_test(config_string_values_must_survive_the_ini_file),
        cmocka_unit_test(config_long_line_is_read_whole),
        cmocka_unit_test(idx_header_promising_terabytes_is_a_truncation_error),
        cmocka_unit_test(budgets_long_lines_and_nul_bytes),
    };
    return cmocka_run_group_tests_name("fuzz regressions", tests, setup, teardown);
}
