/* The deployment's wire format and keys (src/net/wire.c, src/net/keys.c): every frame type round-trips; the strict
 * decoder refuses each kind of malformed frame with a message that says what is wrong (truncated, trailing bytes,
 * bad magic, other version, unknown type, reserved bits, oversized, checksum, a layout that does not fit, values
 * out of range, a client sending a round, non-finite updates, unprintable text); Z85 against the RFC's example and
 * its strictness; key files (mode 0600 for the secret, no overwrite without force, malformed keys refused). */
#include "testutil.h"
#include "dpfl/net.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static dpfl_wire_msg round_msg(const float *w, uint64_t n)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_ROUND;
    m.sender = DPFL_WIRE_SERVER;
    m.round = 3;
    m.released = 2;
    m.lr = 0.05;
    m.update_clip = 1.5;
    m.record_z = 1.1;
    for (int i = 0; i < 32; i++) m.rates_digest[i] = (uint8_t)i, m.model_digest[i] = (uint8_t)(255 - i);
    m.nparam = n;
    m.fvec = w;
    return m;
}

static dpfl_wire_msg update_msg(const float *u, uint64_t n)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_UPDATE;
    m.sender = 7;
    m.round = 3;
    m.flags = DPFL_WIRE_STATS;
    m.steps = 10;
    m.examples = 160;
    m.loss_sum = 123.5;
    m.clipped = 17;
    m.nparam = n;
    m.fvec = u;
    return m;
}

/* Re-seal a frame after an edit: the CRC over header and payload. */
static void reseal(uint8_t *buf, size_t len)
{
    uint32_t crc = dpfl_crc32(buf, len - 4);
    memcpy(buf + len - 4, &crc, 4);
}

static void expect_refused(const uint8_t *buf, size_t len, const char *want)
{
    dpfl_wire_msg m;
    dpfl_error err = {{0}};
    if (dpfl_wire_decode(buf, len, &m, &err) != DPFL_EFORMAT || !strstr(err.msg, want)) {
        print_error("decoding gave '%s', expected an error saying '%s'\n", err.msg, want);
        fail();
    }
    assert_null(m.vec);
}

static void every_type_round_trips(void **state)
{
    (void)state;
    float w[5] = {1.0f, -2.5f, 3e-7f, 0.0f, 1e30f};
    const float cv[5] = {0.25f, -1e-3f, 7.0f, -0.0f, 2e-20f};
    dpfl_wire_msg msgs[12];
    memset(msgs, 0, sizeof msgs);
    msgs[0] = round_msg(w, 5);
    msgs[1] = update_msg(w, 5);
    msgs[2].type = DPFL_WIRE_HELLO, msgs[2].sender = 4, msgs[2].config_digest[0] = 9;
    msgs[3].type = DPFL_WIRE_HELLO, msgs[3].sender = DPFL_WIRE_SERVER, msgs[3].nparam = 5, msgs[3].rounds = 10,
    msgs[3].released = 4, msgs[3].partition_key[31] = 1, msgs[3].partition_digest[5] = 2;
    msgs[4].type = DPFL_WIRE_HEARTBEAT, msgs[4].sender = 2, msgs[4].round = 77;
    msgs[5].type = DPFL_WIRE_ERROR, msgs[5].sender = DPFL_WIRE_SERVER, msgs[5].code = 3, msgs[5].round = 2;
    dpfl_wire_set_text(&msgs[5], "refused: key %s\n", "x"); /* the newline becomes '?' */
    msgs[6].type = DPFL_WIRE_BYE, msgs[6].sender = 1;
    const uint8_t sa[20] = {'D', 'P', 'S', 'A', 1, 5, 0, 0, 2, 0, 0, 0, 9, 8, 7, 6, 5, 4, 3, 2};
    msgs[7].type = DPFL_WIRE_SECAGG, msgs[7].sender = 2, msgs[7].round = 4, msgs[7].data = sa, msgs[7].data_len = 20;
    msgs[8] = round_msg(w, 5); /* distributed DP */
    msgs[8].cohort = 4, msgs[8].index = 3, msgs[8].threshold = 3, msgs[8].client_z = 0.7;
    for (int i = 0; i < 32; i++) msgs[8].ddp_seed[i] = (uint8_t)(7 * i);
    /* helper models' sync: a released model, and round 0 (the initial model) */
    msgs[9].type = DPFL_WIRE_SYNC, msgs[9].sender = DPFL_WIRE_SERVER, msgs[9].round = 6, msgs[9].nparam = 5;
    msgs[9].fvec = w, msgs[9].model_digest[3] = 4;
    msgs[10] = msgs[9];
    msgs[10].round = 0;
    msgs[11] = round_msg(w, 5); /* fl.scaffold: the server's control variate follows the model */
    msgs[11].ncontrol = 5, msgs[11].fcvec = cv;
    for (int i = 0; i < 12; i++) {
        uint8_t *buf, *again;
        size_t len, len2;
        dpfl_error err;
        assert_int_equal(dpfl_wire_encode(&msgs[i], &buf, &len, &err), DPFL_OK);
        dpfl_wire_msg d;
        assert_int_equal(dpfl_wire_decode(buf, len, &d, &err), DPFL_OK);
        assert_int_equal(d.type, msgs[i].type);
        assert_int_equal(d.sender, msgs[i].sender);
        assert_int_equal(d.round, msgs[i].round);
        assert_int_equal(d.nparam, msgs[i].nparam);
        assert_memory_equal(d.config_digest, msgs[i].config_digest, 32);
        assert_memory_equal(d.partition_key, msgs[i].partition_key, 32);
        assert_memory_equal(d.partition_digest, msgs[i].partition_digest, 32);
        assert_memory_equal(d.rates_digest, msgs[i].rates_digest, 32);
        assert_memory_equal(d.model_digest, msgs[i].model_digest, 32);
        assert_true(d.lr == msgs[i].lr && d.update_clip == msgs[i].update_clip && d.record_z == msgs[i].record_z);
        assert_true(d.steps == msgs[i].steps && d.examples == msgs[i].examples && d.clipped == msgs[i].clipped &&
                    d.loss_sum == msgs[i].loss_sum && d.flags == msgs[i].flags);
        assert_true(d.rounds == msgs[i].rounds && d.released == msgs[i].released && d.code == msgs[i].code);
        assert_true(d.cohort == msgs[i].cohort && d.index == msgs[i].index && d.threshold == msgs[i].threshold &&
                    d.client_z == msgs[i].client_z);
        assert_memory_equal(d.ddp_seed, msgs[i].ddp_seed, 32);
        assert_int_equal(d.data_len, msgs[i].data_len);
        if (d.data_len) assert_memory_equal(d.data, msgs[i].data, d.data_len);
        assert_string_equal(d.text, msgs[i].text);
        assert_true((d.vec != NULL) ==
                    (d.type == DPFL_WIRE_ROUND || d.type == DPFL_WIRE_UPDATE || d.type == DPFL_WIRE_SYNC));
        if (d.vec) {
            float got[5];
            dpfl_wire_floats(&d, got);
            assert_memory_equal(got, w, sizeof w);
        }
        assert_int_equal(d.ncontrol, msgs[i].ncontrol);
        assert_true((d.cvec != NULL) == (msgs[i].ncontrol != 0));
        if (d.cvec) {
            float got[5];
            dpfl_wire_control(&d, got);
            assert_memory_equal(got, cv, sizeof cv);
        }
        /* canonical: a decoded frame encodes to the same bytes */
        d.fvec = NULL;
        assert_int_equal(dpfl_wire_encode(&d, &again, &len2, &err), DPFL_OK);
        assert_int_equal(len2, len);
        assert_memory_equal(again, buf, len);
        free(again);
        free(buf);
    }
    assert_string_equal(msgs[5].text, "refused: key x?");
}

static void malformed_frames_are_refused_with_a_reason(void **state)
{
    (void)state;
    float w[4] = {1, 2, 3, 4};
    dpfl_wire_msg m = update_msg(w, 4);
    uint8_t *good;
    size_t len;
    dpfl_error err;
    assert_int_equal(dpfl_wire_encode(&m, &good, &len, &err), DPFL_OK);
    uint8_t *b = malloc(len + 8);
    assert_non_null(b);

    expect_refused(good, 0, "truncated frame: 0 bytes");
    expect_refused(good, 19, "truncated frame");
    expect_refused(good, len - 1, "truncated");
    memcpy(b, good, len);
    b[len] = 0;
    expect_refused(b, len + 1, "trailing bytes");
#define EDIT(off, val, want)                                                                                          \
    do {                                                                                                              \
        memcpy(b, good, len);                                                                                         \
        b[off] = (uint8_t)(val);                                                                                      \
        reseal(b, len);                                                                                               \
        expect_refused(b, len, want);                                                                                 \
    } while (0)
    EDIT(0, 'X', "bad magic");
    EDIT(4, 1, "version 1 is not supported"); /* 1: rounds without SCAFFOLD's control variate */
    EDIT(4, 3, "version 3 is not supported");
    EDIT(5, 0, "unknown frame type 0");
    EDIT(5, 9, "unknown frame type 9");
    EDIT(6, 1, "reserved bits");
    EDIT(15, 0x7f, "oversized update frame");
    /* one byte less of payload announced: the length no longer matches the bytes */
    EDIT(12, good[12] - 1, "trailing bytes");
    /* the checksum itself */
    memcpy(b, good, len);
    b[20] ^= 1;
    expect_refused(b, len, "checksum");
    /* type changed to one whose layout does not fit the payload */
    EDIT(5, DPFL_WIRE_HEARTBEAT, "does not fit its layout");
    EDIT(5, DPFL_WIRE_HELLO, "does not fit its layout");
    /* an update from the server, a round from a client */
    memcpy(b, good, len);
    memset(b + 8, 0xff, 4);
    reseal(b, len);
    expect_refused(b, len, "sent by the server");
    /* values out of range: unknown flags, negative steps, clipped > examples, round 0, a NaN in the update */
    const size_t P0 = 16; /* payload offset */
    EDIT(P0 + 4, 0x80, "unknown flags");
    EDIT(P0 + 8 + 32 + 7, 0x80, "out of range");            /* steps < 0 */
    EDIT(P0 + 8 + 32 + 24 + 7, 0x7f, "out of range");       /* clipped > examples */
    memcpy(b, good, len);
    memset(b + P0, 0, 4);
    reseal(b, len);
    expect_refused(b, len, "round 0");
    memcpy(b, good, len);
    const float nan = NAN;
    memcpy(b + len - 4 - 8, &nan, 4);
    reseal(b, len);
    expect_refused(b, len, "value 2 of the update is not finite");
    /* more parameters announced than the payload holds */
    EDIT(P0 + 8 + 32 + 32, 5, "5 parameters announced");
    free(good);

    /* a round sent by a client; a round whose released count is not below it */
    dpfl_wire_msg r = round_msg(w, 4);
    assert_int_equal(dpfl_wire_encode(&r, &good, &len, &err), DPFL_OK);
    uint8_t *b2 = malloc(len);
    memcpy(b2, good, len);
    memset(b2 + 8, 0, 4);
    reseal(b2, len);
    expect_refused(b2, len, "only the server sends rounds");
    memcpy(b2, good, len);
    b2[P0 + 4] = 3;
    reseal(b2, len);
    expect_refused(b2, len, "round 3 with 3 rounds released");
    memcpy(b2, good, len);
    const double neg = -1.0;
    memcpy(b2 + P0 + 16, &neg, 8);
    reseal(b2, len);
    expect_refused(b2, len, "out of range");
    /* distributed-DP values: a noise without a cohort; an id outside the cohort */
    const size_t DDP = P0 + 8 + 24 + 64; /* cohort, index, threshold, client_z, seed */
    memcpy(b2, good, len);
    b2[DDP + 12 + 7] = 0x3f;
    reseal(b2, len);
    expect_refused(b2, len, "distributed-DP values without a cohort");
    free(b2);
    free(good);
    r.cohort = 3, r.index = 1, r.threshold = 2, r.client_z = 1.0;
    assert_int_equal(dpfl_wire_encode(&r, &good, &len, &err), DPFL_OK);
    b2 = malloc(len);
    memcpy(b2, good, len);
    b2[DDP + 4] = 3; /* index 3 of 3 */
    reseal(b2, len);
    expect_refused(b2, len, "client 3 of a cohort of 3");
    memcpy(b2, good, len);
    b2[DDP + 8] = 1; /* threshold 1 */
    reseal(b2, len);
    expect_refused(b2, len, "threshold 1");
    free(b2);
    free(good);

    /* SCAFFOLD's control variate: of another length than the model (encoding refuses it; a frame whose counts were
     * edited to 2 + 6 keeps its length), not finite, or more values announced than the payload holds */
    const float cw[4] = {0.5f, -0.5f, 1.0f, 2.0f};
    r.cohort = 0, r.index = 0, r.threshold = 0, r.client_z = 0;
    r.ncontrol = 3, r.fcvec = cw;
    assert_int_equal(dpfl_wire_encode(&r, &good, &len, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "control variate of 3 values for 4 parameters"));
    r.ncontrol = 4;
    assert_int_equal(dpfl_wire_encode(&r, &good, &len, &err), DPFL_OK);
    const size_t NP = DDP + 12 + 8 + 32; /* u64 nparam, u64 ncontrol, the model, the control variate */
    b2 = malloc(len);
    memcpy(b2, good, len);
    b2[NP] = 2, b2[NP + 8] = 6;
    reseal(b2, len);
    expect_refused(b2, len, "control variate of 6 values for 2 parameters");
    memcpy(b2, good, len);
    memcpy(b2 + NP + 16 + 4 * 4 + 4, &nan, 4);
    reseal(b2, len);
    expect_refused(b2, len, "value 1 of the control variate is not finite");
    memcpy(b2, good, len);
    b2[NP + 8] = 5;
    reseal(b2, len);
    expect_refused(b2, len, "4 parameters announced");
    free(b2);
    free(good);
    dpfl_wire_msg rd;
    assert_int_equal(dpfl_wire_encode(&r, &good, &len, &err), DPFL_OK);
    assert_int_equal(dpfl_wire_decode(good, len, &rd, &err), DPFL_OK);
    float back[4];
    dpfl_wire_control(&rd, back);
    assert_memory_equal(back, cw, sizeof cw);
    free(good);

    /* a sync (helper models) sent by a client; one announcing more parameters than it holds */
    dpfl_wire_msg sy;
    memset(&sy, 0, sizeof sy);
    sy.type = DPFL_WIRE_SYNC, sy.sender = DPFL_WIRE_SERVER, sy.round = 2, sy.nparam = 4, sy.fvec = w;
    assert_int_equal(dpfl_wire_encode(&sy, &good, &len, &err), DPFL_OK);
    b2 = malloc(len);
    memcpy(b2, good, len);
    memset(b2 + 8, 0, 4);
    reseal(b2, len);
    expect_refused(b2, len, "only the server syncs");
    memcpy(b2, good, len);
    b2[P0 + 4 + 32] = 5;
    reseal(b2, len);
    expect_refused(b2, len, "5 parameters announced");
    free(b2);
    free(good);

    /* a secure-aggregation frame shorter than a message header */
    dpfl_wire_msg sg;
    memset(&sg, 0, sizeof sg);
    sg.type = DPFL_WIRE_SECAGG;
    sg.round = 1;
    const uint8_t sa[12] = {'D', 'P', 'S', 'A', 1, 1};
    sg.data = sa, sg.data_len = 11;
    assert_int_equal(dpfl_wire_encode(&sg, &good, &len, &err), DPFL_EFORMAT);
    sg.data_len = 12;
    assert_int_equal(dpfl_wire_encode(&sg, &good, &len, &err), DPFL_OK);
    b2 = malloc(len);
    memcpy(b2, good, len - 5);
    const uint32_t shorter = 4 + 11;
    memcpy(b2 + 12, &shorter, 4);
    reseal(b2, len - 1);
    expect_refused(b2, len - 1, "does not fit its layout");
    free(b2);
    free(good);

    /* text: unprintable bytes, too long */
    dpfl_wire_msg e;
    memset(&e, 0, sizeof e);
    e.type = DPFL_WIRE_ERROR;
    e.sender = 1;
    strcpy(e.text, "fine");
    assert_int_equal(dpfl_wire_encode(&e, &good, &len, &err), DPFL_OK);
    memcpy(b, good, len);
    b[len - 5] = '\n';
    reseal(b, len);
    expect_refused(b, len, "not printable");
    free(good);
    uint8_t *big = calloc(1, 16 + 8 + 2000 + 4);
    dpfl_wire_msg t;
    memset(&t, 0, sizeof t);
    t.type = DPFL_WIRE_BYE;
    assert_int_equal(dpfl_wire_encode(&t, &good, &len, &err), DPFL_OK);
    memcpy(big, good, 16);
    const uint32_t plen = 8 + 2000;
    memcpy(big + 12, &plen, 4);
    memset(big + 24, 'a', 2000);
    reseal(big, 16 + plen + 4);
    expect_refused(big, 16 + plen + 4, "text of 2000 bytes");
    free(big);
    free(good);
    free(b);

    /* the encoder refuses what the decoder would */
    float bad[2] = {1.0f, INFINITY};
    dpfl_wire_msg u = update_msg(bad, 2);
    assert_int_equal(dpfl_wire_encode(&u, &good, &len, &err), DPFL_EFORMAT);
    assert_null(good);
    u = update_msg(w, 0);
    assert_int_equal(dpfl_wire_encode(&u, &good, &len, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "no parameters"));
}

/* Every prefix and every single-bit flip of a valid frame is refused (the CRC, then the layout). */
static void every_prefix_and_bit_flip_is_refused(void **state)
{
    (void)state;
    float w[3] = {0.5f, -0.25f, 2.0f};
    dpfl_wire_msg m = round_msg(w, 3);
    uint8_t *good;
    size_t len;
    dpfl_error err;
    assert_int_equal(dpfl_wire_encode(&m, &good, &len, &err), DPFL_OK);
    dpfl_wire_msg d;
    for (size_t n = 0; n < len; n++) assert_int_equal(dpfl_wire_decode(good, n, &d, &err), DPFL_EFORMAT);
    uint8_t *b = malloc(len);
    for (size_t i = 0; i < 8 * len; i++) {
        memcpy(b, good, len);
        b[i / 8] ^= (uint8_t)(1u << (i % 8));
        assert_int_equal(dpfl_wire_decode(b, len, &d, &err), DPFL_EFORMAT);
        assert_true(err.msg[0] != '\0');
    }
    free(b);
    free(good);
}

static void model_digest_names_the_bytes(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3}, b[3] = {1, 2, 3};
    uint8_t da[32], db[32];
    dpfl_wire_model_digest(a, 3, da);
    dpfl_wire_model_digest(b, 3, db);
    assert_memory_equal(da, db, 32);
    b[2] = nextafterf(3.0f, 4.0f);
    dpfl_wire_model_digest(b, 3, db);
    assert_memory_not_equal(da, db, 32);
}

/* ZeroMQ RFC 32's example: 0x86 0x4F 0xD2 0x6F 0xB5 0x59 0xF7 0x5B <-> "HelloWorld". */
static void z85_matches_the_rfc_and_is_strict(void **state)
{
    (void)state;
    const uint8_t hello[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
    char out[16];
    dpfl_error err;
    assert_int_equal(dpfl_z85_encode(hello, 8, out, &err), DPFL_OK);
    assert_string_equal(out, "HelloWorld");
    uint8_t back[8];
    size_t n;
    assert_int_equal(dpfl_z85_decode("HelloWorld", back, sizeof back, &n, &err), DPFL_OK);
    assert_int_equal(n, 8);
    assert_memory_equal(back, hello, 8);
    assert_int_equal(dpfl_z85_encode(hello, 7, out, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_z85_decode("Hello", back, 2, &n, &err), DPFL_EFORMAT);   /* no room */
    assert_int_equal(dpfl_z85_decode("Hell", back, 8, &n, &err), DPFL_EFORMAT);    /* not a multiple of 5 */
    assert_int_equal(dpfl_z85_decode("Hell~", back, 8, &n, &err), DPFL_EFORMAT);   /* not in the alphabet */
    assert_int_equal(dpfl_z85_decode("#####", back, 8, &n, &err), DPFL_EFORMAT);   /* 85^5 - 1 > 2^32 - 1 */
    assert_non_null(strstr(err.msg, "overflows"));
}

static void keygen_writes_a_private_secret_and_refuses_to_overwrite(void **state)
{
    (void)state;
    char dir[] = "/tmp/dpfl-test-net-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pub[41], pub2[41], path[256];
    dpfl_error err;
    assert_int_equal(dpfl_net_keygen(dir, "client3", 0, pub, &err), DPFL_OK);
    snprintf(path, sizeof path, "%s/client3.key", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    uint8_t sk[32], pk[32], pk_file[32];
    assert_int_equal(dpfl_net_key_read(path, sk, &err), DPFL_OK);
    snprintf(path, sizeof path, "%s/client3.pub", dir);
    assert_int_equal(dpfl_net_key_read(path, pk_file, &err), DPFL_OK);
    size_t n;
    assert_int_equal(dpfl_z85_decode(pub, pk, 32, &n, &err), DPFL_OK);
    assert_memory_equal(pk, pk_file, 32);
    assert_memory_not_equal(sk, pk, 32);
    /* no silent overwrite; --force makes a new pair */
    assert_int_equal(dpfl_net_keygen(dir, "client3", 0, pub2, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "exists"));
    assert_int_equal(dpfl_net_keygen(dir, "client3", 1, pub2, &err), DPFL_OK);
    assert_string_not_equal(pub, pub2);
    /* bad names */
    assert_int_equal(dpfl_net_keygen(dir, "../evil", 0, NULL, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_net_keygen(dir, ".hidden", 0, NULL, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_net_keygen(dir, "", 0, NULL, &err), DPFL_EINVAL);
    /* a malformed key file */
    snprintf(path, sizeof path, "%s/bad.pub", dir);
    FILE *f = fopen(path, "w");
    fputs("HelloWorld\n", f);
    fclose(f);
    assert_int_equal(dpfl_net_key_read(path, pk, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "40"));
    f = fopen(path, "w");
    fputs("~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n", f);
    fclose(f);
    assert_int_equal(dpfl_net_key_read(path, pk, &err), DPFL_EFORMAT);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Without libzmq the deployment functions say what is missing; with it they exist. */
static void serve_and_join_name_what_is_missing(void **state)
{
    (void)state;
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err = {{0}};
    if (dpfl_net_available()) {
#ifndef DPFL_HAVE_ZMQ
        fail_msg("dpfl_net_available() without DPFL_HAVE_ZMQ");
#endif
        /* a setting the network refuses (noisy updates in the clear) is refused before anything binds */
        cfg.client_dp.enabled = 1;
        cfg.client_dp.mechanism = DPFL_CLIENT_MECH_DDP;
        cfg.client_dp.ddp_secagg = 0;
        dpfl_serve_options so = {"tcp://127.0.0.1:1", "/nonexistent", NULL, -1, 1, 1, 1, 0, 0};
        dpfl_run_options ro;
        memset(&ro, 0, sizeof ro);
        ro.out_dir = "/tmp/dpfl-test-net-never";
        assert_int_equal(dpfl_net_serve(&cfg, &ro, &so, &err), DPFL_EINVAL);
        assert_non_null(strstr(err.msg, "client_dp.ddp_secagg = no"));
        assert_int_not_equal(access("/tmp/dpfl-test-net-never", F_OK), 0);
        return;
    }
    dpfl_serve_options so = {"tcp://127.0.0.1:1", "/tmp", NULL, -1, 1, 1, 1, 0, 0};
    dpfl_run_options ro;
    memset(&ro, 0, sizeof ro);
    assert_int_equal(dpfl_net_serve(&cfg, &ro, &so, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "libzmq"));
    dpfl_join_options jo = {"tcp://127.0.0.1:1", "/tmp", NULL, 0, "/tmp", 1, 0, 1, NULL};
    assert_int_equal(dpfl_net_join(&cfg, &jo, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "libzmq"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_round_trips),
        cmocka_unit_test(malformed_frames_are_refused_with_a_reason),
        cmocka_unit_test(every_prefix_and_bit_flip_is_refused),
        cmocka_unit_test(model_digest_names_the_bytes),
        cmocka_unit_test(z85_matches_the_rfc_and_is_strict),
        cmocka_unit_test(keygen_writes_a_private_secret_and_refuses_to_overwrite),
        cmocka_unit_test(serve_and_join_name_what_is_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
