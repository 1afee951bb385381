/* Element-wise activations (backward needs only the output, so they run in place on the previous layer's
 * buffer) and Flatten, the one layout change between convolutional and linear layers. */
#include "layers.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* out (n) = max(0, inp) */
void dpfl_nn_relu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

/* dinp (n) = dout * [out > 0].  dout is read whatever out is: a load under the condition vectorizes only with
 * masked loads (AVX2, AVX-512), and the portable build (SSE2) would run this loop one float at a time. */
void dpfl_nn_relu_backward(float *dinp, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float d = dout[i];
        dinp[i] = out[i] > 0.0f ? d : 0.0f;
    }
}

/* tanh without a libm call per element, so that the loop vectorizes (libm's tanhf was a third of a cnn-small
 * step): for |x| < 0.55 the odd Taylor series to x^17 (the first term left out is below 3e-9 relative there),
 * otherwise (1 - e) / (1 + e) with e = exp(-2|x|) from a degree-7 polynomial after the usual reduction by ln 2.
 * Within a few ulp of the exact value (tests/test_nn.c); NaN stays NaN, +-inf gives +-1. */
/* c ? a : b by bit masks: a branch (or a conditional expression on floats, under the default -ftrapping-math)
 * keeps GCC from vectorizing the loop */
static inline float select_f(int c, float a, float b)
{
    const uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t u = (ua & m) | (ub & ~m);
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static inline float tanh_one(float x)
{
    const float a = fabsf(x), x2 = x * x;
    /* the series: x (1 + x^2 (c1 + x^2 (c2 + ...))) */
    float p = 6404582.0f / 10854718875.0f;
    p = p * x2 - 929569.0f / 638512875.0f;
    p = p * x2 + 21844.0f / 6081075.0f;
    p = p * x2 - 1382.0f / 155925.0f;
    p = p * x2 + 62.0f / 2835.0f;
    p = p * x2 - 17.0f / 315.0f;
    p = p * x2 + 2.0f / 15.0f;
    p = p * x2 - 1.0f / 3.0f;
    const float small = x + x * (x2 * p);
    /* e = exp(y), y = -2|x| in [-87, 0]: y = n ln2 + r, |r| <= ln2 / 2, e = 2^n (1 + r + r^2/2 + ... + r^7/7!) */
    float y = -2.0f * a;
    y = select_f(y >= -87.0f, y, -87.0f); /* and NaN -> -87: its int conversion below would be undefined */
    const float t = y * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds y / ln2 to an integer */
    const float nf = t - 12582912.0f;
    const float r = (y - nf * 0.693359375f) + nf * 2.12194440e-4f; /* ln 2 in two parts */
    float q = 1.0f / 5040.0f;
    q = q * r + 1.0f / 720.0f;
    q = q * r + 1.0f / 120.0f;
    q = q * r + 1.0f / 24.0f;
    q = q * r + 1.0f / 6.0f;
    q = q * r + 0.5f;
    q = q * r + 1.0f;
    q = q * r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)nf + 127) << 23; /* 2^n, n in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const float e = q * scale;
    const float big = copysignf((1.0f - e) / (1.0f + e), x);
    return select_f(a >= 0.55f, big, small); /* NaN (a >= 0.55 false) takes the series: NaN */
}

void dpfl_nn_tanh_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = tanh_one(inp[i]);
}

/* d tanh = 1 - tanh^2 */
void dpfl_nn_tanh_backward(float *dinp, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
}

void dpfl_nn_sigmoid_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-inp[i]));
}

void dpfl_nn_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * out[i] * (1.0f - out[i]);
}

/* out ROWS (B, C*S) from inp CNHW (C, B, S) */
void dpfl_nn_flatten_forward(float *out, const float *inp, int B, int C, int S)
{
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++) {
            const float *src = inp + ((size_t)c * B + b) * S;
            float *dst = out + ((size_t)b * C + c) * S;
            for (int s = 0; s < S; s++) dst[s] = src[s];
        }
}

/* dinp CNHW (C, B, S) from dout ROWS (B, C*S) */
void dpfl_nn_flatten_backward(float *dinp, const float *dout, int B, int C, int S)
{
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++) {
            const float *src = dout + ((size_t)b * C + c) * S;
            float *dst = dinp + ((size_t)c * B + b) * S;
            for (int s = 0; s < S; s++) dst[s] = src[s];
        }
}
