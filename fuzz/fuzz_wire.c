/* Deployment's wire frames (src/net/wire.c, dpfl_wire_decode) and key files (src/net/keys.c, dpfl_net_key_read):
 * what a peer or the allow-list folder hands the server.  Byte 0 is the mode:
 *   bit 1 set    the rest is a key file (Z85 text), read with dpfl_net_key_read;
 *   else bit 0   set: the rest is the whole frame; clear: the rest is [type][sender u32][payload], wrapped in a
 *                well-formed header (magic, the current version, the payload's length) with a correct CRC-32, so that the
 *                fuzzer reaches each type's layout and range checks instead of stopping at the checksum.
 * A frame the decoder accepts must re-encode to exactly its own bytes (the format is canonical: no two encodings
 * of one message), its vector must read back, and every refusal must carry a message. */
#include "dpfl/net.h"
#include "fuzz_common.h"

static void check_frame(const uint8_t *buf, size_t len)
{
    dpfl_wire_msg m;
    dpfl_error err = {{0}};
    if (dpfl_wire_decode(buf, len, &m, &err) != DPFL_OK) {
        if (!err.msg[0]) abort();
        return;
    }
    const int has_vec = m.type == DPFL_WIRE_ROUND || m.type == DPFL_WIRE_UPDATE || m.type == DPFL_WIRE_SYNC;
    if ((m.vec != NULL) != has_vec) abort();
    if (m.vec) {
        float *v = malloc(m.nparam * sizeof(float) + 1);
        if (!v) abort();
        dpfl_wire_floats(&m, v);
        dpfl_wire_control(&m, v); /* a round's control variate: 0 or nparam floats */
        free(v);
    }
    uint8_t *again;
    size_t n;
    if (dpfl_wire_encode(&m, &again, &n, &err) != DPFL_OK) abort(); /* decodable = encodable */
    if (n != len || memcmp(again, buf, len)) abort();                /* canonical */
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    data++, size--;
    if (mode & 2) {
        const char *path = fuzz_path("key.pub");
        fuzz_write(path, data, size, 0);
        uint8_t key[32];
        dpfl_error err = {{0}};
        if (dpfl_net_key_read(path, key, &err) != DPFL_OK && !err.msg[0]) abort();
        return 0;
    }
    if (mode & 1) {
        check_frame(data, size);
        return 0;
    }
    if (size < 5) return 0;
    const size_t plen = size - 5, len = DPFL_WIRE_HEADER + plen + DPFL_WIRE_TRAILER;
    uint8_t *buf = malloc(len);
    if (!buf) abort();
    const uint32_t magic = DPFL_WIRE_MAGIC, pl = (uint32_t)plen;
    memcpy(buf, &magic, 4);
    buf[4] = DPFL_WIRE_VERSION, buf[5] = data[0], buf[6] = 0, buf[7] = 0;
    memcpy(buf + 8, data + 1, 4);
    memcpy(buf + 12, &pl, 4);
    memcpy(buf + DPFL_WIRE_HEADER, data + 5, plen);
    const uint32_t crc = dpfl_crc32(buf, DPFL_WIRE_HEADER + plen);
    memcpy(buf + DPFL_WIRE_HEADER + plen, &crc, 4);
    check_frame(buf, len);
    free(buf);
    return 0;
}
