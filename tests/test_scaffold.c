/* DP-SCAFFOLD (Noble, Bellet, Dieuleveut 2022; SCAFFOLD, Karimireddy et al. 2020), option II, under record-level
 * DP: the client's control variate is post-processing of the update it sends (src/fl/scaffold.c), so the ledger's
 * DP-SGD charge covers it; the combinations it is not valid for are refused. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/run.h"
#include "dpfl/transport.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K = 4 };

/* The server's reconstruction from what it receives: c = mean of its copies of the c_i at each round's start (what
 * the server's own c equals, to float rounding: server_variate_is_the_mean_of_the_clients), and for each arrived
 * update u of client i, c_i <- c_i - c - u / (steps_i lr). */
typedef struct {
    size_t P;
    float *ci[K], *c;
    int32_t round;
    const int64_t *steps;
    double lr;
    int64_t updates;
} server_view;

static void begin_round(server_view *v)
{
    memset(v->c, 0, v->P * sizeof(float));
    for (int k = 0; k < K; k++)
        for (size_t j = 0; j < v->P; j++) v->c[j] += v->ci[k][j];
    for (size_t j = 0; j < v->P; j++) v->c[j] *= (float)(1.0 / K);
}

static void observe(void *ctx, int32_t round, int32_t client, const float *u, size_t P)
{
    server_view *v = ctx;
    if (round != v->round) {
        v->round = round;
        begin_round(v);
    }
    const float inv = (float)(1.0 / ((double)v->steps[client] * v->lr));
    for (size_t j = 0; j < P; j++) v->ci[client][j] = v->ci[client][j] - v->c[j] - u[j] * inv;
    v->updates++;
}

static double run_rounds(fl_fixture *f, float *g, const char *scaffold, int rounds, server_view *view,
                         const float **variates, dpfl_sim **out, const char *per_round)
{
    static const int32_t sizes[K] = {30, 40, 50, 60};
    fl_fixture_make(f, "mlp:10-8-3", sizes, K);
    fixture_set(&f->cfg, "fl.scaffold", scaffold);
    fixture_set(&f->cfg, "record_dp.enabled", "yes");
    fixture_set(&f->cfg, "record_dp.noise", "1.2");
    fixture_set(&f->cfg, "record_dp.clip", "1");
    fixture_set(&f->cfg, "fl.batch", "10");
    fixture_set(&f->cfg, "fl.local_epochs", "1"); /* ceil(n / 10) steps: 3, 4, 5 and 6 */
    fixture_set(&f->cfg, "fl.lr", "0.2");
    fixture_set(&f->cfg, "run.threads", "1");
    if (per_round) { /* some clients sit rounds out */
        fixture_set(&f->cfg, "fl.sampling", "fixed");
        fixture_set(&f->cfg, "fl.clients_per_round", per_round);
    }
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&f->cfg, &err), DPFL_OK);
    const size_t P = f->model.nparam;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 9);
    dpfl_model_init(&f->model, g, &root);
    (void)P;
    dpfl_sim *sim;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, g, &sim, &err), DPFL_OK);
    if (view) dpfl_server_set_update_observer(dpfl_sim_server(sim), observe, view);
    for (int32_t r = 1; r <= rounds; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
    }
    dpfl_record_report rep;
    assert_int_equal(dpfl_sim_epsilon(sim, &rep, NULL, NULL, &err), DPFL_OK);
    if (variates) {
        const size_t floats = dpfl_clients_state_floats(dpfl_sim_clients(sim));
        assert_int_equal(floats, f->model.nparam); /* plain SGD, nothing personal: the state is the variate alone */
        for (int k = 0; k < K; k++) { /* NULL: client k never trained (c_i = 0) */
            const float *s;
            assert_true(dpfl_clients_state(dpfl_sim_clients(sim), k, &s) > 0 || per_round);
            variates[k] = s;
        }
    }
    *out = sim;
    return rep.epsilon;
}

/* Every client's c_i after 4 rounds is what the server computes from the updates it received (and the public lr
 * and step counts): the variate is a function of the release, nothing beyond it.  Fails if a client's variate used
 * anything else -- its raw gradients, its un-noised model, another scale.  The record-level epsilon and steps
 * equal the same run's without SCAFFOLD: the DP-SGD charge covers it, with no extra event. */
static void variate_is_post_processing_of_the_sent_update(void **state)
{
    (void)state;
    const size_t P = 10 * 8 + 8 + 8 * 3 + 3;
    const int64_t steps[K] = {3, 4, 5, 6};
    server_view v = {.P = P, .steps = steps, .lr = 0.2};
    for (int k = 0; k < K; k++) v.ci[k] = calloc(P, sizeof(float));
    v.c = calloc(P, sizeof(float));
    const float *variates[K];
    dpfl_sim *sim, *plain;
    fl_fixture fa, fb;
    float *ga = malloc(P * sizeof *ga), *gb = malloc(P * sizeof *gb);
    const double eps = run_rounds(&fa, ga, "yes", 4, &v, variates, &sim, NULL);
    const double eps_plain = run_rounds(&fb, gb, "no", 4, NULL, NULL, &plain, NULL);
    assert_int_equal(fa.model.nparam, P);
    assert_int_equal(v.updates, 4 * K);
    double largest = 0;
    for (int k = 0; k < K; k++)
        for (size_t j = 0; j < P; j++) {
            if (fabsf(variates[k][j] - v.ci[k][j]) > 1e-5f * (1.0f + fabsf(v.ci[k][j]))) {
                print_error("client %d coordinate %zu: variate %g, the server's reconstruction %g\n", k, j,
                            variates[k][j], v.ci[k][j]);
                fail();
            }
            largest = fmax(largest, fabs(variates[k][j]));
        }
    assert_true(largest > 1e-3); /* the variates moved */
    assert_true(eps > 0 && eps == eps_plain);
    const dpfl_ledger *a = dpfl_server_ledger(dpfl_sim_server(sim)), *b = dpfl_server_ledger(dpfl_sim_server(plain));
    for (int k = 0; k < K; k++) assert_true(a->record_steps[k] == b->record_steps[k] && a->record_steps[k] > 0);
    assert_int_equal(a->nclient_events, 0);
    /* the corrected steps trained another model than plain DP-SGD did (the sims step ga and gb in place) */
    assert_true(memcmp(ga, gb, P * sizeof(float)) != 0);
    dpfl_sim_free(sim);
    dpfl_sim_free(plain);
    fl_fixture_free(&fa);
    fl_fixture_free(&fb);
    free(ga);
    free(gb);
    for (int k = 0; k < K; k++) free(v.ci[k]);
    free(v.c);
}

/* The server's c is its own state, c += (1/N) sum of the dc_i it forms from the updates it receives; with every c_i
 * starting at 0 it stays the mean of all N clients' c_i, to float rounding, whether every client trains every round
 * or 2 of 4 do (clients that never trained count as c_i = 0).  Fails if c is not updated, updated with a wrong sign
 * or scale, or from another update than the one received. */
static void server_variate_is_the_mean_of_the_clients(void **state)
{
    (void)state;
    const char *per_round[2] = {NULL, "2"};
    for (int c = 0; c < 2; c++) {
        fl_fixture f;
        dpfl_sim *sim;
        const float *variates[K];
        float *g = malloc((10 * 8 + 8 + 8 * 3 + 3) * sizeof *g);
        run_rounds(&f, g, "yes", 5, NULL, variates, &sim, per_round[c]);
        const size_t P = f.model.nparam;
        const float *cbar = dpfl_server_control(dpfl_sim_server(sim));
        assert_non_null(cbar);
        double largest = 0;
        for (size_t j = 0; j < P; j++) {
            double mean = 0;
            for (int k = 0; k < K; k++) mean += variates[k] ? variates[k][j] : 0.0;
            mean /= K;
            if (fabs(cbar[j] - mean) > 1e-5 * (1.0 + fabs(mean))) {
                print_error("%s: coordinate %zu: the server's c %g, the clients' mean %g\n",
                            per_round[c] ? "2 of 4 a round" : "every client", j, cbar[j], mean);
                fail();
            }
            largest = fmax(largest, fabs(mean));
        }
        assert_true(largest > 1e-3); /* the variates moved */
        dpfl_sim_free(sim);
        fl_fixture_free(&f);
        free(g);
    }
}

/* One-line refusals: client-level DP (the server's c from raw updates), an optimizer other than plain SGD, helper
 * models, e2e.  (A deployed client trains with the c the server sends: tests/test_deploy.c, tests/mpi.sh.) */
static void invalid_combinations_are_refused(void **state)
{
    (void)state;
    struct {
        const char *key, *value, *want;
    } bad[] = {
        {"client_dp.enabled", "yes", "client_dp"},
        {"fl.optimizer", "adam", "plain sgd"},
        {"fl.momentum", "0.9", "plain sgd"},
        {"fl.personalization", "helper", "helper"},
        {"record_dp.e2e", "yes", "e2e"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dpfl_config c;
        dpfl_config_defaults(&c);
        fixture_set(&c, "fl.scaffold", "yes");
        fixture_set(&c, "record_dp.enabled", "yes");
        fixture_set(&c, "record_dp.noise", "1");
        if (!strcmp(bad[i].key, "client_dp.enabled")) fixture_set(&c, "client_dp.noise", "1");
        dpfl_error err;
        assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
        fixture_set(&c, bad[i].key, bad[i].value);
        if (dpfl_config_validate(&c, &err) != DPFL_EINVAL || !strstr(err.msg, "fl.scaffold") ||
            !strstr(err.msg, bad[i].want)) {
            print_error("%s = %s: got '%s'\n", bad[i].key, bad[i].value, err.msg);
            fail();
        }
    }
}

/* The checkpoint holds the server's c (server state) and the clients' c_i (client state): a run stopped after round 2
 * and resumed equals the whole run (checkpoint bytes, c included, model, epsilon); clients sit rounds out (Poisson
 * sampling at 0.5), so a c recomputed or restarted at 0 on a resume would differ. */
static int stop_at_2(void *ctx, const dpfl_run_round *r)
{
    (void)ctx;
    return r->round == 2;
}

static void run_to(const char *out, int mode)
{
    const char *ini = "[data]\ndataset = synthetic\npartition = shards\nclients = 6\n\n[model]\narch = mlp:20-12-10\n\n"
                      "[fl]\nrounds = 5\nsampling = poisson\nclient_rate = 0.5\nlocal_steps = 3\nbatch = 20\nlr = 0.1\nscaffold = yes\n\n"
                      "[record_dp]\nenabled = yes\nnoise = 1.5\nclip = 1\n\n[run]\nseed = 4\nthreads = 1\n";
    FILE *fp = fopen("/tmp/dpfl_test_scaffold.ini", "w");
    assert_non_null(fp);
    fputs(ini, fp);
    fclose(fp);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, "/tmp/dpfl_test_scaffold.ini", &err), DPFL_OK);
    dpfl_run_options o = {.out_dir = out, .quiet = 1, .force = mode != 2, .resume = mode == 2,
                          .on_round = mode == 1 ? stop_at_2 : NULL};
    if (dpfl_run(&cfg, &o, &err) != DPFL_OK) {
        print_error("%s: %s\n", out, err.msg);
        fail();
    }
    remove("/tmp/dpfl_test_scaffold.ini");
}

static void a_resumed_run_is_the_whole_run(void **state)
{
    (void)state;
    run_to("/tmp/dpfl_test_scaffold_whole", 0);
    run_to("/tmp/dpfl_test_scaffold_parts", 1);
    run_to("/tmp/dpfl_test_scaffold_parts", 2);
    fixture_checkpoints_match("/tmp/dpfl_test_scaffold_whole", "/tmp/dpfl_test_scaffold_parts");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(variate_is_post_processing_of_the_sent_update),
        cmocka_unit_test(server_variate_is_the_mean_of_the_clients),
        cmocka_unit_test(invalid_combinations_are_refused),
        cmocka_unit_test(a_resumed_run_is_the_whole_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
