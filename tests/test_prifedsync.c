/* PriFedSync end to end (Zheng et al., Algorithm 1/2): personalized helper models kept per client across rounds,
 * through checkpoints, and the federated f-DP the run reports. */
#include "fixtures.h"
#include "dpfl/privacy.h"
#include "dpfl/run.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

/* the updates the server receives, per client (one round at a time) */
typedef struct {
    float *u[4];
    size_t P;
} seen_updates;

/* client k's helper model (the clients' side of the simulation) */
static const float *helper_model(dpfl_sim *sim, int32_t k)
{
    return dpfl_clients_helper_model(dpfl_sim_clients(sim), k);
}

static void observe(void *ctx, int32_t round, int32_t client, const float *update, size_t P)
{
    (void)round;
    seen_updates *s = ctx;
    memcpy(s->u[client], update, P * sizeof(float));
}

/* h_k = (1 - alpha) w~_k + alpha w_global after a sync, with w~_k = global before + the update the server got;
 * before its first sync a client's helper is w0, and the next round trains from the helper, not the global model. */
static void helper_model_formula_on_a_hand_example(void **state)
{
    (void)state;
    const int32_t sizes[] = {30, 40, 50};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 3);
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.helper_alpha", "0.25");
    fixture_set(&f.cfg, "fl.weighting", "uniform");
    fixture_set(&f.cfg, "fl.eta", "0.5");
    fixture_set(&f.cfg, "fl.local_steps", "3");
    fixture_set(&f.cfg, "fl.lr", "0.1");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *before = malloc(P * sizeof(float)), *w0 = malloc(P * sizeof(float));
    dpfl_sim *sim = fl_fixture_sim(&f, global, 3);
    memcpy(w0, global, P * sizeof(float));
    seen_updates seen = {{malloc(P * sizeof(float)), malloc(P * sizeof(float)), malloc(P * sizeof(float)), NULL}, P};
    dpfl_server_set_update_observer(dpfl_sim_server(sim), observe, &seen);
    for (int32_t k = 0; k < 3; k++) assert_memory_equal(helper_model(sim, k), w0, P * sizeof(float));
    dpfl_round_metrics m;
    dpfl_error err;
    for (int32_t r = 1; r <= 2; r++) {
        memcpy(before, global, P * sizeof(float));
        float *h_before[3];
        for (int32_t k = 0; k < 3; k++) {
            h_before[k] = malloc(P * sizeof(float));
            memcpy(h_before[k], helper_model(sim, k), P * sizeof(float));
        }
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        for (size_t j = 0; j < P; j++) {
            /* the server's average: global <- global + eta * mean(w~_k - global) */
            double mean = (seen.u[0][j] + seen.u[1][j] + seen.u[2][j]) / 3.0;
            assert_true(fabs(global[j] - (before[j] + 0.5 * mean)) <= 1e-5 * (1 + fabs(global[j])));
            for (int32_t k = 0; k < 3; k++) {
                double trained = (double)before[j] + seen.u[k][j]; /* w~_k */
                double want = 0.75 * trained + 0.25 * global[j];
                assert_true(fabs(helper_model(sim, k)[j] - want) <= 1e-5 * (1 + fabs(want)));
            }
        }
        /* training started from the helper: in round 2 the updates differ from training from the global model,
         * which a helper-less run does (checked below by the helper's own value: the update is w~_k - global) */
        for (int32_t k = 0; k < 3; k++) free(h_before[k]);
    }
    /* alpha = 1 is FedAvg: every helper is the global model after the round */
    dpfl_sim_free(sim);
    fixture_set(&f.cfg, "fl.helper_alpha", "1");
    sim = fl_fixture_sim(&f, global, 3);
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    for (int32_t k = 0; k < 3; k++) assert_memory_equal(helper_model(sim, k), global, P * sizeof(float));
    dpfl_sim_free(sim);
    for (int i = 0; i < 3; i++) free(seen.u[i]);
    free(global);
    free(before);
    free(w0);
    fl_fixture_free(&f);
}

/* A client's helper model survives the rounds it sits out bit for bit, changes in the rounds it syncs, and is
 * where its next local training starts: with alpha = 0 a client's model only ever moves by its own training. */
static void helpers_persist_across_rounds_a_client_sits_out(void **state)
{
    (void)state;
    const int32_t sizes[] = {40, 40, 40, 40, 40, 40};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 6);
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.sampling", "poisson");
    fixture_set(&f.cfg, "fl.client_rate", "0.5");
    fixture_set(&f.cfg, "fl.local_steps", "2");
    fixture_set(&f.cfg, "fl.lr", "0.1");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *snap = malloc(6 * P * sizeof(float));
    dpfl_sim *sim = fl_fixture_sim(&f, global, 9);
    dpfl_round_metrics m;
    dpfl_error err;
    int sat_out = 0, synced = 0;
    for (int32_t r = 1; r <= 12; r++) {
        for (int32_t k = 0; k < 6; k++) memcpy(snap + k * P, helper_model(sim, k), P * sizeof(float));
        const int32_t *who;
        int32_t ms = dpfl_sim_sample(sim, r, &who);
        assert_int_equal(dpfl_sim_train(sim, r, &m, &err), DPFL_OK);
        for (int32_t k = 0; k < 6; k++) {
            int in = 0;
            for (int32_t i = 0; i < ms; i++) in |= who[i] == k;
            int same = memcmp(snap + k * P, helper_model(sim, k), P * sizeof(float)) == 0;
            assert_int_equal(same, !in);
            sat_out += !in;
            synced += in;
        }
    }
    assert_true(sat_out > 10 && synced > 10);
    dpfl_sim_free(sim);
    free(global);
    free(snap);
    fl_fixture_free(&f);
}

/* Local training starts from the client's own helper model, not from the global model (Algorithm 2: w <- h).
 * alpha = 0 keeps each helper the client's own model; round 1 trains (lr 0.1), round 2 barely moves (the step
 * schedule multiplies lr by 1e-6): a client's model after round 2 is where it started, its helper, far from the
 * global model. */
static void clients_train_from_their_helper(void **state)
{
    (void)state;
    const int32_t sizes[] = {30, 40, 50};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 3);
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.helper_alpha", "0");
    fixture_set(&f.cfg, "fl.local_steps", "3");
    fixture_set(&f.cfg, "fl.lr", "0.1");
    fixture_set(&f.cfg, "fl.schedule", "step");
    fixture_set(&f.cfg, "fl.lr_step", "1");
    fixture_set(&f.cfg, "fl.lr_gamma", "1e-6");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *h1 = malloc(3 * P * sizeof(float));
    dpfl_sim *sim = fl_fixture_sim(&f, global, 8);
    dpfl_round_metrics m;
    dpfl_error err;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    for (int32_t k = 0; k < 3; k++) memcpy(h1 + k * P, helper_model(sim, k), P * sizeof(float));
    assert_int_equal(dpfl_sim_round(sim, 2, &m, &err), DPFL_OK);
    for (int32_t k = 0; k < 3; k++) {
        double from_helper = 0, helper_to_global = 0;
        for (size_t j = 0; j < P; j++) {
            from_helper = fmax(from_helper, fabs(helper_model(sim, k)[j] - h1[k * P + j]));
            helper_to_global = fmax(helper_to_global, fabs(h1[k * P + j] - global[j]));
        }
        assert_true(from_helper < 1e-5);
        assert_true(helper_to_global > 1e-3);
    }
    dpfl_sim_free(sim);
    free(global);
    free(h1);
    fl_fixture_free(&f);
}

/* Clients sync independently with probability p: over 2,000 rounds each client's count is Bin(2000, p). */
static void sync_counts_follow_p(void **state)
{
    (void)state;
    int32_t sizes[20];
    for (int i = 0; i < 20; i++) sizes[i] = 10;
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 20);
    fixture_set(&f.cfg, "fl.algorithm", "prifedsync");
    fixture_set(&f.cfg, "fl.client_rate", "0.3");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float));
    dpfl_sim *sim = fl_fixture_sim(&f, global, 4);
    int64_t count[20] = {0}, total = 0;
    const int R = 2000;
    for (int32_t r = 1; r <= R; r++) {
        const int32_t *who;
        int32_t ms = dpfl_sim_sample(sim, r, &who);
        for (int32_t i = 0; i < ms; i++) count[who[i]]++;
        total += ms;
    }
    double sd = sqrt(R * 0.3 * 0.7), chi2 = 0;
    for (int k = 0; k < 20; k++) {
        assert_true(fabs(count[k] - R * 0.3) < 5 * sd);
        chi2 += (count[k] - R * 0.3) * (count[k] - R * 0.3) / (R * 0.3 * 0.7);
    }
    assert_true(chi2 < 45.3); /* chi-square, 20 dof, p = 0.001 */
    assert_true(fabs(total - 20.0 * R * 0.3) < 5 * sqrt(20.0 * R * 0.21));
    dpfl_sim_free(sim);
    free(global);
    fl_fixture_free(&f);
}

static void write_pfs_config(const char *path, int rounds)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "[data]\ndataset = synthetic\npartition = iid\nclients = 8\ntest_per_client = 20\n\n"
                "[model]\narch = mlp:20-16-10\n\n"
                "[fl]\nalgorithm = prifedsync\nrounds = %d\nclient_rate = 0.5\nlocal_steps = 4\nbatch = 8\nlr = 0.01\n"
                "helper_alpha = 0.2\ntarget_accuracy = 0.1\n\n"
                "[record_dp]\nclip = 1.0\nnoise = 1.1\ndelta = 1e-5\n\n[run]\nseed = 11\nthreads = 2\n",
            rounds);
    fclose(fp);
}

static const char *build_dir(void)
{
    const char *b = getenv("BUILD");
    return b ? b : "build";
}

static char *slurp(const char *path)
{
    char *t;
    size_t n;
    return dpfl_file_read_all(path, &t, &n, NULL) ? NULL : t;
}

/* A run stopped after 2 rounds and resumed to 5 ends bit-identical to 5 rounds straight: the model, and the whole
 * checkpoint but its wall-time fields -- the references to every client's state file and w0 --, the state files
 * themselves (helper model, Adam state) and the same metrics lines. */
static void helper_models_resume_bit_identically(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfs.ini", *A = "/tmp/dpfl_test_pfsA", *B = "/tmp/dpfl_test_pfsB";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfsA /tmp/dpfl_test_pfsB"), 0);
    write_pfs_config(cfgp, 5);
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    dpfl_run_options straight = {.out_dir = B, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &straight, &err), DPFL_OK);
    cfg.fl.rounds = 2;
    dpfl_run_options first = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    /* a config without helper models cannot take this checkpoint */
    dpfl_config none = cfg;
    none.fl.personalization = DPFL_PERSONAL_NONE;
    none.fl.rounds = 5;
    dpfl_run_options resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&none, &resume, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "fl.personalization"));
    cfg.fl.rounds = 5;
    cfg.run.threads = 1;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    char *ma, *mb;
    size_t la, lb;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_pfsA/model.bin", &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_pfsB/model.bin", &mb, &lb, &err), DPFL_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(ma, mb, la);
    free(ma);
    free(mb);
    /* 8 clients: helper (P floats) + Adam m and v per client that trained, each in its own file; w0 in the
     * checkpoint */
    const size_t P = 20 * 16 + 16 + 16 * 10 + 10;
    const size_t ck = fixture_checkpoints_match(A, B);
    assert_true(ck > P * sizeof(float) && ck < 2 * P * sizeof(float) * 3);
    assert_int_equal(fixture_client_files_match(A, B), 8);
    char *da = slurp("/tmp/dpfl_test_pfsA/metrics.jsonl"), *db = slurp("/tmp/dpfl_test_pfsB/metrics.jsonl");
    assert_non_null(da);
    assert_non_null(db);
    assert_string_equal(da, db);
    free(da);
    free(db);
    /* the personalized accuracy is reported each evaluated round, with the round it first reached the target; the
     * straight run evaluates only the helper models that changed since their last evaluation, the resumed one
     * every helper model at its first round: the same figures */
    char *diag = slurp("/tmp/dpfl_test_pfsB/diagnostics.jsonl"), *sum = slurp("/tmp/dpfl_test_pfsB/summary.json");
    char *diag_a = slurp("/tmp/dpfl_test_pfsA/diagnostics.jsonl");
    assert_non_null(diag_a);
    int lines = 0;
    for (const char *pa = diag_a, *pb = diag; (pa = strstr(pa, "\"personal_accuracy_mean\":"));) {
        assert_non_null(pb = strstr(pb, "\"personal_accuracy_mean\":"));
        const char *ea = strstr(pa, "\"local_accuracy_mean\""), *eb = strstr(pb, "\"local_accuracy_mean\"");
        assert_non_null(ea);
        assert_non_null(eb);
        assert_int_equal(ea - pa, eb - pb); /* the mean and the spread, digit for digit */
        assert_memory_equal(pa, pb, (size_t)(ea - pa));
        pa = ea, pb = eb, lines++;
    }
    assert_int_equal(lines, 5);
    free(diag_a);
    cJSON *s = cJSON_Parse(sum);
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(s, "not_private");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(np, "personal_accuracy_mean")));
    const cJSON *reached = cJSON_GetObjectItemCaseSensitive(np, "personal_accuracy_reached_round");
    assert_true(cJSON_IsNumber(reached) && reached->valuedouble >= 1 && reached->valuedouble <= 5);
    cJSON_Delete(s);
    free(diag);
    free(sum);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfsA /tmp/dpfl_test_pfsB"), 0);
}

/* The federated f-DP in the run's metrics and summary is what `dpfl fdp` prints for the same parameters. */
static void run_report_fdp_equals_dpfl_fdp(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfs_fdp.ini", *dir = "/tmp/dpfl_test_pfs_fdp";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_fdp"), 0);
    write_pfs_config(cfgp, 3);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpfl train %s --out %s --quiet 2>/dev/null", build_dir(), cfgp, dir);
    assert_int_equal(system(cmd), 0);
    char *sum = slurp("/tmp/dpfl_test_pfs_fdp/summary.json");
    assert_non_null(sum);
    cJSON *s = cJSON_Parse(sum);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "federated_fdp");
    assert_non_null(f);
    double n = cJSON_GetObjectItemCaseSensitive(f, "worst_client_n")->valuedouble;
    /* synthetic: 10,000 training records split IID over 8 equal clients */
    assert_true(n == 1250);
    snprintf(cmd, sizeof cmd, "%s/dpfl fdp --clients 8 --p 0.5 --noise 1.1 --batch 8 --n %.0f --local-steps 4 "
                              "--rounds 3 --delta 1e-5 --json > /tmp/dpfl_test_pfs_fdp.json", build_dir(), n);
    assert_int_equal(system(cmd), 0);
    char *cli = slurp("/tmp/dpfl_test_pfs_fdp.json");
    cJSON *c = cJSON_Parse(cli);
    const char *keys[] = {"mu", "mu_strong", "epsilon_clt", "epsilon_strong_clt", "epsilon"};
    for (int i = 0; i < 5; i++) {
        double a = cJSON_GetObjectItemCaseSensitive(f, keys[i])->valuedouble;
        double b = cJSON_GetObjectItemCaseSensitive(c, keys[i])->valuedouble;
        if (a != b) print_error("%s: run %.17g, dpfl fdp %.17g\n", keys[i], a, b);
        assert_true(a == b);
    }
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "mu_asymptotic")));
    /* and both are the independent reference's value (tests/reference/pin_fdp.py, its last case) */
    const double want = 0.74472718209429017, got = cJSON_GetObjectItemCaseSensitive(f, "epsilon")->valuedouble;
    if (!(fabs(got - want) <= 1e-9 * want)) print_error("run's federated f-DP epsilon %.17g, reference %.17g\n", got, want);
    assert_true(got >= want * (1 - 1e-12) && got <= want * (1 + 1e-9));
    /* every metrics line carries the values after its round: the last is the summary's */
    char *metrics = slurp("/tmp/dpfl_test_pfs_fdp/metrics.jsonl");
    char *last = strstr(metrics, "{\"round\":3");
    assert_non_null(last);
    cJSON *l = cJSON_Parse(last);
    const cJSON *lf = cJSON_GetObjectItemCaseSensitive(l, "federated_fdp");
    assert_true(cJSON_GetObjectItemCaseSensitive(lf, "epsilon")->valuedouble ==
                cJSON_GetObjectItemCaseSensitive(f, "epsilon")->valuedouble);
    assert_true(cJSON_GetObjectItemCaseSensitive(lf, "rounds")->valuedouble == 3);
    cJSON_Delete(l);
    cJSON_Delete(c);
    cJSON_Delete(s);
    free(metrics);
    free(cli);
    free(sum);
    unlink(cfgp);
    unlink("/tmp/dpfl_test_pfs_fdp.json");
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_fdp"), 0);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Issue 31, item 4: the ledger's epsilon (the syncs that happened, no amplification) and the federated f-DP bound
 * (sync probability p kept) both hold against any observer, so the run's guarantee is the smaller; summary.json's
 * epsilon is that number (epsilon_ledger beside it when the f-DP bound is the smaller), every metrics line's
 * epsilon is the smaller of its two, and record_dp.target_epsilon stops the run on that same number. */
static void prifedsync_guarantee_is_the_smaller_bound_and_the_budget_checks_it(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfs_g.ini";
    char cmd[1024];
    double g[7] = {0};
    for (int pass = 0; pass < 2; pass++) {
        write_pfs_config(cfgp, 6);
        if (pass == 1) { /* a budget between the guarantees after rounds 3 and 4 */
            FILE *fp = fopen(cfgp, "a");
            fprintf(fp, "[record_dp]\ntarget_epsilon = %.17g\n", 0.5 * (g[3] + g[4]));
            fclose(fp);
        }
        snprintf(cmd, sizeof cmd, "rm -rf /tmp/dpfl_test_pfs_g && %s/dpfl train %s --out /tmp/dpfl_test_pfs_g --quiet "
                                  "2>/dev/null", build_dir(), cfgp);
        assert_int_equal(system(cmd), 0);
        char *metrics = slurp("/tmp/dpfl_test_pfs_g/metrics.jsonl"), *sum = slurp("/tmp/dpfl_test_pfs_g/summary.json");
        assert_non_null(metrics);
        assert_non_null(sum);
        int lines = 0, fdp_smaller = 0;
        for (char *p = metrics; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
            cJSON *l = cJSON_Parse(p);
            if (!l) break;
            const double e = num(l, "epsilon"), f = num(cJSON_GetObjectItemCaseSensitive(l, "federated_fdp"), "epsilon");
            lines++;
            assert_true(e <= f);
            fdp_smaller += e == f;
            if (pass == 0) g[lines] = e;
            else assert_true(e == g[lines] && e <= 0.5 * (g[3] + g[4]));
            cJSON_Delete(l);
        }
        cJSON *s = cJSON_Parse(sum);
        const double eps = num(s, "epsilon"), f = num(cJSON_GetObjectItemCaseSensitive(s, "federated_fdp"), "epsilon");
        /* the ledger's, recomputed: fixed batches of B of the worst client's n, its steps */
        dpfl_event ev = dpfl_event_fixed((int64_t)num(s, "worst_client_n"), (int64_t)num(s, "worst_client_batch"), 1.1,
                                         (int64_t)num(s, "worst_client_steps"));
        dpfl_guarantee lg;
        dpfl_error err;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &lg, &err), DPFL_OK);
        assert_close(eps, fmin(lg.epsilon, f), 1e-12);
        if (f < lg.epsilon) assert_close(num(s, "epsilon_ledger"), lg.epsilon, 1e-12);
        else assert_true(isnan(num(s, "epsilon_ledger")));
        if (pass == 0) {
            assert_int_equal(lines, 6);
            assert_true(fdp_smaller > 0); /* the case the test is about: the f-DP bound decides some rounds */
            assert_true(g[4] > g[3]);
        } else {
            assert_int_equal(lines, 3); /* the fourth round would pass the budget: never trained */
            assert_non_null(strstr(sum, "\"stopped_at_budget\":\ttrue"));
        }
        cJSON_Delete(s);
        free(metrics);
        free(sum);
    }
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_g"), 0);
}

/* Helper models compose with client-level DP: the server clips and noises the updates w~_k - w_global as for any
 * run (the helper is computed by the client from the noisy global model it receives), and the run is charged. */
static void helper_models_compose_with_client_level_dp(void **state)
{
    (void)state;
    const int32_t sizes[] = {30, 30, 30, 30};
    fl_fixture f;
    fl_fixture_make(&f, "logreg", sizes, 4);
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.local_steps", "3");
    fixture_set(&f.cfg, "client_dp.enabled", "yes");
    fixture_set(&f.cfg, "client_dp.clip", "0.01");
    fixture_set(&f.cfg, "client_dp.noise", "1.0");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *before = malloc(P * sizeof(float));
    dpfl_sim *sim = fl_fixture_sim(&f, global, 5);
    memcpy(before, global, P * sizeof(float));
    dpfl_round_metrics m;
    dpfl_error err;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    assert_int_equal(m.replied, 4);
    assert_true(m.update_clip_fraction == 1.0); /* every update was clipped to 0.01 ... */
    double moved = 0;
    for (size_t j = 0; j < P; j++) moved += (global[j] - before[j]) * (global[j] - before[j]);
    /* ... and the noise std z S / 4 = 0.0025 per coordinate moved the global model by about that much */
    assert_true(sqrt(moved / P) > 0.0015 && sqrt(moved / P) < 0.0045);
    double ceps;
    int cpriv;
    assert_int_equal(dpfl_sim_epsilon(sim, NULL, &ceps, &cpriv, &err), DPFL_OK);
    assert_true(cpriv && ceps > 0 && isfinite(ceps));
    /* the helpers mixed the noisy global model in: h = 0.9 w~ + 0.1 w_global differs from w_global */
    assert_memory_not_equal(helper_model(sim, 0), global, P * sizeof(float));
    dpfl_sim_free(sim);
    free(global);
    free(before);
    fl_fixture_free(&f);
}

/* Memory: fl.client_state_max_mb is a cache limit (any number of clients); a client's own state larger than the
 * cap is refused up front, naming the cap and what the state holds. */
static void client_state_cap_is_checked_up_front(void **state)
{
    (void)state;
    const int32_t sizes[] = {10, 10, 10, 10};
    fl_fixture f;
    fl_fixture_make(&f, "mlp:10-200-3", sizes, 4);
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.client_state_max_mb", "1");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 1);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err),
                     DPFL_OK); /* 4 x 2,803 floats: far below 1 MiB */
    dpfl_sim_free(sim);
    dpfl_partition_free(&f.part);
    int32_t many[400];
    for (int i = 0; i < 400; i++) many[i] = 1;
    f.part = fixture_contiguous(many, 400);
    fixture_set(&f.cfg, "fl.client_state", "keep");
    fixture_set(&f.cfg, "fl.optimizer", "adam");
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err),
                     DPFL_OK); /* 400 x 3 x 2,803 floats = 12.8 MiB in all: paged under the cap */
    dpfl_sim_free(sim);
    free(global);
    fl_fixture_free(&f);
    fl_fixture_make(&f, "mlp:10-40000-3", sizes, 4); /* 560,003 parameters: one client's state is 6.4 MiB */
    fixture_set(&f.cfg, "fl.personalization", "helper");
    fixture_set(&f.cfg, "fl.client_state", "keep");
    fixture_set(&f.cfg, "fl.optimizer", "adam");
    fixture_set(&f.cfg, "fl.client_state_max_mb", "6");
    global = calloc(f.model.nparam, sizeof(float));
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err),
                     DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.client_state_max_mb"));
    assert_non_null(strstr(err.msg, "helper model + optimizer state"));
    assert_null(strchr(err.msg, '\n'));
    free(global);
    fl_fixture_free(&f);
}

/* Under a small fl.client_state_max_mb the blocks of clients a round does not train page out to their files and
 * come back when the client is sampled again: the run (and a resume of it, under the cap) is bit-identical to one
 * that keeps every block in memory -- model, metrics, checkpoint and state files. */
static void client_state_pages_under_the_cap_bit_identically(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfs_page.ini", *A = "/tmp/dpfl_test_pfs_pageA", *B = "/tmp/dpfl_test_pfs_pageB",
               *C = "/tmp/dpfl_test_pfs_pageC";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_pageA /tmp/dpfl_test_pfs_pageB /tmp/dpfl_test_pfs_pageC"), 0);
    write_pfs_config(cfgp, 6);
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    /* 24 clients, about 6 a round; 9,310 parameters x 3 (helper, Adam m, v) = 109 KiB a client: 9 fit in 1 MiB */
    snprintf(cfg.model.arch, sizeof cfg.model.arch, "mlp:20-300-10");
    cfg.data.clients = 24;
    cfg.fl.client_rate = 0.25;
    dpfl_run_options all = {.out_dir = B, .quiet = 1}, capped = {.out_dir = C, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &all, &err), DPFL_OK);
    cfg.fl.client_state_max_mb = 1;
    assert_int_equal(dpfl_run(&cfg, &capped, &err), DPFL_OK);
    cfg.fl.rounds = 3;
    dpfl_run_options first = {.out_dir = A, .quiet = 1}, resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    cfg.fl.rounds = 6;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    const char *runs[2] = {A, C};
    for (int i = 0; i < 2; i++) {
        char pa[256], pb[256];
        snprintf(pa, sizeof pa, "%s/model.bin", runs[i]);
        snprintf(pb, sizeof pb, "%s/model.bin", B);
        char *ma, *mb;
        size_t la, lb;
        assert_int_equal(dpfl_file_read_all(pa, &ma, &la, &err), DPFL_OK);
        assert_int_equal(dpfl_file_read_all(pb, &mb, &lb, &err), DPFL_OK);
        assert_int_equal(la, lb);
        assert_memory_equal(ma, mb, la);
        free(ma);
        free(mb);
        fixture_checkpoints_match(runs[i], B);
        assert_true(fixture_client_files_match(runs[i], B) > 9);
        snprintf(pa, sizeof pa, "%s/metrics.jsonl", runs[i]);
        snprintf(pb, sizeof pb, "%s/metrics.jsonl", B);
        char *da = slurp(pa), *db = slurp(pb);
        assert_non_null(da);
        assert_non_null(db);
        assert_string_equal(da, db);
        free(da);
        free(db);
    }
    /* the capped run paged: blocks out, and files read back */
    char *sum = slurp("/tmp/dpfl_test_pfs_pageC/summary.json");
    cJSON *s = cJSON_Parse(sum), *cs = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "stage_seconds"), "client_state");
    assert_non_null(cs);
    assert_true(cJSON_GetObjectItem(cs, "paged_out")->valuedouble > 0);
    assert_true(cJSON_GetObjectItem(cs, "files_read")->valuedouble > 0);
    assert_true(cJSON_GetObjectItem(cs, "in_memory")->valuedouble <= 9);
    cJSON_Delete(s);
    free(sum);
    sum = slurp("/tmp/dpfl_test_pfs_pageB/summary.json");
    s = cJSON_Parse(sum);
    cs = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "stage_seconds"), "client_state");
    assert_true(cJSON_GetObjectItem(cs, "paged_out")->valuedouble == 0);
    cJSON_Delete(s);
    free(sum);
}

/* PriFedSync's non-asymptotic bound at K, R > 1, by value: tests/reference/pin_fdp.py (mpmath at 1500 digits, WBK
 * Theorem 9 with the Gaussian's forward differences per step, K steps and the sync probability p per round by
 * joint convexity, R rounds, the tight RDP conversion over orders 2..64) gives these.  dpfl's bound, over more
 * orders and rounded up, must agree to 1e-9 (the optimum is inside 2..64) at the same order.  The last case is the
 * run of write_pfs_config(3 rounds): run_report_fdp_equals_dpfl_fdp pins the run's number to it too. */
typedef struct {
    int64_t m;
    double p, z;
    int64_t B, n, K, R;
    double delta, eps;
    int order;
} fdp_case;
static const fdp_case FDP_CASES[] = {
    {10, 0.29999999999999999, 1, 16, 600, 38, 5, 1.0000000000000001e-05, 3.4187326711551927, 5},
    {5, 1, 2, 50, 500, 4, 10, 1.0000000000000001e-05, 3.2618238017172632, 7},
    {20, 0.5, 1.5, 10, 100, 3, 7, 9.9999999999999995e-07, 3.3305907003424124, 7},
    {8, 0.5, 1.1000000000000001, 8, 1250, 4, 3, 1.0000000000000001e-05, 0.74472718209429017, 12},
};

static void fdp_exact_bound_pins_k_and_r_by_value(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof FDP_CASES / sizeof *FDP_CASES; i++) {
        const fdp_case *c = &FDP_CASES[i];
        dpfl_fdp_params pp = {c->m, c->p, c->z, c->B, c->n, c->K, c->R, 1};
        dpfl_fdp_result r;
        dpfl_error err;
        assert_int_equal(dpfl_fdp_prifedsync(&pp, c->delta, &r, &err), DPFL_OK);
        if (!(fabs(r.eps_exact - c->eps) <= 1e-9 * c->eps) || r.order_exact != c->order)
            print_error("case %zu: epsilon %.17g at order %g, the reference's %.17g at %d\n", i, r.eps_exact,
                        r.order_exact, c->eps, c->order);
        assert_true(r.eps_exact >= c->eps * (1 - 1e-12)); /* an upper bound: never below the exact value */
        assert_true(r.eps_exact <= c->eps * (1 + 1e-9));
        assert_true(r.order_exact == c->order);
    }
}

/* A record held by several clients is released by each of them, and the f-DP bound composes the copies: with every
 * record in every batch (B = n, sampling = all) each step is a plain Gaussian of mu = 1/z (replace-one, std z 2C),
 * so a record in c clients after K R steps in each is exactly sqrt(c K R) / z-GDP, the least epsilon any bound may
 * report.  Before the fix the f-DP bound counted one copy and became the headline (4.75 against 17.9 here). */
static void a_record_in_several_clients_is_charged_in_each(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfs_copies.ini", *dir = "/tmp/dpfl_test_pfs_copies";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_copies"), 0);
    FILE *fp = fopen(cfgp, "w");
    assert_non_null(fp);
    fprintf(fp, "[data]\ndataset = synthetic\npartition = iid\nclients = 40\nsamples_per_client = 1000\n\n"
                "[model]\narch = logreg\n\n[fl]\nrounds = 4\nsampling = all\nlocal_steps = 1\nbatch = 1000\nlr = 0.1\n\n"
                "[record_dp]\nenabled = yes\nsampler = fixed\nclip = 1.0\nnoise = 2.0\ndelta = 1e-5\n\n"
                "[run]\nseed = 1\nthreads = 1\n");
    fclose(fp);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpfl train %s --out %s --quiet 2>/dev/null", build_dir(), cfgp, dir);
    assert_int_equal(system(cmd), 0);
    char *sum = slurp("/tmp/dpfl_test_pfs_copies/summary.json");
    assert_non_null(sum);
    cJSON *s = cJSON_Parse(sum);
    const double copies = num(s, "worst_record_copies");
    assert_true(copies >= 2); /* the case under test: replicated records */
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "federated_fdp");
    assert_true(num(f, "record_copies") == copies);
    const double exact = dpfl_gdp_epsilon(sqrt(copies * 1 * 4) / 2.0, 1e-5);
    if (!(num(s, "epsilon") >= exact) || !(num(f, "epsilon") >= exact))
        print_error("epsilon %g, federated f-DP %g: below the exact %g of a record in %g clients\n", num(s, "epsilon"),
                    num(f, "epsilon"), exact, copies);
    assert_true(num(s, "epsilon") >= exact);
    assert_true(num(f, "epsilon") >= exact);
    cJSON_Delete(s);
    free(sum);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pfs_copies"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(helper_model_formula_on_a_hand_example),
        cmocka_unit_test(helpers_persist_across_rounds_a_client_sits_out),
        cmocka_unit_test(clients_train_from_their_helper),
        cmocka_unit_test(sync_counts_follow_p),
        cmocka_unit_test(helper_models_resume_bit_identically),
        cmocka_unit_test(run_report_fdp_equals_dpfl_fdp),
        cmocka_unit_test(fdp_exact_bound_pins_k_and_r_by_value),
        cmocka_unit_test(a_record_in_several_clients_is_charged_in_each),
        cmocka_unit_test(prifedsync_guarantee_is_the_smaller_bound_and_the_budget_checks_it),
        cmocka_unit_test(client_state_cap_is_checked_up_front),
        cmocka_unit_test(client_state_pages_under_the_cap_bit_identically),
        cmocka_unit_test(helper_models_compose_with_client_level_dp),
    };
    return cmocka_run_group_tests_name("prifedsync", tests, NULL, NULL);
}
