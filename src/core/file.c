/* Checksummed, versioned, atomically replaced files: a crash leaves the old file or the new one, never half; and
 * the folders they go in (mkdir -p). */
#define _GNU_SOURCE
#include "core/file.h"
#include "core/bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static uLong crc32_update(uLong c, const void *data, size_t len)
{
    const Bytef *p = data;
    while (len > 0) {
        uInt chunk = len > 1u << 30 ? 1u << 30 : (uInt)len;
        c = crc32(c, p, chunk);
        p += chunk;
        len -= chunk;
    }
    return c;
}

uint32_t dpfl_crc32(const void *data, size_t len)
{
    return (uint32_t)crc32_update(crc32(0L, Z_NULL, 0), data, len);
}

void dpfl_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, len);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

double dpfl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dpfl_status write_all(int fd, const void *buf, size_t len, const char *path, dpfl_error *err)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return dpfl_fail(err, DPFL_EIO, "cannot write (%s): %s", path, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    return DPFL_OK;
}

/* Write the pieces to a temp file next to path, fsync, rename over path, fsync the directory. */
static dpfl_status atomic_write(const char *path, const void *const *parts, const size_t *lens, int nparts,
                                dpfl_error *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        dpfl_status s = dpfl_fail(err, DPFL_EIO, "cannot create file (%s): %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    dpfl_status s = DPFL_OK;
    for (int i = 0; i < nparts && s == DPFL_OK; i++) s = write_all(fd, parts[i], lens[i], tmp, err);
    if (s == DPFL_OK && fsync(fd) != 0) s = dpfl_fail(err, DPFL_EIO, "cannot fsync (%s): %s", tmp, strerror(errno));
    if (close(fd) != 0 && s == DPFL_OK) s = dpfl_fail(err, DPFL_EIO, "cannot close (%s): %s", tmp, strerror(errno));
    if (s == DPFL_OK && rename(tmp, path) != 0)
        s = dpfl_fail(err, DPFL_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (s != DPFL_OK) {
        unlink(tmp);
    } else {
        /* make the rename itself durable */
        char *dir = strdup(path);
        if (dir) {
            char *slash = strrchr(dir, '/');
            const char *d = ".";
            if (slash) {
                *slash = '\0';
                d = slash == dir ? "/" : dir;
            }
            int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
            free(dir);
        }
    }
    free(tmp);
    return s;
}

dpfl_status dpfl_file_write(const char *path, uint32_t magic, uint32_t version, const void *payload,
                            size_t len, dpfl_error *err)
{
    uint8_t head[16];
    uint64_t len64 = len;
    dpfl_bytes_store_u32(head, magic);
    dpfl_bytes_store_u32(head + 4, version);
    dpfl_bytes_store_u64(head + 8, len64);
    uint8_t crc[4];
    dpfl_bytes_store_u32(crc, dpfl_crc32(payload, len));
    const void *parts[3] = {head, payload, crc};
    size_t lens[3] = {sizeof head, len, sizeof crc};
    return atomic_write(path, parts, lens, 3, err);
}

dpfl_status dpfl_file_write_parts(const char *path, uint32_t magic, uint32_t version, const void *const *parts,
                                  const size_t *lens, int nparts, dpfl_error *err)
{
    const void **all = malloc(((size_t)nparts + 2) * sizeof *all);
    size_t *all_lens = malloc(((size_t)nparts + 2) * sizeof *all_lens);
    if (!all || !all_lens) {
        free(all);
        free(all_lens);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
    }
    uint8_t head[16];
    uint64_t len64 = 0;
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < nparts; i++) {
        len64 += lens[i];
        c = crc32_update(c, parts[i], lens[i]);
        all[i + 1] = parts[i];
        all_lens[i + 1] = lens[i];
    }
    uint8_t crc[4];
    dpfl_bytes_store_u32(crc, (uint32_t)c);
    dpfl_bytes_store_u32(head, magic);
    dpfl_bytes_store_u32(head + 4, version);
    dpfl_bytes_store_u64(head + 8, len64);
    all[0] = head;
    all_lens[0] = sizeof head;
    all[nparts + 1] = crc;
    all_lens[nparts + 1] = sizeof crc;
    dpfl_status st = atomic_write(path, all, all_lens, nparts + 2, err);
    free(all);
    free(all_lens);
    return st;
}

dpfl_status dpfl_file_write_text(const char *path, const char *text, size_t len, dpfl_error *err)
{
    const void *parts[1] = {text};
    size_t lens[1] = {len};
    return atomic_write(path, parts, lens, 1, err);
}

dpfl_status dpfl_file_read_all(const char *path, char **out, size_t *len, dpfl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot open (%s): %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading (%s)", path);
    if (bad) {
        free(buf);
        return dpfl_fail(err, DPFL_EIO, "read error (%s)", path);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return DPFL_OK;
}

dpfl_status dpfl_file_read(const char *path, uint32_t magic, uint32_t version, void **payload, size_t *len,
                           dpfl_error *err)
{
    char *buf;
    size_t n;
    dpfl_status s = dpfl_file_read_all(path, &buf, &n, err);
    if (s) return s;
    if (n < 20) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "file too short to be a dpfl file (%s): %zu bytes", path, n);
    }
    const uint8_t *b = (const uint8_t *)buf;
    const uint32_t m = dpfl_bytes_load_u32(b), v = dpfl_bytes_load_u32(b + 4);
    const uint64_t plen = dpfl_bytes_load_u64(b + 8);
    if (m != magic) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "wrong magic number (%s): not the expected kind of dpfl file", path);
    }
    if (v != version) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "unsupported version %u (%s): expected %u", v, path, version);
    }
    if (plen != n - 20) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "truncated or padded file (%s): header says %llu payload bytes, found %zu",
                         path, (unsigned long long)plen, n - 20);
    }
    if (dpfl_bytes_load_u32(b + 16 + plen) != dpfl_crc32(buf + 16, plen)) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "checksum mismatch (%s): the file is corrupt", path);
    }
    memmove(buf, buf + 16, plen);
    *payload = buf;
    *len = plen;
    return DPFL_OK;
}

dpfl_status dpfl_file_make_dirs(const char *path, unsigned mode, dpfl_error *err)
{
    char buf[1024];
    if (!*path) return dpfl_fail(err, DPFL_EINVAL, "cannot create a folder with an empty name");
    if (strlen(path) >= sizeof buf) return dpfl_fail(err, DPFL_EINVAL, "folder path too long (%s)", path);
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) { /* each parent, then the folder itself */
        if (*p && *p != '/') continue;
        const char c = *p;
        *p = '\0';
        if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
            return dpfl_fail(err, DPFL_EIO, "cannot create folder (%s): %s", buf, strerror(errno));
        if (!(*p = c)) break;
    }
    return DPFL_OK;
}
