/* Residual additions (He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition", CVPR 2016, eq. 1-2):
 * a block's output F(x) plus its input x, or plus a projection W_s x (a 1x1 convolution, optionally
 * normalized) where the shapes differ.  The two operands may be stored in different layouts (a block on the raw
 * ROWS input whose first layer is a conv, which writes CNHW), so the sums address planes through each operand's
 * own layout.  No parameters: the projection is an ordinary Conv2d layer that reads the block's input (net.c). */
#include "layers.h"

#include <string.h>

static inline size_t plane(int cnhw, int b, int c, int B, int C, size_t S)
{
    return (cnhw ? (size_t)c * B + b : (size_t)b * C + c) * S;
}

void dpfl_nn_planes_copy(float *dst, int dst_cnhw, const float *src, int src_cnhw, int B, int C, size_t S, int add)
{
    if (!add && dst_cnhw == src_cnhw) {
        memcpy(dst, src, (size_t)B * C * S * sizeof *dst);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float *d = dst + plane(dst_cnhw, b, c, B, C, S);
            const float *s = src + plane(src_cnhw, b, c, B, C, S);
            if (add)
                for (size_t i = 0; i < S; i++) d[i] += s[i];
            else
                memcpy(d, s, S * sizeof *d);
        }
}

void dpfl_nn_add_forward(float *out, int out_cnhw, const float *main, const float *skip, int skip_cnhw, int B, int C,
                         size_t S)
{
    dpfl_nn_planes_copy(out, out_cnhw, main, out_cnhw, B, C, S, 0);
    dpfl_nn_planes_copy(out, out_cnhw, skip, skip_cnhw, B, C, S, 1);
}
