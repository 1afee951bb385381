/* Model files: a dpfl_file (magic, version, length, payload, CRC-32; written atomically) whose payload is
 *   u32 spec length, spec bytes, u64 nparam, nparam float32 (little-endian, as in memory on x86-64).
 * The spec is stored so that loading into a different architecture fails loudly instead of silently
 * reinterpreting weights. */
#include "layers.h"

#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC 0x4D465044u /* "DPFM" */
#define MODEL_VERSION 1u

dpfl_status dpfl_model_save(const dpfl_model *m, const float *params, const char *path, dpfl_error *err)
{
    uint32_t slen = (uint32_t)strlen(m->spec);
    uint64_t np = m->nparam;
    size_t len = 4 + slen + 8 + m->nparam * sizeof(float);
    uint8_t *buf = dpfl_alloc(len, err);
    if (!buf) return DPFL_ENOMEM;
    memcpy(buf, &slen, 4);
    memcpy(buf + 4, m->spec, slen);
    memcpy(buf + 4 + slen, &np, 8);
    memcpy(buf + 12 + slen, params, m->nparam * sizeof(float));
    dpfl_status st = dpfl_file_write(path, MODEL_MAGIC, MODEL_VERSION, buf, len, err);
    dpfl_free(buf);
    return st;
}

/* The payload's spec (not NUL-terminated) and parameters, checked for consistency. */
static dpfl_status parse(const uint8_t *p, size_t len, const char *path, const uint8_t **spec, uint32_t *slen,
                         uint64_t *np, dpfl_error *err)
{
    if (len < 12) goto malformed;
    memcpy(slen, p, 4);
    if (*slen > len - 12) goto malformed;
    memcpy(np, p + 4 + *slen, 8);
    if (*np > (len - 12 - *slen) / sizeof(float) || len != 12 + *slen + *np * sizeof(float))
        return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): %llu parameters do not fill its %zu bytes", path,
                         (unsigned long long)*np, len);
    *spec = p + 4;
    return DPFL_OK;
malformed:
    return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): bad header", path);
}

dpfl_status dpfl_model_load(const dpfl_model *m, float *params, const char *path, dpfl_error *err)
{
    void *payload;
    size_t len;
    dpfl_status st = dpfl_file_read(path, MODEL_MAGIC, MODEL_VERSION, &payload, &len, err);
    if (st) return st;
    const uint8_t *spec = NULL;
    uint32_t slen = 0;
    uint64_t np = 0;
    if ((st = parse(payload, len, path, &spec, &slen, &np, err))) goto done;
    if (slen != strlen(m->spec) || memcmp(spec, m->spec, slen)) {
        st = dpfl_fail(err, DPFL_EFORMAT, "model file is for another architecture (%s): file has '%.*s', expected '%s'",
                       path, (int)(slen < 100 ? slen : 100), (const char *)spec, m->spec);
        goto done;
    }
    if (np != m->nparam) {
        st = dpfl_fail(err, DPFL_EFORMAT, "model file has %llu parameters (%s): expected %zu for '%s'",
                       (unsigned long long)np, path, m->nparam, m->spec);
        goto done;
    }
    memcpy(params, spec + slen + 8, m->nparam * sizeof(float));
done:
    free(payload);
    return st;
}

dpfl_status dpfl_model_file_read(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                 dpfl_error *err)
{
    void *payload;
    size_t len;
    *params = NULL;
    *nparam = 0;
    dpfl_status st = dpfl_file_read(path, MODEL_MAGIC, MODEL_VERSION, &payload, &len, err);
    if (st) return st;
    const uint8_t *s = NULL;
    uint32_t slen = 0;
    uint64_t np = 0;
    if ((st = parse(payload, len, path, &s, &slen, &np, err))) goto done;
    if (slen == 0 || slen >= spec_cap || memchr(s, 0, slen)) {
        st = dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): bad architecture spec (%u bytes)", path, slen);
        goto done;
    }
    memcpy(spec, s, slen);
    spec[slen] = '\0';
    if (!(*params = dpfl_alloc(np ? np * sizeof(float) : 1, err))) {
        st = DPFL_ENOMEM;
        goto done;
    }
    memcpy(*params, s + slen + 8, np * sizeof(float));
    *nparam = np;
done:
    free(payload);
    return st;
}
