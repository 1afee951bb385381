/* Little-endian byte codecs, private to the library: the one encoding of integers and floats in dpfl's own binary
 * layouts (model.bin, checkpoint.bin and client.bin, the deployment wire, secure aggregation's messages) and of the
 * foreign ones it writes or reads (the zip and NPY headers of exported models, NumPy arrays from .npy / .npz files).
 * Byte order is explicit (shifts, not memory), so a layout reads the same on any host; floats travel as their
 * IEEE-754 bit patterns.
 *
 *   dpfl_bytes_store_*, dpfl_bytes_load_*   at a fixed position the caller has checked fits (hot loops)
 *   dpfl_bytes_writer                       a cursor over a buffer whose size the caller computed first: a write
 *                                           past its end is a bug in that arithmetic (DPFL_ASSERT)
 *   dpfl_bytes_reader                       a cursor over outside input: a read past its end fills zeros, sets
 *                                           short_read (sticky, so a run of reads is checked once) and returns
 *                                           DPFL_EFORMAT; the caller names the file or message in its error */
#ifndef DPFL_CORE_BYTES_H
#define DPFL_CORE_BYTES_H

#include "dpfl/core.h"
#include "core/cpu.h"

#include <stddef.h>
#include <stdint.h>

static inline void dpfl_bytes_store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void dpfl_bytes_store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void dpfl_bytes_store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t dpfl_bytes_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t dpfl_bytes_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t dpfl_bytes_load_u64(const uint8_t *p)
{
    return (uint64_t)dpfl_bytes_load_u32(p) | (uint64_t)dpfl_bytes_load_u32(p + 4) << 32;
}
/* The float64 whose IEEE-754 bits are the 8 bytes at p. */
static inline double dpfl_bytes_load_f64(const uint8_t *p)
{
    union {
        uint64_t u;
        double d;
    } v = {dpfl_bytes_load_u64(p)};
    return v.d;
}
/* The unsigned integer in the n <= 8 bytes at p (formats whose field widths vary: NPY headers and elements). */
static inline uint64_t dpfl_bytes_load_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

typedef struct {
    uint8_t *p, *end;
} dpfl_bytes_writer;

/* A writer over buf[0..len). */
DPFL_HIDDEN dpfl_bytes_writer dpfl_bytes_writer_over(void *buf, size_t len);
/* Bytes copied as they are (digests, keys, text). */
DPFL_HIDDEN void dpfl_bytes_put(dpfl_bytes_writer *w, const void *v, size_t n);
DPFL_HIDDEN void dpfl_bytes_put_u8(dpfl_bytes_writer *w, uint8_t v);
DPFL_HIDDEN void dpfl_bytes_put_u32(dpfl_bytes_writer *w, uint32_t v);
DPFL_HIDDEN void dpfl_bytes_put_u64(dpfl_bytes_writer *w, uint64_t v);
DPFL_HIDDEN void dpfl_bytes_put_i32(dpfl_bytes_writer *w, int32_t v);
DPFL_HIDDEN void dpfl_bytes_put_i64(dpfl_bytes_writer *w, int64_t v);
DPFL_HIDDEN void dpfl_bytes_put_f32(dpfl_bytes_writer *w, float v);
DPFL_HIDDEN void dpfl_bytes_put_f64(dpfl_bytes_writer *w, double v);
/* n floats (a model, an update): one copy on a little-endian host. */
DPFL_HIDDEN void dpfl_bytes_put_f32s(dpfl_bytes_writer *w, const float *v, size_t n);

typedef struct {
    const uint8_t *p, *end;
    int short_read;
} dpfl_bytes_reader;

/* A reader over buf[0..len). */
DPFL_HIDDEN dpfl_bytes_reader dpfl_bytes_reader_over(const void *buf, size_t len);
/* Bytes not read yet. */
DPFL_HIDDEN size_t dpfl_bytes_left(const dpfl_bytes_reader *r);
DPFL_HIDDEN dpfl_status dpfl_bytes_get(dpfl_bytes_reader *r, void *v, size_t n);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_u8(dpfl_bytes_reader *r, uint8_t *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_u32(dpfl_bytes_reader *r, uint32_t *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_u64(dpfl_bytes_reader *r, uint64_t *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_i32(dpfl_bytes_reader *r, int32_t *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_i64(dpfl_bytes_reader *r, int64_t *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_f32(dpfl_bytes_reader *r, float *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_f64(dpfl_bytes_reader *r, double *v);
DPFL_HIDDEN dpfl_status dpfl_bytes_get_f32s(dpfl_bytes_reader *r, float *v, size_t n);

#endif
