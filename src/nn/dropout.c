/* Inverted dropout: kept units are scaled by 1/(1-p) at training time so evaluation is the identity.
 *
 * The masks only need to be reproducible, not secret (they are not part of any privacy mechanism), and a
 * CNN batch needs ~10^6 of them per step, so the driver draws a 128-bit seed per layer and step from the
 * caller's dpfl_rng (ChaCha20) and each fixed-size segment of the layer expands its own derived seed with
 * xoshiro128++, two orders of magnitude cheaper than ChaCha20 per draw.  Fixed segments keep the masks
 * independent of the thread count. */
#include "layers.h"

static inline uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

/* mask (n) in {0, 1/(1-p)};  out (n) = inp * mask  (out may equal inp) */
void dpfl_nn_dropout_forward(float *out, float *mask, const float *inp, size_t n, float p, uint64_t a, uint64_t b)
{
    uint32_t s0 = (uint32_t)a, s1 = (uint32_t)(a >> 32), s2 = (uint32_t)b, s3 = (uint32_t)(b >> 32) | 1u;
    /* keep iff u >= p * 2^32 with u uniform on 32 bits */
    uint32_t thresh = p >= 1.0f ? UINT32_MAX : (uint32_t)((double)p * 4294967296.0);
    float keep = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rotl32(s0 + s3, 7) + s0;
        uint32_t t = s1 << 9;
        s2 ^= s0;
        s3 ^= s1;
        s1 ^= s2;
        s0 ^= s3;
        s2 ^= t;
        s3 = rotl32(s3, 11);
        float mk = r >= thresh ? keep : 0.0f;
        mask[i] = mk;
        out[i] = inp[i] * mk;
    }
}

/* dinp (n) = dout * mask */
void dpfl_nn_dropout_backward(float *dinp, const float *dout, const float *mask, size_t n)
{
    for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * mask[i];
}
