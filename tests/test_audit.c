/* dpfl audit: the lower-bound estimators on synthetic guesses, and the audit end to end -- below the claimed
 * epsilon for the real mechanism, above it for a deliberately broken one (noise / 10 behind the test-only
 * DPFL_TEST_NOISE_DIVISOR), so the audit catches the bug class of a missing noise factor. */
#include "testutil.h"
#include "dpfl/audit.h"

#include <stdlib.h>

static void one_run_estimator(void **state)
{
    (void)state;
    enum { M = 200 };
    double s[M];
    int in[M];
    int32_t c, g;
    for (int i = 0; i < M; i++) in[i] = i % 2, s[i] = in[i] ? 1.0 + i : -1.0 - i; /* perfectly separated */
    double perfect = dpfl_audit_one_run(s, in, M, 1e-6, 0.05, &c, &g);
    assert_int_equal(c, g);
    /* all r = 200 right: P[Bin(200, p) = 200] = p^200 <= 0.05/4 - 4e-4 gives p = 0.978.., eps = log(p / (1-p)) */
    double p = pow(0.05 / 4 - 2.0 * M * 1e-6, 1.0 / M);
    assert_close(perfect, log(p / (1 - p)), 1e-6);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 9);
    for (int i = 0; i < M; i++) s[i] = dpfl_rng_gaussian(&r); /* scores unrelated to membership */
    assert_true(dpfl_audit_one_run(s, in, M, 1e-6, 0.05, &c, &g) < 0.5);
    /* partly informative: in between, and more signal never lowers the bound */
    double prev = 0;
    for (double shift = 0.5; shift <= 4; shift *= 2) {
        for (int i = 0; i < M; i++) s[i] = dpfl_rng_gaussian(&r) + (in[i] ? shift : 0);
        double e = dpfl_audit_one_run(s, in, M, 1e-6, 0.05, &c, &g);
        assert_true(e <= perfect + 1e-12);
        assert_true(e >= prev - 0.3); /* noisy, but the trend is up */
        prev = e;
    }
    assert_true(prev > 1.0);
}

static void multi_run_estimator(void **state)
{
    (void)state;
    enum { M = 2000 };
    double *s = malloc(M * sizeof *s);
    int *in = malloc(M * sizeof *in);
    for (int i = 0; i < M; i++) in[i] = i % 2, s[i] = in[i] ? 1.0 + i : -1.0 - i;
    double perfect = dpfl_audit_multi_run(s, in, M, 1e-6, 0.05);
    assert_true(perfect > 4.5); /* 1000 of each, no error: rates bounded by 1 - (0.05/128)^(1/1000) = 0.0078 */
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 10);
    for (int i = 0; i < M; i++) s[i] = dpfl_rng_gaussian(&r);
    assert_true(dpfl_audit_multi_run(s, in, M, 1e-6, 0.05) < 0.3);
    free(s);
    free(in);
}

static dpfl_audit_result audit(int32_t runs)
{
    dpfl_audit_params p = {400, runs, 1000, 100, 200, 3.0, 1.0, 2.0, 1e-5, 0.05, 10.0, 3};
    dpfl_audit_result r;
    dpfl_error err;
    if (dpfl_audit_run(&p, &r, &err) != DPFL_OK) {
        print_error("audit: %s\n", err.msg);
        fail();
    }
    return r;
}

static void audit_respects_a_correct_claim_and_catches_a_broken_mechanism(void **state)
{
    (void)state;
    unsetenv("DPFL_TEST_NOISE_DIVISOR");
    dpfl_audit_result ok = audit(3);
    print_message("  z = 3: claimed %.3f, epsilon_lower %.3f (one run, %d/%d), %.3f (3 runs pooled)\n",
                  ok.claimed_epsilon, ok.eps_one_run, ok.correct, ok.guesses, ok.eps_multi_run);
    assert_true(ok.claimed_epsilon > 1 && ok.claimed_epsilon < 3);
    assert_true(ok.eps_one_run <= ok.claimed_epsilon);
    assert_true(ok.eps_multi_run <= ok.claimed_epsilon);
    assert_true(ok.mean_in > ok.mean_out); /* the canaries leave a trace even so */
    setenv("DPFL_TEST_NOISE_DIVISOR", "10", 1);
    dpfl_audit_result bad = audit(1);
    unsetenv("DPFL_TEST_NOISE_DIVISOR");
    print_message("  noise / 10: claimed %.3f, epsilon_lower %.3f (%d/%d)\n", bad.claimed_epsilon, bad.eps_one_run,
                  bad.correct, bad.guesses);
    assert_close(bad.claimed_epsilon, ok.claimed_epsilon, 1e-12); /* the accountant is told the same */
    assert_true(bad.eps_one_run > bad.claimed_epsilon);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_run_estimator),
        cmocka_unit_test(multi_run_estimator),
        cmocka_unit_test(audit_respects_a_correct_claim_and_catches_a_broken_mechanism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
