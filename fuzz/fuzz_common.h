/* Shared by the libFuzzer harnesses: the parsers under test read files, so each input is written to a file in a
 * per-process temporary directory (on /dev/shm when there is one) and the parser is called on its path. */
#ifndef DPFL_FUZZ_COMMON_H
#define DPFL_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* The harness's temporary directory, created on first use (removed by fuzz_cleanup at exit). */
static char fuzz_dir[64];

static inline void fuzz_cleanup(void)
{
    char cmd[128];
    if (!fuzz_dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir);
}

static inline const char *fuzz_tmpdir(void)
{
    if (!fuzz_dir[0]) {
        strcpy(fuzz_dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/dpfl-fuzz-XXXXXX" : "/tmp/dpfl-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    return fuzz_dir;
}

/* <tmpdir>/<name> (static buffers, four in rotation). */
static inline const char *fuzz_path(const char *name)
{
    static char buf[4][256];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", fuzz_tmpdir(), name);
    return b;
}

/* Write len bytes to path, gzip-compressed when gz; aborts on I/O errors (a harness problem, not a finding). */
static inline void fuzz_write(const char *path, const void *data, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        if (!f || (len && gzwrite(f, data, (unsigned)len) != (int)len) || gzclose(f) != Z_OK) {
            fprintf(stderr, "fuzz: cannot write %s\n", path);
            abort();
        }
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}

/* A dpfl_file (src/core/file.c) around payload, with a correct length and CRC-32, so that the fuzzer reaches the
 * format's own checks instead of stopping at the checksum. */
static inline void fuzz_write_dpfl_file(const char *path, uint32_t magic, uint32_t version, const uint8_t *payload,
                                 size_t len)
{
    uint8_t head[16];
    uint64_t len64 = len;
    memcpy(head, &magic, 4);
    memcpy(head + 4, &version, 4);
    memcpy(head + 8, &len64, 8);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), payload, (uInt)len);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(head, 1, 16, f) != 16 || (len && fwrite(payload, 1, len, f) != len) ||
        fwrite(&crc, 1, 4, f) != 4 || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}
#endif
