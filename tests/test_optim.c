#include "testutil.h"
#include "dpfl/optim.h"

static dpfl_optim make(dpfl_opt_kind kind, double mom, double wd)
{
    dpfl_optim_config c;
    dpfl_optim_defaults(&c);
    c.kind = kind;
    c.momentum = mom;
    c.weight_decay = wd;
    dpfl_optim o;
    assert_int_equal(dpfl_optim_init(&o, &c, 2, NULL), DPFL_OK);
    return o;
}

static void sgd_plain_and_weight_decay(void **state)
{
    (void)state;
    dpfl_optim o = make(DPFL_OPT_SGD, 0, 0.1);
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    dpfl_optim_step(&o, p, g, 0.1);
    assert_close(p[0], 1.0 - 0.1 * (0.5 + 0.1 * 1.0), 1e-6);
    assert_close(p[1], -2.0 - 0.1 * (0.25 + 0.1 * -2.0), 1e-6);
    dpfl_optim_free(&o);
}

static void sgd_momentum_matches_pytorch_convention(void **state)
{
    (void)state;
    dpfl_optim o = make(DPFL_OPT_SGD, 0.9, 0);
    float p[2] = {0, 0}, g[2] = {1, 2};
    dpfl_optim_step(&o, p, g, 0.1); /* buf = g */
    dpfl_optim_step(&o, p, g, 0.1); /* buf = 0.9 g + g */
    assert_close(p[0], -0.1 * 1 - 0.1 * 1.9, 1e-6);
    assert_close(p[1], -0.1 * 2 - 0.1 * 3.8, 1e-6);
    dpfl_optim_reset(&o);
    float q[2] = {0, 0};
    dpfl_optim_step(&o, q, g, 0.1);
    assert_close(q[0], -0.1, 1e-6);
    dpfl_optim_free(&o);
}

static void adam_first_steps(void **state)
{
    (void)state;
    /* With bias correction the first Adam step is lr * g / (|g| + eps') = lr * sign(g). */
    dpfl_optim o = make(DPFL_OPT_ADAM, 0, 0);
    float p[2] = {0, 0}, g[2] = {3, -0.001f};
    dpfl_optim_step(&o, p, g, 0.01);
    assert_close(p[0], -0.01, 1e-5);
    assert_close(p[1], 0.01 * 0.001 / (0.001 + 1e-8), 1e-4);
    /* second step with a different gradient, against a hand computation */
    float g2[2] = {1, 1};
    dpfl_optim_step(&o, p, g2, 0.01);
    double m = 0.9 * 0.1 * 3 + 0.1 * 1, v = 0.999 * 0.001 * 9 + 0.001 * 1;
    double mh = m / (1 - 0.81), vh = v / (1 - 0.999 * 0.999);
    assert_close(p[0], -0.01 - 0.01 * mh / (sqrt(vh) + 1e-8), 1e-4);
    dpfl_optim_free(&o);
}

static void adamw_decouples_decay(void **state)
{
    (void)state;
    dpfl_optim a = make(DPFL_OPT_ADAMW, 0, 0.5), b = make(DPFL_OPT_ADAM, 0, 0.5);
    float pa[2] = {2, 2}, pb[2] = {2, 2}, g[2] = {0, 0};
    dpfl_optim_step(&a, pa, g, 0.1);
    dpfl_optim_step(&b, pb, g, 0.1);
    assert_close(pa[0], 2 - 0.1 * 0.5 * 2, 1e-6); /* decay only, no gradient step */
    assert_close(pb[0], 2 - 0.1, 1e-4);           /* L2 in the gradient: Adam normalises it to lr * sign */
    dpfl_optim_free(&a);
    dpfl_optim_free(&b);
}

static void schedules(void **state)
{
    (void)state;
    dpfl_optim_config c;
    dpfl_optim_defaults(&c);
    c.lr = 1.0;
    c.gamma = 0.5;
    c.step_size = 3;
    c.sched = DPFL_SCHED_STEP;
    assert_close(dpfl_optim_lr(&c, 2), 1.0, 1e-12);
    assert_close(dpfl_optim_lr(&c, 3), 0.5, 1e-12);
    assert_close(dpfl_optim_lr(&c, 7), 0.25, 1e-12);
    c.sched = DPFL_SCHED_EXP;
    assert_close(dpfl_optim_lr(&c, 3), 0.125, 1e-12);
    c.sched = DPFL_SCHED_CONSTANT;
    assert_close(dpfl_optim_lr(&c, 100), 1.0, 1e-12);
    dpfl_opt_kind k;
    dpfl_error err;
    assert_int_equal(dpfl_optim_parse_kind("rmsprop", &k, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "sgd, adam, adamw"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_plain_and_weight_decay),
        cmocka_unit_test(sgd_momentum_matches_pytorch_convention),
        cmocka_unit_test(adam_first_steps),
        cmocka_unit_test(adamw_decouples_decay),
        cmocka_unit_test(schedules),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
