/* IDX files (LeCun's MNIST format), plain or gzip: zlib's gzread detects gzip by its magic bytes and reads
 * anything else as is, so one reader serves both.  Header: 0x00 0x00 <type> <ndims>, then ndims big-endian
 * u32 sizes, then the data.  Only unsigned-byte data (type 0x08) occurs in the datasets we use (MNIST,
 * Fashion-MNIST, EMNIST).  Errors name the file and the byte offset (of the uncompressed stream for gzip). */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
    const char *path;
    gzFile f;
    int gz;     /* 1 if the file is gzip-compressed */
    size_t pos; /* bytes read so far (of the uncompressed stream): the offset errors name */
    size_t hdr; /* header length */
} idx_file;

static dpfl_status idx_open(idx_file *f, const char *path, dpfl_error *err)
{
    f->path = path;
    errno = 0;
    f->f = gzopen(path, "rb");
    if (!f->f)
        return dpfl_fail(err, errno ? DPFL_EIO : DPFL_ENOMEM, "cannot open IDX file (%s): %s", path,
                         errno ? strerror(errno) : "out of memory");
    gzbuffer(f->f, 1 << 17);
    f->gz = 0;
    f->pos = f->hdr = 0;
    return DPFL_OK;
}

/* Read exactly len bytes; *got says how many arrived before end of file. */
static dpfl_status idx_read(idx_file *f, void *buf, size_t len, size_t *got, dpfl_error *err)
{
    size_t n = 0;
    *got = 0;
    while (n < len) {
        unsigned chunk = len - n > (size_t)1 << 30 ? 1u << 30 : (unsigned)(len - n);
        int r = gzread(f->f, (char *)buf + n, chunk);
        if (r < 0) {
            int code;
            const char *msg = gzerror(f->f, &code);
            return dpfl_fail(err, DPFL_EFORMAT, "corrupt %sIDX file (%s, %sbyte %zu): %s", f->gz ? "gzip " : "",
                             f->path, f->gz ? "uncompressed " : "", f->pos + n, code == Z_ERRNO ? strerror(errno) : msg);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *got = n;
    f->pos += n;
    return DPFL_OK;
}

/* Header: type must be unsigned byte, ndims as expected; returns the sizes. */
static dpfl_status idx_header(idx_file *f, int want_ndims, const char *kind, uint32_t *dims, dpfl_error *err)
{
    uint8_t h[4 + 4 * 3];
    size_t need = 4 + 4 * (size_t)want_ndims, got;
    dpfl_status s = idx_read(f, h, 4, &got, err);
    if (s) return s;
    f->gz = !gzdirect(f->f);
    if (got < 4)
        return dpfl_fail(err, DPFL_EFORMAT, "truncated IDX file (%s, byte %zu): %zu bytes, too short for the "
                         "4-byte magic number", f->path, got, got);
    if (h[0] != 0 || h[1] != 0)
        return dpfl_fail(err, DPFL_EFORMAT, "not an IDX file (%s, byte 0): magic number starts 0x%02x%02x, expected "
                         "0x0000", f->path, h[0], h[1]);
    if (h[2] != 0x08)
        return dpfl_fail(err, DPFL_EFORMAT, "unsupported IDX data type (%s, byte 2): 0x%02x, expected 0x08 "
                         "(unsigned byte)", f->path, h[2]);
    if (h[3] != want_ndims)
        return dpfl_fail(err, DPFL_EFORMAT, "wrong IDX dimension count (%s, byte 3): %d, expected %d for %s",
                         f->path, h[3], want_ndims, kind);
    s = idx_read(f, h + 4, need - 4, &got, err);
    if (s) return s;
    if (got < need - 4)
        return dpfl_fail(err, DPFL_EFORMAT, "truncated IDX file (%s, byte %zu): header ends after %zu of %zu bytes",
                         f->path, 4 + got, 4 + got, need);
    for (int i = 0; i < want_ndims; i++) {
        const uint8_t *p = h + 4 + 4 * i;
        dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (dims[i] == 0 || dims[i] > INT32_MAX)
            return dpfl_fail(err, DPFL_EFORMAT, "bad IDX size (%s, byte %d): dimension %d is %u", f->path, 4 + 4 * i,
                             i, dims[i]);
    }
    f->hdr = need;
    return DPFL_OK;
}

/* Read the payload of len bytes into *out (malloc'd) and make sure nothing follows it.  The buffer grows with
 * what actually arrives, so a short file whose header promises gigabytes is an error, not a huge allocation. */
static dpfl_status idx_payload(idx_file *f, size_t len, const char *what, uint8_t **out, dpfl_error *err)
{
    size_t cap = len < ((size_t)1 << 20) ? len : (size_t)1 << 20, n = 0, got;
    uint8_t *buf = malloc(cap ? cap : 1);
    dpfl_status s = buf ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory reading IDX file (%s)", f->path);
    while (!s) {
        s = idx_read(f, buf + n, cap - n, &got, err);
        if (s) break;
        n += got;
        if (n < cap || cap == len) break; /* end of file, or all of it */
        size_t nc = cap > len / 2 ? len : 2 * cap;
        uint8_t *nb = realloc(buf, nc);
        if (!nb) s = dpfl_fail(err, DPFL_ENOMEM, "out of memory reading IDX file (%s): %zu bytes", f->path, len);
        else buf = nb, cap = nc;
    }
    if (!s && n < len)
        s = dpfl_fail(err, DPFL_EFORMAT, "truncated IDX file (%s, byte %zu): header promises %zu bytes of %s, only "
                      "%zu present", f->path, f->hdr + n, len, what, n);
    uint8_t extra;
    if (!s) s = idx_read(f, &extra, 1, &got, err);
    if (!s && got)
        s = dpfl_fail(err, DPFL_EFORMAT, "IDX file longer than its header says (%s, byte %zu): extra bytes after "
                      "%zu bytes of %s", f->path, f->hdr + len, len, what);
    if (s) {
        free(buf);
        return s;
    }
    *out = buf;
    return DPFL_OK;
}

dpfl_status dpfl_idx_load(const char *images_path, const char *labels_path, dpfl_dataset *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    idx_file fi = {0}, fl = {0};
    uint32_t di[3] = {0}, dl[1] = {0};
    uint8_t *pix = NULL, *lab = NULL;
    dpfl_status s = idx_open(&fi, images_path, err);
    if (!s) s = idx_header(&fi, 3, "images", di, err);
    if (!s) s = idx_open(&fl, labels_path, err);
    if (!s) s = idx_header(&fl, 1, "labels", dl, err);
    if (!s && di[0] != dl[0])
        s = dpfl_fail(err, DPFL_EFORMAT, "image and label counts differ (%s, byte 4): %u images but %u labels in %s",
                      images_path, di[0], dl[0], labels_path);
    if (!s && (uint64_t)di[1] * di[2] > (1u << 24))
        s = dpfl_fail(err, DPFL_EFORMAT, "implausible IDX image size (%s, byte 8): %ux%u", images_path, di[1], di[2]);
    if (!s && (uint64_t)di[0] * di[1] * di[2] > (uint64_t)1 << 40)
        s = dpfl_fail(err, DPFL_EFORMAT, "implausible IDX file size (%s, byte 4): %u images of %ux%u", images_path,
                      di[0], di[1], di[2]);
    size_t n = di[0], dim = (size_t)di[1] * di[2];
    if (!s) s = idx_payload(&fi, n * dim, "pixels", &pix, err);
    if (!s) s = idx_payload(&fl, n, "labels", &lab, err);
    if (!s) s = dpfl__dataset_alloc(out, (int32_t)di[0], 1, (int32_t)di[1], (int32_t)di[2], 0, images_path, err);
    if (!s) {
        float scale[256]; /* exact p / 255 for every byte value */
        for (int v = 0; v < 256; v++) scale[v] = (float)v / 255.0f;
        for (size_t i = 0; i < n * dim; i++) out->x[i] = scale[pix[i]];
        int32_t k = 0;
        for (size_t i = 0; i < n; i++) {
            out->y[i] = lab[i];
            if (lab[i] + 1 > k) k = lab[i] + 1;
        }
        out->classes = k;
    }
    free(pix);
    free(lab);
    if (fi.f) gzclose(fi.f);
    if (fl.f) gzclose(fl.f);
    if (s) dpfl_dataset_free(out);
    return s;
}
