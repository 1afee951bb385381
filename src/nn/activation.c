/* Element-wise activations (backward needs only the output, so they run in place on the previous layer's
 * buffer) and Flatten, the one layout change between convolutional and linear layers. */
#include "layers.h"

#include <math.h>

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

void dpfl_nn_tanh_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = tanhf(inp[i]);
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
