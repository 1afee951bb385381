/* Writers of NumPy .npy / .npz and CIFAR binary files in their exact published formats, for tests (no Python,
 * no network): numpy.lib.format NPY 1.0 headers padded to 64 bytes, ZIP archives as numpy.savez (stored) and
 * savez_compressed (raw deflate) write them, CIFAR records <label byte(s)><3072 pixel bytes>. */
#ifndef DPFL_TESTS_ARRAYS_WRITE_H
#define DPFL_TESTS_ARRAYS_WRITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* An NPY 1.0 file in a malloc'd buffer: header dict for descr / fortran / shape, then nbytes of data. */
static inline uint8_t *npy_bytes(const char *descr, int fortran, const int64_t *shape, int ndim, const void *data,
                                 size_t nbytes, size_t *len)
{
    char dict[256], sh[128] = "";
    size_t k = 0;
    for (int i = 0; i < ndim; i++) k += (size_t)snprintf(sh + k, sizeof sh - k, "%lld,%s", (long long)shape[i], i + 1 < ndim ? " " : "");
    if (ndim > 1) sh[k - 1] = '\0'; /* numpy writes (3, 4) but (3,) */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", descr,
                     fortran ? "True" : "False", sh);
    size_t hl = (size_t)n + 1, total = 10 + hl;
    hl += (64 - total % 64) % 64;
    uint8_t *b = malloc(10 + hl + nbytes);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hl & 0xff), b[9] = (uint8_t)(hl >> 8);
    memset(b + 10, ' ', hl);
    memcpy(b + 10, dict, (size_t)n);
    b[10 + hl - 1] = '\n';
    if (nbytes) memcpy(b + 10 + hl, data, nbytes);
    *len = 10 + hl + nbytes;
    return b;
}

static inline void arrays_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (len && fwrite(data, 1, len, f) != len) abort();
    fclose(f);
}

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A ZIP of members name[i] (+ ".npy") holding data[i], stored (deflate = 0) or raw-deflated, as numpy writes. */
static inline void npz_write(const char *path, int nmem, const char *const *names, uint8_t *const *data,
                             const size_t *lens, int compress)
{
    size_t cap = 1024;
    for (int i = 0; i < nmem; i++) cap += 2 * lens[i] + 256;
    uint8_t *z = malloc(cap), *cd = malloc(256 * (size_t)nmem + 64);
    size_t p = 0, c = 0;
    for (int i = 0; i < nmem; i++) {
        char nm[128];
        int nl = snprintf(nm, sizeof nm, "%s.npy", names[i]);
        uint32_t crc = (uint32_t)crc32(0L, data[i], (uInt)lens[i]);
        uint8_t *comp = data[i];
        size_t clen = lens[i];
        if (compress) {
            comp = malloc(lens[i] + 1024);
            z_stream s;
            memset(&s, 0, sizeof s);
            deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
            s.next_in = data[i], s.avail_in = (uInt)lens[i], s.next_out = comp, s.avail_out = (uInt)(lens[i] + 1024);
            deflate(&s, Z_FINISH);
            clen = s.total_out;
            deflateEnd(&s);
        }
        size_t loc = p;
        put_le(z + p, 0x04034b50, 4), put_le(z + p + 4, 20, 2), put_le(z + p + 6, 0, 2);
        put_le(z + p + 8, compress ? 8 : 0, 2), put_le(z + p + 10, 0, 2), put_le(z + p + 12, 0x21, 2);
        put_le(z + p + 14, crc, 4), put_le(z + p + 18, clen, 4), put_le(z + p + 22, lens[i], 4);
        put_le(z + p + 26, (uint64_t)nl, 2), put_le(z + p + 28, 20, 2); /* a ZIP64 extra, as numpy's force_zip64 */
        memcpy(z + p + 30, nm, (size_t)nl);
        p += 30 + (size_t)nl;
        put_le(z + p, 1, 2), put_le(z + p + 2, 16, 2), put_le(z + p + 4, lens[i], 8), put_le(z + p + 12, clen, 8);
        p += 20;
        memcpy(z + p, comp, clen);
        p += clen;
        if (comp != data[i]) free(comp);
        put_le(cd + c, 0x02014b50, 4), put_le(cd + c + 4, 20, 2), put_le(cd + c + 6, 20, 2), put_le(cd + c + 8, 0, 2);
        put_le(cd + c + 10, compress ? 8 : 0, 2), put_le(cd + c + 12, 0, 2), put_le(cd + c + 14, 0x21, 2);
        put_le(cd + c + 16, crc, 4), put_le(cd + c + 20, clen, 4), put_le(cd + c + 24, lens[i], 4);
        put_le(cd + c + 28, (uint64_t)nl, 2), put_le(cd + c + 30, 0, 2), put_le(cd + c + 32, 0, 2);
        put_le(cd + c + 34, 0, 2), put_le(cd + c + 36, 0, 2), put_le(cd + c + 38, 0, 4), put_le(cd + c + 42, loc, 4);
        memcpy(cd + c + 46, nm, (size_t)nl);
        c += 46 + (size_t)nl;
    }
    memcpy(z + p, cd, c);
    size_t cdo = p;
    p += c;
    put_le(z + p, 0x06054b50, 4), put_le(z + p + 4, 0, 4), put_le(z + p + 8, (uint64_t)nmem, 2);
    put_le(z + p + 10, (uint64_t)nmem, 2), put_le(z + p + 12, c, 4), put_le(z + p + 16, cdo, 4), put_le(z + p + 20, 0, 2);
    p += 22;
    arrays_write_file(path, z, p);
    free(z), free(cd);
}

/* n CIFAR records into path: labels lab[i] (CIFAR-100: coarse[i] then lab[i]), pixels px + i * 3072. */
static inline void cifar_write(const char *path, int hundred, int n, const uint8_t *coarse, const uint8_t *lab,
                               const uint8_t *px)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    for (int i = 0; i < n; i++) {
        if (hundred) fputc(coarse[i], f);
        fputc(lab[i], f);
        if (fwrite(px + (size_t)i * 3072, 1, 3072, f) != 3072) abort();
    }
    fclose(f);
}

#endif
