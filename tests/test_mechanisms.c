/* The privacy mechanisms measured against what the accountant is told: every test here must fail when a
 * mechanism loses its privacy (noise gone, a sensitivity factor dropped, every record sampled, the step scaled),
 * which `make mutate` (tests/mutate.py) checks by applying such one-line mutations. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/fl.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"

#include <math.h>
#include <stdlib.h>

typedef fl_fixture fixture;

static void fixture_make(fixture *f, const char *arch, const int32_t *sizes, int32_t K)
{
    fl_fixture_make(f, arch, sizes, K);
    f->cfg.run.threads = 1;
    f->cfg.fl.sampling = DPFL_SAMPLE_ALL;
}

static void fixture_free(fixture *f) { fl_fixture_free(f); }

/* `rounds` rounds from the model initialised by `seed`; the final global model in out, metrics summed. */
static void run_rounds(fixture *f, uint64_t seed, int rounds, float *out, dpfl_round_metrics *sum)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, seed);
    dpfl_model_init(&f->model, out, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, out, &sim, &err),
                     DPFL_OK);
    memset(sum, 0, sizeof *sum);
    for (int r = 1; r <= rounds; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        sum->examples += m.examples;
        sum->clients += m.clients;
    }
    dpfl_sim_free(sim);
}

/* One DP-SGD step of one client, run twice from the same seed with z = 0 and z > 0: the batch, the clipped
 * gradients and every other draw are the same, so the two models differ by exactly lr * noise / denominator.
 * Its std must be lr z f C / B: f = 1 for Poisson batches (add-remove, sensitivity C, divided by the expected
 * batch qn = B), f = 2 for fixed batches (replace-one, sensitivity 2C, divided by B).  7,171 parameters give the
 * std to about 1%; the test allows 5%.  Both ways a client steps: plain SGD (the step fused into the backward pass,
 * the noise added to the model) and SGD with momentum (sum, noise, optimizer), whose first step is the same. */
static void dpsgd_step_noise_has_the_accounted_std(void **state)
{
    (void)state;
    const char *samplers[2] = {"poisson", "fixed"};
    const double f_sens[2] = {1.0, 2.0};
    int32_t sizes[1] = {1000};
    for (int s = 0; s < 4; s++) {
        fixture f;
        fixture_make(&f, "mlp:10-512-3", sizes, 1);
        f.cfg.fl.momentum = s >= 2 ? 0.9 : 0.0;
        f.cfg.fl.local_steps = 1;
        f.cfg.fl.batch = 100;
        f.cfg.fl.lr = 0.5;
        f.cfg.record_dp.enabled = 1;
        fixture_set(&f.cfg, "record_dp.sampler", samplers[s % 2]);
        f.cfg.record_dp.clip = 0.3;
        const size_t P = f.model.nparam;
        float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b);
        dpfl_round_metrics m;
        f.cfg.record_dp.noise = 0.0;
        run_rounds(&f, 5, 1, a, &m);
        f.cfg.record_dp.noise = 2.0;
        run_rounds(&f, 5, 1, b, &m);
        double s2 = 0, mean = 0;
        for (size_t i = 0; i < P; i++) {
            double d = (double)b[i] - a[i];
            mean += d;
            s2 += d * d;
        }
        mean /= (double)P;
        const double sd = sqrt(s2 / (double)P), want = 0.5 * 2.0 * f_sens[s % 2] * 0.3 / 100.0;
        if (!(fabs(sd / want - 1) < 0.05) || !(fabs(mean) < 5 * want / sqrt((double)P))) {
            print_error("%s batches, %s: the noise moved the model by std %.6g (mean %.3g), expected lr z f C / B = "
                        "%.6g\n", samplers[s % 2], s >= 2 ? "momentum" : "plain SGD", sd, mean, want);
            fail();
        }
        free(a);
        free(b);
        fixture_free(&f);
    }
}

/* Poisson batches take each record independently with q = B/n: over T steps the examples processed are
 * Binomial(nT, q); fixed batches take exactly B per step. */
static void batch_sizes_follow_the_sampler(void **state)
{
    (void)state;
    int32_t sizes[2] = {400, 250};
    fixture f;
    fixture_make(&f, "mlp:10-4-3", sizes, 2);
    f.cfg.fl.local_steps = 50;
    f.cfg.fl.batch = 20;
    f.cfg.fl.lr = 0.1;
    f.cfg.record_dp.enabled = 1;
    f.cfg.record_dp.noise = 1.0;
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g);
    dpfl_round_metrics m;
    run_rounds(&f, 9, 4, g, &m);
    /* each client: q = 20 / n over n records -> mean 20 per step; 2 clients x 50 steps x 4 rounds */
    const double mean = 2 * 50 * 4 * 20.0;
    const double var = 4 * 50 * (400 * (20.0 / 400) * (1 - 20.0 / 400) + 250 * (20.0 / 250) * (1 - 20.0 / 250));
    if (!(fabs((double)m.examples - mean) < 5 * sqrt(var))) {
        print_error("Poisson batches: %lld examples in 400 steps, expected %.0f +- %.0f\n", (long long)m.examples, mean,
                    sqrt(var));
        fail();
    }
    assert_true(m.examples != (int64_t)mean); /* random, not fixed */
    f.cfg.record_dp.sampler = DPFL_BATCH_FIXED;
    run_rounds(&f, 9, 4, g, &m);
    assert_int_equal(m.examples, (int64_t)mean);
    free(g);
    fixture_free(&f);
}

/* Poisson client sampling at rate p: the clients taking part over R rounds are Binomial(KR, p). */
static void client_sampling_follows_its_rate(void **state)
{
    (void)state;
    int32_t sizes[50];
    for (int k = 0; k < 50; k++) sizes[k] = 4;
    fixture f;
    fixture_make(&f, "mlp:10-4-3", sizes, 50);
    f.cfg.fl.local_steps = 1;
    f.cfg.fl.batch = 4;
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.2;
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g);
    dpfl_round_metrics m;
    run_rounds(&f, 3, 60, g, &m);
    const double mean = 50 * 60 * 0.2, sd = sqrt(50 * 60 * 0.2 * 0.8);
    if (!(fabs(m.clients - mean) < 5 * sd)) {
        print_error("Poisson client sampling: %d participations in 60 rounds of 50 clients, expected %.0f +- %.0f\n",
                    m.clients, mean, sd);
        fail();
    }
    f.cfg.fl.sampling = DPFL_SAMPLE_FIXED;
    f.cfg.fl.clients_per_round = 7;
    run_rounds(&f, 3, 60, g, &m);
    assert_int_equal(m.clients, 7 * 60);
    free(g);
    fixture_free(&f);
}

/* Adaptive clipping releases the share of unclipped updates with noise sigma_b on the centred count: with every
 * update zero (lr = 0, all unclipped) and every client sampled, the released estimate is 1 + N(0, sigma_b^2) / K,
 * recovered from S's geometric step S' = S exp(-eta (b - gamma)).  Its std over 400 rounds must be sigma_b / K. */
static void adaptive_quantile_estimate_has_the_accounted_noise(void **state)
{
    (void)state;
    int32_t sizes[40];
    for (int k = 0; k < 40; k++) sizes[k] = 5;
    fixture f;
    fixture_make(&f, "mlp:10-4-3", sizes, 40);
    f.cfg.fl.lr = 0.0;
    f.cfg.fl.local_steps = 1;
    f.cfg.fl.batch = 5;
    f.cfg.client_dp.enabled = 1;
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_ADAPTIVE;
    f.cfg.client_dp.clip = 1.0;
    f.cfg.client_dp.noise = 1.0;
    f.cfg.client_dp.quantile_noise = 4.0;
    f.cfg.client_dp.target_quantile = 0.5;
    f.cfg.client_dp.clip_lr = 0.01;
    const size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 12);
    dpfl_model_init(&f.model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, g, &sim, &err), DPFL_OK);
    double s1 = 0, s2 = 0;
    const int R = 400;
    for (int r = 1; r <= R; r++) {
        double S = dpfl_server_update_clip(dpfl_sim_server(sim));
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        double b = 0.5 - log(dpfl_server_update_clip(dpfl_sim_server(sim)) / S) / 0.01;
        s1 += b - 1.0;
        s2 += (b - 1.0) * (b - 1.0);
    }
    const double mean = s1 / R, sd = sqrt(s2 / R - mean * mean), want = 4.0 / 40;
    if (!(fabs(sd / want - 1) < 0.15) || !(fabs(mean) < 5 * want / sqrt((double)R))) {
        print_error("released quantile estimate: std %.5g (mean offset %.3g), expected sigma_b / K = %.5g\n", sd, mean,
                    want);
        fail();
    }
    dpfl_sim_free(sim);
    free(g);
    fixture_free(&f);
}

/* ------------------------------------------------------------------------------------------ mech/ units */
/* chi-square statistic of observed counts against expected e each (k cells): below a 5-sigma bound */
static void chi_square_uniform(const int64_t *obs, int32_t k, double e, const char *what)
{
    double chi = 0;
    for (int32_t i = 0; i < k; i++) chi += ((double)obs[i] - e) * ((double)obs[i] - e) / e;
    /* chi^2 with k-1 degrees of freedom: mean k-1, sd sqrt(2(k-1)) */
    if (!(chi < (k - 1) + 5 * sqrt(2.0 * (k - 1)))) {
        print_error("%s: chi-square %.1f with %d degrees of freedom\n", what, chi, k - 1);
        fail();
    }
}

/* Poisson batches include every record at rate q (chi-square over records, and the mean batch size); fixed
 * batches have exactly B distinct records, each record equally often. */
static void batch_samplers_include_records_at_their_rate(void **state)
{
    (void)state;
    enum { N = 200, T = 20000 };
    int32_t idx[N], out[N];
    int64_t cnt[N] = {0}, total = 0;
    for (int i = 0; i < N; i++) idx[i] = 1000 + i;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 77);
    for (int t = 0; t < T; t++) {
        int32_t b = dpfl_mech_poisson_batch(&r, idx, N, 0.05, out);
        total += b;
        for (int32_t i = 0; i < b; i++) cnt[out[i] - 1000]++;
    }
    chi_square_uniform(cnt, N, 0.05 * T, "Poisson batch inclusion");
    assert_true(fabs((double)total - 0.05 * N * T) < 5 * sqrt(N * T * 0.05 * 0.95));
    memset(cnt, 0, sizeof cnt);
    for (int t = 0; t < T; t++) {
        assert_int_equal(dpfl_mech_fixed_batch(&r, idx, N, 10, out), 10);
        char seen[N] = {0};
        for (int32_t i = 0; i < 10; i++) {
            assert_true(out[i] >= 1000 && out[i] < 1000 + N);
            assert_int_equal(seen[out[i] - 1000], 0); /* distinct */
            seen[out[i] - 1000] = 1;
            cnt[out[i] - 1000]++;
        }
    }
    chi_square_uniform(cnt, N, 10.0 * T / N, "fixed batch inclusion");
}

static void client_samplers_follow_their_design(void **state)
{
    (void)state;
    enum { K = 100, R = 5000 };
    int32_t out[K];
    int64_t cnt[K] = {0};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 78);
    for (int t = 0; t < R; t++) {
        int32_t m = dpfl_mech_sample_clients(&r, DPFL_SAMPLE_POISSON, K, 0.1, 0, out);
        for (int32_t i = 0; i < m; i++) cnt[out[i]]++;
    }
    chi_square_uniform(cnt, K, 0.1 * R, "Poisson client sampling");
    memset(cnt, 0, sizeof cnt);
    for (int t = 0; t < R; t++) {
        assert_int_equal(dpfl_mech_sample_clients(&r, DPFL_SAMPLE_FIXED, K, 0, 7, out), 7);
        for (int32_t i = 0; i < 7; i++) {
            if (i > 0) assert_true(out[i] > out[i - 1]); /* ascending, distinct */
            cnt[out[i]]++;
        }
    }
    chi_square_uniform(cnt, K, 7.0 * R / K, "fixed client sampling");
    assert_int_equal(dpfl_mech_sample_clients(&r, DPFL_SAMPLE_ALL, K, 0, 0, out), K);
}

/* The noise std is z * sensitivity, measured on 2e5 draws (Gaussian) and 1e5 (exact discrete Gaussian on its grid,
 * where the grid's rounding allowance makes it 0.1% larger); z = 0 adds nothing, even with an infinite clip. */
static void noise_has_std_z_times_sensitivity(void **state)
{
    (void)state;
    const size_t P = 200000;
    float *v = calloc(P, sizeof *v);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 79);
    dpfl_mech_gaussian(&r, v, P, 1.5, 0.4, 0.5f, 2);
    double s2 = 0;
    for (size_t i = 0; i < P; i++) s2 += (double)v[i] * v[i];
    double sd = sqrt(s2 / P), want = 1.5 * 0.4 * 0.5;
    if (!(fabs(sd / want - 1) < 5 / sqrt(2.0 * P))) {
        print_error("Gaussian noise std %.6g, expected %.6g\n", sd, want);
        fail();
    }
    memset(v, 0, P * sizeof *v);
    dpfl_mech_gaussian(&r, v, P, 0.0, INFINITY, 1.0f, 1);
    for (size_t i = 0; i < P; i++) assert_true(v[i] == 0.0f);
    const size_t Pd = 100000;
    memset(v, 0, Pd * sizeof *v);
    dpfl_mech_discrete_gaussian(&r, v, Pd, 0.8, 2.0, 1.0f);
    s2 = 0;
    for (size_t i = 0; i < Pd; i++) s2 += (double)v[i] * v[i];
    sd = sqrt(s2 / Pd);
    want = 0.8 * 2.0 * 1.001;
    if (!(fabs(sd / want - 1) < 5 / sqrt(2.0 * Pd))) {
        print_error("discrete Gaussian noise std %.6g, expected %.6g\n", sd, want);
        fail();
    }
    free(v);
}

/* Secure mode's sigma^2 (grid units) is never below the exact z^2 1001^2 P: z = m / 2^k is exact in binary, so the
 * exact value is an integer ratio compared in 128 bits.  (ceil((z 1001 sqrt(P))^2) came out 512 below at z = 2500,
 * P = 600,000.) */
static void secure_sigma2_rounds_up(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 81);
    for (int i = 0; i < 20000; i++) {
        uint64_t m = 1 + dpfl_rng_below(&r, 1u << 20), k = dpfl_rng_below(&r, 12), P = 1 + dpfl_rng_below(&r, 1u << 22);
        double z = ldexp((double)m, -(int)k);
        if (!dpfl_mech_discrete_in_range(P, z)) continue;
        unsigned __int128 exact_num = (unsigned __int128)m * m * 1002001u * P; /* exact = num / 4^k */
        unsigned __int128 got = (unsigned __int128)(uint64_t)dpfl_mech_discrete_sigma2(P, z);
        assert_true(got << (2 * k) >= exact_num);
    }
    assert_true(dpfl_mech_discrete_sigma2(600000, 2500.0) >= 3757503750000000000.0);
    assert_false(dpfl_mech_discrete_in_range(379210, 4000.0)); /* 6.1e18 > 2^62 */
}

/* Counts released with the exact discrete Gaussian: the noise's variance is (z sens)^2 rounded up (measured on 1e5
 * draws, mean 0), the event is the discrete Gaussian at z, z = 0 adds nothing, and bad inputs leave v untouched. */
static void discrete_gaussian_counts_match_their_event(void **state)
{
    (void)state;
    const size_t n = 100000;
    int64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = 5;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 83);
    dpfl_event ev;
    dpfl_error err;
    assert_int_equal(dpfl_mech_discrete_gaussian_counts(&r, v, n, 0.8, 3.0, &ev, &err), DPFL_OK);
    assert_int_equal(ev.kind, DPFL_EV_DISCRETE_GAUSSIAN);
    assert_true(ev.z == 0.8 && ev.count == 1 && ev.adjacency == DPFL_ADJ_ADD_REMOVE);
    assert_int_equal(dpfl_event_check(&ev, &err), DPFL_OK);
    double sum = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)(v[i] - 5);
        sum += d;
        s2 += d * d;
    }
    const double var = 6.0; /* ceil(0.8^2 3^2 = 5.76) */
    if (!(fabs(s2 / n / var - 1) < 5 * sqrt(2.0 / n) && fabs(sum / n) < 5 * sqrt(var / n))) {
        print_error("discrete Gaussian counts: mean %.4g, variance %.6g, expected 0 and %g\n", sum / n, s2 / n, var);
        fail();
    }
    assert_true(sqrt(s2 / n) >= 0.8 * 3.0 * (1 - 5 * sqrt(2.0 / n))); /* never less noise than the event claims */
    for (size_t i = 0; i < 10; i++) v[i] = 7;
    assert_int_equal(dpfl_mech_discrete_gaussian_counts(&r, v, 10, 0.0, 3.0, &ev, &err), DPFL_OK);
    for (size_t i = 0; i < 10; i++) assert_true(v[i] == 7);
    assert_true(ev.z == 0.0);
    assert_int_equal(dpfl_mech_discrete_gaussian_counts(&r, v, 10, -1.0, 3.0, &ev, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_mech_discrete_gaussian_counts(&r, v, 10, 1.0, INFINITY, &ev, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_mech_discrete_gaussian_counts(&r, v, 10, 3e9, 3e9, &ev, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "2^62"));
    for (size_t i = 0; i < 10; i++) assert_true(v[i] == 7);
    free(v);
}

/* DP-SGD's step mechanism and the client-level round: sensitivities, denominators and the events charged. */
static void mechanisms_describe_themselves(void **state)
{
    (void)state;
    dpfl_mech_dpsgd p = dpfl_mech_dpsgd_make(1, 500, 50, 2.0, 1.1), f = dpfl_mech_dpsgd_make(0, 30, 50, 2.0, 1.1);
    assert_close(p.q, 0.1, 1e-15);
    assert_close(p.sens, 2.0, 0);
    assert_close(p.noise_std, 2.2, 1e-15);
    assert_close(p.denom, 50.0, 1e-12);
    dpfl_event e = dpfl_mech_dpsgd_event(&p, 7);
    assert_int_equal(e.kind, DPFL_EV_POISSON);
    assert_close(e.q, 0.1, 1e-15);
    assert_close(e.z, 1.1, 0);
    assert_int_equal(e.count, 7);
    assert_int_equal(f.batch, 30); /* B_k = min(B, n) */
    assert_close(f.sens, 4.0, 0);  /* replace-one: 2C */
    assert_close(f.noise_std, 4.4, 1e-15);
    assert_close(f.denom, 30.0, 0);
    e = dpfl_mech_dpsgd_event(&f, 3);
    assert_int_equal(e.kind, DPFL_EV_FIXED);
    assert_int_equal(e.adjacency, DPFL_ADJ_REPLACE_ONE);
    assert_true(e.n == 30 && e.batch == 30 && e.count == 3);
    assert_close(dpfl_mech_dpsgd_make(1, 10, 5, INFINITY, 0.0).noise_std, 0.0, 0);

    dpfl_mech_round rp = dpfl_mech_round_make(DPFL_SAMPLE_POISSON, 200, 0.05, 0, 1.0, 2.0);
    dpfl_mech_round rf = dpfl_mech_round_make(DPFL_SAMPLE_FIXED, 200, 0, 10, 1.0, 2.0);
    dpfl_mech_round ra = dpfl_mech_round_make(DPFL_SAMPLE_ALL, 200, 0, 0, 1.0, 2.0);
    assert_close(rp.denom, 10.0, 1e-12);
    assert_close(rf.denom, 10.0, 0);
    assert_close(ra.denom, 200.0, 0);
    e = dpfl_mech_round_event(&rp);
    assert_true(e.kind == DPFL_EV_POISSON && e.q == 0.05 && e.z == 2.0);
    e = dpfl_mech_round_event(&rf);
    assert_true(e.kind == DPFL_EV_FIXED && e.n == 200 && e.batch == 10 && e.z == 1.0); /* 2S: z / 2 */
    e = dpfl_mech_round_event(&ra);
    assert_true(e.kind == DPFL_EV_GAUSSIAN && e.z == 2.0);
    assert_close(dpfl_mech_round_rate(&rf), 0.05, 1e-15);
}

/* rPDP-FL's round is the one the simulation runs: the client sampler's design (the rate it charges, 1 with every
 * client), the local steps every sampled client takes (all its records in at p = 1: steps x n_k examples) and the
 * record noise; each level's event and the accountant's parameters are that round's, and the filter's noise plan
 * spends a budget_max record's budget over rounds x steps steps exactly. */
static void rpdp_round_is_the_one_the_simulation_runs(void **state)
{
    (void)state;
    const int32_t sizes[] = {40, 25, 15};
    fixture f;
    fixture_make(&f, "logreg", sizes, 3);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.fl.local_steps = 6;
    f.cfg.record_dp.enabled = 1;
    f.cfg.record_dp.sampler = DPFL_BATCH_POISSON;
    f.cfg.record_dp.noise = 1.3;
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 11);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), 1.3);
    double p[80], denom[3];
    for (int i = 0; i < 80; i++) p[i] = 1.0;
    for (int k = 0; k < 3; k++) denom[k] = sizes[k];
    dpfl_record_dp_set_rates(dpfl_sim_record_dp(sim), p, denom);
    dpfl_mech_rpdp d = dpfl_record_dp_design(dpfl_sim_record_dp(sim));
    assert_int_equal(d.clients.kind, DPFL_SAMPLE_POISSON);
    assert_true(d.clients.q == 0.5 && d.clients.K == 3 && d.steps == 6 && d.z == 1.3);
    int64_t examples = 0, want = 0;
    for (int32_t r = 1; r <= 4; r++) {
        const int32_t *clients;
        const int32_t m = dpfl_sim_sample(sim, r, &clients);
        d = dpfl_record_dp_design(dpfl_sim_record_dp(sim)); /* the design the sampler returned for this round */
        assert_true(d.clients.q == 0.5 && d.steps == 6);
        for (int32_t i = 0; i < m; i++) want += d.steps * sizes[clients[i]];
        dpfl_round_metrics met;
        assert_int_equal(dpfl_sim_train(sim, r, &met, &err), DPFL_OK);
        examples += met.examples;
    }
    assert_true(want > 0);
    assert_int_equal(examples, want); /* every sampled client ran the design's steps */
    dpfl_sim_free(sim);
    free(global);

    dpfl_event e = dpfl_mech_rpdp_event(&d, 0.3, 4);
    assert_int_equal(e.kind, DPFL_EV_TWO_STAGE);
    assert_true(e.lambda == 0.5 && e.q == 0.3 && e.z == 1.3 && e.inner == 6 && e.count == 4);
    assert_int_equal(e.bound, DPFL_BOUND_RPDP);
    assert_int_equal(dpfl_mech_rpdp_event(&d, 0.0, 4).count, 0); /* never sampled: nothing charged */
    dpfl_rpdp_params pp = dpfl_mech_rpdp_params(&d, 4, 1e-3);
    assert_true(pp.lambda == 0.5 && pp.inner == 6 && pp.z == 1.3 && pp.rounds == 4 && pp.delta == 1e-3);
    const dpfl_mech_clients all = dpfl_mech_clients_make(DPFL_SAMPLE_ALL, 3, 0.0, 0);
    assert_true(dpfl_mech_rpdp_params(&(dpfl_mech_rpdp){all, 6, 1.3}, 1, 1e-3).lambda == 1.0);

    /* the filter's plan: 3 rounds x 6 steps at alpha 8 for budget 2: 18 x 8 / (2 z^2) = 2, z = 6; a record at norm C
     * every step then spends its budget (up to the float pad) */
    const double z = dpfl_mech_filter_noise(&d, 3, 8.0, 2.0), C = 0.7;
    assert_close(z, 6.0, 1e-15);
    double spent = 0;
    for (int s = 0; s < 18; s++) spent += dpfl_mech_filter_loss(C, INFINITY, C, z * C, 8.0);
    assert_close(spent, 2.0, 1e-4);
    fixture_free(&f);
}

/* The e2e client-level mechanism (mech/e2e.c) against the thesis's bound computed here: the most local steps of any
 * client, the largest rate of the rounds' designs, participation visible (two-stage), a fixed-size design making it
 * replace-one (sensitivity 2BC) and the server's noise capping mu at 2 / z_s. */
static void e2e_client_event_takes_the_worst_round_and_client(void **state)
{
    (void)state;
    const dpfl_mech_dpsgd step = dpfl_mech_dpsgd_make(1, 1, 1, 1.0, 2.0); /* noise std z C = 2 */
    dpfl_mech_e2e e = dpfl_mech_e2e_make(&step, 8, 0.0);
    const int64_t steps[] = {3, 5, 0};
    for (int k = 0; k < 3; k++) dpfl_mech_e2e_client(&e, steps[k]);
    const double rates[] = {0.2, 0.5, 0.3};
    for (int r = 0; r < 3; r++) {
        const dpfl_mech_clients c = dpfl_mech_clients_make(DPFL_SAMPLE_POISSON, 100, rates[r], 0);
        dpfl_mech_e2e_round(&e, &c);
    }
    const double mu = sqrt(5.0) * 8 * 1.0 / 2.0; /* sqrt(s) B C / (z C) */
    assert_close(dpfl_mech_e2e_mu(&e), mu, 1e-12);
    dpfl_event ev = dpfl_mech_e2e_event(&e, 7);
    assert_int_equal(ev.kind, DPFL_EV_TWO_STAGE);
    assert_int_equal(ev.adjacency, DPFL_ADJ_ZERO_OUT);
    assert_true(ev.lambda == 0.5 && ev.q == 1.0 && ev.inner == 1 && ev.count == 7);
    assert_close(ev.z, 1.0 / mu, 1e-12);
    const dpfl_mech_clients fixed = dpfl_mech_clients_make(DPFL_SAMPLE_FIXED, 100, 0.0, 10);
    dpfl_mech_e2e_round(&e, &fixed); /* q 0.1 < 0.5: the rate stays, the adjacency becomes replace-one */
    ev = dpfl_mech_e2e_event(&e, 7);
    assert_int_equal(ev.adjacency, DPFL_ADJ_REPLACE_ONE);
    assert_true(ev.lambda == 0.5);
    assert_close(dpfl_mech_e2e_mu(&e), 2 * mu, 1e-12);
    dpfl_mech_e2e capped = dpfl_mech_e2e_make(&step, 8, 0.5);
    dpfl_mech_e2e_client(&capped, 5);
    assert_close(dpfl_mech_e2e_mu(&capped), 4.0, 1e-12); /* 2 / 0.5 < mu */
}

/* Clipped updates are within the bound (flat, and per layer so that the whole stays within S); adaptive clipping's
 * split gives back z, and refuses a count noise that leaves nothing for the sum. */
static void clipping_bounds_and_the_adaptive_split(void **state)
{
    (void)state;
    enum { P = 1000 };
    float u[P];
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 80);
    for (int i = 0; i < P; i++) u[i] = (float)(3 * dpfl_rng_gaussian(&r));
    double before = dpfl_mech_clip_update(u, P, 2.5, NULL, NULL, 0);
    assert_true(before > 2.5);
    assert_true(dpfl_vec_norm2(u, P) <= 2.5 * (1 + 1e-6));
    for (int i = 0; i < P; i++) u[i] = (float)(3 * dpfl_rng_gaussian(&r));
    size_t off[3] = {0, 100, 900}, len[3] = {100, 800, 100};
    dpfl_mech_clip_update(u, P, 2.5, off, len, 3);
    assert_true(dpfl_vec_norm2(u, P) <= 2.5 * (1 + 1e-6));
    assert_true(dpfl_vec_norm2(u + 100, 800) <= 2.5 * sqrt(0.8) * (1 + 1e-6));
    double zd;
    dpfl_error err;
    assert_int_equal(dpfl_mech_adaptive_split(2.0, 4.0, &zd, &err), DPFL_OK);
    assert_close(dpfl_mech_adaptive_release_z(zd, 4.0), 2.0, 1e-12);
    assert_true(zd > 2.0);
    assert_int_equal(dpfl_mech_adaptive_split(2.0, 1.0, &zd, &err), DPFL_EINVAL);
    double norms[5] = {5, 1, 4, 2, 3};
    assert_close(dpfl_mech_median(norms, 5), 3.0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dpsgd_step_noise_has_the_accounted_std),
        cmocka_unit_test(batch_sizes_follow_the_sampler),
        cmocka_unit_test(client_sampling_follows_its_rate),
        cmocka_unit_test(adaptive_quantile_estimate_has_the_accounted_noise),
        cmocka_unit_test(batch_samplers_include_records_at_their_rate),
        cmocka_unit_test(client_samplers_follow_their_design),
        cmocka_unit_test(noise_has_std_z_times_sensitivity),
        cmocka_unit_test(discrete_gaussian_counts_match_their_event),
        cmocka_unit_test(mechanisms_describe_themselves),
        cmocka_unit_test(secure_sigma2_rounds_up),
        cmocka_unit_test(clipping_bounds_and_the_adaptive_split),
        cmocka_unit_test(rpdp_round_is_the_one_the_simulation_runs),
        cmocka_unit_test(e2e_client_event_takes_the_worst_round_and_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
