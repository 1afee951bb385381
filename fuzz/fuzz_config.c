/* The INI config and its --set overrides (src/config/config.c).  Input: NUL-separated parts; the first is the INI
 * file (written to a temp file for dpfl_config_load), each further part (up to 16) one `--set section.key=value`
 * (dpfl_config_set).  Then dpfl_config_validate and dpfl_config_check_ignored, and the resolved config's round
 * trip: dpfl_config_to_ini, loaded back from a file into fresh defaults, must give the same text (a resumed run
 * reads config.ini back; a value that does not survive the trip would silently change the run). */
#include "dpfl/fl.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size, *nul = memchr(data, 0, size);
    const uint8_t *ini_end = nul ? nul : end;
    const char *path = fuzz_path("config.ini");
    fuzz_write(path, data, (size_t)(ini_end - data), 0);
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err = {{0}};
    dpfl_status s = dpfl_config_load(&c, path, &err);
    const uint8_t *p = nul ? nul + 1 : end;
    for (int i = 0; s == DPFL_OK && i < 16 && p < end; i++) {
        const uint8_t *q = memchr(p, 0, (size_t)(end - p));
        const uint8_t *stop = q ? q : end;
        char *a = malloc((size_t)(stop - p) + 1);
        if (!a) abort();
        memcpy(a, p, (size_t)(stop - p));
        a[stop - p] = '\0';
        s = dpfl_config_set(&c, a, &err);
        free(a);
        p = q ? q + 1 : end;
    }
    if (s != DPFL_OK) {
        if (!err.msg[0]) abort();
        return 0;
    }
    err.msg[0] = '\0';
    if (dpfl_config_validate(&c, &err) != DPFL_OK && !err.msg[0]) abort();
    err.msg[0] = '\0';
    if (dpfl_config_check_ignored(&c, &err) != DPFL_OK && !err.msg[0]) abort();
    char *ini = dpfl_config_to_ini(&c);
    if (!ini) abort();
    const char *path2 = fuzz_path("resolved.ini");
    fuzz_write(path2, ini, strlen(ini), 0);
    dpfl_config c2;
    dpfl_config_defaults(&c2);
    if (dpfl_config_load(&c2, path2, &err) != DPFL_OK) {
        fprintf(stderr, "round trip: the resolved config does not load back: %s\n%s", err.msg, ini);
        abort();
    }
    char *ini2 = dpfl_config_to_ini(&c2);
    if (!ini2) abort();
    if (strcmp(ini, ini2)) {
        fprintf(stderr, "round trip: the resolved config changes when loaded back:\n%s\n----\n%s", ini, ini2);
        abort();
    }
    free(ini);
    free(ini2);
    return 0;
}
