/* Cross-device participation (PrivateFL, Yang et al. 2023, Table 11): shuffled disjoint cohorts, each client in
 * exactly r rounds, and its client-level accounting -- r unsampled Gaussian releases under replace-one, no
 * amplification by sampling (docs/privacy.md, "Cross-device participation"). */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/run.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void cross_device(dpfl_config *c, const char *rate, const char *r, const char *rounds)
{
    fixture_set(c, "fl.sampling", "cross-device");
    fixture_set(c, "fl.client_rate", rate);
    fixture_set(c, "fl.participations", r);
    fixture_set(c, "fl.rounds", rounds);
}

/* K = 20 clients, cohorts of 5 (E = 4 rounds a pass), r = 1, 2, 3: every pass is a partition of the clients into
 * cohorts of exactly 5, so every client takes part exactly r times in r E rounds, and the ledger counts the same;
 * the passes' permutations differ (reshuffled every E rounds), and a seed gives the same cohorts again.  Fails if
 * the rounds of a pass draw from different streams (clients repeat or are missed), if the permutation is not
 * redrawn, or if a cohort's size is not rate K. */
static void every_client_takes_part_exactly_r_times(void **state)
{
    (void)state;
    int32_t sizes[20];
    for (int k = 0; k < 20; k++) sizes[k] = 6 + k % 3;
    for (int r = 1; r <= 3; r++) {
        fl_fixture f;
        fl_fixture_make(&f, "mlp:10-4-3", sizes, 20);
        char rs[16], rounds[16];
        snprintf(rs, sizeof rs, "%d", r);
        snprintf(rounds, sizeof rounds, "%d", 4 * r);
        cross_device(&f.cfg, "0.25", rs, rounds);
        fixture_set(&f.cfg, "fl.local_steps", "1");
        fixture_set(&f.cfg, "run.threads", "1");
        dpfl_error err;
        assert_int_equal(dpfl_config_validate(&f.cfg, &err), DPFL_OK);
        float *g = malloc(f.model.nparam * sizeof *g);
        int32_t first[3][20], again[20];
        for (uint64_t seed = 1; seed <= 2; seed++) {
            dpfl_sim *sim = fl_fixture_sim(&f, g, seed);
            int32_t count[20] = {0};
            for (int32_t t = 1; t <= 4 * r; t++) {
                dpfl_round_metrics m;
                assert_int_equal(dpfl_sim_round(sim, t, &m, &err), DPFL_OK);
                const int32_t *who;
                const int32_t n = dpfl_sim_sample(sim, t, &who); /* the same round drawn again: the same cohort */
                assert_int_equal(n, 5);
                assert_int_equal(m.clients, 5);
                for (int32_t i = 0; i < n; i++) {
                    assert_true(i == 0 || who[i] > who[i - 1]); /* ascending, distinct */
                    count[who[i]]++;
                    if (seed == 1) first[(t - 1) / 4][(t - 1) % 4 * 5 + i] = who[i];
                    else if (t <= 4) again[(t - 1) % 4 * 5 + i] = who[i];
                }
                if (t % 4 == 0)
                    for (int32_t k = 0; k < 20; k++) assert_int_equal(count[k], t / 4); /* once in each pass */
            }
            const dpfl_ledger *l = dpfl_server_ledger(dpfl_sim_server(sim));
            for (int32_t k = 0; k < 20; k++) assert_int_equal(l->participations[k], r);
            dpfl_sim_free(sim);
        }
        /* another pass is another permutation (equal by chance with probability 5!^4 4! / 20! ~ 2e-9) */
        if (r >= 2) assert_true(memcmp(first[0], first[1], sizeof first[0]) != 0);
        /* the second seed's first pass differs from the first seed's; re-running seed 1 repeats it */
        assert_true(memcmp(first[0], again, sizeof again) != 0);
        dpfl_sim *sim = fl_fixture_sim(&f, g, 1);
        for (int32_t t = 1; t <= 4; t++) {
            const int32_t *who;
            assert_int_equal(dpfl_sim_sample(sim, t, &who), 5);
            assert_memory_equal(who, &first[0][(t - 1) * 5], 5 * sizeof *who);
        }
        dpfl_sim_free(sim);
        free(g);
        fl_fixture_free(&f);
    }
}

/* The permutation is uniform: over 4,000 passes of K = 8, cohorts of 2, client k sits in round 1's cohort with
 * probability 1/4 (std of the estimate 0.007; a 0.03 band is over 4 sd) and clients 0 and 1 share a cohort with
 * probability 1/7 (0.14). */
static void cohorts_are_a_uniform_permutation(void **state)
{
    (void)state;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 11);
    int32_t in_first[8] = {0}, together = 0, out[8];
    const int passes = 4000;
    for (int p = 0; p < passes; p++) {
        dpfl_rng r;
        dpfl_rng_derive(&root, &r, (uint64_t)p, 0, 0);
        dpfl_rng r2 = r;
        dpfl_mech_clients d;
        assert_int_equal(dpfl_mech_sample_clients_ran(&r, DPFL_SAMPLE_CROSS_DEVICE, 8, 0.25, 0, 1, out, &d), 2);
        assert_int_equal(d.m, 2);
        assert_true(d.q == 1.0 && d.denom == 2.0);
        for (int i = 0; i < 2; i++) in_first[out[i]]++;
        for (int32_t t = 1; t <= 4; t++) { /* the pass's rounds from the pass's stream */
            dpfl_rng rt = r2;
            assert_int_equal(dpfl_mech_sample_clients_ran(&rt, DPFL_SAMPLE_CROSS_DEVICE, 8, 0.25, 0, t, out, NULL), 2);
            if (out[0] == 0 && out[1] == 1) together++;
        }
    }
    for (int k = 0; k < 8; k++) assert_true(fabs(in_first[k] / (double)passes - 0.25) < 0.03);
    assert_true(fabs(together / (double)passes - 1.0 / 7.0) < 0.03);
}

/* The client-level epsilon of a cross-device run equals exactly the r-fold Gaussian of multiplier z / 2
 * (replace-one) after every pass, and ceil(t / E) Gaussians after round t (the client of round 1 has already
 * released once).  It is compared with what would be wrong: Poisson amplification at the cohort's rate over the
 * rounds (smaller), each round charged in full (r E Gaussians: larger), and r - 1 or r + 1 releases. */
static double gaussian_eps(double z, int64_t count, double delta)
{
    dpfl_event ev = dpfl_event_gaussian(z, count);
    ev.adjacency = DPFL_ADJ_REPLACE_ONE;
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(&ev, 1, delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    return g.epsilon;
}

static void charged_epsilon_is_the_r_fold_gaussian(void **state)
{
    (void)state;
    int32_t sizes[20];
    for (int k = 0; k < 20; k++) sizes[k] = 6;
    const double z = 3.0, delta = 1e-5;
    fl_fixture f;
    fl_fixture_make(&f, "mlp:10-4-3", sizes, 20);
    cross_device(&f.cfg, "0.25", "3", "12");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "client_dp.enabled", "yes");
    fixture_set(&f.cfg, "client_dp.noise", "3");
    fixture_set(&f.cfg, "client_dp.clip", "1");
    fixture_set(&f.cfg, "client_dp.delta", "1e-5");
    fixture_set(&f.cfg, "run.threads", "1");
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&f.cfg, &err), DPFL_OK);
    float *g = malloc(f.model.nparam * sizeof *g);
    dpfl_sim *sim = fl_fixture_sim(&f, g, 3);
    for (int32_t t = 1; t <= 12; t++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, t, &m, &err), DPFL_OK);
        double eps;
        int priv;
        assert_int_equal(dpfl_sim_epsilon(sim, NULL, &eps, &priv, &err), DPFL_OK);
        assert_true(priv);
        const int64_t passes = (t + 3) / 4;
        assert_true(eps == gaussian_eps(z / 2.0, passes, delta));
        if (passes > 1) assert_true(eps > gaussian_eps(z / 2.0, passes - 1, delta));
        assert_true(eps < gaussian_eps(z / 2.0, passes + 1, delta));
        assert_close(m.update_noise_std, z * 1.0 / 5.0, 1e-12); /* z S on the sum, divided by the cohort */
    }
    double eps;
    assert_int_equal(dpfl_sim_epsilon(sim, NULL, &eps, NULL, &err), DPFL_OK);
    dpfl_event amplified = dpfl_event_poisson(0.25, z, 12);
    dpfl_guarantee ga;
    assert_int_equal(dpfl_account_epsilon(&amplified, 1, delta, DPFL_ACC_RDP, NULL, &ga, &err), DPFL_OK);
    assert_true(ga.epsilon < 0.8 * eps); /* amplification would report far less */
    assert_true(gaussian_eps(z / 2.0, 12, delta) > 1.5 * eps); /* every round charged: far more */
    /* the ledger holds one Gaussian event, three releases, replace-one */
    const dpfl_ledger *l = dpfl_server_ledger(dpfl_sim_server(sim));
    assert_int_equal(l->nclient_events, 1);
    assert_int_equal(l->client_events[0].kind, DPFL_EV_GAUSSIAN);
    assert_int_equal(l->client_events[0].adjacency, DPFL_ADJ_REPLACE_ONE);
    assert_int_equal(l->client_events[0].count, 3);
    assert_true(l->client_events[0].z == z / 2.0);
    /* the event calibration composes for the run is the same: r releases */
    dpfl_event ev;
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, z, &ev, &err), DPFL_OK);
    assert_true(ev.kind == DPFL_EV_GAUSSIAN && ev.z == z / 2.0 && ev.adjacency == DPFL_ADJ_REPLACE_ONE);
    const dpfl_mech_clients d = dpfl_mech_clients_make(DPFL_SAMPLE_CROSS_DEVICE, 20, 0.25, 0);
    assert_int_equal(dpfl_mech_clients_releases(&d, 12), 3);
    assert_int_equal(dpfl_mech_clients_releases(&d, 5), 2);
    dpfl_sim_free(sim);
    free(g);
    fl_fixture_free(&f);
}

/* The ledger refuses any event that claims amplification for cross-device cohorts (Poisson, fixed-size,
 * two-stage) or another adjacency, at any round; an unsampled replace-one Gaussian is charged at a pass's first
 * round only.  Other designs are charged every round, as before. */
static void ledger_refuses_amplification(void **state)
{
    (void)state;
    dpfl_ledger l;
    dpfl_error err;
    assert_int_equal(dpfl_ledger_init(&l, 20, &err), DPFL_OK);
    const dpfl_mech_clients d = dpfl_mech_clients_make(DPFL_SAMPLE_CROSS_DEVICE, 20, 0.25, 0);
    assert_int_equal(dpfl_mech_clients_pass(&d), 4);
    dpfl_event bad[4] = {dpfl_event_poisson(0.25, 2.0, 1), dpfl_event_fixed(20, 5, 1.0, 1),
                         dpfl_event_two_stage(0.25, 1.0, 2.0, 1, 1, DPFL_BOUND_RPDP), dpfl_event_gaussian(1.0, 1)};
    for (int i = 0; i < 4; i++)
        for (int32_t t = 1; t <= 2; t++) {
            assert_int_equal(dpfl_ledger_charge_round(&l, &d, t, &bad[i], &err), DPFL_EINVAL);
            assert_non_null(strstr(err.msg, "cross-device"));
        }
    assert_int_equal(l.nclient_events, 0);
    dpfl_event ok = dpfl_event_gaussian(1.0, 1);
    ok.adjacency = DPFL_ADJ_REPLACE_ONE;
    for (int32_t t = 1; t <= 9; t++) assert_int_equal(dpfl_ledger_charge_round(&l, &d, t, &ok, &err), DPFL_OK);
    assert_int_equal(l.nclient_events, 1);
    assert_int_equal(l.client_events[0].count, 3); /* rounds 1, 5 and 9 */
    dpfl_ledger_free(&l);
    /* a fixed-size design is charged every round, as it was */
    assert_int_equal(dpfl_ledger_init(&l, 20, &err), DPFL_OK);
    const dpfl_mech_clients fx = dpfl_mech_clients_make(DPFL_SAMPLE_FIXED, 20, 0.0, 5);
    for (int32_t t = 1; t <= 3; t++) assert_int_equal(dpfl_ledger_charge_round(&l, &fx, t, &bad[1], &err), DPFL_OK);
    assert_int_equal(l.client_events[0].count, 3);
    dpfl_ledger_free(&l);
}

/* One-line refusals: cohorts that do not cut the clients evenly, rounds that are not r passes, the mechanisms
 * whose releases cannot be charged once per pass, and participations without cross-device sampling. */
static void configurations_are_checked(void **state)
{
    (void)state;
    struct {
        const char *key, *value, *want;
    } bad[] = {
        {"fl.client_rate", "0.15", "fl.client_rate"}, /* 3 of 20: not a divisor */
        {"fl.client_rate", "0.33", "fl.client_rate"}, /* 6.6 clients */
        {"fl.rounds", "11", "needs rounds = 8"},
        {"client_dp.clip_strategy", "adaptive", "adaptive"},
        {"client_dp.noise_schedule", "1:1, 3:2", "noise_schedule"},
        {"client_dp.mechanism", "ddp", "ddp"},
        {"record_dp.e2e", "yes", "e2e"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dpfl_config c;
        dpfl_config_defaults(&c);
        c.data.clients = 20;
        cross_device(&c, "0.25", "2", "8");
        fixture_set(&c, "client_dp.enabled", "yes");
        fixture_set(&c, "client_dp.noise", "1");
        if (!strcmp(bad[i].key, "record_dp.e2e")) {
            fixture_set(&c, "record_dp.enabled", "yes");
            fixture_set(&c, "record_dp.noise", "1");
        }
        dpfl_error err;
        assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
        fixture_set(&c, bad[i].key, bad[i].value);
        if (dpfl_config_validate(&c, &err) != DPFL_EINVAL || !strstr(err.msg, bad[i].want) || strchr(err.msg, '\n')) {
            print_error("%s = %s: got '%s', wanted an error naming '%s'\n", bad[i].key, bad[i].value, err.msg,
                        bad[i].want);
            fail();
        }
    }
    dpfl_config c;
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.participations", "2");
    dpfl_error err;
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "participations"));
}

/* A whole run (dpfl_run, as `dpfl train`) calibrates its noise to the target for r releases, not for the rounds:
 * client level, the calibrated multiplier z gives the 2-fold Gaussian of z / 2 at the target (to calibration's
 * tolerance) and summary.json reports replace-one and 2 participations; record level, the worst client's epsilon
 * meets the target after its 2 participations of 8 rounds (calibrated for 8 rounds it would be far below). */
static int stop_at_3(void *ctx, const dpfl_run_round *r)
{
    (void)ctx;
    return r->round == 3;
}

/* mode 0: a whole run; 1: stopped after round 3 (mid-pass); 2: resumed */
static cJSON *run_mode(const char *name, const char *level, int mode)
{
    char ini[1024], path[512], out[256];
    snprintf(ini, sizeof ini,
             "[data]\ndataset = synthetic\npartition = iid\nclients = 20\n\n[model]\narch = mlp:20-12-10\n\n"
             "[fl]\nlocal_steps = 3\nbatch = 20\nlr = 0.1\nsampling = cross-device\nclient_rate = 0.25\n"
             "participations = 2\nrounds = 8\n\n%s\n\n[run]\nseed = 3\nthreads = 1\neval_every = 1000\n",
             level);
    snprintf(path, sizeof path, "/tmp/dpfl_test_cross_device_%s.ini", name);
    snprintf(out, sizeof out, "/tmp/dpfl_test_cross_device_%s", name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(ini, f);
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, path, &err), DPFL_OK);
    dpfl_run_options o = {.out_dir = out, .quiet = 1, .force = mode != 2, .resume = mode == 2,
                          .on_round = mode == 1 ? stop_at_3 : NULL};
    if (dpfl_run(&cfg, &o, &err) != DPFL_OK) {
        print_error("run %s: %s\n", name, err.msg);
        fail();
    }
    remove(path);
    snprintf(path, sizeof path, "%s/summary.json", out);
    char *t;
    size_t n;
    assert_int_equal(dpfl_file_read_all(path, &t, &n, &err), DPFL_OK);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_non_null(j);
    return j;
}

static cJSON *run_json(const char *name, const char *level) { return run_mode(name, level, 0); }

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void runs_calibrate_for_r_releases(void **state)
{
    (void)state;
    cJSON *c = run_json("client", "[client_dp]\nenabled = yes\nclip = 1\ntarget_epsilon = 4\ndelta = 1e-5");
    const double z = number(c, "client_noise"), eps = number(c, "client_epsilon");
    assert_true(eps <= 4.0 && eps > 3.99);
    assert_true(eps == gaussian_eps(z / 2.0, 2, 1e-5));
    assert_true(number(c, "client_participations") == 2);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "client_adjacency_accounted")->valuestring, "replace-one");
    cJSON_Delete(c);
    cJSON *r = run_json("record", "[record_dp]\nenabled = yes\nclip = 1\ntarget_epsilon = 4\ndelta = 1e-5");
    const double reps = number(r, "epsilon");
    assert_true(reps <= 4.0 && reps > 3.9);
    assert_true(number(r, "worst_client_steps") == 2 * 3);
    cJSON_Delete(r);
}

/* Stopped after round 3 (mid-pass, E = 4) and resumed: the same cohorts, model and ledger as the whole run (the
 * sampler is a function of the pass's stream; the checkpoint holds the ledger's pass charges). */
static void a_resumed_run_is_the_whole_run(void **state)
{
    (void)state;
    const char *level = "[client_dp]\nenabled = yes\nclip = 1\nnoise = 2\ndelta = 1e-5";
    cJSON *whole = run_mode("whole", level, 0);
    cJSON_Delete(run_mode("parts", level, 1));
    cJSON *parts = run_mode("parts", level, 2);
    assert_true(number(whole, "client_epsilon") == number(parts, "client_epsilon"));
    assert_true(number(parts, "rounds") == 8);
    fixture_checkpoints_match("/tmp/dpfl_test_cross_device_whole", "/tmp/dpfl_test_cross_device_parts");
    cJSON_Delete(whole);
    cJSON_Delete(parts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_client_takes_part_exactly_r_times),
        cmocka_unit_test(cohorts_are_a_uniform_permutation),
        cmocka_unit_test(charged_epsilon_is_the_r_fold_gaussian),
        cmocka_unit_test(ledger_refuses_amplification),
        cmocka_unit_test(configurations_are_checked),
        cmocka_unit_test(runs_calibrate_for_r_releases),
        cmocka_unit_test(a_resumed_run_is_the_whole_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
