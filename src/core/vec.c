/* Flat vector operations: parameters, gradients and updates are single float blocks, so clipping, noising,
 * averaging and norms are these loops.  Reductions accumulate in double. */
#include "dpfl/core.h"

#include <math.h>
#include <string.h>

double dpfl_vec_dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

double dpfl_vec_norm2(const float *a, size_t n) { return sqrt(dpfl_vec_dot(a, a, n)); }

void dpfl_vec_scale(float *a, float s, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] *= s;
}

void dpfl_vec_axpy(float *y, float a, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

void dpfl_vec_copy(float *dst, const float *src, size_t n) { memmove(dst, src, n * sizeof *dst); }

void dpfl_vec_zero(float *a, size_t n) { memset(a, 0, n * sizeof *a); }

void dpfl_vec_sub(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] - b[i];
}

double dpfl_vec_clip(float *a, size_t n, double c)
{
    double norm = dpfl_vec_norm2(a, n);
    if (norm > c) {
        /* float rounding could leave the result a hair above c: scale by the next float below c/norm */
        float s = nextafterf((float)(c / norm), 0.0f);
        dpfl_vec_scale(a, s, n);
    }
    return norm;
}
