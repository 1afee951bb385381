/* Where datasets live (include/dpfl/data.h, "where datasets live"): the data folder named by $DPFL_DATA, the
 * user's cache folder (XDG base directories), and the installed data folder.  Never the current directory: a
 * program started elsewhere must not find, or write, a different copy of a dataset.
 *
 * DPFL_DATADIR (PREFIX/share/dpfl) is fixed when this file is compiled: the Makefile passes it for this file alone,
 * so installing under another PREFIX rebuilds one object (and relinks), not the library. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DPFL_DATADIR
#define DPFL_DATADIR "/usr/local/share/dpfl"
#endif

const char *dpfl_data_root(void)
{
    const char *e = getenv("DPFL_DATA");
    return e && *e ? e : NULL;
}

const char *dpfl_data_install_dir(void) { return DPFL_DATADIR; }

/* An environment variable holding an absolute path (the XDG rule: relative values are ignored), or NULL. */
static const char *abs_env(const char *name)
{
    const char *e = getenv(name);
    return e && e[0] == '/' ? e : NULL;
}

dpfl_status dpfl_data_cache_dir(char *buf, size_t len, dpfl_error *err)
{
    const char *root = dpfl_data_root(), *xdg = abs_env("XDG_CACHE_HOME"), *home = abs_env("HOME");
    int n;
    if (root) n = snprintf(buf, len, "%s/cache", root);
    else if (xdg) n = snprintf(buf, len, "%s/dpfl", xdg);
    else if (home) n = snprintf(buf, len, "%s/.cache/dpfl", home);
    else
        return dpfl_fail(err, DPFL_EINVAL, "no folder for downloaded datasets (DPFL_DATA, XDG_CACHE_HOME, HOME): none "
                                           "is set to an absolute path; set DPFL_DATA to a data folder");
    if (n < 0 || (size_t)n >= len)
        return dpfl_fail(err, DPFL_EINVAL, "data folder path too long (%s)", root ? "DPFL_DATA" : xdg ? "XDG_CACHE_HOME"
                                                                                                      : "HOME");
    return DPFL_OK;
}

dpfl_status dpfl__data_candidates(int shipped, const char *sub, const char *data_dir, char (*dirs)[DPFL__PATH_MAX],
                                  int *n, dpfl_error *err)
{
    *n = 0;
    if (data_dir && *data_dir) { /* asked for by name: that folder only */
        snprintf(dirs[(*n)++], DPFL__PATH_MAX, "%s/%s", data_dir, sub);
        return DPFL_OK;
    }
    if (shipped) {
        if (dpfl_data_root()) snprintf(dirs[(*n)++], DPFL__PATH_MAX, "%s/%s", dpfl_data_root(), sub);
    } else {
        char cache[DPFL__PATH_MAX - 64];
        dpfl_status s = dpfl_data_cache_dir(cache, sizeof cache, err);
        if (s) return s;
        snprintf(dirs[(*n)++], DPFL__PATH_MAX, "%s/%s", cache, sub);
    }
    snprintf(dirs[(*n)++], DPFL__PATH_MAX, "%s/%s", DPFL_DATADIR, sub);
    return DPFL_OK;
}

void dpfl__data_list(char (*dirs)[DPFL__PATH_MAX], int n, char *out, size_t len)
{
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", i ? ", " : "", dirs[i]);
    }
}
