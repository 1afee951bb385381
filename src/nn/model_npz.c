/* Model parameters as a NumPy .npz (include/dpfl/nn.h: dpfl_model_export_npz), so that Python can read a dpfl
 * model with numpy alone.  An .npz is a ZIP archive of .npy files; this writes the simplest one numpy.load accepts:
 * every member "stored" (no compression), no data descriptors, no ZIP64, fixed timestamps.  Each member is an NPY
 * 1.0 file: magic "\x93NUMPY", version 1.0, a u16 header length, an ASCII dict padded with spaces to a 64-byte
 * boundary and ended by '\n', then the data in C order.
 *
 * The parameters are already in PyTorch's memory order (Linear (out, in), Conv2d (out, in, k, k), weights then
 * bias: src/nn/model.c), so each array is a straight copy of its slice of the flat vector; only the shapes are
 * added.  Every field and array goes through core/bytes.h, little-endian as the '<' in its descr says (the floats:
 * one copy of the vector on a little-endian host, as model.bin's).
 *
 * The graph goes with the parameters, so that a model with residual blocks (He et al. 2016) can be run from the
 * archive without dpfl's spec parser: dpfl_layers is an int32 (layers, 14) table, one row per layer index, whose
 * columns dpfl_layer_columns names (kind, the per-example input and output shapes, k, stride, pad, bias, groups,
 * from, shortcut: the dpfl_layer fields of include/dpfl/nn.h), and dpfl_layer_kinds names the kinds in order.  A
 * layer with from > 0 that is not an add reads the input of layer from - 1 (a projection shortcut's first layer);
 * an add sums the output of the layer before its shortcut (the block's last) and either the input of layer
 * from - 1 (shortcut = 0: identity) or the output of the layer before it (the shortcut's last). */
#include "layers.h"
#include "core/bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* the six dpfl_* arrays, two tensors per layer */
enum { MAX_LAYERS_NPZ = 256, MAX_ARRAYS = 8 + 2 * MAX_LAYERS_NPZ, LAYER_COLUMNS = 14 };

static const char layer_columns[] = "kind,in_c,in_h,in_w,out_c,out_h,out_w,k,stride,pad,bias,groups,from,shortcut";

typedef struct {
    char name[48];     /* member name without ".npy" */
    char descr[32];    /* '<f4', '<i4', '<U12' */
    int ndim;
    int64_t shape[4];
    const void *data;  /* the array's bytes (little-endian), nbytes long */
    size_t nbytes;
} npy_array;

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int failed;
} out_buf;

static void put(out_buf *o, const void *p, size_t n)
{
    if (o->failed) return;
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n) cap *= 2;
        uint8_t *b = realloc(o->buf, cap);
        if (!b) {
            o->failed = 1;
            return;
        }
        o->buf = b, o->cap = cap;
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

/* ZIP's little-endian fields (core/bytes.h), appended */
static void put16(out_buf *o, uint32_t v)
{
    uint8_t b[2];
    dpfl_bytes_store_u16(b, (uint16_t)v);
    put(o, b, 2);
}

static void put32(out_buf *o, uint32_t v)
{
    uint8_t b[4];
    dpfl_bytes_store_u32(b, v);
    put(o, b, 4);
}

/* The NPY 1.0 header of a (magic through the '\n'); returns its length (a multiple of 64), 0 if too long. */
static size_t npy_header(const npy_array *a, char *h, size_t cap)
{
    char shape[128];
    int n = 0;
    for (int d = 0; d < a->ndim; d++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, "%lld%s", (long long)a->shape[d],
                      a->ndim == 1 ? "," : d + 1 < a->ndim ? ", " : "");
    shape[n] = '\0';
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", a->descr, shape);
    if (dl < 0 || (size_t)dl >= sizeof dict) return 0;
    size_t total = 10 + (size_t)dl + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap || total - 10 > 0xFFFF) return 0;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    dpfl_bytes_store_u16((uint8_t *)h + 8, (uint16_t)(total - 10));
    memcpy(h + 10, dict, (size_t)dl);
    memset(h + 10 + dl, ' ', total - 10 - (size_t)dl - 1);
    h[total - 1] = '\n';
    return total;
}

/* MS-DOS time and date of every member: 00:00:00, 1980-01-01 (the earliest ZIP can say), for reproducible bytes. */
#define ZIP_TIME 0u
#define ZIP_DATE ((0u << 9) | (1u << 5) | 1u)

/* One member: its local header, name and NPY bytes at o's end; *offset, *crc, *size for the central directory. */
static dpfl_status zip_member(out_buf *o, const npy_array *a, const char *path, uint32_t *offset, uint32_t *crc,
                              uint32_t *size, dpfl_error *err)
{
    char head[256], name[64];
    size_t hl = npy_header(a, head, sizeof head);
    if (!hl) return dpfl_fail(err, DPFL_EINVAL, "cannot export %s (%s): NPY header too long", a->name, path);
    size_t nl = (size_t)snprintf(name, sizeof name, "%s.npy", a->name);
    const uint64_t member = (uint64_t)hl + a->nbytes;
    if (member > 0xFFFFFFFFu || (uint64_t)o->len + 30 + nl + member > 0xFFFFFFFFu)
        return dpfl_fail(err, DPFL_EINVAL, "cannot export (%s): the archive would pass 4 GiB, which a ZIP without "
                                           "ZIP64 cannot hold (array %s: %llu bytes)",
                         path, a->name, (unsigned long long)member);
    uLong c = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)head, (uInt)hl);
    for (size_t off = 0; off < a->nbytes;) { /* crc32 takes a uInt length */
        size_t chunk = a->nbytes - off > (1u << 30) ? (1u << 30) : a->nbytes - off;
        c = crc32(c, (const Bytef *)a->data + off, (uInt)chunk);
        off += chunk;
    }
    *offset = (uint32_t)o->len, *crc = (uint32_t)c, *size = (uint32_t)member;
    put32(o, 0x04034b50u); /* local file header */
    put16(o, 20);          /* version needed to extract: 2.0 */
    put16(o, 0);           /* flags */
    put16(o, 0);           /* method: stored */
    put16(o, ZIP_TIME);
    put16(o, ZIP_DATE);
    put32(o, *crc);
    put32(o, *size); /* compressed size */
    put32(o, *size); /* uncompressed size */
    put16(o, (uint32_t)nl);
    put16(o, 0); /* extra field length */
    put(o, name, nl);
    put(o, head, hl);
    put(o, a->data, a->nbytes);
    return DPFL_OK;
}

/* The central directory's header of member a. */
static void zip_central(out_buf *o, const npy_array *a, uint32_t offset, uint32_t crc, uint32_t size)
{
    char name[64];
    size_t nl = (size_t)snprintf(name, sizeof name, "%s.npy", a->name);
    put32(o, 0x02014b50u); /* central directory header */
    put16(o, 20 | (3u << 8)); /* made by: 2.0, Unix (so the external attributes are permissions) */
    put16(o, 20);
    put16(o, 0);
    put16(o, 0);
    put16(o, ZIP_TIME);
    put16(o, ZIP_DATE);
    put32(o, crc);
    put32(o, size);
    put32(o, size);
    put16(o, (uint32_t)nl);
    put16(o, 0); /* extra */
    put16(o, 0); /* comment */
    put16(o, 0); /* disk number */
    put16(o, 0); /* internal attributes */
    put32(o, 0100644u << 16); /* external attributes: a regular file, rw-r--r-- */
    put32(o, offset);
    put(o, name, nl);
}

/* The archive: per array a local header, the name and the NPY bytes; then the central directory and its end. */
static dpfl_status write_zip(const npy_array *arr, int n, const char *path, dpfl_error *err)
{
    out_buf o = {0};
    uint32_t *offset = calloc((size_t)n, sizeof *offset), *crc = calloc((size_t)n, sizeof *crc),
             *size = calloc((size_t)n, sizeof *size);
    dpfl_status st = DPFL_OK;
    if (!offset || !crc || !size) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
        goto done;
    }
    for (int i = 0; i < n; i++)
        if ((st = zip_member(&o, &arr[i], path, &offset[i], &crc[i], &size[i], err))) goto done;
    const uint64_t cd_start = o.len;
    for (int i = 0; i < n; i++) zip_central(&o, &arr[i], offset[i], crc[i], size[i]);
    const uint64_t cd_size = o.len - cd_start;
    if (cd_start + cd_size > 0xFFFFFFFFu) {
        st = dpfl_fail(err, DPFL_EINVAL, "cannot export (%s): the archive would pass 4 GiB, which a ZIP without ZIP64 "
                                         "cannot hold", path);
        goto done;
    }
    put32(&o, 0x06054b50u); /* end of central directory */
    put16(&o, 0);
    put16(&o, 0);
    put16(&o, (uint32_t)n);
    put16(&o, (uint32_t)n);
    put32(&o, (uint32_t)cd_size);
    put32(&o, (uint32_t)cd_start);
    put16(&o, 0); /* comment length */
    if (o.failed) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s: %zu bytes)", path, o.len);
        goto done;
    }
    st = dpfl_file_write_text(path, (const char *)o.buf, o.len, err);
done:
    free(o.buf);
    free(offset);
    free(crc);
    free(size);
    return st;
}

static npy_array *add(npy_array *arr, int *n, const char *name, const char *descr, const void *data, size_t nbytes)
{
    npy_array *a = &arr[(*n)++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->descr, sizeof a->descr, "%s", descr);
    a->data = data;
    a->nbytes = nbytes;
    return a;
}

/* an ASCII string as a 0-d '<U' array: UTF-32LE code units in buf (4 bytes per character, at least 4) */
static void add_string(npy_array *arr, int *n, const char *name, const char *str, uint8_t *buf)
{
    const size_t len = strlen(str);
    for (size_t i = 0; i < len; i++) dpfl_bytes_store_u32(buf + 4 * i, (uint8_t)str[i]);
    if (!len) dpfl_bytes_store_u32(buf, 0);
    char descr[32];
    snprintf(descr, sizeof descr, "<U%zu", len ? len : 1);
    add(arr, n, name, descr, buf, (len ? len : 1) * 4)->ndim = 0;
}

/* n int32 as little-endian bytes at b */
static void store_i32s(uint8_t *b, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) dpfl_bytes_store_u32(b + 4 * i, (uint32_t)v[i]);
}

/* Layer l's parameters as arrays named as PyTorch names them ("<l>.weight", "<l>.bias", "<l>.scale", "<l>.shift"):
 * the names and shapes its kind's row in the layer table gives. */
static dpfl_status add_layer_params(npy_array *arr, int *np, const dpfl_layer *L, int32_t l, const uint8_t *p,
                                    const char *path, dpfl_error *err)
{
    char name[48];
    int n = *np;
    dpfl_nn_param_array pa[2];
    const dpfl_layer_ops *ops = dpfl_nn_layer_ops(L->kind);
    const int k = ops->arrays ? ops->arrays(L, pa) : -1;
    if (k < 0)
        return dpfl_fail(err, DPFL_EINVAL, "cannot export (%s): layer %d has parameters of an unknown kind", path,
                         (int)l);
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "%d.%s", (int)l, pa[i].name);
        npy_array *a = add(arr, &n, name, "<f4", p + 4 * pa[i].off, pa[i].count * 4);
        a->ndim = pa[i].ndim;
        for (int d = 0; d < 4; d++) a->shape[d] = pa[i].shape[d];
    }
    *np = n;
    return DPFL_OK;
}

dpfl_status dpfl_model_export_npz(const dpfl_model *m, const float *params, int32_t classes,
                                  const dpfl_input_standardization *s, const char *path, dpfl_error *err)
{
    if (m->nlayers > MAX_LAYERS_NPZ)
        return dpfl_fail(err, DPFL_EINVAL, "cannot export (%s): more than %d layers", path, MAX_LAYERS_NPZ);
    npy_array arr[MAX_ARRAYS];
    int n = 0;
    /* the parameters, then the standardization's means and standard deviations, as little-endian bytes */
    const size_t nstd = s && s->n > 0 ? (size_t)s->n : 0, vlen = 4 * m->nparam + 16 * nstd;
    uint8_t *values = malloc(vlen ? vlen : 1);
    if (!values) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    dpfl_bytes_writer w = dpfl_bytes_writer_over(values, vlen);
    dpfl_bytes_put_f32s(&w, params, m->nparam);
    for (size_t j = 0; j < nstd; j++) dpfl_bytes_put_f64(&w, s->mean[j]);
    for (size_t j = 0; j < nstd; j++) dpfl_bytes_put_f64(&w, s->std[j]);
    DPFL_ASSERT(w.p == w.end);
    for (int32_t l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (!L->nparam) continue;
        dpfl_status st = add_layer_params(arr, &n, L, l, values + 4 * L->param_off, path, err);
        if (st) {
            free(values);
            return st;
        }
    }
    char layer_kinds[256]; /* the kinds' names in dpfl_layer_kind's order (the layer table's) */
    dpfl_nn_layer_kind_names(layer_kinds, sizeof layer_kinds);
    uint8_t spec32[sizeof m->spec * 4], cols32[sizeof layer_columns * 4], kinds32[sizeof layer_kinds * 4];
    add_string(arr, &n, "dpfl_spec", m->spec, spec32);
    add_string(arr, &n, "dpfl_layer_columns", layer_columns, cols32);
    add_string(arr, &n, "dpfl_layer_kinds", layer_kinds, kinds32);
    /* the graph: one row of int32 per layer, little-endian */
    uint8_t *table = malloc((size_t)m->nlayers * LAYER_COLUMNS * 4);
    if (!table) {
        free(values);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    }
    for (int32_t l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        const int32_t row[LAYER_COLUMNS] = {(int32_t)L->kind, L->in_c,   L->in_h, L->in_w, L->out_c,
                                            L->out_h,         L->out_w,  L->k,    L->stride, L->pad,
                                            L->bias,          L->groups, L->from, L->shortcut};
        store_i32s(table + (size_t)l * LAYER_COLUMNS * 4, row, LAYER_COLUMNS);
    }
    npy_array *t = add(arr, &n, "dpfl_layers", "<i4", table, (size_t)m->nlayers * LAYER_COLUMNS * 4);
    t->ndim = 2, t->shape[0] = m->nlayers, t->shape[1] = LAYER_COLUMNS;
    uint8_t shape[12], cls[4];
    const int32_t dims[3] = {m->in_c, m->in_h, m->in_w};
    store_i32s(shape, dims, 3);
    store_i32s(cls, &classes, 1);
    npy_array *a = add(arr, &n, "dpfl_input_shape", "<i4", shape, sizeof shape);
    a->ndim = 1, a->shape[0] = 3;
    add(arr, &n, "dpfl_classes", "<i4", cls, sizeof cls)->ndim = 0;
    if (nstd) { /* the inputs' standardization in training, '<f8' */
        npy_array *mean = add(arr, &n, "dpfl_input_mean", "<f8", values + 4 * m->nparam, 8 * nstd);
        npy_array *std = add(arr, &n, "dpfl_input_std", "<f8", values + 4 * m->nparam + 8 * nstd, 8 * nstd);
        mean->ndim = std->ndim = 1;
        mean->shape[0] = std->shape[0] = s->n;
    }
    dpfl_status st = write_zip(arr, n, path, err);
    free(table);
    free(values);
    return st;
}
