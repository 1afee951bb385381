/* NumPy arrays as a dataset: "npy:X.npy,Y.npy", "npy:FILE.npz" or "npy:FILE.npz:XNAME,YNAME".
 *
 * Formats: NEP 1 / numpy.lib.format (NPY 1.0, 2.0 and 3.0: magic "\x93NUMPY", version, header length, a Python
 * dict literal with 'descr', 'fortran_order' and 'shape', then the raw array) and NumPy's .npz (a ZIP archive of
 * NPY files named <array>.npy, stored by numpy.savez or deflated by numpy.savez_compressed, ZIP64 extra fields as
 * numpy writes them; PKWARE APPNOTE 4.3.7 for the ZIP records).  Read with our own parser (no Python): every
 * length, offset and count is checked against the file before use, and every error names the file and the byte
 * offset where the problem was found.
 *
 * X: shape (N, ...): (N, F) is N examples of F features, (N, H, W) one channel of H x W, (N, C, H, W) C channels,
 * more dimensions are flattened into features.  Types float32, float64, (u)int8/16/32/64 and bool; values are
 * taken as they are (no scaling: uint8 pixels stay 0..255 -- set data.normalize to scale them) and must be
 * finite.  Y: shape (N,) or (N, 1), integer (or float holding integers, or bool) labels >= 0. */
#include "internal.h"
#include "core/bytes.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define NPY_MAX_DIMS 8

typedef struct {
    char kind;          /* 'f', 'i', 'u', 'b' */
    int size;           /* bytes per element */
    int fortran, ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t count;      /* product of shape */
    const uint8_t *data;
    size_t base;        /* offset of this NPY's first byte in its file (inside an .npz: of the member's data) */
    size_t data_off;    /* offset of the array data in the file */
} npy_array;

static dpfl_status bad(dpfl_error *err, const char *what, size_t off, const char *why)
{
    return dpfl_fail(err, DPFL_EFORMAT, "bad NumPy array (%s, byte %zu): %s", what, off, why);
}

/* ------------------------------------------------------------------------------------------ NPY header */
typedef struct {
    const char *s, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r')) c->s++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->s < c->end && *c->s == ch) {
        c->s++;
        return 1;
    }
    return 0;
}

/* a quoted string ('...' or "...") into out (cap bytes) */
static int quoted(cursor *c, char *out, size_t cap)
{
    skip_ws(c);
    if (c->s >= c->end || (*c->s != '\'' && *c->s != '"')) return 0;
    char q = *c->s++;
    size_t n = 0;
    while (c->s < c->end && *c->s != q) {
        if (n + 1 >= cap) return 0;
        out[n++] = *c->s++;
    }
    if (c->s >= c->end) return 0;
    c->s++;
    out[n] = '\0';
    return 1;
}

/* s for an error message: control characters (a newline would break the one-line error) as '?' */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) *s = '?';
}

static dpfl_status parse_descr(const char *d, npy_array *a, const char *what, size_t off, dpfl_error *err)
{
    if (strlen(d) < 3 || !strchr("<|=>", d[0]))
        return bad(err, what, off, "unsupported dtype (need a little-endian number type such as '<f4')");
    if (d[0] == '>' && strcmp(d + 2, "1"))
        return bad(err, what, off, "big-endian arrays are not supported: convert with arr.astype(arr.dtype.newbyteorder('<'))");
    char *e;
    long sz = strtol(d + 2, &e, 10);
    a->kind = d[1];
    a->size = (int)sz;
    int ok = !*e && ((a->kind == 'f' && (sz == 4 || sz == 8)) ||
                     ((a->kind == 'i' || a->kind == 'u') && (sz == 1 || sz == 2 || sz == 4 || sz == 8)) ||
                     (a->kind == 'b' && sz == 1));
    if (!ok) {
        char msg[96];
        snprintf(msg, sizeof msg, "unsupported dtype '%.16s' (float32/64, (u)int8-64 or bool)", d);
        printable(msg);
        return bad(err, what, off, msg);
    }
    return DPFL_OK;
}

/* Parses one NPY file held in buf[0, len); base = its offset in the file named what (for messages). */
static dpfl_status npy_parse(const uint8_t *buf, size_t len, size_t base, const char *what, npy_array *a,
                             dpfl_error *err)
{
    memset(a, 0, sizeof *a);
    a->base = base;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) return bad(err, what, base, "not an NPY file (no \\x93NUMPY magic)");
    const int major = buf[6];
    if (major < 1 || major > 3) return bad(err, what, base + 6, "unknown NPY format version");
    size_t hl, ho = major == 1 ? 10 : 12;
    if (len < ho) return bad(err, what, base + 8, "file ends inside the header length");
    hl = (size_t)dpfl_bytes_load_le(buf + 8, major == 1 ? 2 : 4);
    if (hl > len - ho) return bad(err, what, base + 8, "header longer than the file");
    cursor c = {(const char *)buf + ho, (const char *)buf + ho + hl};
    int have_descr = 0, have_fo = 0, have_shape = 0;
    if (!eat(&c, '{')) return bad(err, what, base + ho, "header is not a Python dict");
    while (!eat(&c, '}')) {
        char key[32], val[32];
        size_t at = base + (size_t)((const uint8_t *)c.s - buf);
        if (!quoted(&c, key, sizeof key) || !eat(&c, ':')) return bad(err, what, at, "malformed header dict");
        at = base + (size_t)((const uint8_t *)c.s - buf);
        if (!strcmp(key, "descr")) {
            if (!quoted(&c, val, sizeof val)) return bad(err, what, at, "'descr' is not a simple dtype string");
            dpfl_status s = parse_descr(val, a, what, at, err);
            if (s) return s;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            skip_ws(&c);
            if (c.end - c.s >= 4 && !memcmp(c.s, "True", 4)) a->fortran = 1, c.s += 4;
            else if (c.end - c.s >= 5 && !memcmp(c.s, "False", 5)) a->fortran = 0, c.s += 5;
            else return bad(err, what, at, "'fortran_order' is not True or False");
            have_fo = 1;
        } else if (!strcmp(key, "shape")) {
            if (!eat(&c, '(')) return bad(err, what, at, "'shape' is not a tuple");
            a->ndim = 0;
            while (!eat(&c, ')')) {
                skip_ws(&c);
                if (a->ndim == NPY_MAX_DIMS) return bad(err, what, at, "more than 8 dimensions");
                int64_t v = 0;
                const char *d0 = c.s;
                while (c.s < c.end && *c.s >= '0' && *c.s <= '9') {
                    if (v > ((int64_t)1 << 50)) return bad(err, what, at, "dimension too large");
                    v = v * 10 + (*c.s++ - '0');
                }
                if (c.s == d0) return bad(err, what, at, "malformed 'shape'");
                a->shape[a->ndim++] = v;
                skip_ws(&c);
                if (c.s < c.end && *c.s == 'L') c.s++; /* Python 2 longs */
                if (!eat(&c, ',') && !(c.s < c.end && *c.s == ')')) return bad(err, what, at, "malformed 'shape'");
            }
            have_shape = 1;
        } else {
            return bad(err, what, at, "unknown key in the header");
        }
        if (!eat(&c, ',') && !(skip_ws(&c), c.s < c.end && *c.s == '}')) return bad(err, what, at, "malformed header dict");
    }
    if (!have_descr || !have_fo || !have_shape)
        return bad(err, what, base + ho, "header lacks 'descr', 'fortran_order' or 'shape'");
    a->count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] && a->count > ((int64_t)1 << 40) / a->shape[i]) return bad(err, what, base + ho, "array too large");
        a->count *= a->shape[i];
    }
    const size_t data_off = ho + hl, need = (size_t)a->count * (size_t)a->size;
    if (len - data_off != need) {
        char msg[128];
        snprintf(msg, sizeof msg, "the shape needs %zu bytes of data, the file has %zu after its header", need,
                 len - data_off);
        return bad(err, what, base + data_off, msg);
    }
    a->data = buf + data_off;
    a->data_off = base + data_off;
    return DPFL_OK;
}

/* Element i in C order (the array's own order converted) as a double. */
static double elem(const npy_array *a, int64_t i)
{
    int64_t at = i;
    if (a->fortran && a->ndim > 1) { /* C-order index -> Fortran-order offset */
        int64_t rem = i, stride = 1, idx[NPY_MAX_DIMS];
        for (int d = a->ndim - 1; d >= 0; d--) idx[d] = rem % a->shape[d], rem /= a->shape[d];
        at = 0;
        for (int d = 0; d < a->ndim; d++) at += idx[d] * stride, stride *= a->shape[d];
    }
    const uint8_t *p = a->data + (size_t)at * (size_t)a->size;
    uint64_t u = dpfl_bytes_load_le(p, a->size);
    switch (a->kind) {
    case 'f':
        if (a->size == 4) {
            uint32_t b = (uint32_t)u;
            float f;
            memcpy(&f, &b, 4);
            return f;
        } else {
            double d;
            memcpy(&d, &u, 8);
            return d;
        }
    case 'i': {
        int sh = 64 - 8 * a->size;
        return (double)((int64_t)(u << sh) >> sh);
    }
    default: return (double)u; /* 'u', 'b' */
    }
}

/* X and Y arrays -> dataset */
static dpfl_status to_dataset(const npy_array *x, const npy_array *y, const char *xw, const char *yw, dpfl_dataset *out,
                              dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (x->ndim < 2 || x->shape[0] < 1)
        return bad(err, xw, x->base, "features need shape (N, ...) with N >= 1 examples");
    if (!(y->ndim == 1 || (y->ndim == 2 && y->shape[1] == 1)))
        return bad(err, yw, y->base, "labels need shape (N,) or (N, 1)");
    if (y->shape[0] != x->shape[0]) {
        char msg[128];
        snprintf(msg, sizeof msg, "%lld labels for %lld examples", (long long)y->shape[0], (long long)x->shape[0]);
        return bad(err, yw, y->base, msg);
    }
    if (x->shape[0] > INT32_MAX) return bad(err, xw, x->base, "more than 2^31 examples");
    const int64_t n = x->shape[0], dim = x->count / n;
    int64_t c = 1, h = 1, w = dim;
    if (x->ndim == 3) h = x->shape[1], w = x->shape[2];
    if (x->ndim == 4) c = x->shape[1], h = x->shape[2], w = x->shape[3];
    if (dim < 1 || dim > INT32_MAX) return bad(err, xw, x->base, "examples of no or too many values");
    dpfl_status s = dpfl__dataset_alloc(out, (int32_t)n, (int32_t)c, (int32_t)h, (int32_t)w, 0, xw, err);
    if (s) return s;
    for (int64_t i = 0; i < x->count; i++) {
        double v = elem(x, i);
        if (!isfinite(v) || fabs(v) > 3.4e38) {
            dpfl_dataset_free(out);
            char msg[96];
            snprintf(msg, sizeof msg, "value %g of example %lld is not a finite float", v, (long long)(i / dim));
            return bad(err, xw, x->data_off + (size_t)i * x->size, msg);
        }
        out->x[i] = (float)v;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = elem(y, i);
        if (!(v >= 0 && v < 65536 && v == floor(v))) {
            dpfl_dataset_free(out);
            char msg[96];
            snprintf(msg, sizeof msg, "label %g of example %lld is not an integer in [0, 65536)", v, (long long)i);
            return bad(err, yw, y->data_off + (size_t)i * y->size, msg);
        }
        out->y[i] = (int32_t)v;
    }
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ files */
static dpfl_status read_all(const char *path, uint8_t **buf, size_t *len, dpfl_error *err)
{
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot open NumPy file (%s): %s", path, "no such file or not readable");
    int ok = fseek(f, 0, SEEK_END) == 0;
    long n = ok ? ftell(f) : -1;
    ok = ok && n >= 0 && fseek(f, 0, SEEK_SET) == 0;
    if (ok) *buf = malloc((size_t)n + 1);
    ok = ok && *buf && fread(*buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        free(*buf);
        *buf = NULL;
        return dpfl_fail(err, DPFL_EIO, "cannot read NumPy file (%s)", path);
    }
    *len = (size_t)n;
    return DPFL_OK;
}

/* Offsets (into the member data) are reported relative to the .npz file: base = the member's data offset. */
typedef struct {
    char name[128];
    uint8_t *data; /* the member's bytes (inflated if needed; owned) */
    size_t len, off;
} zip_member;

/* The central directory's entry count and offset, from the end-of-central-directory record (ZIP64's where the
 * classic fields overflow). */
static dpfl_status zip_directory(const uint8_t *z, size_t len, const char *path, uint64_t *count, uint64_t *cd_off,
                                 dpfl_error *err)
{
    size_t eocd = (size_t)-1;
    for (size_t i = len >= 22 ? len - 22 + 1 : 0; i-- > 0 && len - i <= 22 + 65535;)
        if (dpfl_bytes_load_u32(z + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    if (eocd == (size_t)-1) return bad(err, path, 0, "not a ZIP (.npz) archive: no end-of-central-directory record");
    *count = dpfl_bytes_load_u16(z + eocd + 10), *cd_off = dpfl_bytes_load_u32(z + eocd + 16);
    if (*count == 0xFFFF || *cd_off == 0xFFFFFFFFu) { /* ZIP64: locator just before the EOCD */
        if (eocd < 20 || dpfl_bytes_load_u32(z + eocd - 20) != 0x07064b50)
            return bad(err, path, eocd, "ZIP64 locator missing");
        uint64_t r = dpfl_bytes_load_u64(z + eocd - 20 + 8);
        if (r > len - 56 || len < 56 || dpfl_bytes_load_u32(z + r) != 0x06064b50)
            return bad(err, path, eocd - 20, "bad ZIP64 record");
        *count = dpfl_bytes_load_u64(z + r + 32), *cd_off = dpfl_bytes_load_u64(z + r + 48);
    }
    return DPFL_OK;
}

/* A central directory entry's ZIP64 extra field (xl bytes at x): the 0xFFFFFFFF fields, in order. */
static void zip64_extra(const uint8_t *x, unsigned xl, uint64_t *usize, uint64_t *csize, uint64_t *loc)
{
    for (unsigned q = 0; q + 4 <= xl;) {
        unsigned id = dpfl_bytes_load_u16(x + q), sz = dpfl_bytes_load_u16(x + q + 2), k = q + 4;
        if (q + 4 + sz > xl) break;
        if (id == 1) {
            if (*usize == 0xFFFFFFFFu && k + 8 <= q + 4 + sz) *usize = dpfl_bytes_load_u64(x + k), k += 8;
            if (*csize == 0xFFFFFFFFu && k + 8 <= q + 4 + sz) *csize = dpfl_bytes_load_u64(x + k), k += 8;
            if (*loc == 0xFFFFFFFFu && k + 8 <= q + 4 + sz) *loc = dpfl_bytes_load_u64(x + k);
        }
        q += 4 + sz;
    }
}

/* A member's bytes into o->data (o->len of them): stored (method 0) or deflated (8), then its CRC-32 checked. */
static dpfl_status zip_extract(zip_member *o, const uint8_t *z, size_t data, unsigned method, uint64_t csize,
                               uint32_t crc, const char *path, dpfl_error *err)
{
    const uint64_t usize = o->len;
    if (method == 0) {
        memcpy(o->data, z + data, (size_t)usize);
    } else {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (inflateInit2(&zs, -15) != Z_OK) return dpfl_fail(err, DPFL_ENOMEM, "zlib failed (%s)", path);
        zs.next_in = (Bytef *)(z + data);
        zs.avail_in = (uInt)(csize > UINT_MAX ? UINT_MAX : csize);
        zs.next_out = o->data;
        zs.avail_out = (uInt)(usize > UINT_MAX ? UINT_MAX : usize);
        int r = inflate(&zs, Z_FINISH);
        size_t got = (size_t)zs.total_out;
        inflateEnd(&zs);
        if (r != Z_STREAM_END || got != usize) return bad(err, path, data, "corrupt deflated member");
    }
    if ((uint32_t)crc32(0L, o->data, (uInt)o->len) != crc && o->len <= UINT_MAX)
        return bad(err, path, data, "member fails its CRC-32");
    return DPFL_OK;
}

/* The members of a ZIP archive named *.npy (at most cap), their data extracted. */
static dpfl_status zip_members(const uint8_t *z, size_t len, const char *path, zip_member *m, int cap, int *n,
                               dpfl_error *err)
{
    *n = 0;
    uint64_t count = 0, cd_off = 0;
    dpfl_status st = zip_directory(z, len, path, &count, &cd_off, err);
    if (st) return st;
    size_t p = (size_t)cd_off;
    for (uint64_t e = 0; e < count; e++) {
        if (p > len || len - p < 46 || dpfl_bytes_load_u32(z + p) != 0x02014b50)
            return bad(err, path, p, "bad central directory entry");
        const unsigned method = dpfl_bytes_load_u16(z + p + 10), nl = dpfl_bytes_load_u16(z + p + 28);
        const unsigned xl = dpfl_bytes_load_u16(z + p + 30), cl = dpfl_bytes_load_u16(z + p + 32);
        const uint32_t crc = dpfl_bytes_load_u32(z + p + 16);
        uint64_t csize = dpfl_bytes_load_u32(z + p + 20), usize = dpfl_bytes_load_u32(z + p + 24);
        uint64_t loc = dpfl_bytes_load_u32(z + p + 42);
        if (len - p - 46 < (size_t)nl + xl + cl) return bad(err, path, p, "central directory entry past the end");
        const uint8_t *name = z + p + 46;
        zip64_extra(name + nl, xl, &usize, &csize, &loc);
        const size_t entry = p;
        p += 46 + (size_t)nl + xl + cl;
        if (nl < 5 || nl >= sizeof m->name || memcmp(name + nl - 4, ".npy", 4)) continue;
        if (*n == cap) return bad(err, path, entry, "more than 64 arrays");
        if (loc > len || len - loc < 30 || dpfl_bytes_load_u32(z + loc) != 0x04034b50)
            return bad(err, path, entry, "bad local header offset");
        size_t data = (size_t)loc + 30 + (size_t)dpfl_bytes_load_u16(z + loc + 26) + dpfl_bytes_load_u16(z + loc + 28);
        if (data > len || csize > len - data) return bad(err, path, (size_t)loc, "member data past the end of the file");
        if (usize > ((uint64_t)1 << 40)) return bad(err, path, entry, "member too large");
        if (method != 0 && method != 8) return bad(err, path, entry, "member compressed with a method other than deflate");
        if (method == 0 && usize != csize) return bad(err, path, entry, "stored member whose sizes differ");
        /* deflate expands at most 1032:1 (a 258-byte match per 2 bits): a larger claim is corrupt, and would make
         * us allocate what no file of this size can hold */
        if (method == 8 && usize / 1032 > csize + 1)
            return bad(err, path, entry, "deflated member larger than its compressed size allows");
        zip_member *o = &m[*n];
        memcpy(o->name, name, nl - 4);
        o->name[nl - 4] = '\0';
        o->off = data;
        o->len = (size_t)usize;
        o->data = malloc(usize ? (size_t)usize : 1);
        if (!o->data) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
        ++*n;
        if ((st = zip_extract(o, z, data, method, csize, crc, path, err))) return st;
    }
    return DPFL_OK;
}

static const zip_member *find_member(const zip_member *m, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].name, name)) return &m[i];
    return NULL;
}

static dpfl_status pair_from(const zip_member *m, int n, const char *xn, const char *yn, const char *path,
                             dpfl_dataset *out, dpfl_error *err)
{
    const zip_member *xm = find_member(m, n, xn), *ym = find_member(m, n, yn);
    if (!xm || !ym) {
        char names[512] = "";
        for (int i = 0; i < n; i++) {
            if (i) strncat(names, ", ", sizeof names - strlen(names) - 1);
            strncat(names, m[i].name, sizeof names - strlen(names) - 1);
        }
        printable(names);
        return dpfl_fail(err, DPFL_EFORMAT, "no array '%s' in NumPy archive (%s): it holds %s", !xm ? xn : yn, path,
                         n ? names : "no arrays");
    }
    npy_array x, y;
    char xw[DPFL__PATH_MAX + 64], yw[DPFL__PATH_MAX + 64];
    snprintf(xw, sizeof xw, "%s:%s", path, xn);
    snprintf(yw, sizeof yw, "%s:%s", path, yn);
    dpfl_status s = npy_parse(xm->data, xm->len, xm->off, xw, &x, err);
    if (!s) s = npy_parse(ym->data, ym->len, ym->off, yw, &y, err);
    if (!s) s = to_dataset(&x, &y, xw, yw, out, err);
    return s;
}

dpfl_status dpfl_npy_load(const char *x_path, const char *y_path, dpfl_dataset *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *xb = NULL, *yb = NULL;
    size_t xl = 0, yl = 0;
    npy_array x, y;
    dpfl_status s = read_all(x_path, &xb, &xl, err);
    if (!s) s = read_all(y_path, &yb, &yl, err);
    if (!s) s = npy_parse(xb, xl, 0, x_path, &x, err);
    if (!s) s = npy_parse(yb, yl, 0, y_path, &y, err);
    if (!s) s = to_dataset(&x, &y, x_path, y_path, out, err);
    free(xb), free(yb);
    return s;
}

dpfl_status dpfl_npz_load(const char *path, const char *x_name, const char *y_name, dpfl_dataset *train,
                          dpfl_dataset *test, int *has_test, dpfl_error *err)
{
    memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (has_test) *has_test = 0;
    uint8_t *z = NULL;
    size_t len = 0;
    enum { CAP = 64 };
    zip_member m[CAP];
    int n = 0;
    dpfl_status s = read_all(path, &z, &len, err);
    if (!s) s = zip_members(z, len, path, m, CAP, &n, err);
    if (!s && x_name && *x_name) {
        s = pair_from(m, n, x_name, y_name, path, train, err);
    } else if (!s && find_member(m, n, "x_train")) { /* the Keras layout: x_train, y_train [, x_test, y_test] */
        s = pair_from(m, n, "x_train", "y_train", path, train, err);
        if (!s && test && find_member(m, n, "x_test")) {
            s = pair_from(m, n, "x_test", "y_test", path, test, err);
            if (!s && has_test) *has_test = 1;
        }
    } else if (!s) {
        s = pair_from(m, n, find_member(m, n, "X") && !find_member(m, n, "x") ? "X" : "x", "y", path, train, err);
    }
    for (int i = 0; i < n; i++) free(m[i].data);
    free(z);
    if (s) {
        dpfl_dataset_free(train);
        if (test) dpfl_dataset_free(test);
    }
    return s;
}

/* "X.npy,Y.npy" | "F.npz" | "F.npz:XNAME,YNAME" (the part after "npy:") */
dpfl_status dpfl__npy_read(const char *spec, dpfl_dataset *all, dpfl_dataset *test, int *has_test, dpfl_error *err)
{
    char buf[2 * DPFL__PATH_MAX];
    *has_test = 0;
    if (strlen(spec) >= sizeof buf) return dpfl_fail(err, DPFL_EINVAL, "data.dataset: npy: spec too long");
    snprintf(buf, sizeof buf, "%s", spec);
    char *npz = strstr(buf, ".npz");
    if (npz && (npz[4] == '\0' || npz[4] == ':')) {
        char *names = npz[4] == ':' ? npz + 5 : NULL, *yn = NULL;
        npz[4] = '\0';
        if (names) {
            yn = strchr(names, ',');
            if (!yn || !yn[1] || yn == names)
                return dpfl_fail(err, DPFL_EINVAL, "data.dataset: 'npy:%s': name the arrays as FILE.npz:X,Y", spec);
            *yn++ = '\0';
        }
        return dpfl_npz_load(buf, names, yn, all, test, has_test, err);
    }
    char *comma = strchr(buf, ',');
    if (!comma || strchr(comma + 1, ','))
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset: 'npy:%s': expected npy:X.npy,Y.npy or npy:FILE.npz[:X,Y]",
                         spec);
    *comma = '\0';
    return dpfl_npy_load(buf, comma + 1, all, err);
}
