/* Model files read without their architecture (dpfl_model_file_read), the NumPy export (dpfl_model_export_npz) parsed
 * back by an independent ZIP + NPY reader written here (CRCs checked with zlib, shapes from the NPY headers, a
 * forward pass computed from the arrays alone), and dpfl_evaluate. */
#include "testutil.h"
#include "dpfl/data.h"
#include "dpfl/fl.h"
#include "dpfl/nn.h"

#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpfl_model_file_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* a model of spec on c x h x w with random parameters (an input transform away from its identity) */
static float *random_model(const char *spec, int c, int h, int w, int classes, dpfl_model *m, uint64_t seed)
{
    dpfl_error err;
    assert_int_equal(dpfl_model_create(spec, c, h, w, classes, m, &err), DPFL_OK);
    float *p = malloc(m->nparam * sizeof(float));
    dpfl_rng rng;
    dpfl_rng_init_seed(&rng, seed);
    for (size_t i = 0; i < m->nparam; i++) p[i] = (float)(dpfl_rng_uniform(&rng) - 0.5);
    return p;
}

static void file_read_returns_spec_and_params(void **state)
{
    (void)state;
    dpfl_model m;
    float *p = random_model("net:conv3k3,relu,fc4", 2, 5, 5, 4, &m, 1);
    char path[128];
    snprintf(path, sizeof path, "%s/m.bin", tmpdir);
    dpfl_error err;
    assert_int_equal(dpfl_model_save(&m, p, path, &err), DPFL_OK);
    char spec[128];
    float *q;
    size_t n;
    assert_int_equal(dpfl_model_file_read(path, spec, sizeof spec, &q, &n, &err), DPFL_OK);
    assert_string_equal(spec, "net:conv3k3,relu,fc4");
    assert_int_equal(n, m.nparam);
    assert_memory_equal(q, p, n * sizeof(float));
    dpfl_free(q);
    /* a spec that does not fit the caller's buffer */
    assert_int_equal(dpfl_model_file_read(path, spec, 8, &q, &n, &err), DPFL_EFORMAT);
    assert_null(q);
    /* one flipped byte: the checksum */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 40, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 40, SEEK_SET);
    fputc(ch ^ 1, f);
    fclose(f);
    assert_int_equal(dpfl_model_file_read(path, spec, sizeof spec, &q, &n, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "checksum"));
    /* another kind of dpfl file, and none at all */
    assert_int_equal(dpfl_file_write(path, 0x12345678u, 1, "abcdefghijklmnop", 16, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read(path, spec, sizeof spec, &q, &n, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "magic"));
    unlink(path);
    assert_int_equal(dpfl_model_file_read(path, spec, sizeof spec, &q, &n, &err), DPFL_EIO);
    free(p);
    dpfl_model_free(&m);
}

/* model.bin holds the shape the model was built for (dpfl export needs no data); a version 1 file (spec
 * and parameters only) still reads, with shape 0s; version 4 is refused. */
static void file_holds_the_shape_and_old_files_still_read(void **state)
{
    (void)state;
    dpfl_model m;
    float *p = random_model("logreg", 1, 1, 6, 2, &m, 3); /* 2 classes: 1 logit */
    char path[128];
    snprintf(path, sizeof path, "%s/shape.bin", tmpdir);
    dpfl_error err;
    assert_int_equal(dpfl_model_save(&m, p, path, &err), DPFL_OK);
    char spec[128];
    float *q;
    size_t n;
    int32_t shape[4];
    assert_int_equal(dpfl_model_file_read_shape(path, spec, sizeof spec, &q, &n, shape, &err), DPFL_OK);
    assert_int_equal(shape[0], 1);
    assert_int_equal(shape[1], 1);
    assert_int_equal(shape[2], 6);
    assert_int_equal(shape[3], 1);
    dpfl_free(q);
    dpfl_model m2;
    float *p2 = calloc(m.nparam, sizeof(float));
    assert_int_equal(dpfl_model_create("logreg", 1, 1, 6, 2, &m2, &err), DPFL_OK);
    assert_int_equal(dpfl_model_load(&m2, p2, path, &err), DPFL_OK);
    assert_memory_equal(p2, p, m.nparam * sizeof(float));
    /* a version 1 file: u32 spec length, spec, u64 nparam, the floats */
    const uint32_t slen = 6;
    const uint64_t np = m.nparam;
    size_t len = 4 + slen + 8 + np * sizeof(float);
    uint8_t *v1 = malloc(len);
    memcpy(v1, &slen, 4);
    memcpy(v1 + 4, "logreg", slen);
    memcpy(v1 + 4 + slen, &np, 8);
    memcpy(v1 + 12 + slen, p, np * sizeof(float));
    assert_int_equal(dpfl_file_write(path, 0x4D465044u, 1, v1, len, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_shape(path, spec, sizeof spec, &q, &n, shape, &err), DPFL_OK);
    assert_int_equal(shape[0] | shape[1] | shape[2] | shape[3], 0);
    assert_memory_equal(q, p, n * sizeof(float));
    dpfl_free(q);
    memset(p2, 0, m.nparam * sizeof(float));
    assert_int_equal(dpfl_model_load(&m2, p2, path, &err), DPFL_OK);
    assert_memory_equal(p2, p, m.nparam * sizeof(float));
    assert_int_equal(dpfl_file_write(path, 0x4D465044u, 4, v1, len, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_shape(path, spec, sizeof spec, &q, &n, shape, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "unsupported version 4"));
    unlink(path);
    free(v1);
    free(p2);
    free(p);
    dpfl_model_free(&m);
    dpfl_model_free(&m2);
}

/* ------------------------------------------------------------------ an independent .npz reader */
typedef struct {
    char name[64];
    char descr[16];
    int ndim;
    long shape[4];
    const uint8_t *data;
    size_t nbytes;
} member;

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }

/* Parse one NPY 1.0 file: descr, fortran_order False, shape; data after the 64-aligned header. */
static void parse_npy(const uint8_t *p, size_t len, member *mb)
{
    assert_true(len >= 10);
    assert_memory_equal(p, "\x93NUMPY", 6);
    assert_int_equal(p[6], 1);
    assert_int_equal(p[7], 0);
    size_t hl = rd16(p + 8);
    assert_true(10 + hl <= len);
    assert_int_equal((10 + hl) % 64, 0);
    assert_int_equal(p[10 + hl - 1], '\n');
    char h[1024];
    assert_true(hl < sizeof h);
    memcpy(h, p + 10, hl);
    h[hl] = '\0';
    assert_non_null(strstr(h, "'fortran_order': False"));
    const char *d = strstr(h, "'descr': '");
    assert_non_null(d);
    d += 10;
    size_t dl = strcspn(d, "'");
    assert_true(dl < sizeof mb->descr);
    memcpy(mb->descr, d, dl);
    mb->descr[dl] = '\0';
    const char *s = strstr(h, "'shape': (");
    assert_non_null(s);
    s += 10;
    mb->ndim = 0;
    while (*s != ')') {
        char *end;
        long v = strtol(s, &end, 10);
        assert_true(end > s && mb->ndim < 4);
        mb->shape[mb->ndim++] = v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    mb->data = p + 10 + hl;
    mb->nbytes = len - 10 - hl;
}

/* Walk the local headers, check each CRC-32 with zlib and the central directory against them. */
static int parse_zip(const uint8_t *z, size_t len, member *mb, int cap)
{
    size_t off = 0;
    int n = 0;
    uint32_t offsets[256];
    while (off + 4 <= len && rd32(z + off) == 0x04034b50u) {
        assert_true(n < cap && off + 30 <= len);
        const uint8_t *h = z + off;
        assert_int_equal(rd16(h + 6) & 8, 0); /* no data descriptor */
        assert_int_equal(rd16(h + 8), 0);     /* stored */
        uint32_t crc = rd32(h + 14), csize = rd32(h + 18), usize = rd32(h + 22);
        uint32_t nl = rd16(h + 26), xl = rd16(h + 28);
        assert_int_equal(csize, usize);
        assert_true(off + 30 + nl + xl + csize <= len);
        const uint8_t *data = h + 30 + nl + xl;
        assert_int_equal(crc, (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, csize));
        assert_true(nl > 4 && nl < sizeof mb[n].name);
        memcpy(mb[n].name, h + 30, nl);
        mb[n].name[nl] = '\0';
        assert_string_equal(mb[n].name + nl - 4, ".npy");
        mb[n].name[nl - 4] = '\0';
        parse_npy(data, csize, &mb[n]);
        offsets[n++] = (uint32_t)off;
        off += 30 + nl + xl + csize;
    }
    /* the central directory: one entry per member, pointing at its local header; then the end record */
    assert_true(len >= 22);
    const uint8_t *e = z + len - 22;
    assert_int_equal(rd32(e), 0x06054b50u);
    assert_int_equal(rd16(e + 10), n);
    uint32_t cd = rd32(e + 16);
    assert_int_equal(cd, off);
    assert_int_equal(cd + rd32(e + 12), len - 22);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rd32(z + cd), 0x02014b50u);
        assert_int_equal(rd32(z + cd + 42), offsets[i]);
        uint32_t nl = rd16(z + cd + 28);
        assert_int_equal(nl, strlen(mb[i].name) + 4);
        assert_memory_equal(z + cd + 46, mb[i].name, nl - 4);
        cd += 46 + nl + rd16(z + cd + 30) + rd16(z + cd + 32);
    }
    return n;
}

static const member *find(const member *mb, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(mb[i].name, name)) return &mb[i];
    print_error("no member %s\n", name);
    fail();
    return NULL;
}

static float at(const member *a, size_t i)
{
    float v;
    assert_true((i + 1) * 4 <= a->nbytes);
    memcpy(&v, a->data + 4 * i, 4);
    return v;
}

static uint8_t *export_and_read(const dpfl_model *m, const float *p, int classes, const char *name, size_t *len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    dpfl_error err;
    assert_int_equal(dpfl_model_export_npz(m, p, classes, NULL, path, &err), DPFL_OK);
    char *buf;
    assert_int_equal(dpfl_file_read_all(path, &buf, len, &err), DPFL_OK);
    return (uint8_t *)buf;
}

/* transform (a per channel, b per pixel) -> conv -> relu -> maxpool 2 -> flatten -> fc, computed from the arrays
 * alone with PyTorch's conventions, equals dpfl's forward pass: names, shapes and memory order are right. */
static void npz_arrays_give_the_models_forward_pass(void **state)
{
    (void)state;
    enum { C = 2, H = 6, W = 6, OC = 3, K = 3, CLS = 4, B = 3 };
    dpfl_model m;
    float *p = random_model("transform:net:conv3k3p1,relu,pool2,fc4", C, H, W, CLS, &m, 7);
    size_t len;
    uint8_t *z = export_and_read(&m, p, CLS, "cnn.npz", &len);
    member mb[16];
    int n = parse_zip(z, len, mb, 16);
    assert_int_equal(n, 2 + 2 + 2 + 6); /* scale, shift, conv weight + bias, fc weight + bias, six dpfl_* */
    const member *sc = find(mb, n, "0.scale"), *sh = find(mb, n, "0.shift"), *cw = find(mb, n, "1.weight"),
                 *cb = find(mb, n, "1.bias"), *fw = find(mb, n, "5.weight"), *fb = find(mb, n, "5.bias");
    assert_int_equal(sc->ndim, 1);
    assert_int_equal(sc->shape[0], C);
    assert_int_equal(sh->ndim, 3);
    assert_true(sh->shape[0] == C && sh->shape[1] == H && sh->shape[2] == W);
    assert_int_equal(cw->ndim, 4);
    assert_true(cw->shape[0] == OC && cw->shape[1] == C && cw->shape[2] == K && cw->shape[3] == K);
    assert_true(cb->ndim == 1 && cb->shape[0] == OC);
    assert_int_equal(fw->ndim, 2);
    assert_true(fw->shape[0] == CLS && fw->shape[1] == OC * (H / 2) * (W / 2));
    assert_true(fb->ndim == 1 && fb->shape[0] == CLS);
    for (int i = 0; i < n; i++)
        if (strncmp(mb[i].name, "dpfl_", 5)) {
            assert_string_equal(mb[i].descr, "<f4");
            long cnt = 1;
            for (int d = 0; d < mb[i].ndim; d++) cnt *= mb[i].shape[d];
            assert_int_equal((size_t)cnt * 4, mb[i].nbytes);
        }
    /* the model's description */
    const member *sp = find(mb, n, "dpfl_spec"), *is = find(mb, n, "dpfl_input_shape"), *nc = find(mb, n, "dpfl_classes");
    const char *spec = "transform:net:conv3k3p1,relu,pool2,fc4";
    char descr[16];
    snprintf(descr, sizeof descr, "<U%zu", strlen(spec));
    assert_string_equal(sp->descr, descr);
    assert_int_equal(sp->ndim, 0);
    assert_int_equal(sp->nbytes, 4 * strlen(spec));
    for (size_t i = 0; i < strlen(spec); i++) assert_int_equal(rd32(sp->data + 4 * i), (uint32_t)spec[i]);
    assert_string_equal(is->descr, "<i4");
    assert_true(is->ndim == 1 && is->shape[0] == 3);
    assert_true(rd32(is->data) == C && rd32(is->data + 4) == H && rd32(is->data + 8) == W);
    assert_true(nc->ndim == 0 && rd32(nc->data) == CLS);

    /* forward pass from the arrays */
    float x[B][C][H][W];
    dpfl_rng rng;
    dpfl_rng_init_seed(&rng, 3);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) x[b][c][i][j] = (float)(2.0 * dpfl_rng_uniform(&rng) - 1.0);
    dpfl_error err;
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, B, &err);
    assert_non_null(ws);
    const float *logits = dpfl_nn_forward(&m, p, ws, &x[0][0][0][0], B, 0, NULL);
    for (int b = 0; b < B; b++) {
        float t[C][H][W], y[OC][H][W], pool[OC][H / 2][W / 2];
        for (int c = 0; c < C; c++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++)
                    t[c][i][j] = at(sc, (size_t)c) * x[b][c][i][j] + at(sh, ((size_t)c * H + i) * W + j);
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    double s = at(cb, (size_t)o);
                    for (int c = 0; c < C; c++)
                        for (int u = 0; u < K; u++)
                            for (int v = 0; v < K; v++) {
                                int ii = i + u - 1, jj = j + v - 1;
                                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                s += (double)at(cw, (((size_t)o * C + c) * K + u) * K + v) * t[c][ii][jj];
                            }
                    y[o][i][j] = s > 0 ? (float)s : 0.0f;
                }
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < H / 2; i++)
                for (int j = 0; j < W / 2; j++) {
                    float a = fmaxf(y[o][2 * i][2 * j], y[o][2 * i][2 * j + 1]);
                    pool[o][i][j] = fmaxf(a, fmaxf(y[o][2 * i + 1][2 * j], y[o][2 * i + 1][2 * j + 1]));
                }
        const float *flat = &pool[0][0][0]; /* PyTorch's Flatten: (C, H, W) order */
        for (int k = 0; k < CLS; k++) {
            double s = at(fb, (size_t)k);
            for (int i = 0; i < OC * (H / 2) * (W / 2); i++) s += (double)at(fw, (size_t)k * OC * (H / 2) * (W / 2) + i) * flat[i];
            assert_close(logits[b * CLS + k], s, 1e-4);
        }
    }
    /* the same model gives the same bytes */
    size_t len2;
    uint8_t *z2 = export_and_read(&m, p, CLS, "cnn2.npz", &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(z, z2, len);
    free(z2);
    free(z);
    dpfl_nn_ws_free(ws);
    free(p);
    dpfl_model_free(&m);
}

/* The graph of a residual model: dpfl_layers holds every layer's row (kind, shapes, k, stride, pad, bias, groups,
 * from, shortcut) as the model has it, under the column and kind names the archive gives. */
static void npz_layers_table_is_the_graph(void **state)
{
    (void)state;
    dpfl_model m;
    float *p = random_model("net:conv4k3p1nb,gn2,relu,(conv8k3s2p1nb,gn2,relu,conv8k3p1nb,gn2)+pg2,relu,"
                            "(conv8k3p1nb,gn2)+,gap,fc3", 2, 6, 6, 3, &m, 5);
    size_t len;
    uint8_t *z = export_and_read(&m, p, 3, "res.npz", &len);
    member mb[64];
    int n = parse_zip(z, len, mb, 64);
    const member *t = find(mb, n, "dpfl_layers"), *cols = find(mb, n, "dpfl_layer_columns"),
                 *kinds = find(mb, n, "dpfl_layer_kinds");
    assert_string_equal(t->descr, "<i4");
    assert_true(t->ndim == 2 && t->shape[0] == m.nlayers && t->shape[1] == 14);
    const char *want_cols = "kind,in_c,in_h,in_w,out_c,out_h,out_w,k,stride,pad,bias,groups,from,shortcut";
    assert_true(cols->ndim == 0 && cols->nbytes == 4 * strlen(want_cols));
    for (size_t i = 0; i < strlen(want_cols); i++) assert_int_equal(rd32(cols->data + 4 * i), (uint32_t)want_cols[i]);
    char kn[256] = {0};
    for (size_t i = 0; i < kinds->nbytes / 4 && i + 1 < sizeof kn; i++) kn[i] = (char)rd32(kinds->data + 4 * i);
    assert_string_equal(kn, "linear,conv2d,maxpool2d,relu,tanh,sigmoid,flatten,dropout,affine,groupnorm,avgpool2d,add");
    int adds = 0, proj = 0;
    for (int l = 0; l < m.nlayers; l++) {
        const dpfl_layer *L = &m.layers[l];
        const int32_t want[14] = {(int32_t)L->kind, L->in_c, L->in_h, L->in_w, L->out_c, L->out_h, L->out_w, L->k,
                                  L->stride, L->pad, L->bias, L->groups, L->from, L->shortcut};
        for (int c = 0; c < 14; c++) assert_int_equal((int32_t)rd32(t->data + ((size_t)l * 14 + c) * 4), want[c]);
        adds += L->kind == DPFL_LAYER_ADD;
        proj += L->kind == DPFL_LAYER_ADD && L->shortcut == 2;
    }
    assert_true(adds == 2 && proj == 1); /* the model has the residual structure the table must carry */
    free(z);
    free(p);
    dpfl_model_free(&m);
}

/* An mlp on tabular data: fc weights (out, in), biases, a one-logit output for two classes; ":nobias" has no
 * bias arrays. */
static void npz_mlp_shapes_and_values(void **state)
{
    (void)state;
    const char *specs[2] = {"mlp:5-7-1", "mlp:5-7-1:nobias"};
    for (int s = 0; s < 2; s++) {
        dpfl_model m;
        float *p = random_model(specs[s], 1, 1, 5, 2, &m, 11 + (uint64_t)s);
        size_t len;
        uint8_t *z = export_and_read(&m, p, 2, "mlp.npz", &len);
        member mb[16];
        int n = parse_zip(z, len, mb, 16);
        assert_int_equal(n, (s ? 2 : 4) + 6);
        const member *w0 = find(mb, n, "0.weight"), *w2 = find(mb, n, "2.weight");
        assert_true(w0->ndim == 2 && w0->shape[0] == 7 && w0->shape[1] == 5);
        assert_true(w2->ndim == 2 && w2->shape[0] == 1 && w2->shape[1] == 7);
        /* logit = w2 relu(w0 x + b0) + b2 */
        float x[5] = {0.3f, -1.0f, 2.0f, 0.5f, -0.25f};
        double logit = s ? 0.0 : at(find(mb, n, "2.bias"), 0);
        for (int h = 0; h < 7; h++) {
            double a = s ? 0.0 : at(find(mb, n, "0.bias"), (size_t)h);
            for (int i = 0; i < 5; i++) a += (double)at(w0, (size_t)h * 5 + i) * x[i];
            logit += (a > 0 ? a : 0) * at(w2, (size_t)h);
        }
        dpfl_error err;
        dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, 1, &err);
        assert_close(dpfl_nn_forward(&m, p, ws, x, 1, 0, NULL)[0], logit, 1e-5);
        dpfl_nn_ws_free(ws);
        free(z);
        free(p);
        dpfl_model_free(&m);
    }
}

/* dpfl_evaluate: dpfl_nn_evaluate's numbers over any number of chunks; refuses data that does not fit the model */
/* model.bin version 3 records the standardization the model's inputs had in training (per channel here), so that it
 * can be fed without the run's config: read back exactly, exported as dpfl_input_mean / dpfl_input_std; "none"
 * (n = 0) and "not recorded" (n = -1: dpfl_model_save, version 2 files) stay distinct; a record that fits neither
 * 1 value, the channels nor the values, or holds a standard deviation that is not > 0, is refused. */
static void file_records_the_inputs_standardization(void **state)
{
    (void)state;
    dpfl_model m;
    float *p = random_model("net:conv2k3p1,relu,fc3", 3, 4, 4, 3, &m, 11);
    char path[128];
    snprintf(path, sizeof path, "%s/std.bin", tmpdir);
    double mean[3] = {0.4914, 0.4822, 0.4465}, sd[3] = {0.2470, 0.2435, 0.2616};
    dpfl_input_standardization s = {3, mean, sd}, r;
    dpfl_error err;
    char spec[128];
    float *q;
    size_t n;
    int32_t shape[4];
    assert_int_equal(dpfl_model_save_standardized(&m, p, &s, path, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_OK);
    assert_int_equal(r.n, 3);
    assert_memory_equal(r.mean, mean, sizeof mean);
    assert_memory_equal(r.std, sd, sizeof sd);
    assert_memory_equal(q, p, n * sizeof(float));
    assert_int_equal(shape[0], 3);
    dpfl_free(q);
    dpfl_input_standardization_free(&r);
    /* the npz carries it */
    size_t len;
    snprintf(path, sizeof path, "%s/std.npz", tmpdir);
    assert_int_equal(dpfl_model_export_npz(&m, p, 3, &s, path, &err), DPFL_OK);
    char *z;
    assert_int_equal(dpfl_file_read_all(path, &z, &len, &err), DPFL_OK);
    member mb[16];
    int k = parse_zip((const uint8_t *)z, len, mb, 16);
    const member *zm = find(mb, k, "dpfl_input_mean"), *zs = find(mb, k, "dpfl_input_std");
    assert_string_equal(zm->descr, "<f8");
    assert_int_equal(zm->ndim, 1);
    assert_int_equal(zm->shape[0], 3);
    assert_int_equal(zs->nbytes, sizeof sd);
    assert_memory_equal(zm->data, mean, sizeof mean);
    assert_memory_equal(zs->data, sd, sizeof sd);
    free(z);
    /* none, and not recorded */
    snprintf(path, sizeof path, "%s/std.bin", tmpdir);
    s.n = 0;
    assert_int_equal(dpfl_model_save_standardized(&m, p, &s, path, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_OK);
    assert_int_equal(r.n, 0);
    dpfl_free(q);
    assert_int_equal(dpfl_model_save(&m, p, path, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_OK);
    assert_int_equal(r.n, -1);
    dpfl_free(q);
    /* a version 2 file (the shape, no standardization) */
    void *payload;
    assert_int_equal(dpfl_file_read(path, 0x4D465044u, 3, &payload, &len, &err), DPFL_OK);
    assert_int_equal(dpfl_file_write(path, 0x4D465044u, 2, payload, len - 4, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_OK);
    assert_int_equal(r.n, -1);
    assert_int_equal(shape[3], 3);
    assert_memory_equal(q, p, n * sizeof(float));
    dpfl_free(q);
    free(payload);
    /* 5 values fit neither 1, 3 channels nor 48 values */
    double five[5] = {0, 0, 0, 0, 0}, ones[5] = {1, 1, 1, 1, 1};
    s = (dpfl_input_standardization){5, five, ones};
    assert_int_equal(dpfl_model_save_standardized(&m, p, &s, path, &err), DPFL_EINVAL);
    /* a zero standard deviation written by hand is refused when read */
    s = (dpfl_input_standardization){1, five, ones};
    assert_int_equal(dpfl_model_save_standardized(&m, p, &s, path, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read(path, 0x4D465044u, 3, &payload, &len, &err), DPFL_OK);
    memset((uint8_t *)payload + len - 8, 0, 8);
    assert_int_equal(dpfl_file_write(path, 0x4D465044u, 3, payload, len, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "standard deviation 1 is 0"));
    assert_null(q);
    /* and a count that does not match the bytes */
    int32_t two = 2;
    memcpy((uint8_t *)payload + len - 20, &two, 4);
    assert_int_equal(dpfl_file_write(path, 0x4D465044u, 3, payload, len, &err), DPFL_OK);
    assert_int_equal(dpfl_model_file_read_all(path, spec, sizeof spec, &q, &n, shape, &r, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "standardization of 2 values"));
    free(payload);
    unlink(path);
    free(p);
    dpfl_model_free(&m);
}

/* The recorded standardization applied to a dataset: one pair, per channel (planes), per value; other counts refused. */
static void dataset_standardized_as_recorded(void **state)
{
    (void)state;
    float x[2 * 12];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    dpfl_dataset d = {.n = 2, .c = 3, .h = 2, .w = 2, .dim = 12, .classes = 2, .x = x};
    const double m3[3] = {1, 2, 3}, s3[3] = {2, 4, 8};
    dpfl_error err;
    assert_int_equal(dpfl_dataset_standardize_as(&d, m3, s3, 3, &err), DPFL_OK);
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 12; k++)
            assert_true(x[e * 12 + k] == (float)(((double)(e * 12 + k) - m3[k / 4]) / s3[k / 4]));
    double m12[12], s12[12];
    for (int k = 0; k < 12; k++) m12[k] = k, s12[k] = 1 + k;
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    assert_int_equal(dpfl_dataset_standardize_as(&d, m12, s12, 12, &err), DPFL_OK);
    assert_true(x[13] == (float)((13.0 - 1) / 2));
    const float before = x[13];
    assert_int_equal(dpfl_dataset_standardize_as(&d, m3, s3, 1, &err), DPFL_OK);
    assert_true(x[13] == (float)(((double)before - 1) / 2));
    assert_int_equal(dpfl_dataset_standardize_as(&d, m12, s12, 4, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "4 values"));
}

static void evaluate_whole_dataset(void **state)
{
    (void)state;
    dpfl_dataset d;
    dpfl_error err;
    assert_int_equal(dpfl_synthetic(1234, 6, 3, 2.0, 5, &d, &err), DPFL_OK);
    dpfl_model m;
    float *p = random_model("mlp:6-8-3", 1, 1, 6, 3, &m, 2);
    double loss, acc, want_loss, want_acc;
    assert_int_equal(dpfl_evaluate(&m, p, &d, 100, &loss, &acc, &err), DPFL_OK);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&m, d.n, &err);
    dpfl_nn_evaluate(&m, p, ws, d.x, d.y, d.n, &want_loss, &want_acc);
    dpfl_nn_ws_free(ws);
    assert_close(acc, want_acc, 1e-12);
    assert_close(loss, want_loss, 1e-6);
    dpfl_model other;
    float *q = random_model("mlp:5-8-3", 1, 1, 5, 3, &other, 2);
    assert_int_equal(dpfl_evaluate(&other, q, &d, 100, &loss, &acc, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "inputs"));
    dpfl_model two;
    float *r = random_model("mlp:6-8-1", 1, 1, 6, 2, &two, 2);
    assert_int_equal(dpfl_evaluate(&two, r, &d, 100, &loss, &acc, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "label 2"));
    free(p);
    free(q);
    free(r);
    dpfl_model_free(&m);
    dpfl_model_free(&other);
    dpfl_model_free(&two);
    dpfl_dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(file_read_returns_spec_and_params),
        cmocka_unit_test(file_holds_the_shape_and_old_files_still_read),
        cmocka_unit_test(npz_arrays_give_the_models_forward_pass),
        cmocka_unit_test(npz_mlp_shapes_and_values),
        cmocka_unit_test(npz_layers_table_is_the_graph),
        cmocka_unit_test(evaluate_whole_dataset),
        cmocka_unit_test(file_records_the_inputs_standardization),
        cmocka_unit_test(dataset_standardized_as_recorded),
    };
    return cmocka_run_group_tests_name("model_file", tests, setup, teardown);
}
