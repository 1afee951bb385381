/* Model files: a dpfl_file (magic, version, length, payload, CRC-32; written atomically) whose payload is
 *   u32 spec length, spec bytes, u64 nparam, nparam float32 (little-endian, as in memory on x86-64),
 *   and since version 2: i32 in_c, in_h, in_w, out_dim (the input shape and the logits the model was built for).
 * The spec is stored so that loading into a different architecture fails loudly instead of silently
 * reinterpreting weights; the shape, so that the model can be rebuilt (dpfl export, dpfl eval --data) without the
 * data it was trained on.  Version 1 files (no shape) are still read. */
#include "core/bytes.h"
#include "layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC 0x4D465044u /* "DPFM" */
#define MODEL_VERSION 2u
#define SHAPE_BYTES 16u

dpfl_status dpfl_model_save(const dpfl_model *m, const float *params, const char *path, dpfl_error *err)
{
    uint32_t slen = (uint32_t)strlen(m->spec);
    uint64_t np = m->nparam;
    size_t len = 4 + slen + 8 + m->nparam * sizeof(float) + SHAPE_BYTES;
    uint8_t *buf = dpfl_alloc(len, err);
    if (!buf) return DPFL_ENOMEM;
    memcpy(buf, &slen, 4);
    memcpy(buf + 4, m->spec, slen);
    memcpy(buf + 4 + slen, &np, 8);
    memcpy(buf + 12 + slen, params, m->nparam * sizeof(float));
    const int32_t shape[4] = {m->in_c, m->in_h, m->in_w, m->out_dim};
    memcpy(buf + len - SHAPE_BYTES, shape, SHAPE_BYTES);
    dpfl_status st = dpfl_file_write(path, MODEL_MAGIC, MODEL_VERSION, buf, len, err);
    dpfl_free(buf);
    return st;
}

/* The model file at path, of version 1 or 2 (*version). */
static dpfl_status read_file(const char *path, void **payload, size_t *len, uint32_t *version, dpfl_error *err)
{
    uint8_t head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (f) {
        if (fread(head, 1, sizeof head, f) != sizeof head) memset(head, 0, sizeof head);
        fclose(f);
    }
    /* a version 1 file is read as one; anything else as the current version (its errors name what is wrong) */
    *version = dpfl_bytes_load_u32(head) == MODEL_MAGIC && dpfl_bytes_load_u32(head + 4) == 1 ? 1 : MODEL_VERSION;
    return dpfl_file_read(path, MODEL_MAGIC, *version, payload, len, err);
}

/* The payload's spec (not NUL-terminated) and parameters, checked for consistency; a version 2 payload's shape
 * trailer is cut off len first. */
static dpfl_status parse(const uint8_t *p, size_t len, uint32_t version, const char *path, const uint8_t **spec,
                         uint32_t *slen, uint64_t *np, int32_t shape[4], dpfl_error *err)
{
    memset(shape, 0, 4 * sizeof *shape);
    if (version >= 2) {
        if (len < 12 + SHAPE_BYTES) goto malformed;
        len -= SHAPE_BYTES;
        memcpy(shape, p + len, SHAPE_BYTES);
        for (int i = 0; i < 4; i++)
            if (shape[i] < 1)
                return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): input shape %dx%dx%d, %d outputs",
                                 path, (int)shape[0], (int)shape[1], (int)shape[2], (int)shape[3]);
    }
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
    uint32_t version;
    dpfl_status st = read_file(path, &payload, &len, &version, err);
    if (st) return st;
    const uint8_t *spec = NULL;
    uint32_t slen = 0;
    uint64_t np = 0;
    int32_t shape[4];
    if ((st = parse(payload, len, version, path, &spec, &slen, &np, shape, err))) goto done;
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
    return dpfl_model_file_read_shape(path, spec, spec_cap, params, nparam, NULL, err);
}

dpfl_status dpfl_model_file_read_shape(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                       int32_t shape[4], dpfl_error *err)
{
    void *payload;
    size_t len;
    uint32_t version;
    *params = NULL;
    *nparam = 0;
    if (shape) memset(shape, 0, 4 * sizeof *shape);
    dpfl_status st = read_file(path, &payload, &len, &version, err);
    if (st) return st;
    const uint8_t *s = NULL;
    uint32_t slen = 0;
    uint64_t np = 0;
    int32_t sh[4];
    if ((st = parse(payload, len, version, path, &s, &slen, &np, sh, err))) goto done;
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
    if (shape) memcpy(shape, sh, sizeof sh);
done:
    free(payload);
    return st;
}
