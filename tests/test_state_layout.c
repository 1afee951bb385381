/* The layout of a client's state block (src/fl/state_layout.c; PriFedSync's helper models, Zheng et al.; SCAFFOLD's
 * variates, Karimireddy et al. 2020; PrivateFL's input transform, Yang et al. 2023).  The block is what the state
 * files, checkpoint.bin's references and a deployed client's client.bin hold, so its order is a file format:
 *   1. helper model, Adam's m and v, personal parameters -- in that order, disjoint, covering the block;
 *   2. SCAFFOLD's variate c_i, then the personal parameters;
 *   3. a new block: the helper model is w0, the optimizer state zero, the personal slices their initial values
 *      (the transform's identity). */
#include "testutil.h"
#include "fixtures.h"
#include "fl/sim_internal.h"

#include <string.h>

/* the layout of arch "transform:mlp:10-3" (10 inputs, 3 classes) under the fixture's defaults and the given keys */
typedef struct {
    fl_fixture f;
    float *global;
    fl_state_layout L;
    size_t P, T;
} layout_case;

static void layout_make(layout_case *c, int helper, int adam, int scaffold)
{
    const int32_t sizes[2] = {20, 20};
    fl_fixture_make(&c->f, "transform:mlp:10-3", sizes, 2);
    dpfl_config *cfg = &c->f.cfg;
    cfg->fl.client_state = adam ? DPFL_STATE_KEEP : DPFL_STATE_RESET;
    cfg->fl.personalization = helper ? DPFL_PERSONAL_HELPER : DPFL_PERSONAL_NONE;
    cfg->fl.scaffold = scaffold;
    c->P = c->f.model.nparam;
    c->T = c->f.model.layers[0].nparam; /* the transform, layer 0: always personal */
    assert_int_equal(c->f.model.layers[0].kind, DPFL_LAYER_AFFINE);
    c->global = malloc(c->P * sizeof(float));
    assert_non_null(c->global);
    for (size_t i = 0; i < c->P; i++) c->global[i] = 0.5f + (float)i; /* no parameter is 0 or 1 */
    dpfl_optim_config opt;
    dpfl_optim_defaults(&opt);
    opt.kind = adam ? DPFL_OPT_ADAM : DPFL_OPT_SGD;
    dpfl_error err;
    assert_int_equal(fl_layout_init(&c->L, cfg, &c->f.model, &opt, c->global, &err), DPFL_OK);
}

static void layout_free(layout_case *c)
{
    fl_layout_free(&c->L);
    free(c->global);
    fl_fixture_free(&c->f);
}

static void helper_optimizer_personal_in_order(void **state)
{
    (void)state;
    layout_case c;
    layout_make(&c, 1, 1, 0);
    const size_t P = c.P, T = c.T;
    assert_true(c.L.keep && c.L.helper && c.L.state_vecs == 2 && c.L.pers.npers == T);
    assert_int_equal(fl_layout_floats(&c.L), 3 * P + T);
    float *block = calloc(3 * P + T, sizeof(float));
    assert_non_null(block);
    assert_ptr_equal(fl_layout_optimizer(&c.L, block), block + P); /* m at P, v at 2P: after the helper model */
    assert_ptr_equal(fl_layout_personal(&c.L, block), block + 3 * P);
    assert_null(fl_layout_variate(&c.L, block));
    assert_null(fl_layout_optimizer(&c.L, NULL)); /* no block: no parts */
    assert_null(fl_layout_personal(&c.L, NULL));
    fl_layout_fresh(&c.L, block);
    assert_memory_equal(block, c.global, P * sizeof(float)); /* h(i) = w0 */
    for (size_t i = P; i < 3 * P; i++) assert_true(block[i] == 0.0f); /* a reset optimizer's state */
    assert_memory_equal(block + 3 * P, c.L.pers.pinit, T * sizeof(float));
    for (size_t i = 0; i < T; i++) /* the transform's identity (a = 1, b = 0), not the global model's values */
        assert_true(block[3 * P + i] == 0.0f || block[3 * P + i] == 1.0f);
    free(block);
    layout_free(&c);
}

static void variate_before_the_personal_parameters(void **state)
{
    (void)state;
    layout_case c;
    layout_make(&c, 0, 0, 1);
    const size_t P = c.P, T = c.T;
    assert_true(c.L.keep && !c.L.helper && c.L.state_vecs == 0);
    assert_int_equal(fl_layout_floats(&c.L), P + T);
    float *block = calloc(P + T, sizeof(float));
    assert_non_null(block);
    assert_ptr_equal(fl_layout_variate(&c.L, block), block);
    assert_ptr_equal(fl_layout_personal(&c.L, block), block + P);
    assert_null(fl_layout_optimizer(&c.L, block));
    fl_layout_fresh(&c.L, block);
    for (size_t i = 0; i < P; i++) assert_true(block[i] == 0.0f); /* c_i starts at 0 */
    assert_memory_equal(block + P, c.L.pers.pinit, T * sizeof(float));
    free(block);
    layout_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(helper_optimizer_personal_in_order),
        cmocka_unit_test(variate_before_the_personal_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
