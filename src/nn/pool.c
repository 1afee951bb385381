/* 2-D max pooling on a sequence of planes (layout-agnostic: ROWS and CNHW are both (P, H, W)). */
#include "layers.h"

#include <float.h>
#include <string.h>

/* inp (P, H, W) -> out (P, OH, OW), idx (P, OH, OW) = argmax offset y*W+x in the plane.  Window (oy, ox) covers
 * rows oy*stride - pad .. + k-1 (likewise columns); with padding its max is over the cells inside the plane (the
 * padding is -infinity, as in PyTorch's MaxPool2d), and pad <= k/2 leaves every window at least one cell. */
void dpfl_nn_maxpool_forward(float *out, int32_t *idx, const float *inp, size_t P, int H, int W, int OH, int OW,
                             int k, int stride, int pad)
{
    for (size_t p = 0; p < P; p++) {
        const float *in = inp + p * H * W;
        float *o = out + p * OH * OW;
        int32_t *ix = idx + p * OH * OW;
        if (k == 2 && stride == 2 && pad == 0) {
            for (int oy = 0; oy < OH; oy++) {
                const float *r0 = in + 2 * oy * W, *r1 = r0 + W;
                for (int ox = 0; ox < OW; ox++) {
                    int x = 2 * ox, off = 2 * oy * W + x;
                    float best = r0[x];
                    int bi = off;
                    if (r0[x + 1] > best) best = r0[x + 1], bi = off + 1;
                    if (r1[x] > best) best = r1[x], bi = off + W;
                    if (r1[x + 1] > best) best = r1[x + 1], bi = off + W + 1;
                    o[oy * OW + ox] = best;
                    ix[oy * OW + ox] = bi;
                }
            }
            continue;
        }
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const int y0 = oy * stride - pad, x0 = ox * stride - pad;
                const int ya = y0 > 0 ? y0 : 0, yb = y0 + k < H ? y0 + k : H;
                const int xa = x0 > 0 ? x0 : 0, xb = x0 + k < W ? x0 + k : W;
                float best = -FLT_MAX;
                int bi = ya * W + xa;
                for (int y = ya; y < yb; y++)
                    for (int x = xa; x < xb; x++) {
                        int off = y * W + x;
                        if (in[off] > best) best = in[off], bi = off;
                    }
                o[oy * OW + ox] = best;
                ix[oy * OW + ox] = bi;
            }
    }
}

/* dinp (P, H, W) = sum over windows of dout routed to each window's argmax (windows may overlap).
 * out (P, OH, OW) or NULL: the pool's own output, given when its input is a ReLU output.  The ReLU's backward
 * (zero where its output is 0) is then applied in the same pass: the value at the argmax is the window's max,
 * so the test reads the small pooled tensor instead of the ReLU output. */
void dpfl_nn_maxpool_backward(float *dinp, const float *dout, const int32_t *idx, const float *out, size_t P, int H,
                              int W, int OH, int OW, int k, int stride, int pad)
{
    if (k == stride && pad == 0 && OH * k == H && OW * k == W) {
        /* windows tile the plane: every input cell is written exactly once, no zeroing pass */
        for (size_t p = 0; p < P; p++) {
            float *d = dinp + p * H * W;
            const float *g = dout + p * OH * OW, *ro = out ? out + p * OH * OW : NULL;
            const int32_t *ix = idx + p * OH * OW;
            if (k == 2) {
                for (int oy = 0; oy < OH; oy++) {
                    float *d0 = d + 2 * oy * W, *d1 = d0 + W;
                    for (int ox = 0; ox < OW; ox++) {
                        int o = oy * OW + ox, rel = ix[o] - 2 * oy * W - 2 * ox;
                        float v = g[o];
                        if (ro && !(ro[o] > 0.0f)) v = 0.0f;
                        d0[2 * ox] = rel == 0 ? v : 0.0f;
                        d0[2 * ox + 1] = rel == 1 ? v : 0.0f;
                        d1[2 * ox] = rel == W ? v : 0.0f;
                        d1[2 * ox + 1] = rel == W + 1 ? v : 0.0f;
                    }
                }
                continue;
            }
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    int o = oy * OW + ox, base = oy * k * W + ox * k;
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) d[base + i * W + j] = 0.0f;
                    if (!ro || ro[o] > 0.0f) d[ix[o]] = g[o];
                }
        }
        return;
    }
    memset(dinp, 0, P * H * W * sizeof *dinp);
    for (size_t p = 0; p < P; p++) {
        float *d = dinp + p * H * W;
        const float *g = dout + p * OH * OW, *ro = out ? out + p * OH * OW : NULL;
        const int32_t *ix = idx + p * OH * OW;
        for (int i = 0; i < OH * OW; i++)
            if (!ro || ro[i] > 0.0f) d[ix[i]] += g[i];
    }
}

/* Average pooling: inp (P, H, W) -> out (P, OH, OW), the mean of each kh x kw window at stride `stride` (no
 * padding; kh = H, kw = W is global average pooling).  Sums in double, so a window's mean does not depend on how
 * the planes are split among threads. */
void dpfl_nn_avgpool_forward(float *out, const float *inp, size_t P, int H, int W, int OH, int OW, int kh, int kw,
                             int stride)
{
    const double inv = 1.0 / ((double)kh * kw);
    for (size_t p = 0; p < P; p++) {
        const float *in = inp + p * H * W;
        float *o = out + p * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                double s = 0.0;
                for (int i = 0; i < kh; i++) {
                    const float *r = in + (size_t)(oy * stride + i) * W + ox * stride;
                    for (int j = 0; j < kw; j++) s += r[j];
                }
                o[oy * OW + ox] = (float)(s * inv);
            }
    }
}

/* dinp (P, H, W) = each window's output gradient spread evenly over the window (windows may overlap; cells in no
 * window get 0). */
void dpfl_nn_avgpool_backward(float *dinp, const float *dout, size_t P, int H, int W, int OH, int OW, int kh, int kw,
                              int stride)
{
    const float inv = (float)(1.0 / ((double)kh * kw));
    memset(dinp, 0, P * H * W * sizeof *dinp);
    for (size_t p = 0; p < P; p++) {
        float *d = dinp + p * H * W;
        const float *g = dout + p * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const float v = g[oy * OW + ox] * inv;
                for (int i = 0; i < kh; i++) {
                    float *r = d + (size_t)(oy * stride + i) * W + ox * stride;
                    for (int j = 0; j < kw; j++) r[j] += v;
                }
            }
    }
}
