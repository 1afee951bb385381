/* The seeds' remaining methods (issue 38): the thesis's clipping-threshold decay (its Algorithm 6: a public
 * schedule of the per-example clip, noise std z C_t, accounting unchanged), its trusted-curator and naive baselines
 * (Algorithms 7 and 8) as presets, and personal parameters that never leave a client (FedBN / FedGN, PrivateFL
 * Table 5; PP-SGD, Bietti et al. 2022). */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/fl.h"
#include "dpfl/transport.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the empirical std of v's n entries about their mean */
static double sample_std(const float *v, size_t n)
{
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    const double mean = s / (double)n;
    for (size_t i = 0; i < n; i++) ss += ((double)v[i] - mean) * ((double)v[i] - mean);
    return sqrt(ss / (double)(n - 1));
}

/* C_t = max(C_0 (1 - d)^(t-1), C_min), exactly C_0 without decay. */
static void record_clip_schedule_is_the_thesis_decay(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    fixture_set(&c, "record_dp.enabled", "yes");
    fixture_set(&c, "record_dp.noise", "1");
    fixture_set(&c, "record_dp.clip", "3");
    for (int32_t t = 1; t <= 50; t++) assert_true(dpfl_round_record_clip(&c, t) == 3.0);
    fixture_set(&c, "record_dp.clip_decay", "0.1");
    fixture_set(&c, "record_dp.clip_min", "1");
    assert_true(dpfl_round_record_clip(&c, 1) == 3.0);
    assert_true(fabs(dpfl_round_record_clip(&c, 2) - 2.7) < 1e-12);
    assert_true(fabs(dpfl_round_record_clip(&c, 5) - 3.0 * 0.9 * 0.9 * 0.9 * 0.9) < 1e-12);
    assert_true(dpfl_round_record_clip(&c, 12) == 1.0); /* 3 * 0.9^11 = 0.94: floored */
    assert_true(dpfl_round_record_clip(&c, 1000) == 1.0);
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
    fixture_set(&c, "record_dp.clip_min", "4");
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "record_dp.clip_min"));
    fixture_set(&c, "record_dp.clip_min", "1");
    fixture_set(&c, "record_dp.clip_decay", "1");
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "record_dp.clip_decay"));
    /* clip_min without a decay would be ignored: refused */
    dpfl_config_defaults(&c);
    fixture_set(&c, "record_dp.enabled", "yes");
    fixture_set(&c, "record_dp.clip_min", "1");
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "clip_min"));
}

/* The noise a client actually adds in round t has std z C_t: with z = 1000 the update of one plain-SGD step is
 * almost all noise (the clipped sum is at most b C_t against z C_t per coordinate over ~2800 coordinates), and its
 * empirical std is lr z C_t / (q n) within 5% (std error of the estimate ~1.2%).  Fails if the noise stays at
 * z C_0, uses another round's clip (a factor 2 here, 1.25 between rounds 4 and 5), or ignores the floor (1.6); the round's metrics report the same. */
static void noise_std_of_round_t_is_z_times_c_t(void **state)
{
    (void)state;
    const int32_t sizes[] = {100};
    fl_fixture f;
    fl_fixture_make(&f, "mlp:10-250-3", sizes, 1);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "1000");
    fixture_set(&f.cfg, "record_dp.clip", "1");
    fixture_set(&f.cfg, "record_dp.clip_decay", "0.5");
    fixture_set(&f.cfg, "record_dp.clip_min", "0.1");
    fixture_set(&f.cfg, "fl.batch", "10");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "fl.lr", "1");
    fixture_set(&f.cfg, "run.threads", "1");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *upd = malloc(P * sizeof(float)), *start = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 3);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    const double want_clip[] = {1, 0.5, 0.25, 0.125, 0.1, 0.1}; /* 0.0625 floored at 0.1 */
    for (int32_t t = 1; t <= 6; t++) {
        const double want = 1000.0 * want_clip[t - 1] / 10.0; /* lr z C_t / (q n), q n = 10 */
        /* one client's local training, as a deployed client runs it */
        dpfl_client_report res;
        assert_int_equal(dpfl_sim_client_round(sim, t, 1.0, 0, upd, &res, &err), DPFL_OK);
        const double got = sample_std(upd, P);
        if (fabs(got / want - 1) > 0.05) print_error("round %d: update std %.5g, want %.5g\n", t, got, want);
        assert_true(fabs(got / want - 1) <= 0.05);
        /* the simulation's round: the global model moves by the same noise, and the metrics name its std */
        memcpy(start, global, P * sizeof(float));
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, t, &m, &err), DPFL_OK);
        for (size_t j = 0; j < P; j++) upd[j] = global[j] - start[j];
        const double moved = sample_std(upd, P);
        assert_true(fabs(moved / want - 1) <= 0.05);
        assert_true(fabs(m.noise_std - 1000.0 * want_clip[t - 1]) <= 1e-9 * m.noise_std);
        memcpy(global, start, P * sizeof(float)); /* every round from the same model */
    }
    dpfl_sim_free(sim);
    free(global);
    free(upd);
    free(start);
    fl_fixture_free(&f);
}

/* The record-level epsilon depends on z, q and the steps alone: identical with and without the decay. */
static double epsilon_after(fl_fixture *f, int rounds, dpfl_ledger *out)
{
    const size_t P = f->model.nparam;
    float *global = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 5);
    dpfl_model_init(&f->model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, global, &sim, &err),
                     DPFL_OK);
    for (int32_t r = 1; r <= rounds; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
    }
    dpfl_record_report rep;
    assert_int_equal(dpfl_sim_epsilon(sim, &rep, NULL, NULL, &err), DPFL_OK);
    assert_int_equal(dpfl_ledger_copy(out, dpfl_server_ledger(dpfl_sim_server(sim)), &err), DPFL_OK);
    dpfl_sim_free(sim);
    free(global);
    return rep.epsilon;
}

static void decay_leaves_the_epsilon_unchanged(void **state)
{
    (void)state;
    const int32_t sizes[] = {60, 80, 100};
    double eps[2];
    dpfl_ledger l[2];
    for (int d = 0; d < 2; d++) {
        fl_fixture f;
        fl_fixture_make(&f, "mlp:10-8-3", sizes, 3);
        fixture_set(&f.cfg, "record_dp.enabled", "yes");
        fixture_set(&f.cfg, "record_dp.noise", "1.1");
        fixture_set(&f.cfg, "record_dp.clip", "2");
        fixture_set(&f.cfg, "fl.sampling", "poisson");
        fixture_set(&f.cfg, "fl.client_rate", "0.7");
        fixture_set(&f.cfg, "fl.local_steps", "4");
        if (d) {
            fixture_set(&f.cfg, "record_dp.clip_decay", "0.3");
            fixture_set(&f.cfg, "record_dp.clip_min", "0.2");
        }
        dpfl_error err;
        assert_int_equal(dpfl_ledger_init(&l[d], 3, &err), DPFL_OK);
        eps[d] = epsilon_after(&f, 8, &l[d]);
        fl_fixture_free(&f);
    }
    assert_true(eps[0] > 0 && isfinite(eps[0]));
    assert_true(eps[0] == eps[1]);
    assert_int_equal(l[0].rounds, l[1].rounds);
    for (int32_t k = 0; k < 3; k++) assert_true(l[0].record_steps[k] == l[1].record_steps[k] && l[0].participations[k] == l[1].participations[k]);
    dpfl_ledger_free(&l[0]);
    dpfl_ledger_free(&l[1]);
}

/* ------------------------------------------------------------------------------------------ personal parameters */
/* The parameter slices of the layers of kind `kind` (or, kind < 0, the last layer with parameters) into mask. */
static size_t mark_layers(const dpfl_model *m, int kind, unsigned char *mask)
{
    size_t n = 0;
    memset(mask, 0, m->nparam);
    int32_t last = -1;
    for (int32_t i = 0; i < m->nlayers; i++)
        if (m->layers[i].nparam) last = i;
    for (int32_t i = 0; i < m->nlayers; i++) {
        const dpfl_layer *L = &m->layers[i];
        if (!L->nparam || (kind >= 0 ? (int)L->kind != kind : i != last)) continue;
        memset(mask + L->param_off, 1, L->nparam);
        n += L->nparam;
    }
    return n;
}

typedef struct {
    const unsigned char *mask;
    size_t P;
    int64_t updates, leaks, shared_nonzero;
} leak_watch;

/* the server's view of each arrived update: its personal coordinates must be exactly zero */
static void watch_update(void *ctx, int32_t round, int32_t client, const float *u, size_t P)
{
    (void)round, (void)client;
    leak_watch *w = ctx;
    assert_true(P == w->P);
    w->updates++;
    for (size_t j = 0; j < P; j++) {
        if (w->mask[j]) w->leaks += u[j] != 0.0f;
        else w->shared_nonzero += u[j] != 0.0f;
    }
}

/* Trains `rounds` rounds of 4 clients with fl.personal = which, and checks: no arrived update carries a personal
 * coordinate; the global model's personal slices are bit-equal to the initial model's after every round (nothing
 * aggregated, the server's noise discarded); every client's own personal values moved, and differ between
 * clients; the shared part of the global model moved. */
static void check_personal(const char *arch, const char *which, int kind, const char *const *settings)
{
    const int32_t sizes[] = {40, 50, 60, 70};
    fl_fixture f;
    fl_fixture_make(&f, arch, sizes, 4);
    fixture_set(&f.cfg, "fl.personal", which);
    fixture_set(&f.cfg, "fl.local_steps", "3");
    fixture_set(&f.cfg, "fl.batch", "8");
    fixture_set(&f.cfg, "fl.lr", "0.1");
    for (int i = 0; settings[i]; i += 2) fixture_set(&f.cfg, settings[i], settings[i + 1]);
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&f.cfg, &err), DPFL_OK);
    const size_t P = f.model.nparam;
    unsigned char *mask = malloc(P);
    const size_t npers = mark_layers(&f.model, kind, mask);
    assert_true(npers > 0 && npers < P);
    float *global = malloc(P * sizeof(float)), *w0 = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 11);
    dpfl_model_init(&f.model, global, &root);
    /* a GroupNorm starts at gamma 1, beta 0: perturb the start so that "reset to the start" is not "reset to 1/0" */
    for (size_t j = 0; j < P; j++)
        if (mask[j]) global[j] += 0.01f * (float)(j % 7);
    memcpy(w0, global, P * sizeof(float));
    dpfl_sim *sim;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    leak_watch lw = {mask, P, 0, 0, 0};
    dpfl_server_set_update_observer(dpfl_sim_server(sim), watch_update, &lw);
    for (int32_t r = 1; r <= 3; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        for (size_t j = 0; j < P; j++)
            if (mask[j] && global[j] != w0[j]) {
                print_error("%s: round %d: personal parameter %zu of the global model is %g, started at %g\n", which,
                            r, j, global[j], w0[j]);
                fail();
            }
    }
    assert_true(lw.updates >= 8);
    assert_int_equal(lw.leaks, 0);
    assert_true(lw.shared_nonzero > 0);
    size_t moved = 0;
    for (size_t j = 0; j < P; j++) moved += !mask[j] && global[j] != w0[j];
    assert_true(moved > 0);
    /* each client's own values: trained (moved from the start) and its own */
    const float *st[4];
    for (int32_t k = 0; k < 4; k++) {
        dpfl_clients_state(dpfl_sim_clients(sim), k, &st[k]);
        assert_non_null(st[k]);
    }
    const size_t tail = dpfl_clients_state_floats(dpfl_sim_clients(sim)) - npers;
    size_t changed = 0, differ = 0;
    for (size_t j = 0, q = 0; j < P; j++) {
        if (!mask[j]) continue;
        changed += st[0][tail + q] != w0[j];
        differ += st[0][tail + q] != st[1][tail + q];
        q++;
    }
    assert_true(changed > 0);
    assert_true(differ > 0);
    dpfl_sim_free(sim);
    free(global);
    free(w0);
    free(mask);
    fl_fixture_free(&f);
}

static void normalization_layers_never_reach_the_aggregate(void **state)
{
    (void)state;
    /* FedGN under client-level DP (PrivateFL's FedBN row, with GroupNorm): the server clips and noises */
    const char *const cdp[] = {"client_dp.enabled", "yes", "client_dp.noise", "0.5", "client_dp.clip", "0.5", NULL};
    check_personal("net:fc16,gn4,relu,fc8,gn2,relu,fc3", "norm", DPFL_LAYER_GROUPNORM, cdp);
    /* FedGN under record-level DP (LDP) */
    const char *const ldp[] = {"record_dp.enabled", "yes", "record_dp.noise", "0.8", "record_dp.clip", "1", NULL};
    check_personal("net:fc16,gn4,relu,fc8,gn2,relu,fc3", "norm", DPFL_LAYER_GROUPNORM, ldp);
    /* per-step clipping projects the shared part only */
    const char *const step[] = {"client_dp.enabled", "yes", "client_dp.noise", "0.5", "client_dp.clip", "0.05",
                                "client_dp.clip_strategy", "per-step", NULL};
    check_personal("net:fc16,gn4,relu,fc8,gn2,relu,fc3", "norm", DPFL_LAYER_GROUPNORM, step);
    /* distributed DP: the clients' Skellam noise on the personal coordinates is discarded too */
    const char *const ddp[] = {"client_dp.enabled", "yes", "client_dp.noise", "0.7", "client_dp.clip", "0.5",
                               "client_dp.mechanism", "ddp", NULL};
    check_personal("net:fc16,gn4,relu,fc8,gn2,relu,fc3", "norm", DPFL_LAYER_GROUPNORM, ddp);
}

/* PP-SGD (Bietti et al. 2022): a personal head under client-level DP, the same mechanism */
static void personal_head_never_reaches_the_aggregate(void **state)
{
    (void)state;
    const char *const cdp[] = {"client_dp.enabled", "yes", "client_dp.noise", "0.5", "client_dp.clip", "0.5", NULL};
    check_personal("mlp:10-16-3", "head", -1, cdp);
    const char *const plain[] = {NULL};
    check_personal("mlp:10-16-3", "head", -1, plain);
}

static void personal_layers_are_checked(void **state)
{
    (void)state;
    const int32_t sizes[] = {20, 20};
    const char *bad[][3] = {
        {"mlp:10-16-3", "norm", "has no GroupNorm"},
        {"net:fc16,relu,fc3", "1", "has no parameters"},
        {"net:fc16,relu,fc3", "7", "does not exist"},
        {"net:fc16,relu,fc3", "0,2", "nothing is left to federate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fl_fixture f;
        fl_fixture_make(&f, bad[i][0], sizes, 2);
        fixture_set(&f.cfg, "fl.personal", bad[i][1]);
        const size_t P = f.model.nparam;
        float *global = calloc(P, sizeof(float));
        dpfl_rng root;
        dpfl_rng_init_seed(&root, 1);
        dpfl_sim *sim = NULL;
        dpfl_error err;
        assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err),
                         DPFL_EINVAL);
        if (!strstr(err.msg, bad[i][2])) print_error("%s / %s: %s\n", bad[i][0], bad[i][1], err.msg);
        assert_non_null(strstr(err.msg, bad[i][2]));
        assert_non_null(strstr(err.msg, "fl.personal"));
        free(global);
        fl_fixture_free(&f);
    }
    /* an item that is not norm, head or a position fails when the key is read, naming the key and the item */
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    assert_int_equal(dpfl_config_set(&c, "fl.personal=norm,headx", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "headx"));
    assert_non_null(strstr(err.msg, "fl.personal"));
    assert_int_equal(c.fl.personal.n, 0); /* a bad value is not stored */
}

/* ------------------------------------------------------------------------------------------ the thesis's baselines */
/* trusted-curator and naive-e2e expand into the thesis's Algorithms 7 and 8, and each names whom its numbers cover */
static void baseline_presets(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.algorithm", "trusted-curator");
    assert_true(c.client_dp.enabled && !c.record_dp.enabled);
    assert_int_equal(c.fl.sampling, DPFL_SAMPLE_FIXED);
    assert_int_equal(c.client_dp.clip_strategy, DPFL_CLIP_FIXED);
    assert_int_equal(c.client_dp.mechanism, DPFL_CLIENT_MECH_GAUSSIAN);
    const char *s = dpfl_config_preset_scope(&c, 0, 1);
    assert_non_null(s);
    assert_non_null(strstr(s, "NOT the server"));
    assert_null(dpfl_config_preset_scope(&c, 1, 1)); /* record_dp switched on by hand: no longer the baseline */
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.algorithm", "naive-e2e");
    assert_true(c.client_dp.enabled && c.record_dp.enabled);
    assert_int_equal(c.fl.sampling, DPFL_SAMPLE_FIXED);
    assert_int_equal(c.record_dp.sampler, DPFL_BATCH_POISSON);
    s = dpfl_config_preset_scope(&c, 1, 1);
    assert_non_null(s);
    assert_non_null(strstr(s, "server included"));
    assert_null(dpfl_config_preset_scope(&c, 1, 0));
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.algorithm", "dp-fedavg");
    assert_null(dpfl_config_preset_scope(&c, 0, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(record_clip_schedule_is_the_thesis_decay),
        cmocka_unit_test(noise_std_of_round_t_is_z_times_c_t),
        cmocka_unit_test(decay_leaves_the_epsilon_unchanged),
        cmocka_unit_test(normalization_layers_never_reach_the_aggregate),
        cmocka_unit_test(personal_head_never_reaches_the_aggregate),
        cmocka_unit_test(personal_layers_are_checked),
        cmocka_unit_test(baseline_presets),
    };
    return cmocka_run_group_tests_name("seeds", tests, NULL, NULL);
}
