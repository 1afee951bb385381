/* Writes the fuzzers' seed corpora (fuzz/corpus/<harness>/, in each harness's input format) with the library's
 * own writers: small valid files and a few edge cases.  Usage: gen_corpus DIR  (make fuzz-corpus). */
#include "dpfl/fl.h"
#include "dpfl/nn.h"
#include "dpfl/net.h"
#include "run/run_internal.h"
#include "secagg_round.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;

static void put(const char *harness, const char *name, const void *a, size_t na, const void *b, size_t nb)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, harness);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", root, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, na, f) != na || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f)) {
        fprintf(stderr, "gen_corpus: cannot write %s\n", path);
        exit(1);
    }
}

static void put_text(const char *harness, const char *name, const char *text)
{
    put(harness, name, text, strlen(text), NULL, 0);
}

static size_t be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
    return 4;
}

/* fuzz_idx: flags, u16 images length, images file, labels file */
static void idx_seed(const char *name, int flags, uint32_t n, uint32_t h, uint32_t w)
{
    uint8_t buf[1024];
    size_t k = 3;
    k += be32(buf + k, 0x00000803);
    k += be32(buf + k, n);
    k += be32(buf + k, h);
    k += be32(buf + k, w);
    for (uint32_t i = 0; i < n * h * w; i++) buf[k++] = (uint8_t)(i * 37);
    size_t ni = k - 3;
    k += be32(buf + k, 0x00000801);
    k += be32(buf + k, n);
    for (uint32_t i = 0; i < n; i++) buf[k++] = (uint8_t)(i % 10);
    buf[0] = (uint8_t)flags, buf[1] = (uint8_t)ni, buf[2] = (uint8_t)(ni >> 8);
    put("fuzz_idx", name, buf, k, NULL, 0);
}

static void *slurp(const char *path, size_t *len)
{
    char *b;
    dpfl_error err;
    if (dpfl_file_read_all(path, &b, len, &err)) {
        fprintf(stderr, "gen_corpus: %s\n", err.msg);
        exit(1);
    }
    return b;
}

/* a dpfl_file as the harnesses take it: mode byte (bit 0 clear: payload only), or (bit 0 set) the whole file */
static void dpfl_file_seeds(const char *harness, const char *name, const char *path, uint8_t mode)
{
    size_t len;
    uint8_t *f = slurp(path, &len);
    char n2[128];
    uint8_t m = mode;
    put(harness, name, &m, 1, f + 16, len - 20);
    m = mode | 1;
    snprintf(n2, sizeof n2, "%s-raw", name);
    put(harness, n2, &m, 1, f, len);
    free(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    root = argv[1];
    mkdir(root, 0755);
    char tmp[] = "/tmp/dpfl-gen-XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    char path[256];
    dpfl_error err;

    /* IDX: plain and gzip, a 1x1 image, one of 28x28 */
    idx_seed("two-3x3", 0, 2, 3, 3);
    idx_seed("two-3x3-gz", 3, 2, 3, 3);
    idx_seed("one-1x1", 0, 1, 1, 1);
    idx_seed("one-1x1-gz-images", 1, 1, 1, 1);
    idx_seed("one-28x28", 0, 1, 28, 28);

    /* CSV: mode, label column, file */
    put_text("fuzz_csv", "plain", "\x00\xff" "1,2,0\n3,4,1\n5.5,-6e2,2\n");
    put_text("fuzz_csv", "header-missing", "\x06\x00" "y,a,b\n0,1,?\n1, 2 ,3\r\n\n2,,4\n");
    put_text("fuzz_csv", "label-first", "\x00\x00" "1,0.5\n0,1e-3\n");
    const char *row[6] = {"63,1,1,145,233,1,2,150,0,2.3,3,0,6,0", "67,1,4,160,286,0,2,108,1,1.5,2,3,3,2",
                          "37,1,3,130,250,0,0,187,0,3.5,3,0,3,0", "41,0,2,130,204,0,2,172,0,1.4,1,0,3,0",
                          "56,1,2,120,236,0,0,178,0,0.8,1,0,3,1", "57,0,4,120,?,0,0,163,1,0.6,1,?,?,0"};
    char heart[4096] = "\x01";
    for (int c = 0; c < 4; c++) {
        for (int r = 0; r < 6; r++) {
            strcat(heart, row[(r + c) % 6]);
            strcat(heart, "\n");
        }
        if (c < 3) strcat(heart, "|");
    }
    put_text("fuzz_csv", "heart", heart);

    /* config: examples-like files, with and without --set parts */
    static const char demo[] = "[data]\ndataset = synthetic\nclients = 4\npartition = dirichlet\nbeta = 0.3\n"
                               "[model]\narch = logreg\n[fl]\nrounds = 3\nsampling = poisson\nclient_rate = 0.5\n"
                               "local_steps = 2\nbatch = 8\nlr = 0.1\n[record_dp]\nenabled = yes\nnoise = 1.1\n"
                               "clip = 1.0\ndelta = 1e-5\n[run]\nseed = 7\n";
    put_text("fuzz_config", "demo", demo);
    put("fuzz_config", "demo-set", demo, sizeof demo, "record_dp.noise=2.5\0fl.rounds=5\0run.seed=", 41);
    put_text("fuzz_config", "client-dp", "; comment\n[client_dp]\nenabled = yes\nclip_strategy = adaptive\n"
                                         "noise = 1.0\nquantile_noise = 0.6\nnoise_schedule = 1:1.0, 5:0.8\n"
                                         "[fl]\nsampling = fixed\nclients_per_round = 5\n"
                                         "clients_per_round_schedule = 1:5, 3:2\n[data]\nclients = 10\n");
    put_text("fuzz_config", "empty", "");
    put("fuzz_config", "set-only", "\0data.data_dir=/tmp/x\0model.arch=mlp:784-10", 43, NULL, 0);

    /* checkpoint: 4 parameters, 3 clients (the harness's fixed run), with and without client-level events */
    dpfl_ledger l;
    if (dpfl_ledger_init(&l, 3, &err)) return 1;
    int32_t cl[2] = {0, 2};
    int64_t st[2] = {5, 7};
    dpfl_ledger_charge(&l, cl, 2, st);
    const float params[4] = {0.5f, -1.0f, 2.0f, 0.0f};
    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.record_z = 1.1, rs.wall = 12.5, rs.S = 1.0, rs.examples = 100;
    snprintf(path, sizeof path, "%s/checkpoint.bin", tmp);
    if (fl_checkpoint_save(tmp, params, 4, &l, &rs, NULL, NULL, NULL, "{\"round\":1}", &err)) goto fail;
    dpfl_file_seeds("fuzz_checkpoint", "ckpt-record", path, 2);
    dpfl_event ev = dpfl_event_poisson(0.5, 1.2, 1);
    dpfl_ledger_charge(&l, cl, 1, st);
    if (dpfl_ledger_charge_client(&l, &ev, &err) || dpfl_ledger_charge_client(&l, &ev, &err)) goto fail;
    ev = dpfl_event_gaussian(0.9, 1);
    if (dpfl_ledger_charge_client(&l, &ev, &err)) goto fail;
    if (fl_checkpoint_save(tmp, params, 4, &l, &rs, NULL, NULL, NULL, "{\"round\":2,\"x\":1}", &err)) goto fail;
    dpfl_file_seeds("fuzz_checkpoint", "ckpt-client-events", path, 2);
    /* with per-record budgets: 5 records on 2 levels, one dropped (the harness's bit 2) */
    fl_rpdp rp;
    memset(&rp, 0, sizeof rp);
    if (fl_rpdp_alloc(&rp, 5, 3, 2, &err)) goto fail;
    rp.levels.planned_rounds = 2, rp.levels.mech.z = 3.5;
    rp.levels.lv[0] = (fl_rpdp_level){0.1, 0.02, 2, 0, 3};
    rp.levels.lv[1] = (fl_rpdp_level){5.0, 0.6, 2, 1, 1};
    for (int i = 0; i < 5; i++)
        rp.rec.budget[i] = i < 3 ? 0.1 : 5.0, rp.rec.level[i] = i < 3 ? 0 : i == 3 ? 1 : FL_RPDP_DROPPED;
    if (fl_checkpoint_save(tmp, params, 4, &l, &rs, NULL, NULL, &rp, "{\"round\":2}", &err)) goto fail;
    fl_rpdp_free(&rp);
    dpfl_file_seeds("fuzz_checkpoint", "ckpt-budgets", path, 6);
    dpfl_ledger_free(&l);

    /* model.bin: the harness's two models */
    static const char *const specs[2] = {"logreg", "mlp:4-3-2"};
    for (int i = 0; i < 2; i++) {
        dpfl_model m;
        if (dpfl_model_create(specs[i], 1, 2, 2, 2, &m, &err)) goto fail;
        float *p = calloc(m.nparam, sizeof *p);
        for (size_t j = 0; j < m.nparam; j++) p[j] = 0.25f * (float)j - 1.0f;
        snprintf(path, sizeof path, "%s/model.bin", tmp);
        if (dpfl_model_save(&m, p, path, &err)) goto fail;
        dpfl_file_seeds("fuzz_model", specs[i][0] == 'l' ? "logreg" : "mlp", path, (uint8_t)(i << 1));
        free(p);
        dpfl_model_free(&m);
    }

    /* budgets */
    put_text("fuzz_budgets", "plain", "0.5\n1\n2.5e0\n");
    put_text("fuzz_budgets", "comments", "# budgets\n\n  0.1  \n\t3\r\n# end\n8");
    put_text("fuzz_budgets", "bad", "1\n-2\n");

    /* secure aggregation: each slot's honest message, slot byte first (fuzz/secagg_round.h) */
    static const char *slot_names[SECAGG_SLOTS] = {"advert", "keys", "shares", "shares-for", "masked",
                                                   "unmask-req", "unmask"};
    for (int k = 0; k < SECAGG_SLOTS; k++) {
        dpfl_secagg_msg hm = {0};
        secagg_round_spec sr = {.slot = k, .honest = &hm};
        secagg_round(&sr);
        const uint8_t b = (uint8_t)k;
        put("fuzz_secagg", slot_names[k], &b, 1, hm.data, hm.len);
        dpfl_secagg_msg_free(&hm);
    }

    /* deployment frames: one of each type, wrapped (mode 0: type, sender, payload) and whole (mode 1); a key file */
    {
        float w[3] = {0.5f, -1.0f, 2.0f};
        dpfl_wire_msg msgs[8];
        memset(msgs, 0, sizeof msgs);
        static const char *names[8] = {"hello", "round", "update", "heartbeat", "error", "bye", "secagg", "round-ddp"};
        for (int i = 0; i < 7; i++) msgs[i].type = (dpfl_wire_type)(i + 1);
        msgs[0].sender = 2, msgs[0].config_digest[0] = 1;
        msgs[1].sender = DPFL_WIRE_SERVER, msgs[1].round = 2, msgs[1].released = 1, msgs[1].lr = 0.1;
        msgs[1].update_clip = 1, msgs[1].record_z = 1.1, msgs[1].nparam = 3, msgs[1].fvec = w;
        msgs[2].sender = 1, msgs[2].round = 2, msgs[2].flags = DPFL_WIRE_STATS, msgs[2].steps = 4;
        msgs[2].examples = 64, msgs[2].loss_sum = 80.5, msgs[2].clipped = 3, msgs[2].nparam = 3, msgs[2].fvec = w;
        msgs[3].sender = 0, msgs[3].round = 5;
        msgs[4].sender = DPFL_WIRE_SERVER, msgs[4].code = 3;
        strcpy(msgs[4].text, "refused: key client0 may not act as client 1");
        msgs[5].sender = DPFL_WIRE_SERVER, strcpy(msgs[5].text, "run finished after 2 rounds");
        static const uint8_t sa[16] = {'D', 'P', 'S', 'A', 1, 1, 0, 0, 3, 0, 0, 0, 1, 2, 3, 4};
        msgs[6].sender = 3, msgs[6].round = 2, msgs[6].data = sa, msgs[6].data_len = sizeof sa;
        msgs[7] = msgs[1];
        msgs[7].cohort = 4, msgs[7].index = 2, msgs[7].threshold = 3, msgs[7].client_z = 0.8, msgs[7].ddp_seed[0] = 9;
        for (int i = 0; i < 8; i++) {
            uint8_t *f;
            size_t n;
            if (dpfl_wire_encode(&msgs[i], &f, &n, &err)) goto fail;
            char name[32];
            uint8_t m1 = 1;
            snprintf(name, sizeof name, "%s-whole", names[i]);
            put("fuzz_wire", name, &m1, 1, f, n);
            uint8_t head[6] = {0, f[5], f[8], f[9], f[10], f[11]};
            snprintf(name, sizeof name, "%s", names[i]);
            put("fuzz_wire", name, head, 6, f + DPFL_WIRE_HEADER, n - DPFL_WIRE_HEADER - DPFL_WIRE_TRAILER);
            free(f);
        }
        put_text("fuzz_wire", "key", "\x02HelloWorldHelloWorldHelloWorldHelloWorld\n");
    }

    unlink(path);
    snprintf(path, sizeof path, "%s/checkpoint.bin", tmp);
    unlink(path);
    rmdir(tmp);
    return 0;
fail:
    fprintf(stderr, "gen_corpus: %s\n", err.msg);
    return 1;
}
