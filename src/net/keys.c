/* CURVE keys for deployment: X25519 key pairs from libsodium (what ZeroMQ's CURVE uses), stored as Z85 text, one
 * key per file; the secret key is written with mode 0600 before it holds anything. */
#include "dpfl/net.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char Z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

dpfl_status dpfl_z85_encode(const uint8_t *in, size_t n, char *out, dpfl_error *err)
{
    if (n % 4) return dpfl_fail(err, DPFL_EINVAL, "Z85 encodes multiples of 4 bytes, not %zu", n);
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = (uint32_t)in[i] << 24 | (uint32_t)in[i + 1] << 16 | (uint32_t)in[i + 2] << 8 | in[i + 3];
        for (int k = 4; k >= 0; k--, v /= 85) out[i / 4 * 5 + (size_t)k] = Z85[v % 85];
    }
    out[n / 4 * 5] = '\0';
    return DPFL_OK;
}

dpfl_status dpfl_z85_decode(const char *in, uint8_t *out, size_t cap, size_t *n, dpfl_error *err)
{
    const size_t len = strlen(in);
    if (len % 5) return dpfl_fail(err, DPFL_EFORMAT, "Z85 text of %zu characters (a multiple of 5 is needed)", len);
    if (len / 5 * 4 > cap) return dpfl_fail(err, DPFL_EFORMAT, "Z85 text too long (%zu characters)", len);
    for (size_t i = 0; i < len; i += 5) {
        uint64_t v = 0;
        for (size_t k = 0; k < 5; k++) {
            const char *p = in[i + k] ? strchr(Z85, in[i + k]) : NULL;
            if (!p) return dpfl_fail(err, DPFL_EFORMAT, "character %zu is not Z85", i + k + 1);
            v = v * 85 + (uint64_t)(p - Z85);
        }
        if (v > 0xFFFFFFFFu) return dpfl_fail(err, DPFL_EFORMAT, "Z85 group at character %zu overflows", i + 1);
        for (int k = 0; k < 4; k++) out[i / 5 * 4 + (size_t)k] = (uint8_t)(v >> (24 - 8 * k));
    }
    *n = len / 5 * 4;
    return DPFL_OK;
}

int dpfl_net_key_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return 0;
    }
    return 1;
}

/* text into path: a temp file created with `mode`, fsync'd and renamed (an existing path is replaced only if
 * replace). */
static dpfl_status write_key_file(const char *path, const char *text, mode_t mode, int replace, dpfl_error *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", tmp, strerror(errno));
    dpfl_status st = DPFL_OK;
    size_t len = strlen(text);
    if (fchmod(fd, mode) != 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0)
        st = dpfl_fail(err, DPFL_EIO, "cannot write (%s): %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st) st = dpfl_fail(err, DPFL_EIO, "cannot close (%s): %s", tmp, strerror(errno));
    if (!st && !replace && link(tmp, path) != 0)
        st = dpfl_fail(err, DPFL_EIO, "cannot create (%s): %s", path, strerror(errno));
    else if (!st && replace && rename(tmp, path) != 0)
        st = dpfl_fail(err, DPFL_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp); /* after link (both names), or a failure; after rename it is gone already */
    return st;
}

dpfl_status dpfl_net_keygen(const char *dir, const char *name, int force, char *pub_z85, dpfl_error *err)
{
    if (!dpfl_net_key_name_ok(name))
        return dpfl_fail(err, DPFL_EINVAL, "key name '%s': use letters, digits, '_', '-' and '.' (not first), at most "
                                           "64 characters", name);
    if (sodium_init() < 0) return dpfl_fail(err, DPFL_EIO, "libsodium could not start");
    dpfl_status st = dpfl_file_make_dirs(dir, 0700, err); /* the folder and its parents, private to the user */
    if (st) return st;
    char keypath[1100], pubpath[1100];
    snprintf(keypath, sizeof keypath, "%s/%s.key", dir, name);
    snprintf(pubpath, sizeof pubpath, "%s/%s.pub", dir, name);
    if (!force && access(keypath, F_OK) == 0)
        return dpfl_fail(err, DPFL_EINVAL, "key %s exists: keep it, or replace it with --force (its clients or "
                                           "server must then get the new public key)", keypath);
    uint8_t pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
    crypto_box_keypair(pk, sk);
    char skz[48], pkz[48], line[64];
    dpfl_z85_encode(sk, 32, skz, NULL);
    dpfl_z85_encode(pk, 32, pkz, NULL);
    sodium_memzero(sk, sizeof sk);
    snprintf(line, sizeof line, "%s\n", skz);
    st = write_key_file(keypath, line, 0600, force, err);
    sodium_memzero(skz, sizeof skz);
    sodium_memzero(line, sizeof line);
    if (st) return st;
    snprintf(line, sizeof line, "%s\n", pkz);
    if ((st = write_key_file(pubpath, line, 0644, 1, err))) return st;
    if (pub_z85) memcpy(pub_z85, pkz, 41);
    return DPFL_OK;
}

dpfl_status dpfl_net_key_read(const char *path, uint8_t key[32], dpfl_error *err)
{
    char *text;
    size_t len;
    dpfl_status st = dpfl_file_read_all(path, &text, &len, err);
    if (st) return st;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0';
    size_t n = 0;
    uint8_t buf[32];
    dpfl_error e;
    if (len != 40) st = dpfl_fail(err, DPFL_EFORMAT, "key file (%s): %zu characters, a Z85 key has 40", path, len);
    else if (dpfl_z85_decode(text, buf, sizeof buf, &n, &e))
        st = dpfl_fail(err, DPFL_EFORMAT, "key file (%s): %s", path, e.msg);
    sodium_memzero(text, len);
    free(text);
    if (!st) memcpy(key, buf, 32);
    sodium_memzero(buf, sizeof buf);
    return st;
}
