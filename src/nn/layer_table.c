/* The layer operation table: one row per dpfl_layer_kind, in the enum's order (layers.h says what a row holds).
 * The built-in kinds' rows are defined in net.c beside their forward and backward passes; GroupNorm's in
 * groupnorm.c, as a new layer's would be in its own file.  The table shape follows kann's per-operator function
 * table (A. Li, kann, kautodiff.c) and llm.c's one-file-per-layer layout. */
#include "layers.h"

#include <stdio.h>

extern const dpfl_layer_ops dpfl_nn_linear_ops, dpfl_nn_conv2d_ops, dpfl_nn_maxpool2d_ops, dpfl_nn_relu_ops,
    dpfl_nn_tanh_ops, dpfl_nn_sigmoid_ops, dpfl_nn_flatten_ops, dpfl_nn_dropout_ops, dpfl_nn_affine_ops,
    dpfl_nn_avgpool2d_ops, dpfl_nn_add_ops;
extern const dpfl_layer_ops dpfl_nn_groupnorm_ops; /* groupnorm.c */

static const dpfl_layer_ops *const table[] = {
    [DPFL_LAYER_LINEAR] = &dpfl_nn_linear_ops,
    [DPFL_LAYER_CONV2D] = &dpfl_nn_conv2d_ops,
    [DPFL_LAYER_MAXPOOL2D] = &dpfl_nn_maxpool2d_ops,
    [DPFL_LAYER_RELU] = &dpfl_nn_relu_ops,
    [DPFL_LAYER_TANH] = &dpfl_nn_tanh_ops,
    [DPFL_LAYER_SIGMOID] = &dpfl_nn_sigmoid_ops,
    [DPFL_LAYER_FLATTEN] = &dpfl_nn_flatten_ops,
    [DPFL_LAYER_DROPOUT] = &dpfl_nn_dropout_ops,
    [DPFL_LAYER_AFFINE] = &dpfl_nn_affine_ops,
    [DPFL_LAYER_GROUPNORM] = &dpfl_nn_groupnorm_ops,
    [DPFL_LAYER_AVGPOOL2D] = &dpfl_nn_avgpool2d_ops,
    [DPFL_LAYER_ADD] = &dpfl_nn_add_ops,
};

int dpfl_nn_layer_kind_count(void) { return (int)(sizeof table / sizeof table[0]); }

const dpfl_layer_ops *dpfl_nn_layer_ops(dpfl_layer_kind kind)
{
    DPFL_ASSERT((int)kind >= 0 && (int)kind < dpfl_nn_layer_kind_count() && table[kind]);
    return table[kind];
}

size_t dpfl_nn_layer_kind_names(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < dpfl_nn_layer_kind_count(); k++)
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", k ? "," : "", table[k]->name);
    DPFL_ASSERT(len < cap);
    return len;
}

size_t dpfl_nn_layer_syntax(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < dpfl_nn_layer_kind_count(); k++)
        if (table[k]->match)
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", len ? ", " : "", table[k]->syntax);
    DPFL_ASSERT(len < cap);
    return len;
}
