/* Client-level DP (DP-FedAvg) in the round loop: clipping of every update, the noise and its fixed denominator,
 * dropouts, the accountant's events, the stop rule and calibration, adaptive and median clipping, per-step
 * clipping. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/run.h"
#include "dpfl/privacy.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

typedef fl_fixture fixture;

static void fixture_make(fixture *f, const char *arch, const int32_t *sizes, int32_t K)
{
    fl_fixture_make(f, arch, sizes, K);
    f->cfg.run.threads = 2;
    f->cfg.fl.local_steps = 2;
    f->cfg.fl.batch = 1000;
    f->cfg.client_dp.enabled = 1;
    f->cfg.client_dp.noise = 0.0;
}

static void fixture_free(fixture *f) { fl_fixture_free(f); }

/* One round from a fresh model: *delta (P doubles) = global after - global before. */
static void one_round(fixture *f, uint64_t seed, double *delta, dpfl_round_metrics *m)
{
    size_t P = f->model.nparam;
    float *g = malloc(P * sizeof *g), *before = malloc(P * sizeof *before);
    dpfl_sim *sim = fl_fixture_sim(f, g, seed);
    memcpy(before, g, P * sizeof *g);
    dpfl_error err;
    assert_int_equal(dpfl_sim_round(sim, 1, m, &err), DPFL_OK);
    for (size_t i = 0; i < P; i++) delta[i] = (double)g[i] - (double)before[i];
    dpfl_sim_free(sim);
    free(g);
    free(before);
}

static double norm(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i] * v[i];
    return sqrt(s);
}

/* ------------------------------------------------------------------------------------------ clipping */
/* Raw updates far beyond S: a single client's released update has norm exactly S (flat) or each layer within
 * S sqrt(n_l / P) (per layer); with many clients the global model moves by at most eta S replied / denominator. */
static void every_update_is_clipped_before_summation(void **state)
{
    (void)state;
    int32_t one[1] = {40};
    fixture f;
    fixture_make(&f, "mlp:10-16-8-3", one, 1);
    f.cfg.fl.lr = 100.0;
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f.cfg.client_dp.clip = 0.5;
    f.cfg.client_dp.noise = 0.0; /* noise off */
    size_t P = f.model.nparam;
    double *d = malloc(P * sizeof *d);
    dpfl_round_metrics m;
    one_round(&f, 3, d, &m);
    assert_int_equal(m.replied, 1);
    assert_close(m.update_clip_fraction, 1.0, 0);
    assert_true(norm(d, P) <= 0.5 * (1 + 1e-6));
    assert_true(norm(d, P) >= 0.5 * (1 - 1e-5)); /* the raw update was far larger: clipped to exactly S */
    /* per-layer clipping */
    f.cfg.client_dp.per_layer = 1;
    one_round(&f, 3, d, &m);
    for (int32_t l = 0; l < f.model.nlayers; l++) {
        const dpfl_layer *L = &f.model.layers[l];
        if (!L->nparam) continue;
        double bound = 0.5 * sqrt((double)L->nparam / (double)P);
        double nl = norm(d + L->param_off, L->nparam);
        if (!(nl <= bound * (1 + 1e-6))) {
            print_error("layer %d: update norm %.9g exceeds its share %.9g of S\n", l, nl, bound);
            fail();
        }
    }
    assert_true(norm(d, P) <= 0.5 * (1 + 1e-6));
    free(d);
    fixture_free(&f);

    /* 12 clients, Poisson sampling: the sum of clipped updates divided by p K, times eta */
    int32_t sizes[12] = {20, 30, 25, 40, 35, 20, 30, 45, 25, 30, 20, 40};
    fixture_make(&f, "mlp:10-16-8-3", sizes, 12);
    f.cfg.fl.lr = 100.0;
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.fl.eta = 0.7;
    f.cfg.client_dp.clip = 0.25;
    f.cfg.client_dp.noise = 0.0;
    P = f.model.nparam;
    d = malloc(P * sizeof *d);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        one_round(&f, seed, d, &m);
        assert_true(m.replied > 0);
        assert_close(m.update_clip_fraction, 1.0, 0);
        double bound = 0.7 * 0.25 * m.replied / (0.5 * 12);
        if (!(norm(d, P) <= bound * (1 + 1e-6))) {
            print_error("global change %.9g exceeds eta S replied / (p K) = %.9g\n", norm(d, P), bound);
            fail();
        }
    }
    free(d);
    fixture_free(&f);
}

/* Per-step clipping keeps the local model within S of the global one after every step, so the raw updates are
 * already within S: the server's clip never has to act (clip fraction 0), while the same clients with fixed
 * clipping exceed S. */
static void per_step_clipping_bounds_updates_without_the_server(void **state)
{
    (void)state;
    int32_t sizes[6] = {20, 30, 25, 40, 35, 20};
    fixture f;
    fixture_make(&f, "mlp:10-16-8-3", sizes, 6);
    f.cfg.fl.lr = 5.0;
    f.cfg.fl.local_steps = 6;
    f.cfg.fl.batch = 8;
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f.cfg.client_dp.clip = 0.3;
    f.cfg.client_dp.noise = 0.0;
    size_t P = f.model.nparam;
    double *d = malloc(P * sizeof *d);
    dpfl_round_metrics m;
    one_round(&f, 5, d, &m);
    assert_true(m.update_clip_fraction > 0.5); /* fixed: raw updates exceed S */
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_PER_STEP;
    for (uint64_t seed = 5; seed <= 7; seed++) {
        one_round(&f, seed, d, &m);
        assert_int_equal(m.replied, 6);
        if (m.update_clip_fraction != 0.0) {
            print_error("per-step: %g of the raw updates exceed S\n", m.update_clip_fraction);
            fail();
        }
        assert_true(norm(d, P) <= 0.3 * (1 + 1e-6));
    }
    free(d);
    fixture_free(&f);
    /* a single client: its released update is its raw update, within S */
    int32_t one[1] = {60};
    fixture_make(&f, "mlp:10-16-8-3", one, 1);
    f.cfg.fl.lr = 5.0;
    f.cfg.fl.local_steps = 6;
    f.cfg.fl.batch = 8;
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_PER_STEP;
    f.cfg.client_dp.clip = 0.3;
    f.cfg.client_dp.noise = 0.0;
    d = malloc(f.model.nparam * sizeof *d);
    one_round(&f, 9, d, &m);
    assert_true(m.update_clip_fraction == 0.0);
    assert_true(norm(d, f.model.nparam) <= 0.3 * (1 + 1e-6));
    assert_true(norm(d, f.model.nparam) > 0.1); /* it did train */
    free(d);
    fixture_free(&f);
}

/* ------------------------------------------------------------------------------------------ noise */
/* lr = 0: every update is zero, so the round's global change is eta * noise / denominator.  Its std over all
 * parameters must be eta z S / denominator, with denominator m (fixed), p K (Poisson) or K (all), whoever
 * replied; dropouts change neither the std nor the denominator. */
static double noise_std_of_one_round(fixture *f, uint64_t seed, dpfl_round_metrics *m)
{
    size_t P = f->model.nparam;
    double *d = malloc(P * sizeof *d);
    one_round(f, seed, d, m);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < P; i++) {
        s += d[i];
        s2 += d[i] * d[i];
    }
    free(d);
    double mean = s / (double)P;
    assert_true(fabs(mean) < 5.0 * sqrt(s2 / (double)P) / sqrt((double)P)); /* centred */
    return sqrt(s2 / (double)P);
}

static void noise_std_is_z_S_over_the_fixed_denominator(void **state)
{
    (void)state;
    int32_t sizes[20];
    for (int k = 0; k < 20; k++) sizes[k] = 5 + k % 4;
    const char *sampling[3] = {"fixed", "poisson", "all"};
    const double denom[3] = {5.0, 0.4 * 20, 20.0};
    for (int dropout = 0; dropout < 2; dropout++) {
        for (int s = 0; s < 3; s++) {
            fixture f;
            fixture_make(&f, "mlp:10-200-150-3", sizes, 20); /* 32,803 parameters: std to about 0.4% */
            f.cfg.fl.lr = 0.0;
            f.cfg.fl.local_steps = 1;
            f.cfg.fl.eta = 0.5;
            fixture_set(&f.cfg, "fl.sampling", sampling[s]);
            f.cfg.fl.clients_per_round = 5;
            f.cfg.fl.client_rate = 0.4;
            f.cfg.client_dp.clip = 2.0;
            f.cfg.client_dp.noise = 3.0;
            f.cfg.client_dp.dropout = dropout ? 0.5 : 0.0;
            int32_t lost = 0, sampled = 0;
            for (uint64_t seed = 1; seed <= 3; seed++) {
                dpfl_round_metrics m;
                double sd = noise_std_of_one_round(&f, seed, &m);
                double want = 0.5 * 3.0 * 2.0 / denom[s];
                if (fabs(sd / want - 1) > 0.03) {
                    print_error("%s sampling, dropout %d: noise std %.6g on the global model, expected eta z S / %g "
                                "= %.6g\n", sampling[s], dropout, sd, denom[s], want);
                    fail();
                }
                assert_close(m.update_noise_std, 3.0 * 2.0 / denom[s], 1e-12);
                lost += m.clients - m.replied;
                sampled += m.clients;
            }
            if (dropout) assert_true(lost > 0 && lost < sampled); /* some clients did drop out */
            else assert_int_equal(lost, 0);
            fixture_free(&f);
        }
    }
}

/* ------------------------------------------------------------------------------------------ adaptive clipping */
/* Andrew et al. 2021: with the server model frozen (eta = 0) every client's update norm is fixed, a distribution
 * of 40 values.  Starting 30x too high, S must settle where the share of unclipped updates is the target
 * quantile gamma, both on average over rounds and at the final S. */
static void adaptive_clipping_converges_to_the_target_quantile(void **state)
{
    (void)state;
    int32_t sizes[40];
    for (int k = 0; k < 40; k++) sizes[k] = 4 + (k * 7) % 23;
    const double gammas[2] = {0.3, 0.8};
    for (int gi = 0; gi < 2; gi++) {
        fixture f;
        fixture_make(&f, "mlp:10-8-3", sizes, 40);
        f.cfg.fl.lr = 0.5;
        f.cfg.fl.local_steps = 3;
        f.cfg.fl.eta = 0.0;
        f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
        f.cfg.client_dp.clip_strategy = DPFL_CLIP_ADAPTIVE;
        f.cfg.client_dp.clip = 30.0;
        f.cfg.client_dp.noise = 0.05;
        f.cfg.client_dp.quantile_noise = 0.5; /* std of the noisy count of unclipped updates (of 40) */
        f.cfg.client_dp.target_quantile = gammas[gi];
        f.cfg.client_dp.clip_lr = 0.2;
        float *g = malloc(f.model.nparam * sizeof *g);
        dpfl_sim *sim = fl_fixture_sim(&f, g, 11);
        dpfl_error err;
        double frac = 0, logS = 0;
        int n = 0;
        const int R = 300;
        for (int r = 1; r <= R; r++) {
            dpfl_round_metrics m;
            assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
            if (r > R / 2) {
                frac += 1.0 - m.update_clip_fraction;
                logS += log(m.update_clip);
                n++;
            }
        }
        frac /= n;
        if (fabs(frac - gammas[gi]) > 0.05) {
            print_error("gamma %g: mean unclipped share over the last %d rounds %.4f\n", gammas[gi], n, frac);
            fail();
        }
        /* the share unclipped at the geometric mean of the late S, with a fixed clip */
        double S = exp(logS / n);
        dpfl_sim_free(sim);
        f.cfg.client_dp.clip_strategy = DPFL_CLIP_FIXED;
        f.cfg.client_dp.clip = S;
        sim = fl_fixture_sim(&f, g, 11);
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
        if (fabs((1.0 - m.update_clip_fraction) - gammas[gi]) > 0.1) {
            print_error("gamma %g: at S = %.5g the unclipped share is %.4f\n", gammas[gi], S,
                        1.0 - m.update_clip_fraction);
            fail();
        }
        /* the norms are spread: S well below the start and not degenerate */
        assert_true(S < 30.0 / 5);
        dpfl_sim_free(sim);
        free(g);
        fixture_free(&f);
    }
}

/* The count of unclipped updates is released with noise sigma_b and accounted (together with the update sum,
 * z_Delta = (z^-2 - (2 sigma_b)^-2)^-1/2) as having sensitivity 1/2: so each participant must contribute
 * b_i - 1/2, and the estimate is (sum (b_i - 1/2) + noise) / denominator + 1/2.  A raw count (sensitivity 1 when
 * a client is added) would leak more than accounted.  With Poisson sampling the number of participants varies,
 * and the two estimates differ: recover the released estimate from S's geometric step and check it. */
static void adaptive_quantile_count_has_the_accounted_sensitivity(void **state)
{
    (void)state;
    int32_t sizes[40];
    for (int k = 0; k < 40; k++) sizes[k] = 5;
    fixture f;
    fixture_make(&f, "mlp:10-8-3", sizes, 40);
    f.cfg.fl.lr = 0.0; /* every update is zero, hence unclipped: b_i = 1 */
    f.cfg.fl.local_steps = 1;
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_ADAPTIVE;
    f.cfg.client_dp.clip = 1.0;
    f.cfg.client_dp.noise = 1e-4;
    f.cfg.client_dp.quantile_noise = 1e-4;
    f.cfg.client_dp.target_quantile = 0.5;
    f.cfg.client_dp.clip_lr = 0.2;
    float *g = malloc(f.model.nparam * sizeof *g);
    dpfl_sim *sim = fl_fixture_sim(&f, g, 4);
    dpfl_error err;
    int differs = 0;
    for (int r = 1; r <= 8; r++) {
        double S = dpfl_server_update_clip(dpfl_sim_server(sim));
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        double b = 0.5 - log(dpfl_server_update_clip(dpfl_sim_server(sim)) / S) / 0.2; /* S' = S exp(-eta_S (b - g)) */
        double want = (m.replied - 0.5 * m.replied) / (0.5 * 40) + 0.5;
        if (fabs(b - want) > 1e-3) {
            print_error("round %d: %d participants, all unclipped: released estimate %.6f, expected %.6f\n", r,
                        m.replied, b, want);
            fail();
        }
        differs += m.replied != 20;
    }
    assert_true(differs > 0);
    dpfl_sim_free(sim);
    free(g);
    fixture_free(&f);
}

/* ------------------------------------------------------------------------------------------ run driver */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static cJSON *read_json(const char *path)
{
    char *t;
    size_t n;
    dpfl_error err;
    assert_int_equal(dpfl_file_read_all(path, &t, &n, &err), DPFL_OK);
    cJSON *o = cJSON_Parse(t);
    free(t);
    assert_non_null(o);
    return o;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        print_error("summary key %s is not a number\n", key);
        fail();
    }
    return v->valuedouble;
}

/* Run the synthetic data set with [client_dp] text `extra` over the base config; returns the summary. */
static cJSON *run_cdp(const char *name, const char *fl, const char *cdp, int quiet)
{
    char ini[2048], path[512], out[256];
    snprintf(ini, sizeof ini,
             "[data]\ndataset = synthetic\npartition = iid\nclients = 20\n\n[model]\narch = mlp:20-12-10\n\n"
             "[fl]\nlocal_steps = 1\nbatch = 20\nlr = 0.1\n%s\n\n[client_dp]\nenabled = yes\nclip = 1.0\n%s\n\n"
             "[run]\nseed = 3\nthreads = 2\neval_every = 1000\n",
             fl, cdp);
    snprintf(path, sizeof path, "/tmp/dpfl_test_cdp_%s.ini", name);
    snprintf(out, sizeof out, "/tmp/dpfl_test_cdp_%s", name);
    write_file(path, ini);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, path, &err), DPFL_OK);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    assert_int_equal(system(cmd), 0);
    dpfl_run_options o = {.out_dir = out, .quiet = quiet};
    if (dpfl_run(&cfg, &o, &err) != DPFL_OK) {
        print_error("run %s: %s\n", name, err.msg);
        fail();
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/summary.json", out);
    return read_json(path);
}

static double eps_of(const dpfl_event *ev, double delta)
{
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(ev, 1, delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    return g.epsilon;
}

/* metrics.jsonl: client_epsilon of every round r equals epsilon(event x r): one event per round. */
static void check_per_round(const char *name, dpfl_event ev, double delta, int32_t rounds)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/dpfl_test_cdp_%s/metrics.jsonl", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int32_t r = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        r++;
        assert_int_equal((int32_t)num(o, "round"), r);
        ev.count = r;
        assert_close(num(o, "client_epsilon"), eps_of(&ev, delta), 1e-9);
        cJSON_Delete(o);
    }
    fclose(f);
    assert_int_equal(r, rounds);
}

static void accountant_gets_one_event_per_round_at_the_true_rate(void **state)
{
    (void)state;
    const int R = 7;
    /* Poisson: R Poisson(p, z) events */
    cJSON *s = run_cdp("poisson", "rounds = 7\nsampling = poisson\nclient_rate = 0.3", "noise = 1.3\ndelta = 1e-5", 1);
    dpfl_event ev = dpfl_event_poisson(0.3, 1.3, R);
    assert_close(num(s, "client_epsilon"), eps_of(&ev, 1e-5), 1e-9);
    assert_close(num(s, "client_q"), 0.3, 0);
    assert_int_equal((int)num(s, "client_rounds_charged"), R);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(s, "private")));
    cJSON_Delete(s);
    check_per_round("poisson", ev, 1e-5, R);
    /* fixed m of K: replace-one, the sum moves by 2S, so the event carries z / 2 */
    s = run_cdp("fixed", "rounds = 7\nsampling = fixed\nclients_per_round = 6", "noise = 1.3\ndelta = 1e-5", 1);
    ev = dpfl_event_fixed(20, 6, 1.3 / 2, R);
    assert_close(num(s, "client_epsilon"), eps_of(&ev, 1e-5), 1e-9);
    assert_close(num(s, "client_q"), 6.0 / 20, 1e-12);
    cJSON_Delete(s);
    check_per_round("fixed", ev, 1e-5, R);
    /* everyone every round: R Gaussians */
    s = run_cdp("all", "rounds = 7\nsampling = all", "noise = 1.3\ndelta = 1e-5", 1);
    ev = dpfl_event_gaussian(1.3, R);
    assert_close(num(s, "client_epsilon"), eps_of(&ev, 1e-5), 1e-9);
    assert_close(num(s, "client_q"), 1.0, 0);
    cJSON_Delete(s);
    check_per_round("all", ev, 1e-5, R);
    /* dropouts are charged like everyone sampled */
    s = run_cdp("dropout", "rounds = 7\nsampling = poisson\nclient_rate = 0.3",
                "noise = 1.3\ndelta = 1e-5\ndropout = 0.5", 1);
    ev = dpfl_event_poisson(0.3, 1.3, R);
    assert_close(num(s, "client_epsilon"), eps_of(&ev, 1e-5), 1e-9);
    cJSON_Delete(s);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_cdp_poisson /tmp/dpfl_test_cdp_fixed /tmp/dpfl_test_cdp_all "
                            "/tmp/dpfl_test_cdp_dropout"), 0);
}

/* Noise given with a target: the run stops before the round that would exceed it.  Noise calibrated: all
 * rounds run within the target, and 1% less noise would not be. */
static void stop_rule_and_calibration_respect_the_target(void **state)
{
    (void)state;
    cJSON *s = run_cdp("stop", "rounds = 500\nsampling = poisson\nclient_rate = 0.5",
                       "noise = 2.0\ntarget_epsilon = 3\ndelta = 1e-5", 1);
    int64_t T = (int64_t)num(s, "rounds");
    double eps = num(s, "client_epsilon");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(s, "stopped_at_budget")));
    assert_true(T > 0 && T < 500);
    assert_true(eps <= 3.0);
    dpfl_event ev = dpfl_event_poisson(0.5, 2.0, T);
    assert_close(eps, eps_of(&ev, 1e-5), 1e-9);
    ev.count = T + 1;
    assert_true(eps_of(&ev, 1e-5) > 3.0);
    assert_int_equal((int64_t)num(s, "client_rounds_charged"), T);
    cJSON_Delete(s);

    /* fixed sampling: the replace-one bound (Wang-Balle-Kasiviswanathan) needs more noise than Poisson at the same
     * rate (its second-order term is 4x Poisson's, and the multiplier is halved), so its target is 4 */
    const char *fl[2] = {"rounds = 12\nsampling = poisson\nclient_rate = 0.25",
                         "rounds = 12\nsampling = fixed\nclients_per_round = 5"};
    const char *cdp[2] = {"target_epsilon = 2\ndelta = 1e-5", "target_epsilon = 4\ndelta = 1e-5"};
    const double target[2] = {2.0, 4.0};
    for (int i = 0; i < 2; i++) {
        s = run_cdp("calib", fl[i], cdp[i], 1);
        double z = num(s, "client_noise");
        assert_int_equal((int)num(s, "rounds"), 12);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(s, "stopped_at_budget")));
        assert_true(num(s, "client_epsilon") <= target[i]);
        dpfl_event e = i == 0 ? dpfl_event_poisson(0.25, z, 12) : dpfl_event_fixed(20, 5, z / 2, 12);
        assert_close(num(s, "client_epsilon"), eps_of(&e, 1e-5), 1e-9);
        e.z *= 0.99;
        if (!(eps_of(&e, 1e-5) > target[i])) {
            print_error("calibration (%s): 1%% less noise than z = %g still meets the target\n", i ? "fixed" : "poisson",
                        z);
            fail();
        }
        cJSON_Delete(s);
    }
    /* adaptive clipping whose count noise refuses the calibration's probe z = 1 (z must stay below 2 sigma_b =
     * 0.8): the mode's own event is probed at 0.5 and converted back by it, and the run lands on its target */
    s = run_cdp("calib", "rounds = 12\nsampling = poisson\nclient_rate = 0.25",
                "target_epsilon = 40\ndelta = 1e-5\nclip_strategy = adaptive\nquantile_noise = 0.4", 1);
    const double za = num(s, "client_noise"), ea = num(s, "client_epsilon");
    if (!(za < 0.8 && ea <= 40.0 && ea > 40.0 * 0.99)) {
        print_error("adaptive calibration: z %g gives epsilon %g, not the target 40\n", za, ea);
        fail();
    }
    cJSON_Delete(s);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_cdp_stop /tmp/dpfl_test_cdp_calib"), 0);
}

/* Adaptive clipping splits z between the update sum (z_Delta) and the quantile count (sigma_b); with the default
 * sigma_b = expected clients / 20 = 1 (20 clients, all sampled) and z = 2 nothing is left for the sum (z_Delta
 * would be infinite and the model NaN).  That is a configuration error before any round; with a quantile noise
 * that leaves room, the charged multiplier is the one recomputed from the two noises, and the model stays finite. */
static void adaptive_clipping_rejects_a_quantile_noise_that_leaves_no_update_noise(void **state)
{
    (void)state;
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[data]\ndataset = synthetic\npartition = iid\nclients = 20\n\n[model]\narch = mlp:20-12-10\n\n"
             "[fl]\nlocal_steps = 1\nbatch = 20\nlr = 0.1\nrounds = 2\nsampling = all\n\n[client_dp]\nenabled = yes\n"
             "clip = 1.0\nnoise = 2\nclip_strategy = adaptive\n\n[run]\nseed = 3\nthreads = 1\n");
    write_file("/tmp/dpfl_test_cdp_adaptive.ini", ini);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, "/tmp/dpfl_test_cdp_adaptive.ini", &err), DPFL_OK);
    unlink("/tmp/dpfl_test_cdp_adaptive.ini");
    assert_int_equal(system("rm -rf /tmp/dpfl_test_cdp_adaptive"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_cdp_adaptive", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_EINVAL);
    if (!strstr(err.msg, "client_dp.quantile_noise")) {
        print_error("error does not name the key: %s\n", err.msg);
        fail();
    }
    /* nothing was released */
    assert_int_not_equal(access("/tmp/dpfl_test_cdp_adaptive/metrics.jsonl", F_OK), 0);
    assert_int_not_equal(access("/tmp/dpfl_test_cdp_adaptive/model.bin", F_OK), 0);

    cJSON *s = run_cdp("adaptive", "rounds = 3\nsampling = all", "noise = 2\nclip_strategy = adaptive\nquantile_noise = 4", 1);
    const double zd = num(s, "update_noise"), sb = num(s, "quantile_noise");
    assert_close(sb, 4.0, 0);
    assert_close(zd, 1.0 / sqrt(1.0 / 4.0 - 1.0 / 64.0), 1e-12);
    assert_true(isfinite(num(s, "test_loss"))); /* NaN parameters give a NaN loss */
    dpfl_event ev = dpfl_event_gaussian(1.0 / sqrt(1.0 / (zd * zd) + 1.0 / (4.0 * sb * sb)), 3);
    assert_close(num(s, "client_epsilon"), eps_of(&ev, 1e-5), 1e-9);
    cJSON_Delete(s);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_cdp_adaptive"), 0);
}

/* Median clipping has no sensitivity bound: the run says "private": false and no client epsilon is a number,
 * in the summary, in any metrics line, or on stderr. */
static void median_clipping_is_reported_as_not_private(void **state)
{
    (void)state;
    fflush(stderr);
    int saved = dup(2);
    int fd = open("/tmp/dpfl_test_cdp_median.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    cJSON *s = run_cdp("median", "rounds = 4\nsampling = poisson\nclient_rate = 0.5",
                       "clip_strategy = median\nnoise = 1.0\ntarget_epsilon = 3\ndelta = 1e-5", 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(s, "private")));
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(s, "private")));
    assert_false(cJSON_IsNumber(cJSON_GetObjectItem(s, "client_epsilon")));
    /* numbers stay numbers: null, and the reason in its own key */
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(s, "client_epsilon")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(s, "client_epsilon_reason")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(s, "started_at")));
    assert_int_equal((int)num(s, "rounds"), 4); /* no budget can stop it: there is no epsilon */
    cJSON_Delete(s);
    FILE *f = fopen("/tmp/dpfl_test_cdp_median/metrics.jsonl", "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        const cJSON *e = cJSON_GetObjectItem(o, "client_epsilon");
        assert_false(cJSON_IsNumber(e));
        assert_true(cJSON_IsNull(e) && cJSON_IsString(cJSON_GetObjectItem(o, "client_epsilon_reason")));
        cJSON_Delete(o);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 4);
    char *text;
    size_t len;
    dpfl_error err;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_cdp_median.err", &text, &len, &err), DPFL_OK);
    assert_non_null(strstr(text, "NOT differentially private"));
    assert_null(strstr(text, "client-level ("));
    free(text);
    unlink("/tmp/dpfl_test_cdp_median.err");
    assert_int_equal(system("rm -rf /tmp/dpfl_test_cdp_median"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_update_is_clipped_before_summation),
        cmocka_unit_test(per_step_clipping_bounds_updates_without_the_server),
        cmocka_unit_test(noise_std_is_z_S_over_the_fixed_denominator),
        cmocka_unit_test(adaptive_clipping_converges_to_the_target_quantile),
        cmocka_unit_test(adaptive_quantile_count_has_the_accounted_sensitivity),
        cmocka_unit_test(accountant_gets_one_event_per_round_at_the_true_rate),
        cmocka_unit_test(stop_rule_and_calibration_respect_the_target),
        cmocka_unit_test(median_clipping_is_reported_as_not_private),
        cmocka_unit_test(adaptive_clipping_rejects_a_quantile_noise_that_leaves_no_update_noise),
    };
    return cmocka_run_group_tests_name("client_dp", tests, NULL, NULL);
}
