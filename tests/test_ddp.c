/* Distributed DP as a mechanism and as a training mode (src/mech/ddp.c, src/fl/aggregate_ddp.c): the plan's
 * constants, the client's encoding and the server's decoding, the noise that reaches the model, the accounting
 * against the Gaussian limit, secure aggregation in the round (the same sum as the direct one, dropouts recovered,
 * too few survivors release nothing). */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/ddp.h"
#include "dpfl/run.h"
#include "dpfl/privacy.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

/* The plan: the padded dimension, the grid meeting the inflation, mu = (z d2)^2, the smallest modulus whose
 * overflow bound holds, thresholds, and the refusals. */
static void plan_constants(void **state)
{
    (void)state;
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(1000, 0.5, 1.2, 0.01, 0, 40, 0.1, &p, &err), DPFL_OK);
    assert_int_equal(p.d, 1024);
    const double r = p.clip / p.gamma;
    assert_true(p.d2 <= 1.01 * r * (1 + 1e-9) && p.d2 >= 1.0099 * r); /* the smallest grid within the inflation */
    assert_close(p.mu, (1.2 * p.d2) * (1.2 * p.d2), 1e-12);
    assert_close(p.d1, fmin(p.d2 * p.d2, sqrt(1024.0) * p.d2), 1e-12);
    const double full = dpfl_ddp_client_variance(&p, 40) * 40;
    assert_true(dpfl_ddp_overflow_bound(&p, 40, full) <= 1e-9);
    p.bits--;
    assert_true(dpfl_ddp_overflow_bound(&p, 40, full) > 1e-9);
    p.bits++;
    assert_int_equal(dpfl_ddp_threshold(&p, 10), 9);
    assert_int_equal(dpfl_ddp_threshold(&p, 2), 2);
    assert_int_equal(dpfl_ddp_threshold(&p, 100), 90);
    assert_close(dpfl_ddp_client_variance(&p, 100), p.mu / 90, 1e-15);
    assert_int_equal(dpfl_ddp_plan_make(1000, 0.5, 1.2, 0.01, 0, 40, 0.5, &p, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_ddp_plan_make(1000, 0.5, 0.0, 0.01, 0, 40, 0.1, &p, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_ddp_plan_make(1000, 0.5, 1.2, 0.01, 4, 40, 0.1, &p, &err), DPFL_EINVAL);
    /* a modulus too small for the cohort: the overflow bound says so */
    assert_int_equal(dpfl_ddp_plan_make(1000, 0.5, 1.2, 0.01, 12, 40, 0.1, &p, &err), DPFL_OK);
    assert_close(dpfl_ddp_overflow_bound(&p, 40, full), 1.0, 0);
}

/* Without noise, the modular sum of k encodings decodes to the sum of the clipped updates within the rounding
 * (each client's rounding moves it by < sqrt(d) grid steps); an update beyond S is clipped.  With noise and zero
 * updates, the decoded coordinates have the variance k * client variance * gamma^2. */
static void encode_decode_sums(void **state)
{
    (void)state;
    const size_t P = 3000;
    const int k = 5;
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(P, 1.0, 1.0, 0.01, 0, k, 0.0, &p, &err), DPFL_OK);
    float *u = malloc(P * sizeof *u), *dec = malloc(P * sizeof *dec);
    double *want = calloc(P, sizeof *want), *work = malloc(p.d * sizeof *work);
    int64_t *iw = malloc(p.d * sizeof *iw);
    uint32_t *enc = malloc(p.d * sizeof *enc), *sum = calloc(p.d, sizeof *sum);
    uint8_t seed[32] = {7};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 3);
    const uint32_t mask = p.bits >= 32 ? 0xFFFFFFFFu : ((uint32_t)1 << p.bits) - 1;
    for (int c = 0; c < k; c++) {
        double nn = 0;
        for (size_t i = 0; i < P; i++) u[i] = (float)dpfl_rng_gaussian(&r) * (c == 0 ? 1.0f : 0.03f), nn += (double)u[i] * u[i];
        const double s = sqrt(nn) > 1.0 ? 1.0 / sqrt(nn) : 1.0; /* client 0 is far beyond S = 1 */
        if (c == 0) assert_true(sqrt(nn) > 5);
        for (size_t i = 0; i < P; i++) want[i] += u[i] * s;
        double norm;
        int tries;
        assert_int_equal(dpfl_ddp_encode(&p, u, seed, NULL, &r, work, iw, enc, &norm, &tries, &err), DPFL_OK);
        assert_close(norm, sqrt(nn), 1e-6);
        for (size_t i = 0; i < p.d; i++) sum[i] = (sum[i] + enc[i]) & mask;
    }
    assert_int_equal(dpfl_ddp_decode(&p, sum, seed, iw, work, 1.0f, dec, &err), DPFL_OK);
    double e2 = 0;
    for (size_t i = 0; i < P; i++) e2 += (dec[i] - want[i]) * (dec[i] - want[i]);
    assert_true(sqrt(e2) <= k * p.gamma * sqrt((double)p.d));
    double w2 = 0;
    for (size_t i = 0; i < P; i++) w2 += want[i] * want[i];
    assert_true(sqrt(e2) < 0.25 * sqrt(w2)); /* unbiased rounding on a fine grid: well below the signal */
    /* noise only */
    /* the clients' noise as the mechanism draws it (dpfl_ddp_noise_table): Skellam(cv) = Poisson(cv / 2) - Poisson(cv /
     * 2), the table kept for a round of the same size and replaced for another */
    dpfl_poisson_table *t = NULL;
    const double cv = dpfl_ddp_client_variance(&p, k);
    assert_int_equal(dpfl_ddp_noise_table(&p, 2 * k, &t, &err), DPFL_OK);
    assert_close(dpfl_poisson_table_lambda(t), dpfl_ddp_client_variance(&p, 2 * k) / 2, 1e-15);
    assert_int_equal(dpfl_ddp_noise_table(&p, k, &t, &err), DPFL_OK);
    const dpfl_poisson_table *kept = t;
    assert_int_equal(dpfl_ddp_noise_table(&p, k, &t, &err), DPFL_OK);
    assert_ptr_equal(t, kept);
    assert_close(dpfl_poisson_table_lambda(t), cv / 2, 1e-15);
    memset(sum, 0, p.d * sizeof *sum);
    memset(u, 0, P * sizeof *u);
    for (int c = 0; c < k; c++) {
        assert_int_equal(dpfl_ddp_encode(&p, u, seed, t, &r, work, iw, enc, NULL, NULL, &err), DPFL_OK);
        for (size_t i = 0; i < p.d; i++) sum[i] = (sum[i] + enc[i]) & mask;
    }
    assert_int_equal(dpfl_ddp_decode(&p, sum, seed, iw, work, 1.0f, dec, &err), DPFL_OK);
    double v = 0;
    for (size_t i = 0; i < P; i++) v += (double)dec[i] * dec[i];
    v /= P;
    const double want_v = k * cv * p.gamma * p.gamma;
    if (!(v > 0.8 * want_v && v < 1.2 * want_v)) print_error("variance %g, want %g\n", v, want_v);
    assert_true(v > 0.8 * want_v && v < 1.2 * want_v); /* 3000 coordinates: within 20% */
    assert_true(v > 0.8 * (1.0 * 1.0)); /* z = 1: about S^2 per coordinate, the Gaussian mechanism's */
    /* a diverged update (NaN) is encoded as zero: the decoded vector is the noise-free zero */
    u[3] = NAN;
    double nn;
    assert_int_equal(dpfl_ddp_encode(&p, u, seed, NULL, &r, work, iw, enc, &nn, NULL, &err), DPFL_OK);
    assert_true(isnan(nn));
    assert_int_equal(dpfl_ddp_decode(&p, enc, seed, iw, work, 1.0f, dec, &err), DPFL_OK);
    for (size_t i = 0; i < P; i++) assert_true(dec[i] == 0.0f);
    dpfl_poisson_table_free(t);
    free(u), free(dec), free(want), free(work), free(iw), free(enc), free(sum);
}

/* The Skellam event: at least the Gaussian mechanism's RDP of the same z at every order, within 1% of it at the
 * sizes DDP uses; epsilon at least the Gaussian one with the same client sampling, and within 3%; monotone in z,
 * rounds and q; the same as dpfl_skellam_epsilon within its order grid's resolution. */
static void accounting_bounds_the_gaussian(void **state)
{
    (void)state;
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(100000, 0.3, 0.9, 0.01, 0, 60, 0.1, &p, &err), DPFL_OK);
    const double orders[] = {2, 3.5, 8, 32, 128};
    for (int i = 0; i < 5; i++) {
        dpfl_event sk = dpfl_ddp_event(&p, 1.0), ga = dpfl_event_gaussian(p.z, 1);
        double rs, rg;
        assert_int_equal(dpfl_rdp_compose(&sk, 1, &orders[i], 1, &rs, &err), DPFL_OK);
        assert_int_equal(dpfl_rdp_compose(&ga, 1, &orders[i], 1, &rg, &err), DPFL_OK);
        assert_true(rs >= rg);
        if (orders[i] == floor(orders[i])) assert_true(rs <= 1.01 * rg);
    }
    double prev = 0;
    for (int64_t T = 50; T <= 400; T *= 2) {
        dpfl_event sk = dpfl_ddp_event(&p, 0.03), ga = dpfl_event_poisson(0.03, p.z, T);
        sk.count = T;
        dpfl_guarantee gs, gg;
        assert_int_equal(dpfl_account_epsilon(&sk, 1, 1e-5, DPFL_ACC_RDP, NULL, &gs, &err), DPFL_OK);
        assert_int_equal(dpfl_account_epsilon(&ga, 1, 1e-5, DPFL_ACC_RDP, NULL, &gg, &err), DPFL_OK);
        /* the joint-convexity amplification is looser than the Gaussian's exact subsampled RDP: at least it */
        assert_true(gs.epsilon >= gg.epsilon);
        assert_true(gs.epsilon > prev);
        prev = gs.epsilon;
        double e2;
        assert_int_equal(dpfl_skellam_epsilon(p.d1, p.d2, p.mu, 0.03, T, 1e-5, &e2, &err), DPFL_OK);
        /* more orders (and real ones) than its integer grid: never above it, and close */
        assert_true(gs.epsilon <= e2 * (1 + 1e-9) && gs.epsilon >= 0.97 * e2);
    }
    dpfl_event a = dpfl_ddp_event(&p, 0.03), b = dpfl_ddp_event(&p, 0.1);
    a.count = b.count = 100;
    dpfl_guarantee ga, gb, gc;
    assert_int_equal(dpfl_account_epsilon(&a, 1, 1e-5, DPFL_ACC_RDP, NULL, &ga, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&b, 1, 1e-5, DPFL_ACC_RDP, NULL, &gb, &err), DPFL_OK);
    a.z *= 1.5;
    assert_int_equal(dpfl_account_epsilon(&a, 1, 1e-5, DPFL_ACC_RDP, NULL, &gc, &err), DPFL_OK);
    assert_true(ga.epsilon < gb.epsilon && gc.epsilon < ga.epsilon);
    /* PLD does not cover it: RDP answers, and says so */
    a.z /= 1.5;
    assert_int_equal(dpfl_account_epsilon(&a, 1, 1e-5, DPFL_ACC_PLD, NULL, &gb, &err), DPFL_OK);
    assert_int_equal(gb.answered, DPFL_ACC_RDP);
    assert_close(gb.epsilon, ga.epsilon, 1e-12);
    /* the event's RDP is the corollary's value (its correction term matters at small variance), and the
     * amplified one the joint-convexity formula */
    dpfl_event small = dpfl_event_skellam(1.0, 10, 3, 50, 1);
    const double o2 = 2, o5 = 4.5;
    double r2;
    assert_int_equal(dpfl_rdp_compose(&small, 1, &o2, 1, &r2, &err), DPFL_OK);
    assert_close(r2, 0.18 + 87.0 / 10000, 1e-12);
    small.q = 0.1;
    assert_int_equal(dpfl_rdp_compose(&small, 1, &o5, 1, &r2, &err), DPFL_OK);
    const double b5 = dpfl_skellam_rdp(5, 10, 3, 50);
    assert_close(r2, log(0.9 + 0.1 * exp(3.5 * b5)) / 3.5, 1e-9);
    /* zero-out only */
    a.adjacency = DPFL_ADJ_ADD_REMOVE;
    assert_int_equal(dpfl_event_check(&a, &err), DPFL_EINVAL);
}

/* ------------------------------------------------------------------------------------------ in the round loop */
typedef fl_fixture fixture;

static void fixture_make(fixture *f, int32_t K, int32_t per_client)
{
    int32_t sizes[64];
    for (int32_t k = 0; k < K; k++) sizes[k] = per_client;
    fl_fixture_make(f, "mlp:10-16-3", sizes, K);
    f->cfg.run.threads = 2;
    f->cfg.fl.local_steps = 2;
    f->cfg.fl.batch = 20;
    f->cfg.fl.lr = 0.5;
    f->cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f->cfg.fl.rounds = 3;
    f->cfg.client_dp.enabled = 1;
    f->cfg.client_dp.mechanism = DPFL_CLIENT_MECH_DDP;
    f->cfg.client_dp.clip = 0.5;
    f->cfg.client_dp.noise = 0.8;
}

/* rounds of a fresh simulation; the final global model in g (P floats), the last round's metrics in *m */
static void run_rounds(fixture *f, int rounds, uint64_t seed, float *g, dpfl_round_metrics *m, double *eps)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, seed);
    dpfl_model_init(&f->model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, g, &sim, &err), DPFL_OK);
    for (int r = 1; r <= rounds; r++) {
        dpfl_status st = dpfl_sim_round(sim, r, m, &err);
        if (st) print_error("%s\n", err.msg);
        assert_int_equal(st, DPFL_OK);
    }
    if (eps) assert_int_equal(dpfl_sim_epsilon(sim, NULL, eps, NULL, &err), DPFL_OK);
    dpfl_sim_free(sim);
}

/* Secure aggregation in process gives the very sum the direct modular addition gives (the same model bytes), with
 * and without a dropout it recovers from; the ledger charges one Skellam event per round at the plan's values. */
static void secure_aggregation_gives_the_same_model(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 6, 30);
    const size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b), *c = malloc(P * sizeof *c);
    dpfl_round_metrics m;
    double eps;
    run_rounds(&f, 3, 5, a, &m, &eps);
    assert_int_equal(m.ddp_released, 1);
    assert_int_equal(m.ddp_threshold, 6); /* ceil(0.9 * 6) */
    assert_true(m.ddp_overflow <= 1e-9);
    f.cfg.client_dp.ddp_secagg = 0;
    run_rounds(&f, 3, 5, b, &m, NULL);
    assert_memory_equal(a, b, P * sizeof *a);
    /* the charge: 3 rounds of the plan's event at q = 1 */
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(P, 0.5, 0.8, 0.01, 0, 6, 0.1, &p, &err), DPFL_OK);
    dpfl_event ev = dpfl_ddp_event(&p, 1.0);
    ev.count = 3;
    dpfl_guarantee g;
    assert_int_equal(dpfl_account_epsilon(&ev, 1, f.cfg.client_dp.delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_close(eps, g.epsilon, 1e-12);
    /* one client in five drops after sharing its keys: with f = 0.2 the threshold is 4 of 5, and secure aggregation
     * recovers the survivors' sum exactly (the same model as the direct sum of the same survivors) */
    f.cfg.client_dp.ddp_tolerated_dropout = 0.3;
    f.cfg.client_dp.dropout = 0.2;
    f.cfg.client_dp.ddp_secagg = 1;
    run_rounds(&f, 3, 9, a, &m, NULL);
    f.cfg.client_dp.ddp_secagg = 0;
    run_rounds(&f, 3, 9, c, &m, NULL);
    assert_memory_equal(a, c, P * sizeof *a);
    fl_fixture_free(&f);
    free(a), free(b), free(c);
}

/* Fewer survivors than the threshold: the round releases nothing (the model stays where it was); enough: it moves. */
static void too_few_survivors_release_nothing(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 6, 30);
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g), *init = malloc(P * sizeof *init);
    f.cfg.client_dp.ddp_tolerated_dropout = 0.0; /* every one of the 6 must survive */
    f.cfg.client_dp.dropout = 0.6;
    dpfl_round_metrics m;
    run_rounds(&f, 1, 4, g, &m, NULL);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 4);
    dpfl_model_init(&f.model, init, &root);
    assert_true(m.replied < 6);
    assert_int_equal(m.ddp_released, 0);
    assert_memory_equal(g, init, P * sizeof *g);
    f.cfg.client_dp.dropout = 0.0;
    run_rounds(&f, 1, 4, g, &m, NULL);
    assert_int_equal(m.ddp_released, 1);
    assert_true(memcmp(g, init, P * sizeof *g) != 0);
    fl_fixture_free(&f);
    free(g), free(init);
}

/* A round of fewer than two clients can release nothing (secure aggregation needs two), so nobody trains -- in one
 * process as with dpfl serve and under mpirun (tests/mpi.sh compares them): no example is read, no loss reported, the
 * model stays; the round is charged all the same.  Rounds of two or more clients train as before. */
static void a_round_of_one_client_trains_nobody(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 6, 30);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.25;
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g), *before = malloc(P * sizeof *before);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 12);
    dpfl_model_init(&f.model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, g, &sim, &err), DPFL_OK);
    const int rounds = 24;
    int small = 0, trained = 0;
    for (int r = 1; r <= rounds; r++) {
        dpfl_round_metrics m;
        memcpy(before, g, P * sizeof *g);
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        if (m.clients < 2) {
            small += m.clients == 1;
            assert_int_equal(m.replied, 0);
            assert_int_equal(m.examples, 0);
            assert_int_equal(m.ddp_released, 0);
            assert_memory_equal(g, before, P * sizeof *g);
        } else {
            trained += m.examples > 0;
            assert_int_equal(m.replied, m.clients);
        }
    }
    assert_true(small > 0 && trained > 0); /* both kinds of round happened */
    assert_int_equal(dpfl_server_ledger(dpfl_sim_server(sim))->rounds, rounds);
    dpfl_sim_free(sim);
    fl_fixture_free(&f);
    free(g), free(before);
}

/* With lr = 0 every update is zero: the model moves by the noise alone, whose per-coordinate std must be the
 * plan's sqrt(n mu / t) gamma / n -- the noise the accountant was told about (zeroed or misdivided noise fails). */
static void the_noise_reaches_the_model(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 8, 10);
    f.cfg.fl.lr = 0.0;
    f.cfg.client_dp.noise = 2.0;
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g), *init = malloc(P * sizeof *init);
    dpfl_round_metrics m;
    run_rounds(&f, 1, 6, g, &m, NULL);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 6);
    dpfl_model_init(&f.model, init, &root);
    double v = 0;
    for (size_t i = 0; i < P; i++) v += ((double)g[i] - init[i]) * ((double)g[i] - init[i]);
    v /= (double)P;
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(P, 0.5, 2.0, 0.01, 0, 8, 0.1, &p, &err), DPFL_OK);
    const double want = 8 * dpfl_ddp_client_variance(&p, 8) * p.gamma * p.gamma / 64.0; /* averaged over 8 */
    assert_close(m.update_noise_std, sqrt(want), 1e-9);
    assert_true(v > 0.75 * want && v < 1.25 * want); /* P = 243 coordinates */
    /* about the Gaussian mechanism's z S / n (the threshold adds 8/7 of the variance) */
    assert_true(sqrt(v) > 0.9 * 2.0 * 0.5 / 8);
    fl_fixture_free(&f);
    free(g), free(init);
}

/* The configuration's refusals: ddp needs fixed clipping, flat clipping, and no fixed-size client sampling. */
static void config_refusals(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_error err;
    const char *bad[] = {"client_dp.clip_strategy=adaptive", "client_dp.per_layer=yes", "fl.sampling=fixed"};
    for (int i = 0; i < 3; i++) {
        dpfl_config_defaults(&c);
        fixture_set(&c, "client_dp.enabled", "yes");
        fixture_set(&c, "client_dp.noise", "1");
        fixture_set(&c, "client_dp.mechanism", "ddp");
        assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
        assert_int_equal(dpfl_config_set(&c, bad[i], &err), DPFL_OK);
        assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
        assert_non_null(strstr(err.msg, "mechanism = ddp"));
    }
    dpfl_config_defaults(&c);
    fixture_set(&c, "client_dp.enabled", "yes");
    fixture_set(&c, "client_dp.ddp_bits", "20");
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "ddp_bits"));
}

/* The epsilon against the aggregation server: with secure aggregation the server sees the sum (variance mu); with
 * ddp_secagg = no it sees each client's own vector, whose noise is the client's share mu / t (an audit found the sum's
 * number reported for it: 5.38 where the vectors give 32.6).  Each is the Skellam accountant at q = 1 over the busiest
 * client's rounds, at the variance the server faces. */
static cJSON *ddp_summary(int secagg, int seeded)
{
    const char *cfgp = "/tmp/dpfl_test_ddp_srv.ini", *dir = "/tmp/dpfl_test_ddp_srv";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = logreg\n\n[fl]\nrounds = 5\n"
               "sampling = all\nlocal_steps = 2\nbatch = 50\n\n[client_dp]\nenabled = yes\nmechanism = ddp\nclip = 1.0\n"
               "noise = 2\ndelta = 1e-5\nddp_secagg = %s\n\n[run]\n%sthreads = 1\n", secagg ? "yes" : "no",
            seeded ? "seed = 1\n" : "");
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_ddp_srv"), 0);
    dpfl_run_options o = {.out_dir = dir, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *t;
    size_t n;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_ddp_srv/summary.json", &t, &n, NULL), DPFL_OK);
    cJSON *s = cJSON_Parse(t);
    free(t);
    assert_non_null(s);
    unlink(cfgp);
    return s;
}

static double field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void the_server_epsilon_is_of_what_the_server_sees(void **state)
{
    (void)state;
    for (int secagg = 1; secagg >= 0; secagg--) {
        cJSON *s = ddp_summary(secagg, 0);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "ddp");
        assert_non_null(d);
        const double t = 18; /* 20 clients, every one each round, tolerated dropout 0.1: ceil(0.9 * 20) */
        const double var = field(d, "variance") / (secagg ? 1 : t);
        dpfl_event ev = dpfl_event_skellam(1.0, field(d, "l1_sensitivity"), field(d, "l2_sensitivity"), var, 1);
        ev.count = (int64_t)field(d, "max_participations");
        assert_int_equal(ev.count, 5);
        dpfl_guarantee g;
        dpfl_error err;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        if (fabs(field(d, "epsilon_vs_server") - g.epsilon) > 1e-9 * g.epsilon)
            print_error("secagg %d: epsilon_vs_server %g, the server's view %g\n", secagg,
                        field(d, "epsilon_vs_server"), g.epsilon);
        assert_true(fabs(field(d, "epsilon_vs_server") - g.epsilon) <= 1e-9 * g.epsilon);
        /* what it assumes: the server colludes with no client (each one's noise share is what it does not know) */
        const char *covers = cJSON_GetObjectItemCaseSensitive(d, "epsilon_vs_server_covers")->valuestring;
        assert_non_null(strstr(covers, "colludes with no client"));
        assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(s, "privacy")->valuestring,
                               "against the aggregation server, which sees the cohorts and colludes with no client"));
        cJSON_Delete(s);
    }
    /* with a fixed seed the server, which runs the config, can recompute every client's masks and noise: no epsilon
     * against it (audit 4: a finite one was printed) */
    cJSON *s = ddp_summary(1, 1);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "ddp");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(d, "epsilon_vs_server")));
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(d, "epsilon_vs_server_covers")->valuestring, "none"));
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(s, "privacy")->valuestring,
                           "none against the aggregation server, which holds the seed"));
    assert_true(field(d, "epsilon") > 0); /* against observers of the models: still reported (if the seed is secret) */
    cJSON_Delete(s);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_ddp_srv"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_constants),
        cmocka_unit_test(encode_decode_sums),
        cmocka_unit_test(accounting_bounds_the_gaussian),
        cmocka_unit_test(secure_aggregation_gives_the_same_model),
        cmocka_unit_test(too_few_survivors_release_nothing),
        cmocka_unit_test(a_round_of_one_client_trains_nobody),
        cmocka_unit_test(the_noise_reaches_the_model),
        cmocka_unit_test(config_refusals),
        cmocka_unit_test(the_server_epsilon_is_of_what_the_server_sees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
