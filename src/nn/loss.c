/* Losses on the model's outputs.  Each returns the summed loss in double and writes the output gradient scaled by
 * `scale` (1/B for the mean loss, 1 for DP-SGD's per-example losses).  Cross-entropy (softmax, or sigmoid for one
 * output) is the default; the mean squared error against one-hot targets is the regression loss a spec can name
 * (nn.h: DPFL_LOSS_MSE). */
#include "layers.h"

#include <math.h>

/* logits (B, K), y (B) -> dlogits (B, K) = scale * (softmax(logits) - onehot(y)) */
double dpfl_nn_softmax_ce(float *dlogits, const float *logits, const int32_t *y, int B, int K, float scale,
                          int32_t *correct)
{
    double total = 0.0;
    int32_t hits = 0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (size_t)b * K;
        float *d = dlogits + (size_t)b * K;
        DPFL_ASSERT(y[b] >= 0 && y[b] < K);
        int arg = 0;
        float mx = z[0];
        for (int k = 1; k < K; k++)
            if (z[k] > mx) mx = z[k], arg = k;
        hits += arg == y[b];
        double sum = 0.0;
        for (int k = 0; k < K; k++) sum += exp((double)z[k] - mx);
        double lse = mx + log(sum);
        total += lse - z[y[b]];
        for (int k = 0; k < K; k++) d[k] = scale * (float)exp((double)z[k] - lse);
        d[y[b]] -= scale;
    }
    if (correct) *correct += hits;
    return total;
}

/* logits (B), y (B) in {0,1}: loss = log(1 + e^z) - y z, computed without overflow. */
double dpfl_nn_sigmoid_bce(float *dlogits, const float *logits, const int32_t *y, int B, float scale,
                           int32_t *correct)
{
    double total = 0.0;
    int32_t hits = 0;
    for (int b = 0; b < B; b++) {
        double z = logits[b];
        DPFL_ASSERT(y[b] == 0 || y[b] == 1);
        double softplus = z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
        total += softplus - y[b] * z;
        double p = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
        dlogits[b] = scale * (float)(p - y[b]);
        hits += (z > 0) == (y[b] == 1);
    }
    if (correct) *correct += hits;
    return total;
}

/* outputs (B, K), y (B): an example's loss is (1/K) sum_k (z_k - t_k)^2 with t = onehot(y) (K = 1: t = y), the
 * gradient dz_k = scale * 2 (z_k - t_k) / K.  Prediction: the largest output (K = 1: z > 0.5). */
double dpfl_nn_mse(float *dout, const float *out, const int32_t *y, int B, int K, float scale, int32_t *correct)
{
    double total = 0.0;
    int32_t hits = 0;
    const double g = 2.0 / K;
    for (int b = 0; b < B; b++) {
        const float *z = out + (size_t)b * K;
        float *d = dout + (size_t)b * K;
        DPFL_ASSERT(y[b] >= 0 && (K == 1 ? y[b] <= 1 : y[b] < K));
        double sum = 0.0;
        int arg = 0;
        for (int k = 0; k < K; k++) {
            double t = K == 1 ? (double)y[b] : (double)(k == y[b]);
            double e = (double)z[k] - t;
            sum += e * e;
            d[k] = scale * (float)(g * e);
            if (z[k] > z[arg]) arg = k;
        }
        total += sum / K;
        hits += K == 1 ? (z[0] > 0.5f) == (y[b] == 1) : arg == y[b];
    }
    if (correct) *correct += hits;
    return total;
}
