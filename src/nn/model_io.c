/* Model files: a dpfl_file (magic, version, length, payload, CRC-32; written atomically) whose payload is
 *   u32 spec length, spec bytes, u64 nparam, nparam float32,
 *   since version 2: i32 in_c, in_h, in_w, out_dim (the input shape and the logits the model was built for),
 *   since version 3: i32 n, then n float64 means and n float64 standard deviations: the standardization the
 *   inputs had in training (n = 0: none; n = -1: not recorded).
 * The spec is stored so that loading into a different architecture fails loudly instead of silently
 * reinterpreting weights; the shape and the standardization, so that the model can be rebuilt and fed (dpfl
 * export, dpfl eval --data) without the data or the config it was trained with.  Versions 1 and 2 are still read.
 * Every field is little-endian, written and read through core/bytes.h. */
#include "core/bytes.h"
#include "layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC 0x4D465044u /* "DPFM" */
#define MODEL_VERSION 3u
#define SHAPE_BYTES 16u

dpfl_status dpfl_model_save_standardized(const dpfl_model *m, const float *params, const dpfl_input_standardization *s,
                                         const char *path, dpfl_error *err)
{
    const int32_t n = s ? s->n : -1;
    const int32_t in = m->in_c * m->in_h * m->in_w;
    if (n < -1 || (n > 1 && n != m->in_c && n != in))
        return dpfl_fail(err, DPFL_EINVAL, "model file %s: a standardization of %d values fits neither 1 value, the %d "
                                           "channels nor the %d input values", path, (int)n, (int)m->in_c, (int)in);
    const size_t nstd = n > 0 ? (size_t)n : 0;
    const uint32_t slen = (uint32_t)strlen(m->spec);
    size_t len = 4 + slen + 8 + m->nparam * sizeof(float) + SHAPE_BYTES + 4 + 16 * nstd;
    uint8_t *buf = dpfl_alloc(len, err);
    if (!buf) return DPFL_ENOMEM;
    dpfl_bytes_writer w = dpfl_bytes_writer_over(buf, len);
    dpfl_bytes_put_u32(&w, slen);
    dpfl_bytes_put(&w, m->spec, slen);
    dpfl_bytes_put_u64(&w, m->nparam);
    dpfl_bytes_put_f32s(&w, params, m->nparam);
    const int32_t shape[4] = {m->in_c, m->in_h, m->in_w, m->out_dim};
    for (int i = 0; i < 4; i++) dpfl_bytes_put_i32(&w, shape[i]);
    dpfl_bytes_put_i32(&w, n);
    for (size_t j = 0; j < nstd; j++) dpfl_bytes_put_f64(&w, s->mean[j]);
    for (size_t j = 0; j < nstd; j++) dpfl_bytes_put_f64(&w, s->std[j]);
    DPFL_ASSERT(w.p == w.end);
    dpfl_status st = dpfl_file_write(path, MODEL_MAGIC, MODEL_VERSION, buf, len, err);
    dpfl_free(buf);
    return st;
}

dpfl_status dpfl_model_save(const dpfl_model *m, const float *params, const char *path, dpfl_error *err)
{
    return dpfl_model_save_standardized(m, params, NULL, path, err);
}

/* The model file at path, of version 1, 2 or 3 (*version). */
static dpfl_status read_file(const char *path, void **payload, size_t *len, uint32_t *version, dpfl_error *err)
{
    uint8_t head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (f) {
        if (fread(head, 1, sizeof head, f) != sizeof head) memset(head, 0, sizeof head);
        fclose(f);
    }
    /* an older version is read as one; anything else as the current version (its errors name what is wrong) */
    const uint32_t v = dpfl_bytes_load_u32(head + 4);
    *version = dpfl_bytes_load_u32(head) == MODEL_MAGIC && (v == 1 || v == 2) ? v : MODEL_VERSION;
    return dpfl_file_read(path, MODEL_MAGIC, *version, payload, len, err);
}

/* A payload taken apart: pointers into it. */
typedef struct {
    const uint8_t *spec;
    uint32_t slen;
    uint64_t np;
    const uint8_t *params;
    int32_t shape[4];  /* 0s before version 2 */
    int32_t nstd;      /* -1 before version 3 */
    const uint8_t *std; /* nstd means, then nstd standard deviations */
} model_payload;

/* What follows the parameters (rest bytes at q) in a version 2 or 3 payload. */
static dpfl_status parse_trailer(const uint8_t *q, size_t rest, uint32_t version, const char *path, model_payload *o,
                                 dpfl_error *err)
{
    if (rest < SHAPE_BYTES + (version >= 3 ? 4u : 0u)) goto malformed;
    for (int i = 0; i < 4; i++) o->shape[i] = (int32_t)dpfl_bytes_load_u32(q + 4 * i);
    for (int i = 0; i < 4; i++)
        if (o->shape[i] < 1)
            return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): input shape %dx%dx%d, %d outputs", path,
                             (int)o->shape[0], (int)o->shape[1], (int)o->shape[2], (int)o->shape[3]);
    rest -= SHAPE_BYTES;
    if (version < 3) return rest ? dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): %zu bytes after its "
                                             "input shape", path, rest) : DPFL_OK;
    o->nstd = (int32_t)dpfl_bytes_load_u32(q + SHAPE_BYTES);
    rest -= 4;
    const int64_t in = (int64_t)o->shape[0] * o->shape[1] * o->shape[2];
    const int32_t n = o->nstd;
    if (n < -1 || (n > 1 && n != o->shape[0] && n != in) || rest != 16 * (size_t)(n > 0 ? n : 0))
        return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): a standardization of %d values in %zu bytes "
                         "for input %dx%dx%d", path, (int)n, rest, (int)o->shape[0], (int)o->shape[1],
                         (int)o->shape[2]);
    o->std = q + SHAPE_BYTES + 4;
    for (int32_t j = 0; j < n; j++) {
        const double sd = dpfl_bytes_load_f64(o->std + 8 * ((size_t)n + j));
        if (!(sd > 0) || sd > 1e300) /* also refuses NaN and infinities */
            return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): input standard deviation %d is %g", path,
                             (int)j + 1, sd);
    }
    return DPFL_OK;
malformed:
    return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): bad header", path);
}

/* The payload's parameters into out[0..o->np). */
static void copy_params(const model_payload *o, float *out)
{
    dpfl_bytes_reader r = dpfl_bytes_reader_over(o->params, o->np * sizeof(float));
    dpfl_status st = dpfl_bytes_get_f32s(&r, out, o->np);
    DPFL_ASSERT(st == DPFL_OK); /* parse checked that they fit */
}

/* The payload's spec (not NUL-terminated), parameters, shape and standardization, checked for consistency. */
static dpfl_status parse(const uint8_t *p, size_t len, uint32_t version, const char *path, model_payload *o,
                         dpfl_error *err)
{
    memset(o, 0, sizeof *o);
    o->nstd = -1;
    if (len < 12) goto malformed;
    o->slen = dpfl_bytes_load_u32(p);
    if (o->slen > len - 12) goto malformed;
    o->np = dpfl_bytes_load_u64(p + 4 + o->slen);
    const size_t rest = len - 12 - o->slen;
    const size_t trailer = version >= 2 ? SHAPE_BYTES : 0;
    if (rest < trailer || o->np > (rest - trailer) / sizeof(float) || (version == 1 && rest != o->np * sizeof(float)))
        return dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): %llu parameters do not fill its %zu bytes", path,
                         (unsigned long long)o->np, len);
    o->spec = p + 4;
    o->params = p + 12 + o->slen;
    if (version == 1) return DPFL_OK;
    return parse_trailer(o->params + o->np * sizeof(float), rest - o->np * sizeof(float), version, path, o, err);
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
    model_payload o;
    if ((st = parse(payload, len, version, path, &o, err))) goto done;
    if (o.slen != strlen(m->spec) || memcmp(o.spec, m->spec, o.slen)) {
        st = dpfl_fail(err, DPFL_EFORMAT, "model file is for another architecture (%s): file has '%.*s', expected '%s'",
                       path, (int)(o.slen < 100 ? o.slen : 100), (const char *)o.spec, m->spec);
        goto done;
    }
    if (o.np != m->nparam) {
        st = dpfl_fail(err, DPFL_EFORMAT, "model file has %llu parameters (%s): expected %zu for '%s'",
                       (unsigned long long)o.np, path, m->nparam, m->spec);
        goto done;
    }
    copy_params(&o, params);
done:
    free(payload);
    return st;
}

void dpfl_input_standardization_free(dpfl_input_standardization *s)
{
    dpfl_free(s->mean);
    dpfl_free(s->std);
    s->mean = s->std = NULL;
    s->n = -1;
}

/* o's standardization into s (its arrays dpfl_alloc'd) */
static dpfl_status copy_standardization(const model_payload *o, dpfl_input_standardization *s, dpfl_error *err)
{
    const size_t n = o->nstd > 0 ? (size_t)o->nstd : 0;
    if (n && (!(s->mean = dpfl_alloc(8 * n, err)) || !(s->std = dpfl_alloc(8 * n, err)))) {
        dpfl_input_standardization_free(s);
        return DPFL_ENOMEM;
    }
    for (size_t j = 0; j < n; j++) {
        s->mean[j] = dpfl_bytes_load_f64(o->std + 8 * j);
        s->std[j] = dpfl_bytes_load_f64(o->std + 8 * (n + j));
    }
    s->n = o->nstd;
    return DPFL_OK;
}

dpfl_status dpfl_model_file_read_all(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                     int32_t shape[4], dpfl_input_standardization *s, dpfl_error *err)
{
    void *payload;
    size_t len;
    uint32_t version;
    *params = NULL;
    *nparam = 0;
    if (shape) memset(shape, 0, 4 * sizeof *shape);
    if (s) *s = (dpfl_input_standardization){.n = -1};
    dpfl_status st = read_file(path, &payload, &len, &version, err);
    if (st) return st;
    model_payload o;
    if ((st = parse(payload, len, version, path, &o, err))) goto done;
    if (o.slen == 0 || o.slen >= spec_cap || memchr(o.spec, 0, o.slen)) {
        st = dpfl_fail(err, DPFL_EFORMAT, "malformed model file (%s): bad architecture spec (%u bytes)", path, o.slen);
        goto done;
    }
    memcpy(spec, o.spec, o.slen);
    spec[o.slen] = '\0';
    if (!(*params = dpfl_alloc(o.np ? o.np * sizeof(float) : 1, err))) {
        st = DPFL_ENOMEM;
        goto done;
    }
    if (s && (st = copy_standardization(&o, s, err))) {
        dpfl_free(*params);
        *params = NULL;
        goto done;
    }
    copy_params(&o, *params);
    *nparam = o.np;
    if (shape) memcpy(shape, o.shape, sizeof o.shape);
done:
    free(payload);
    return st;
}

dpfl_status dpfl_model_file_read_shape(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                       int32_t shape[4], dpfl_error *err)
{
    return dpfl_model_file_read_all(path, spec, spec_cap, params, nparam, shape, NULL, err);
}

dpfl_status dpfl_model_file_read(const char *path, char *spec, size_t spec_cap, float **params, size_t *nparam,
                                 dpfl_error *err)
{
    return dpfl_model_file_read_all(path, spec, spec_cap, params, nparam, NULL, NULL, err);
}
