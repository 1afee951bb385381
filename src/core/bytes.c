/* Little-endian cursors over dpfl's binary layouts (core/bytes.h): writers over buffers sized in advance, readers
 * over outside input that report running out instead of reading past the end. */
#include "core/bytes.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

dpfl_bytes_writer dpfl_bytes_writer_over(void *buf, size_t len)
{
    dpfl_bytes_writer w = {buf, (uint8_t *)buf + len};
    return w;
}

void dpfl_bytes_put(dpfl_bytes_writer *w, const void *v, size_t n)
{
    DPFL_ASSERT((size_t)(w->end - w->p) >= n);
    if (n) memcpy(w->p, v, n);
    w->p += n;
}

void dpfl_bytes_put_u8(dpfl_bytes_writer *w, uint8_t v) { dpfl_bytes_put(w, &v, 1); }

void dpfl_bytes_put_u32(dpfl_bytes_writer *w, uint32_t v)
{
    uint8_t b[4];
    dpfl_bytes_store_u32(b, v);
    dpfl_bytes_put(w, b, 4);
}

void dpfl_bytes_put_u64(dpfl_bytes_writer *w, uint64_t v)
{
    uint8_t b[8];
    dpfl_bytes_store_u64(b, v);
    dpfl_bytes_put(w, b, 8);
}

void dpfl_bytes_put_i32(dpfl_bytes_writer *w, int32_t v) { dpfl_bytes_put_u32(w, (uint32_t)v); }
void dpfl_bytes_put_i64(dpfl_bytes_writer *w, int64_t v) { dpfl_bytes_put_u64(w, (uint64_t)v); }

void dpfl_bytes_put_f32(dpfl_bytes_writer *w, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    dpfl_bytes_put_u32(w, u);
}

void dpfl_bytes_put_f64(dpfl_bytes_writer *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    dpfl_bytes_put_u64(w, u);
}

void dpfl_bytes_put_f32s(dpfl_bytes_writer *w, const float *v, size_t n)
{
    DPFL_ASSERT((size_t)(w->end - w->p) / 4 >= n);
    if (HOST_LE) {
        dpfl_bytes_put(w, v, 4 * n);
        return;
    }
    for (size_t i = 0; i < n; i++) dpfl_bytes_put_f32(w, v[i]);
}

dpfl_bytes_reader dpfl_bytes_reader_over(const void *buf, size_t len)
{
    dpfl_bytes_reader r = {buf, (const uint8_t *)buf + len, 0};
    return r;
}

size_t dpfl_bytes_left(const dpfl_bytes_reader *r) { return (size_t)(r->end - r->p); }

dpfl_status dpfl_bytes_get(dpfl_bytes_reader *r, void *v, size_t n)
{
    if (dpfl_bytes_left(r) < n) {
        r->short_read = 1;
        if (n) memset(v, 0, n);
        return DPFL_EFORMAT;
    }
    if (n) memcpy(v, r->p, n);
    r->p += n;
    return DPFL_OK;
}

dpfl_status dpfl_bytes_get_u8(dpfl_bytes_reader *r, uint8_t *v) { return dpfl_bytes_get(r, v, 1); }

dpfl_status dpfl_bytes_get_u32(dpfl_bytes_reader *r, uint32_t *v)
{
    uint8_t b[4];
    dpfl_status st = dpfl_bytes_get(r, b, 4);
    *v = dpfl_bytes_load_u32(b);
    return st;
}

dpfl_status dpfl_bytes_get_u64(dpfl_bytes_reader *r, uint64_t *v)
{
    uint8_t b[8];
    dpfl_status st = dpfl_bytes_get(r, b, 8);
    *v = dpfl_bytes_load_u64(b);
    return st;
}

dpfl_status dpfl_bytes_get_i32(dpfl_bytes_reader *r, int32_t *v)
{
    uint32_t u;
    dpfl_status st = dpfl_bytes_get_u32(r, &u);
    *v = (int32_t)u;
    return st;
}

dpfl_status dpfl_bytes_get_i64(dpfl_bytes_reader *r, int64_t *v)
{
    uint64_t u;
    dpfl_status st = dpfl_bytes_get_u64(r, &u);
    *v = (int64_t)u;
    return st;
}

dpfl_status dpfl_bytes_get_f32(dpfl_bytes_reader *r, float *v)
{
    uint32_t u;
    dpfl_status st = dpfl_bytes_get_u32(r, &u);
    memcpy(v, &u, 4);
    return st;
}

dpfl_status dpfl_bytes_get_f64(dpfl_bytes_reader *r, double *v)
{
    uint64_t u;
    dpfl_status st = dpfl_bytes_get_u64(r, &u);
    memcpy(v, &u, 8);
    return st;
}

dpfl_status dpfl_bytes_get_f32s(dpfl_bytes_reader *r, float *v, size_t n)
{
    if (dpfl_bytes_left(r) / 4 < n) {
        r->short_read = 1;
        if (n) memset(v, 0, 4 * n);
        return DPFL_EFORMAT;
    }
    if (HOST_LE) return dpfl_bytes_get(r, v, 4 * n);
    for (size_t i = 0; i < n; i++) dpfl_bytes_get_f32(r, &v[i]);
    return DPFL_OK;
}
