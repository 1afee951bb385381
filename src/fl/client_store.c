/* The clients' state files (PriFedSync, Zheng et al., Algorithm 1: each client's helper model h(i) and its own Adam
 * state live across the rounds it sits out; issue 35: a round's checkpoint costs the clients that changed, and
 * 10,000 clients' state pages to disk).  One file per client and generation, FOLDER/client<k>.g<gen>.bin, in
 * dpfl's file format (magic, version, length, payload, CRC-32; written to a temporary name, fsync'd, renamed, the
 * folder fsync'd):
 *   payload  i32 client, i32 generation, i64 t, u64 floats, f32 state[floats]
 * A generation is the round after which the state was written.  The checkpoint names each client's generation
 * and its CRC; a file is never rewritten under a generation a durable checkpoint refers to, and the one it
 * replaces goes only once the checkpoint that stops referring to it is durable (clients.c). */
#define _GNU_SOURCE
#include "sim_internal.h"
#include "core/bytes.h"
#include "core/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define STORE_MAGIC 0x53435044u /* "DPCS" */
#define STORE_VERSION 1u
enum { FILE_HEAD = 16, PAYLOAD_HEAD = 4 + 4 + 8 + 8 };

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state files are little-endian; add byte swaps here");

void fl_files_path(const fl_state_files *F, int32_t k, int32_t gen, char *path, size_t len)
{
    snprintf(path, len, "%s/client%d.g%d.bin", F->dir, (int)k, (int)gen);
}

static uLong crc_update(uLong crc, const void *data, size_t len)
{
    const Bytef *p = data;
    while (len > 0) {
        const uInt n = len > 1u << 30 ? 1u << 30 : (uInt)len;
        crc = crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return crc;
}

static dpfl_status write_all(int fd, const void *buf, size_t len, const char *path, dpfl_error *err)
{
    const char *p = buf;
    while (len > 0) {
        const ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return dpfl_fail(err, DPFL_EIO, "cannot write (%s): %s", path, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return DPFL_OK;
}

/* client k's block (its row o) as generation gen into its temporary file (written, its write-back started, not yet
 * fsync'd nor renamed); *crc gets the payload's CRC-32 */
static dpfl_status write_tmp(const fl_state_files *F, const client_opt *o, int32_t k, int32_t gen, uint32_t *crc,
                             dpfl_error *err)
{
    char name[1200], path[1210];
    fl_files_path(F, k, gen, name, sizeof name);
    snprintf(path, sizeof path, "%s.tmp", name);
    const float *state = o->state;
    const size_t floats = F->floats, body = floats * sizeof(float);
    uint8_t head[FILE_HEAD + PAYLOAD_HEAD], tail[4];
    dpfl_bytes_store_u32(head, STORE_MAGIC);
    dpfl_bytes_store_u32(head + 4, STORE_VERSION);
    dpfl_bytes_store_u64(head + 8, PAYLOAD_HEAD + body);
    dpfl_bytes_store_u32(head + 16, (uint32_t)k);
    dpfl_bytes_store_u32(head + 20, (uint32_t)gen);
    dpfl_bytes_store_u64(head + 24, (uint64_t)o->t);
    dpfl_bytes_store_u64(head + 32, floats);
    const uLong sum = crc_update(crc_update(crc32(0L, Z_NULL, 0), head + FILE_HEAD, PAYLOAD_HEAD), state, body);
    *crc = (uint32_t)sum;
    dpfl_bytes_store_u32(tail, *crc);
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return dpfl_fail(err, DPFL_EIO, "cannot create file (%s): %s", path, strerror(errno));
    dpfl_status st = write_all(fd, head, sizeof head, path, err);
    if (!st) st = write_all(fd, state, body, path, err);
    if (!st) st = write_all(fd, tail, sizeof tail, path, err);
    if (!st) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* the disk starts while the next file is written */
    if (close(fd) != 0 && !st) st = dpfl_fail(err, DPFL_EIO, "cannot close (%s): %s", path, strerror(errno));
    if (st) unlink(path);
    return st;
}

/* fsync a file or a folder */
static dpfl_status sync_path(const char *path, int dir, dpfl_error *err)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0) return dpfl_fail(err, DPFL_EIO, "cannot open (%s): %s", path, strerror(errno));
    const int bad = fsync(fd) != 0;
    const int e = errno;
    close(fd);
    return bad ? dpfl_fail(err, DPFL_EIO, "cannot fsync (%s): %s", path, strerror(e)) : DPFL_OK;
}

dpfl_status fl_files_write(fl_state_files *F, client_opt *rows, const int32_t *ks, int32_t n, int32_t gen,
                           dpfl_error *err)
{
    if (n == 0) return DPFL_OK;
    if (!F->dir) return dpfl_fail(err, DPFL_EINVAL, "the clients' state has no folder to be written to");
    uint32_t *crc = malloc((size_t)n * sizeof *crc);
    if (!crc) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client state files)");
    dpfl_status st = DPFL_OK;
    int32_t done = 0;
    for (; done < n && !st; done++) {
        const client_opt *o = &rows[ks[done]];
        DPFL_ASSERT(o->state && gen > 0 && gen != o->ref_gen);
        st = write_tmp(F, o, ks[done], gen, &crc[done], err);
    }
    char path[1200], tmp[1210];
    for (int32_t i = 0; i < done && !st; i++) { /* every file durable under its temporary name */
        fl_files_path(F, ks[i], gen, path, sizeof path);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        st = sync_path(tmp, 0, err);
    }
    for (int32_t i = 0; i < done; i++) { /* then renamed (or dropped) */
        fl_files_path(F, ks[i], gen, path, sizeof path);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (st) {
            unlink(tmp);
        } else if (rename(tmp, path) != 0) {
            st = dpfl_fail(err, DPFL_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
            unlink(tmp);
        }
    }
    if (!st) st = sync_path(F->dir, 1, err); /* the renames themselves durable before a checkpoint names them */
    for (int32_t i = 0; i < n && !st; i++) {
        client_opt *o = &rows[ks[i]];
        /* a generation no durable checkpoint refers to can go at once */
        if (o->gen > 0 && o->gen != o->ref_gen && o->gen != gen) fl_files_remove(F, ks[i], o->gen);
        o->gen = gen;
        o->crc = crc[i];
        o->dirty = 0;
    }
    free(crc);
    F->written += st ? 0 : n;
    return st;
}

dpfl_status fl_files_read(const fl_state_files *F, const client_opt *o, int32_t k, float *state, dpfl_error *err)
{
    char path[1200];
    fl_files_path(F, k, o->gen, path, sizeof path);
    const size_t floats = F->floats, body = floats * sizeof(float);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dpfl_fail(err, DPFL_EIO, "cannot open client %d's state (%s): %s", k, path, strerror(errno));
    uint8_t head[FILE_HEAD + PAYLOAD_HEAD], tail[4];
    const int ok = pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
                   pread(fd, state, body, sizeof head) == (ssize_t)body &&
                   pread(fd, tail, 4, (off_t)(sizeof head + body)) == 4 &&
                   pread(fd, tail, 1, (off_t)(sizeof head + body + 4)) == 0; /* nothing after the CRC */
    close(fd);
    if (!ok) return dpfl_fail(err, DPFL_EFORMAT, "client %d's state (%s) is truncated or padded", k, path);
    const uLong sum = crc_update(crc_update(crc32(0L, Z_NULL, 0), head + FILE_HEAD, PAYLOAD_HEAD), state, body);
    if (dpfl_bytes_load_u32(head) != STORE_MAGIC || dpfl_bytes_load_u32(head + 4) != STORE_VERSION ||
        dpfl_bytes_load_u64(head + 8) != PAYLOAD_HEAD + body)
        return dpfl_fail(err, DPFL_EFORMAT, "client %d's state (%s) is not a dpfl client state file of this "
                                            "version and size", k, path);
    if (dpfl_bytes_load_u32(tail) != (uint32_t)sum)
        return dpfl_fail(err, DPFL_EFORMAT, "checksum mismatch (%s): client %d's state is corrupt", path, k);
    if ((int32_t)dpfl_bytes_load_u32(head + 16) != k || (int32_t)dpfl_bytes_load_u32(head + 20) != o->gen ||
        (int64_t)dpfl_bytes_load_u64(head + 24) != o->t || (uint32_t)sum != o->crc)
        return dpfl_fail(err, DPFL_EFORMAT, "client %d's state (%s) is not the one the checkpoint was written with",
                         k, path);
    return DPFL_OK;
}

void fl_files_remove(const fl_state_files *F, int32_t k, int32_t gen)
{
    char path[1200];
    fl_files_path(F, k, gen, path, sizeof path);
    unlink(path); /* not durable: a file that comes back is not referred to, and the next resume removes it */
}

dpfl_status fl_files_prune(const fl_state_files *F, const client_opt *rows, dpfl_error *err)
{
    DIR *d = opendir(F->dir);
    if (!d) return dpfl_fail(err, DPFL_EIO, "cannot open folder (%s): %s", F->dir, strerror(errno));
    char path[1200];
    for (struct dirent *e; (e = readdir(d));) {
        int k, gen, end = 0;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        const int named = sscanf(e->d_name, "client%d.g%d.bin%n", &k, &gen, &end) == 2 && !e->d_name[end];
        if (named && k >= 0 && k < F->count && gen > 0 && rows && rows[k].ref_gen == gen) continue;
        if (!named && strncmp(e->d_name, "client", 6)) continue; /* not the store's: left alone */
        snprintf(path, sizeof path, "%s/%s", F->dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT) {
            closedir(d);
            return dpfl_fail(err, DPFL_EIO, "cannot remove a stale client state file (%s): %s", path,
                             strerror(errno));
        }
    }
    closedir(d);
    for (int32_t k = 0; rows && k < F->count; k++) { /* every file the checkpoint names is here */
        if (rows[k].ref_gen == 0) continue;
        fl_files_path(F, k, rows[k].ref_gen, path, sizeof path);
        if (access(path, R_OK) != 0)
            return dpfl_fail(err, DPFL_EIO, "the checkpoint names client %d's state %s, which cannot be read: %s",
                             k, path, strerror(errno));
    }
    return DPFL_OK;
}
