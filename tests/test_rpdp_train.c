/* rPDP-FL in training (record_dp.budgets): the non-uniform sampler, the budgets, the per-record ledger, opt-outs,
 * resume, and the errors of bad budgets. */
#include "fixtures.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"
#include "dpfl/transport.h"
#include "run/run_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

/* Each record's inclusion count over T draws matches T p_i (chi-square); p = 0 never in, p = 1 always. */
static void nonuniform_sampler_matches_the_rates(void **state)
{
    (void)state;
    enum { N = 40, T = 20000 };
    double p[N];
    int32_t idx[N], out[N];
    long count[N] = {0};
    for (int32_t i = 0; i < N; i++) {
        idx[i] = N - 1 - i; /* the rates are indexed by record, not by position */
        p[i] = i % 5 == 0 ? 0.0 : i % 5 == 1 ? 1.0 : 0.02 * i;
    }
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    for (int t = 0; t < T; t++) {
        int32_t b = dpfl_mech_poisson_batch_rates(&r, idx, N, p, out);
        for (int32_t j = 0; j < b; j++) count[out[j]]++;
    }
    double chi2 = 0;
    int dof = 0;
    for (int32_t i = 0; i < N; i++) {
        if (p[i] == 0.0) {
            assert_int_equal(count[i], 0);
        } else if (p[i] == 1.0) {
            assert_int_equal(count[i], T);
        } else {
            double e = T * p[i];
            chi2 += (count[i] - e) * (count[i] - e) / (e * (1 - p[i]));
            dof++;
        }
    }
    assert_int_equal(dof, 24);
    assert_true(chi2 < 51.2); /* chi-square, 24 dof, p = 0.001 */
}

/* ThreeLevels: exactly 70 / 20 / 10 %, in record order without shuffle; MixGauss and Pareto: clipped, with the
 * published component shares and means. */
static void budget_generators_follow_the_paper(void **state)
{
    (void)state;
    enum { N = 20000 };
    double *b = malloc(N * sizeof *b);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 9);
    dpfl_budgets_generate(DPFL_PREF_THREELEVELS, N, 0.1, 10, 0, &r, b);
    for (int i = 0; i < N; i++) assert_true(b[i] == (i < 14000 ? 0.1 : i < 18000 ? 1.0 : 5.0));
    dpfl_budgets_generate(DPFL_PREF_THREELEVELS, N, 0.1, 10, 1, &r, b);
    int c01 = 0, c1 = 0, first = 0;
    for (int i = 0; i < N; i++) c01 += b[i] == 0.1, c1 += b[i] == 1.0, first += i < 1000 && b[i] == 0.1;
    assert_int_equal(c01, 14000);
    assert_int_equal(c1, 4000);
    assert_true(first > 600 && first < 800); /* shuffled: the first records are not all 0.1 */
    dpfl_budgets_generate(DPFL_PREF_MIXGAUSS, N, 0.1, 10, 1, &r, b);
    int small = 0, mid = 0, big = 0;
    for (int i = 0; i < N; i++) {
        assert_true(b[i] >= 0.1 && b[i] <= 10);
        small += b[i] < 0.5, mid += b[i] > 0.5 && b[i] < 2.5, big += b[i] > 2.5;
    }
    assert_true(abs(small - 14000) < 300 && abs(mid - 4000) < 250 && abs(big - 2000) < 200);
    dpfl_budgets_generate(DPFL_PREF_PARETO, N, 0.1, 10, 1, &r, b);
    double mean = 0;
    for (int i = 0; i < N; i++) {
        assert_true(b[i] >= 0.1 && b[i] <= 10);
        mean += b[i] / N;
    }
    assert_true(fabs(mean - (0.1 + 1.0 / 3.0)) < 0.02); /* Lomax(4, 1) has mean 1/3 */
    free(b);
}

/* A plan on adversarial budgets: unusable ones, just under and over epsilon*(1), far above budget_max, and more
 * distinct values than levels.  Every record's exact epsilon*(p_i) over the planned rounds is within its own
 * budget (recomputed here with the accountant), and the rates are tight: 0.2% more would pass the budget. */
static void every_record_stays_within_its_own_budget(void **state)
{
    (void)state;
    const int32_t sizes[] = {300, 200, 100};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 3);
    const char *path = "/tmp/dpfl_test_rpdp_budgets.txt";
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    for (int i = 0; i < 600; i++) {
        double b = i % 7 == 0 ? 1e-4 : i % 7 == 1 ? 9.999 : i % 7 == 2 ? 1e3 : 0.05 * pow(1.013, i);
        fprintf(fp, "%.17g\n", b);
    }
    fclose(fp);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.budgets", "file");
    fixture_set(&f.cfg, "record_dp.budget_file", path);
    fixture_set(&f.cfg, "record_dp.delta", "1e-4");
    fixture_set(&f.cfg, "fl.local_steps", "5");
    fixture_set(&f.cfg, "fl.rounds", "6");
    fixture_set(&f.cfg, "fl.sampling", "poisson");
    fixture_set(&f.cfg, "fl.client_rate", "0.5");
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&f.cfg, &err), DPFL_OK);
    fl_rpdp rp;
    memset(&rp, 0, sizeof rp);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    /* the round the sampler and the local training run: Poisson clients at 0.5, 5 local steps */
    const dpfl_mech_clients cd = dpfl_mech_clients_make(DPFL_SAMPLE_POISSON, f.part.clients, 0.5, 0);
    const dpfl_mech_rpdp design = dpfl_mech_rpdp_of(&cd, 5, 0.0);
    assert_int_equal(fl_rpdp_plan(&rp, &f.cfg, &design, &f.train, &f.part, &r, &err), DPFL_OK);
    assert_int_equal(rp.levels.nlevels, FL_RPDP_LEVELS); /* over 256 distinct budgets: the lattice */
    dpfl_rpdp_params pp = {rp.levels.mech.z, 0.5, 5, 6, 1e-4, DPFL_BOUND_RPDP, 0, NULL, 0};
    /* a round is trained only at the plan's design: other steps, another rate or another noise is refused */
    dpfl_mech_rpdp ran = dpfl_mech_rpdp_of(&cd, 5, rp.levels.mech.z);
    assert_int_equal(fl_rpdp_check_round(&rp.levels, &ran, 1, &err), DPFL_OK);
    ran.steps = 6;
    assert_int_equal(fl_rpdp_check_round(&rp.levels, &ran, 2, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "6 local steps"));
    ran = dpfl_mech_rpdp_of(&cd, 5, rp.levels.mech.z);
    ran.clients.q = 0.75;
    assert_int_equal(fl_rpdp_check_round(&rp.levels, &ran, 3, &err), DPFL_EINVAL);
    ran = dpfl_mech_rpdp_of(&cd, 5, 0.9 * rp.levels.mech.z);
    assert_int_equal(fl_rpdp_check_round(&rp.levels, &ran, 4, &err), DPFL_EINVAL);
    double e1;
    assert_int_equal(dpfl_rpdp_epsilon(&pp, 1.0, &e1, &err), DPFL_OK);
    assert_true(e1 <= 10.0 && e1 > 9.99); /* z meets budget_max at p = 1, never above */
    int unused = 0, full = 0, tight = 0;
    for (int32_t i = 0; i < 600; i++) {
        const fl_rpdp_level *lv = &rp.levels.lv[rp.rec.level[i]];
        assert_true(lv->budget <= rp.rec.budget[i]);
        assert_true(rp.rec.p[i] == lv->p);
        if (rp.rec.p[i] == 0) {
            unused++;
            continue;
        }
        double e;
        assert_int_equal(dpfl_rpdp_epsilon(&pp, rp.rec.p[i], &e, &err), DPFL_OK);
        if (e > rp.rec.budget[i]) {
            print_error("record %d: epsilon %.10g over its budget %.10g (p = %g)\n", i, e, rp.rec.budget[i],
                        rp.rec.p[i]);
            fail();
        }
        if (rp.rec.p[i] == 1.0) {
            full++;
            continue;
        }
        assert_int_equal(dpfl_rpdp_epsilon(&pp, fmin(1.0, rp.rec.p[i] * 1.002), &e, &err), DPFL_OK);
        tight += e > lv->budget;
    }
    assert_true(unused >= 86 && unused < 100); /* the 1e-4 budgets (86 of them) */
    assert_true(full >= 86);                   /* 1e3, clipped by nothing: p = 1 */
    assert_int_equal(tight, 600 - unused - full);
    /* the divisor of each client is its expected batch */
    for (int32_t k = 0; k < 3; k++) {
        double d = 0;
        for (int32_t j = f.part.offset[k]; j < f.part.offset[k + 1]; j++) d += rp.rec.p[f.part.index[j]];
        assert_close(rp.rec.denom[k], d, 1e-12);
    }
    fl_rpdp_free(&rp);
    unlink(path);
    fl_fixture_free(&f);
}

static void write_config(const char *path, int rounds, const char *extra)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    /* extra's own budgets line replaces the default one (a key given twice is an error) */
    const int own_budgets = !strncmp(extra, "budgets = ", 10) || strstr(extra, "\nbudgets = ");
    fprintf(fp, "[data]\ndataset = synthetic\npartition = iid\nclients = 4\n\n[model]\narch = logreg\n\n"
                "[fl]\nrounds = %d\nsampling = poisson\nclient_rate = 0.5\nlocal_steps = 4\nlr = 0.1\n\n"
                "[record_dp]\nenabled = yes\nclip = 1\ndelta = 1e-5\n%s%s\n"
                "[run]\nseed = 3\nthreads = 2\n",
            rounds, own_budgets ? "" : "budgets = threelevels\n", extra);
    fclose(fp);
}

static cJSON *summary_of(const char *dir)
{
    char path[256], *t;
    size_t n;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    assert_int_equal(dpfl_file_read_all(path, &t, &n, NULL), DPFL_OK);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_non_null(j);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* Planned for 3 rounds, resumed to 9: the levels whose next round would pass their budget stop (opt out) before
 * it, every other keeps going; no record ever passes its budget, and each opted-out level sits between
 * epsilon(rounds) <= budget < epsilon(rounds + 1). */
static void records_opt_out_before_their_budget_is_passed(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp.ini", *A = "/tmp/dpfl_test_rpdpA";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpA"), 0);
    write_config(cfgp, 3, "");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    dpfl_run_options first = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    cJSON *s = summary_of(A);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s, "record_budgets");
    assert_int_equal((int)num(rb, "opted_out"), 0); /* within the plan nobody stops */
    assert_int_equal((int)num(rb, "over_budget"), 0);
    const double z = num(rb, "noise");
    cJSON_Delete(s);
    cfg.fl.rounds = 9;
    dpfl_run_options resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    s = summary_of(A);
    rb = cJSON_GetObjectItemCaseSensitive(s, "record_budgets");
    assert_int_equal((int)num(rb, "over_budget"), 0);
    assert_true(num(rb, "opted_out") > 0);
    assert_true(num(s, "epsilon") <= 5.0); /* the largest ThreeLevels budget */
    dpfl_rpdp_params pp = {z, 0.5, 4, 0, 1e-5, DPFL_BOUND_RPDP, 0, NULL, 0};
    const cJSON *lv;
    int stopped = 0, kept = 0;
    cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(rb, "levels"))
    {
        double p = num(lv, "p"), b = num(lv, "budget"), e;
        int rounds = (int)num(lv, "rounds");
        pp.rounds = rounds;
        assert_int_equal(dpfl_rpdp_epsilon(&pp, p, &e, &err), DPFL_OK);
        assert_close(num(lv, "epsilon"), e, 1e-12);
        assert_true(e <= b);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lv, "opted_out"))) {
            pp.rounds = rounds + 1;
            assert_int_equal(dpfl_rpdp_epsilon(&pp, p, &e, &err), DPFL_OK);
            assert_true(e > b);
            assert_true(rounds >= 3 && rounds < 9);
            stopped++;
        } else {
            assert_int_equal(rounds, 9);
            kept++;
        }
    }
    assert_true(stopped >= 1);
    (void)kept;
    cJSON_Delete(s);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpA"), 0);
}

/* 2 rounds + resume to 5 == 5 rounds straight: model, checkpoint (the budgets block with it) and metrics. */
static void budget_ledger_resumes_bit_identically(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp2.ini", *A = "/tmp/dpfl_test_rpdpB", *B = "/tmp/dpfl_test_rpdpC";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpB /tmp/dpfl_test_rpdpC"), 0);
    write_config(cfgp, 5, "budget_policy = rpdp\nbudget_rounds = 5\n");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    dpfl_run_options straight = {.out_dir = B, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &straight, &err), DPFL_OK);
    cfg.fl.rounds = 2;
    dpfl_run_options first = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    /* a config without budgets cannot take this checkpoint */
    dpfl_config none;
    dpfl_config_defaults(&none);
    write_config(cfgp, 5, "");
    assert_int_equal(dpfl_config_load(&none, cfgp, &err), DPFL_OK);
    none.record_dp.budgets = DPFL_BUDGETS_NONE;
    none.record_dp.noise = 1.0;
    dpfl_run_options resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&none, &resume, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "per-record budgets"));
    cfg.fl.rounds = 5;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    fixture_checkpoints_match(A, B); /* model, ledger, budgets: all but the wall time */
    char *ma, *mb;
    size_t la, lb;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_rpdpB/metrics.jsonl", &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_rpdpC/metrics.jsonl", &mb, &lb, &err), DPFL_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(ma, mb, la);
    free(ma);
    free(mb);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpB /tmp/dpfl_test_rpdpC"), 0);
}

/* Each bad input is one clear error naming the file, line or key. */
static void expect_error(const char *extra, const char *want)
{
    const char *cfgp = "/tmp/dpfl_test_rpdp3.ini";
    write_config(cfgp, 2, extra);
    dpfl_config cfg;
    dpfl_error err = {{0}};
    dpfl_config_defaults(&cfg);
    dpfl_status st = dpfl_config_load(&cfg, cfgp, &err);
    if (!st) {
        dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_rpdpE", .quiet = 1, .force = 1};
        st = dpfl_run(&cfg, &o, &err);
    }
    assert_int_not_equal(st, DPFL_OK);
    if (!strstr(err.msg, want)) {
        print_error("'%s' does not say '%s'\n", err.msg, want);
        fail();
    }
    assert_null(strchr(err.msg, '\n'));
    unlink(cfgp);
}

static void bad_budgets_are_clear_errors(void **state)
{
    (void)state;
    const char *bf = "/tmp/dpfl_test_rpdp_bad.txt";
    FILE *fp = fopen(bf, "w");
    assert_non_null(fp);
    fprintf(fp, "0.5\n# a comment\n1.0\nnan\n2\n");
    fclose(fp);
    expect_error("budgets = file\nbudget_file = /tmp/dpfl_test_rpdp_bad.txt\n", "line 4");
    fp = fopen(bf, "w");
    fprintf(fp, "0.5\n-1\n");
    fclose(fp);
    expect_error("budgets = file\nbudget_file = /tmp/dpfl_test_rpdp_bad.txt\n", "line 2");
    fp = fopen(bf, "w");
    fprintf(fp, "0.5\n1\n3\n");
    fclose(fp);
    expect_error("budgets = file\nbudget_file = /tmp/dpfl_test_rpdp_bad.txt\n", "3 budgets for 10000 training records");
    unlink(bf);
    expect_error("budgets = file\nbudget_file = /tmp/dpfl_test_no_such_budgets\n", "dpfl_test_no_such_budgets");
    expect_error("budgets = class\nclass_budgets = 0.5, 0.05\n", "2 budgets for 10 classes");
    expect_error("budgets = class\nclass_budgets = 0.5, 0, 1\n", "record_dp.class_budgets");
    expect_error("sampler = fixed\n", "record_dp.sampler");
    expect_error("noise = 1\n", "record_dp.noise");
    expect_error("budget_min = 20\n", "record_dp.budget_min");
    expect_error("budget_policy = filter\nfilter_order = 0.5\n", "record_dp.filter_order");
    expect_error("budget_policy = filter\ntwo_stage_bound = pld\n", "record_dp.two_stage_bound");
    expect_error("filter_order = 4\n", "record_dp.filter_order is set but would be ignored");
    expect_error("budget_policy = filter\nfilter_order = 1.01\n", "costs epsilon");
    expect_error("two_stage_bound = zhu-wang\n", "record_dp.two_stage_bound (");
    expect_error("two_stage_bound = zhu-wang\n", "'zhu-wang' was removed");
}

/* The individual filter, one DP-GD step of 200 records against an independent computation: record i's gradient
 * norm g_i at the start model (its own one-example gradient), its bound r_i = sqrt(2 sigma^2 cap_i / alpha) (shrunk
 * by the pad^2) and its charge alpha min(g_i, r_i, C)^2 pad^2 / (2 sigma^2).  No record spends more than its cap;
 * the ones whose bound was binding leave the sampler; the others stay in. */
static void filter_charges_each_records_own_gradient_norm(void **state)
{
    (void)state;
    const int32_t N = 200, sizes[] = {200};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 1);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "2");
    fixture_set(&f.cfg, "record_dp.clip", "1.5");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "fl.lr", "1");
    fixture_set(&f.cfg, "fl.momentum", "0");
    const size_t P = f.model.nparam;
    const double z = 2, C = 1.5, sigma = z * C, alpha = 8, pad = 1 + 1e-5;
    float *global = malloc(P * sizeof(float)), *start = malloc(P * sizeof(float)), *g = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 5);
    dpfl_model_init(&f.model, global, &root);
    memcpy(start, global, P * sizeof(float));
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), z);
    double *p = malloc(N * sizeof *p), *cap = malloc(N * sizeof *cap), *spent = calloc(N, sizeof *spent), denom = N;
    for (int i = 0; i < N; i++) {
        p[i] = 1.0;
        cap[i] = i % 3 == 0 ? 1e-3 * (1 + i) / N : i % 3 == 1 ? 0.05 : 1e6; /* binding, mixed, never binding */
    }
    dpfl_record_dp_set_rates(dpfl_sim_record_dp(sim), p, &denom);
    dpfl_record_dp_set_filter(dpfl_sim_record_dp(sim), spent, cap, alpha);
    dpfl_round_metrics m;
    dpfl_test_noise_divisor = 1e12; /* the released sum without its noise, to see the bounds */
    dpfl_status st = dpfl_sim_round(sim, 1, &m, &err);
    dpfl_test_noise_divisor = 1.0;
    assert_int_equal(st, DPFL_OK);
    assert_int_equal(m.examples, N);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.model, 1, &err);
    assert_non_null(ws);
    double *sum = calloc(P, sizeof *sum);
    int binding = 0, free_ = 0;
    for (int i = 0; i < N; i++) {
        dpfl_nn_grad(&f.model, start, ws, f.train.x + (size_t)i * f.train.dim, f.train.y + i, 1, NULL, g, NULL);
        double norm = dpfl_vec_norm2(g, P), r = sqrt(2 * sigma * sigma * cap[i] / alpha) / (pad * pad);
        for (size_t j = 0; j < P; j++) sum[j] += g[j] * fmin(1.0, fmin(r, C) / norm);
        double used = fmin(fmin(norm, r), C) * pad, want = alpha * used * used / (2 * sigma * sigma);
        assert_close(spent[i], want, 1e-4);
        assert_true(spent[i] <= cap[i]);
        if (r < fmin(norm, C)) {
            binding++;
            assert_true(p[i] == 0.0); /* filtered out */
        } else {
            free_++;
            assert_true(p[i] == 1.0);
        }
    }
    assert_true(binding >= 60 && free_ >= 60);
    /* the step moved the model by lr / N times the sum of the records clipped to their own bounds */
    double diff = 0, ref = 0;
    for (size_t j = 0; j < P; j++) {
        double want = -sum[j] / N;
        diff += (global[j] - start[j] - want) * (global[j] - start[j] - want);
        ref += want * want;
    }
    assert_true(sqrt(diff) < 1e-4 * sqrt(ref));
    free(sum);
    dpfl_nn_ws_free(ws);
    dpfl_sim_free(sim);
    free(p);
    free(cap);
    free(spent);
    free(global);
    free(start);
    free(g);
    fl_fixture_free(&f);
}

/* The record-level side's per-client views (dpfl_record_dp, what mpirun's ranks and a deployed client exchange):
 * the filter's spend of client k's records in partition order, counted (NULL) or copied; taken back whole or not at
 * all (a value outside [0, cap] is refused, nothing written); a record left within DPFL_FILTER_OUT of its cap
 * leaves the sampler, the others keep their rate.  The rates digest is zero without rates and follows client k's
 * own records' rates only. */
static void record_dp_side_moves_each_clients_spend_and_digest(void **state)
{
    (void)state;
    const int32_t sizes[] = {5, 7}, N = 12;
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 2);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "1");
    float *global = malloc(f.model.nparam * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 3);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp *rd = dpfl_sim_record_dp(sim);
    uint8_t d0[32], d1[32], zero[32] = {0};
    dpfl_record_dp_rates_digest(rd, 1, d1);
    assert_memory_equal(d1, zero, 32); /* no rates yet */
    assert_int_equal(dpfl_record_dp_filter_spent(rd, 1, NULL), 0); /* no filter */
    double p[12], cap[12], spent[12], denom[2] = {5, 7}, out[7];
    for (int i = 0; i < N; i++) p[i] = 0.5, cap[i] = 1.0 + i, spent[i] = 0.1 * i;
    dpfl_record_dp_set_rates(rd, p, denom);
    dpfl_record_dp_set_filter(rd, spent, cap, 8.0);
    dpfl_record_dp_rates_digest(rd, 0, d0);
    dpfl_record_dp_rates_digest(rd, 1, d1);
    assert_memory_not_equal(d0, zero, 32);
    const int32_t *idx0 = f.part.index + f.part.offset[0], *idx1 = f.part.index + f.part.offset[1];
    p[idx1[0]] = 0.25; /* a rate of client 1 changes: its digest does, client 0's does not */
    uint8_t e0[32], e1[32];
    dpfl_record_dp_rates_digest(rd, 0, e0);
    dpfl_record_dp_rates_digest(rd, 1, e1);
    assert_memory_equal(e0, d0, 32);
    assert_memory_not_equal(e1, d1, 32);
    p[idx1[0]] = 0.5;
    assert_int_equal(dpfl_record_dp_filter_spent(rd, 0, NULL), 5);
    assert_int_equal(dpfl_record_dp_filter_spent(rd, 1, out), 7);
    for (int i = 0; i < 7; i++) assert_true(out[i] == spent[idx1[i]]);
    double v[7];
    for (int i = 0; i < 7; i++) v[i] = 0.5 * cap[idx1[i]];
    v[6] = cap[idx1[6]] * 1.01; /* over its cap: refused, nothing taken */
    assert_int_equal(dpfl_record_dp_set_filter_spent(rd, 1, v, &err), DPFL_EINVAL);
    for (int i = 0; i < 7; i++) assert_true(spent[idx1[i]] == 0.1 * idx1[i]);
    v[6] = cap[idx1[6]] * (1 - 0.5 * DPFL_FILTER_OUT); /* all but spent: leaves the sampler */
    v[5] = cap[idx1[5]] * (1 - 2 * DPFL_FILTER_OUT);   /* a little left: stays */
    assert_int_equal(dpfl_record_dp_set_filter_spent(rd, 1, v, &err), DPFL_OK);
    for (int i = 0; i < 7; i++) {
        assert_true(spent[idx1[i]] == v[i]);
        assert_true(p[idx1[i]] == (i == 6 ? 0.0 : 0.5));
    }
    for (int i = 0; i < 5; i++) assert_true(spent[idx0[i]] == 0.1 * idx0[i] && p[idx0[i]] == 0.5); /* untouched */
    dpfl_sim_free(sim);
    free(global);
    fl_fixture_free(&f);
}

/* Under the filter a record's guarantee is its cap once a round is trained, and nothing before: before the first
 * charge the largest epsilon is 0 and there is no event; after it, the worst record is the one with the largest
 * cap, its epsilon the accountant's on rdp-filter(alpha, cap) and within its budget; a record whose budget does not
 * cover the conversion is dropped and stays at 0. */
static void filter_releases_nothing_before_a_round(void **state)
{
    (void)state;
    const int32_t sizes[] = {300, 200, 100};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 3);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.budgets", "threelevels");
    fixture_set(&f.cfg, "record_dp.budget_policy", "filter");
    fixture_set(&f.cfg, "record_dp.budget_max", "2");
    fixture_set(&f.cfg, "record_dp.filter_order", "30"); /* its conversion costs more than the 0.1 budgets */
    fixture_set(&f.cfg, "record_dp.delta", "1e-5");
    fixture_set(&f.cfg, "fl.local_steps", "4");
    fixture_set(&f.cfg, "fl.rounds", "4");
    fixture_set(&f.cfg, "fl.sampling", "poisson");
    fixture_set(&f.cfg, "fl.client_rate", "0.5");
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&f.cfg, &err), DPFL_OK);
    fl_rpdp rp;
    memset(&rp, 0, sizeof rp);
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2);
    const dpfl_mech_clients cd = dpfl_mech_clients_make(DPFL_SAMPLE_POISSON, f.part.clients, 0.5, 0);
    const dpfl_mech_rpdp design = dpfl_mech_rpdp_of(&cd, 4, 0.0);
    assert_int_equal(fl_rpdp_plan(&rp, &f.cfg, &design, &f.train, &f.part, &r, &err), DPFL_OK);
    assert_true(rp.filter.on && rp.levels.nlevels == 1 && rp.levels.lv[0].p == 1.0);
    int64_t worst = -1, dropped = -1;
    for (int64_t i = 0; i < rp.rec.n; i++) {
        assert_close(rp.filter.cap[i], fmax(rp.rec.budget[i] - rp.filter.conv, 0.0), 0);
        if (rp.filter.cap[i] > 0 && (worst < 0 || rp.filter.cap[i] > rp.filter.cap[worst])) worst = i;
        if (rp.filter.cap[i] == 0) dropped = i;
    }
    assert_true(worst >= 0 && dropped >= 0 && rp.filter.conv > 0.1 && rp.filter.conv < 1);
    assert_true(rp.rec.level[dropped] == FL_RPDP_DROPPED && rp.rec.p[dropped] == 0.0);
    double e = -1;
    dpfl_run_event out;
    dpfl_event ev;
    memset(&out, 0, sizeof out);
    out.events = &ev;
    out.nevents = 1;
    assert_int_equal(fl_rpdp_max_epsilon(&rp, &f.cfg, &e, &err), DPFL_OK);
    assert_true(e == 0.0); /* nothing released yet */
    assert_int_equal(fl_rpdp_max_event(&rp, &f.cfg, &out, &err), DPFL_OK);
    assert_int_equal(out.nevents, 0);
    assert_true(out.epsilon == 0.0);
    assert_int_equal(fl_rpdp_filter_epsilon(&rp, &f.cfg, worst, &e, &err), DPFL_OK);
    assert_true(e == 0.0);
    fl_rpdp_charge(&rp.levels); /* one trained round */
    assert_int_equal(rp.levels.lv[0].rounds, 1);
    double mx;
    assert_int_equal(fl_rpdp_max_epsilon(&rp, &f.cfg, &mx, &err), DPFL_OK);
    const dpfl_event want = dpfl_event_rdp_filter(rp.filter.alpha, rp.filter.cap[worst], 1);
    dpfl_guarantee g;
    assert_int_equal(dpfl_account_epsilon(&want, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_true(mx > 0 && mx <= rp.rec.budget[worst]);
    assert_close(mx, fmin(g.epsilon, rp.rec.budget[worst]), 0);
    out.nevents = 1;
    assert_int_equal(fl_rpdp_max_event(&rp, &f.cfg, &out, &err), DPFL_OK);
    assert_int_equal(out.nevents, 1);
    assert_true(out.accountant == DPFL_ACC_RDP && out.epsilon == mx);
    assert_int_equal(ev.kind, DPFL_EV_RDP_FILTER); /* the worst record's filter: its order and cap */
    assert_true(ev.alpha == want.alpha && ev.cap == want.cap);
    assert_int_equal(fl_rpdp_filter_epsilon(&rp, &f.cfg, dropped, &e, &err), DPFL_OK);
    assert_true(e == 0.0);
    fl_rpdp_free(&rp);
    fl_fixture_free(&f);
}

/* A run under the filter (ThreeLevels, small budgets, client sampling): the noise is the one that lets budget_max
 * last the planned steps at full norm, no record ends above its budget, many are filtered out, and 2 rounds +
 * resume to 4 equal 4 straight (the per-record losses travel in the checkpoint). */
static void filter_runs_within_budgets_and_resumes(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp5.ini", *A = "/tmp/dpfl_test_rpdpG", *B = "/tmp/dpfl_test_rpdpH";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpG /tmp/dpfl_test_rpdpH"), 0);
    write_config(cfgp, 4, "budget_policy = filter\nbudget_max = 2\nbudget_rounds = 4\n");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    dpfl_run_options straight = {.out_dir = B, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &straight, &err), DPFL_OK);
    cJSON *s = summary_of(B);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s, "record_budgets");
    const double a = num(rb, "filter_order"), conv = num(rb, "filter_conversion"), d = 1e-5;
    assert_close(conv, log1p(-1 / a) - (log(d) + log(a)) / (a - 1), 1e-12);
    assert_true(conv <= 0.05 + 1e-12); /* auto: at most half of the smallest budget (0.1) */
    assert_close(num(rb, "noise"), sqrt(4 * 4 * a / (2 * (2 - conv))), 1e-12);
    assert_int_equal((int)num(rb, "over_budget"), 0);
    /* which records left the sampler depends on their gradient norms: not private, reported apart */
    assert_null(cJSON_GetObjectItemCaseSensitive(rb, "filtered_out"));
    assert_int_equal((int)num(rb, "opted_out"), 0); /* no level stops under the filter: nor may the count leak there */
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(s, "not_private");
    assert_true(num(np, "filtered_out") > 100);
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(np, "filtered_out_per_client");
    double per = 0;
    for (const cJSON *x = pc ? pc->child : NULL; x; x = x->next) per += x->valuedouble;
    assert_true(per == num(np, "filtered_out"));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(rb, "epsilon");
    assert_true(num(e, "max") <= 2.0 && num(e, "max") > 1.0);
    /* most records (70% at 0.1) spend their whole Renyi budget in the first step: epsilon = cap + conv = 0.1 */
    assert_true(num(e, "median") <= 0.1 && num(e, "median") > 0.0999);
    assert_true(num(s, "epsilon") <= 2.0);
    cJSON_Delete(s);
    cfg.fl.rounds = 2;
    dpfl_run_options first = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    /* the rates' checkpoint cannot continue as a filter run, nor the reverse */
    dpfl_config other = cfg;
    other.record_dp.budget_policy = DPFL_POLICY_RPDP;
    dpfl_run_options resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&other, &resume, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "budget_policy"));
    cfg.fl.rounds = 4;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    fixture_checkpoints_match(A, B);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpG /tmp/dpfl_test_rpdpH"), 0);
}

/* At lambda = 1 the RDP bound is the composition of tau T Poisson steps, >= the PLD of the same steps, which the
 * two-stage PLD reproduces; at lambda < 1 the two-stage PLD is never above the published bound, and never below
 * the Poisson(lambda q) reference it dominates. */
static void two_stage_bounds_bracket_the_reference(void **state)
{
    (void)state;
    dpfl_error err;
    const double ps[] = {0.01, 0.05, 0.2, 0.6};
    for (int i = 0; i < 4; i++) {
        dpfl_rpdp_params pub = {1.5, 1.0, 10, 15, 1e-3, DPFL_BOUND_RPDP, 0, NULL, 0};
        double ep;
        assert_int_equal(dpfl_rpdp_epsilon(&pub, ps[i], &ep, &err), DPFL_OK);
        dpfl_event ev = dpfl_event_poisson(ps[i], 1.5, 150);
        dpfl_guarantee g;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-3, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
        assert_true(ep >= g.epsilon);
        assert_true(ep <= 1.6 * g.epsilon + 0.05); /* and not absurdly loose */
        /* the PLD of the two-stage round: at lambda = 1 the PLD of the same 150 steps */
        dpfl_rpdp_params pld = pub;
        pld.use_pld = 1;
        double el;
        assert_int_equal(dpfl_rpdp_epsilon(&pld, ps[i], &el, &err), DPFL_OK);
        assert_close(el, g.epsilon, 2e-3);
        pub.lambda = pld.lambda = 0.5;
        assert_int_equal(dpfl_rpdp_epsilon(&pub, ps[i], &ep, &err), DPFL_OK);
        assert_int_equal(dpfl_rpdp_epsilon(&pld, ps[i], &el, &err), DPFL_OK);
        assert_true(el <= ep * (1 + 1e-12));
        assert_true(el < 0.95 * g.epsilon); /* client sampling amplifies */
        /* one step per round: the PLD mixture with participation visible is at least Poisson(lambda q) (merge "no
         * output" into a fresh N(0, z^2): a post-processing), and at most the RDP bound */
        dpfl_rpdp_params one = pld;
        one.inner = 1;
        one.rounds = 150;
        assert_int_equal(dpfl_rpdp_epsilon(&one, ps[i], &el, &err), DPFL_OK);
        dpfl_event lo = dpfl_event_poisson(0.5 * ps[i], 1.5, 150);
        assert_int_equal(dpfl_account_epsilon(&lo, 1, 1e-3, DPFL_ACC_PLD, NULL, &g, &err), DPFL_OK);
        assert_true(el >= g.epsilon * (1 - 1e-9));
        one.use_pld = 0;
        assert_int_equal(dpfl_rpdp_epsilon(&one, ps[i], &ep, &err), DPFL_OK);
        assert_true(el <= ep * (1 + 1e-12));
    }
}

/* One DP-SGD step from a non-uniform plan whose batch is empty (p_i = 1e-9): the update is the noise alone,
 * std lr z C / sum_i p_i (the plan's expected batch, not B or n). */
/* delta of the Gaussian mechanism with GDP parameter mu at epsilon (Balle-Wang) */
static double gauss_delta(double eps, double mu)
{
    return 0.5 * erfc((eps / mu - mu / 2) / sqrt(2.0)) - exp(eps) * 0.5 * erfc((eps / mu + mu / 2) / sqrt(2.0));
}

/* Issue 31, item 1: one round, one full-batch step (p = 1), client rate 0.01, z = 1.  A client that sits the round out
 * releases nothing, visibly, so delta(eps) = 0.01 delta_Gauss(eps; mu = 1) exactly and eps(1e-5) = 3.1387.  The
 * Zhu-Wang option answered 1.0066; the published bound and the PLD (the two that remain) must be above the exact
 * value, the PLD within 0.2% of it, and so must `dpfl e2e`'s record level (item 2), which accounts the same pair. */
static void two_stage_with_visible_participation_is_never_below_the_exact_value(void **state)
{
    (void)state;
    double lo = 0, hi = 20;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.01 * gauss_delta(mid, 1.0) > 1e-5) lo = mid;
        else hi = mid;
    }
    const double exact = hi;
    assert_true(fabs(exact - 3.1387) < 1e-3);
    dpfl_error err;
    dpfl_rpdp_params pub = {1.0, 0.01, 1, 1, 1e-5, DPFL_BOUND_RPDP, 0, NULL, 0}, pld = pub;
    pld.use_pld = 1;
    double ep, el;
    assert_int_equal(dpfl_rpdp_epsilon(&pub, 1.0, &ep, &err), DPFL_OK);
    assert_int_equal(dpfl_rpdp_epsilon(&pld, 1.0, &el, &err), DPFL_OK);
    assert_true(ep >= exact);
    assert_true(el >= exact && el <= exact * 1.002);
    dpfl_e2e_params e2 = {0};
    e2.z = 1.0;
    e2.batch = e2.n = 100;
    e2.local_steps = 1;
    e2.client_rate = 0.01;
    e2.rounds = 1;
    e2.client_adjacency = DPFL_ADJ_ZERO_OUT;
    e2.delta = 1e-5;
    dpfl_e2e_result r;
    assert_int_equal(dpfl_e2e(&e2, &r, &err), DPFL_OK);
    assert_true(r.record_epsilon >= exact && r.record_epsilon <= exact * 1.002);
    /* a two-stage event with any other bound is refused */
    dpfl_event ev = dpfl_event_two_stage(0.01, 1.0, 1.0, 1, 1, DPFL_BOUND_RPDP);
    ev.bound = (dpfl_two_stage_bound)1;
    assert_int_equal(dpfl_event_check(&ev, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "visible"));
}

static void noise_is_divided_by_the_expected_batch(void **state)
{
    (void)state;
    const int32_t sizes[] = {200};
    fl_fixture f;
    fl_fixture_make(&f, "mlp:10-200-3", sizes, 1);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "1.5");
    fixture_set(&f.cfg, "record_dp.clip", "2");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "fl.lr", "1");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *start = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 4);
    dpfl_model_init(&f.model, global, &root);
    memcpy(start, global, P * sizeof(float));
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), 1.5);
    double *p = malloc(200 * sizeof *p), denom = 200 * 1e-9;
    for (int i = 0; i < 200; i++) p[i] = 1e-9;
    dpfl_record_dp_set_rates(dpfl_sim_record_dp(sim), p, &denom);
    dpfl_round_metrics m;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    assert_int_equal(m.examples, 0);
    double ss = 0;
    for (size_t j = 0; j < P; j++) ss += ((double)global[j] - start[j]) * ((double)global[j] - start[j]);
    assert_close(sqrt(ss / (double)P), 1.5 * 2 / denom, 0.05);
    dpfl_sim_free(sim);
    free(p);
    free(global);
    free(start);
    fl_fixture_free(&f);
}

/* A run samples each record at its own rate: the examples trained over R rounds of K steps (every client in every
 * round) match R K sum_i p_i within 5 standard deviations. */
static void training_samples_each_record_at_its_rate(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp4.ini", *A = "/tmp/dpfl_test_rpdpF";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpF"), 0);
    write_config(cfgp, 4, "");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    cfg.fl.client_rate = 1.0; /* every client in every round */
    dpfl_run_options o = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    cJSON *s = summary_of(A);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s, "record_budgets"), *lv;
    double mean = 0, var = 0;
    cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(rb, "levels"))
    {
        double p = num(lv, "p"), n = num(lv, "records");
        mean += 4 * 4 * n * p;
        var += 4 * 4 * n * p * (1 - p);
    }
    double got = num(cJSON_GetObjectItemCaseSensitive(s, "not_private"), "examples");
    assert_true(mean > 100);
    assert_true(fabs(got - mean) < 5 * sqrt(var));
    cJSON_Delete(s);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpF"), 0);
}

/* record_id,epsilon rows (a header, any order) give the same budgets as one number per line in record order; a
 * repeated or missing record is an error naming it. */
static void budget_file_as_record_id_rows(void **state)
{
    (void)state;
    enum { N = 50 };
    const char *plain = "/tmp/dpfl_test_rpdp_plain.txt", *csv = "/tmp/dpfl_test_rpdp_rows.csv";
    FILE *a = fopen(plain, "w"), *b = fopen(csv, "w");
    assert_non_null(a);
    assert_non_null(b);
    fprintf(b, "record,epsilon\n");
    for (int i = 0; i < N; i++) fprintf(a, "%g\n", 0.1 + 0.01 * i);
    for (int i = N - 1; i >= 0; i--) fprintf(b, "%d, %g\n", i, 0.1 + 0.01 * i);
    fclose(a);
    fclose(b);
    double x[N], y[N];
    dpfl_error err;
    assert_int_equal(dpfl_budgets_read_records(plain, N, x, &err), DPFL_OK);
    assert_int_equal(dpfl_budgets_read_records(csv, N, y, &err), DPFL_OK);
    assert_memory_equal(x, y, sizeof x);
    b = fopen(csv, "w");
    fprintf(b, "0,1\n1,2\n1,3\n");
    fclose(b);
    assert_int_not_equal(dpfl_budgets_read_records(csv, 3, y, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "line 3: record 1 has a budget already"));
    b = fopen(csv, "w");
    fprintf(b, "0,1\n2,2\n");
    fclose(b);
    assert_int_not_equal(dpfl_budgets_read_records(csv, 3, y, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "record 1 has no budget"));
    b = fopen(csv, "w");
    fprintf(b, "0,1\n7,2\n");
    fclose(b);
    assert_int_not_equal(dpfl_budgets_read_records(csv, 3, y, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "line 2: record 7 is not in 0..2"));
    b = fopen(csv, "w");
    fprintf(b, "0,1\n1,-2\n");
    fclose(b);
    assert_int_not_equal(dpfl_budgets_read_records(csv, 2, y, &err), DPFL_OK);
    assert_non_null(strstr(err.msg, "line 2"));
    unlink(plain);
    unlink(csv);
}

/* The headline epsilon of a run with several active levels (none opted out, all at the planned rounds) is the
 * largest level's: every level's epsilon recomputed here from its (p, rounds) and the run's z on the two-stage
 * accountant (whose values tests/test_privacy.c pins to REFERENCES.md section 7), the maximum taken here; the
 * summary's epsilon and the last metrics line's must be that maximum, which is above every other level's. */
static void headline_epsilon_is_the_largest_active_levels(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp_head.ini", *A = "/tmp/dpfl_test_rpdpH";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpH"), 0);
    write_config(cfgp, 3, "");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    dpfl_run_options o = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    cJSON *s = summary_of(A);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s, "record_budgets"), *lv;
    dpfl_rpdp_params pp = {num(rb, "noise"), 0.5, 4, 3, 1e-5, DPFL_BOUND_RPDP, 0, NULL, 0};
    double top = 0, second = 0;
    int active = 0;
    cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(rb, "levels"))
    {
        double e, p = num(lv, "p");
        if (!(p > 0) || num(lv, "records") < 1) continue;
        assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lv, "opted_out")));
        assert_int_equal((int)num(lv, "rounds"), 3);
        assert_int_equal(dpfl_rpdp_epsilon(&pp, p, &e, &err), DPFL_OK);
        if (e > top) second = top, top = e;
        else if (e > second) second = e;
        active++;
    }
    assert_true(active >= 3);      /* ThreeLevels: 0.1, 1 and 5, each with records sampled */
    assert_true(second < 0.9 * top); /* the levels differ: taking the wrong one shows */
    if (num(s, "epsilon") != top) print_error("headline epsilon %.17g, the largest level's %.17g\n", num(s, "epsilon"), top);
    assert_true(num(s, "epsilon") == top);
    char path[128], *t, *last;
    size_t n;
    snprintf(path, sizeof path, "%s/metrics.jsonl", A);
    assert_int_equal(dpfl_file_read_all(path, &t, &n, NULL), DPFL_OK);
    assert_non_null(last = strstr(t, "{\"round\":3"));
    cJSON *m = cJSON_Parse(last);
    assert_true(num(m, "epsilon") == top);
    cJSON_Delete(m);
    free(t);
    cJSON_Delete(s);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpH"), 0);
}

/* Examples trained in a stretch of rounds, expected from the levels (every client in every round, 4 steps): the sum
 * over levels of records * p * 4 * (the rounds it was charged in the stretch), and its variance. */
static void level_examples(const cJSON *before, const cJSON *after, double *mean, double *var)
{
    *mean = *var = 0;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(after, "record_budgets"), "levels");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(before, "record_budgets"), "levels");
    assert_int_equal(cJSON_GetArraySize(a), cJSON_GetArraySize(b));
    for (int k = 0; k < cJSON_GetArraySize(a); k++) {
        const cJSON *la = cJSON_GetArrayItem(a, k), *lb = cJSON_GetArrayItem(b, k);
        assert_true(num(la, "budget") == num(lb, "budget"));
        double p = num(la, "p"), steps = 4 * (num(la, "rounds") - num(lb, "rounds")), n = num(la, "records");
        *mean += steps * n * p;
        *var += steps * n * p * (1 - p);
    }
}

/* Planned for 3 rounds, resumed to 9 (levels opt out), then resumed again to 12: the second resume starts past the
 * opt-outs, and a level that opted out must stay at rate 0 (its records are no longer charged).  The examples the
 * rounds after each resume trained match the levels still charged (within 5 standard deviations), and the
 * opted-out levels' records would add far more than that.  (With every client in every round each level's rate
 * was planned to the last round for exactly 3 rounds, so every level with records opts out before round 4 and
 * nothing may be trained after round 3.) */
static void rates_after_a_resume_past_an_opt_out_keep_opted_out_levels_at_zero(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp_rr.ini", *A = "/tmp/dpfl_test_rpdpR";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpR"), 0);
    write_config(cfgp, 3, "");
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    cfg.fl.client_rate = 1.0; /* every client in every round: the examples count the sampled records */
    dpfl_run_options first = {.out_dir = A, .quiet = 1}, resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    cJSON *s3 = summary_of(A);
    cfg.fl.rounds = 9;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    cJSON *s9 = summary_of(A);
    cfg.fl.rounds = 12;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    cJSON *s12 = summary_of(A);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s9, "record_budgets"), *lv;
    assert_true(num(rb, "opted_out") > 0);
    double extra = 0; /* what the levels opted out by round 9 would add over rounds 10..12 at their plan's rate */
    cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(rb, "levels"))
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lv, "opted_out"))) extra += 3 * 4 * num(lv, "records") * num(lv, "p");
    const cJSON *s_of[3] = {s3, s9, s12};
    for (int i = 0; i < 2; i++) {
        double mean, var;
        level_examples(s_of[i], s_of[i + 1], &mean, &var);
        double got = num(cJSON_GetObjectItemCaseSensitive(s_of[i + 1], "not_private"), "examples") -
                     num(cJSON_GetObjectItemCaseSensitive(s_of[i], "not_private"), "examples");
        if (!(fabs(got - mean) <= 5 * sqrt(var)))
            print_error("resume %d: %.0f examples trained, the levels still charged give %.1f +- %.1f\n", i + 1, got,
                        mean, sqrt(var));
        assert_true(fabs(got - mean) <= 5 * sqrt(var));
        if (i == 1) assert_true(extra > 10 * sqrt(var) + 50); /* the check can see opted-out records come back */
    }
    cJSON_Delete(s3);
    cJSON_Delete(s9);
    cJSON_Delete(s12);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdpR"), 0);
}

/* Budgets by class take the labels as public (the levels' record counts are the class counts): summary.json's
 * warnings say so, and a file or generated budgets do not get the warning. */
static void class_budgets_say_the_labels_are_public(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rpdp_class.ini", *dir = "/tmp/dpfl_test_rpdp_class";
    const char *extras[2] = {"budgets = class\nclass_budgets = 0.5, 1, 1, 1, 1, 1, 1, 1, 1, 2\n", ""};
    for (int i = 0; i < 2; i++) {
        write_config(cfgp, 1, extras[i]);
        dpfl_config cfg;
        dpfl_error err;
        dpfl_config_defaults(&cfg);
        assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
        assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdp_class"), 0);
        dpfl_run_options o = {.out_dir = dir, .quiet = 1};
        assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
        cJSON *s = summary_of(dir);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(s, "warnings");
        int said = 0;
        for (const cJSON *x = w ? w->child : NULL; x; x = x->next)
            said += cJSON_IsString(x) && strstr(x->valuestring, "takes every label as public") != NULL;
        assert_int_equal(said, i == 0);
        cJSON_Delete(s);
    }
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_rpdp_class"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nonuniform_sampler_matches_the_rates),
        cmocka_unit_test(budget_generators_follow_the_paper),
        cmocka_unit_test(every_record_stays_within_its_own_budget),
        cmocka_unit_test(records_opt_out_before_their_budget_is_passed),
        cmocka_unit_test(budget_ledger_resumes_bit_identically),
        cmocka_unit_test(bad_budgets_are_clear_errors),
        cmocka_unit_test(budget_file_as_record_id_rows),
        cmocka_unit_test(two_stage_bounds_bracket_the_reference),
        cmocka_unit_test(two_stage_with_visible_participation_is_never_below_the_exact_value),
        cmocka_unit_test(noise_is_divided_by_the_expected_batch),
        cmocka_unit_test(training_samples_each_record_at_its_rate),
        cmocka_unit_test(headline_epsilon_is_the_largest_active_levels),
        cmocka_unit_test(rates_after_a_resume_past_an_opt_out_keep_opted_out_levels_at_zero),
        cmocka_unit_test(filter_charges_each_records_own_gradient_norm),
        cmocka_unit_test(record_dp_side_moves_each_clients_spend_and_digest),
        cmocka_unit_test(filter_runs_within_budgets_and_resumes),
        cmocka_unit_test(class_budgets_say_the_labels_are_public),
        cmocka_unit_test(filter_releases_nothing_before_a_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
