/* PrivateFL (Yang et al.): each client's own input transform in front of the shared model. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/run.h"

#include <stdlib.h>
#include <unistd.h>

/* Every update the server receives, copied. */
typedef struct {
    int n;
    size_t T;
    int nonzero_prefix; /* updates whose transform slice is not all zero */
    int nonzero_rest;   /* updates that carry something for the shared model */
} seen;

static void observe(void *ctx, int32_t round, int32_t client, const float *update, size_t P)
{
    (void)round, (void)client;
    seen *o = ctx;
    o->n++;
    int pre = 0, rest = 0;
    for (size_t j = 0; j < P; j++) {
        if (j < o->T) pre |= update[j] != 0.0f;
        else rest |= update[j] != 0.0f;
    }
    o->nonzero_prefix += pre;
    o->nonzero_rest += rest;
}

static int is_identity(const float *t, size_t T, size_t channels)
{
    for (size_t i = 0; i < T; i++)
        if (t[i] != (i < channels ? 1.0f : 0.0f)) return 0;
    return 1;
}

/* Three clients, two plain rounds: the transform slice of every update the server receives is zero while the rest
 * is not; each client's own transform has moved away from the identity and is kept between rounds (round 2 starts
 * from it: its state after round 2 differs from after round 1 but round 1's is not reset); the global model's
 * slice stays the identity; the per-client state counts the transform. */
static void transform_never_leaves_the_client(void **state)
{
    (void)state;
    const int32_t sizes[] = {40, 50, 60};
    fl_fixture f;
    fl_fixture_make(&f, "transform:logreg", sizes, 3);
    fixture_set(&f.cfg, "fl.local_steps", "3");
    fixture_set(&f.cfg, "fl.lr", "0.5");
    fixture_set(&f.cfg, "fl.sampling", "all");
    const size_t P = f.model.nparam, T = f.model.layers[0].nparam;
    assert_int_equal(T, 1 + 10);
    float *global = malloc(P * sizeof(float)), *after1 = malloc(3 * T * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 9);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    assert_true(dpfl_clients_keep_state(dpfl_sim_clients(sim)));
    assert_int_equal(dpfl_clients_state_floats(dpfl_sim_clients(sim)), T); /* plain SGD, no helper: the transform */
    seen o = {0, T, 0, 0};
    dpfl_server_set_update_observer(dpfl_sim_server(sim), observe, &o);
    dpfl_round_metrics m;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    for (int32_t k = 0; k < 3; k++) {
        const float *st;
        dpfl_clients_state(dpfl_sim_clients(sim), k, &st);
        assert_non_null(st);
        assert_false(is_identity(st, T, 1));
        memcpy(after1 + k * T, st, T * sizeof(float));
    }
    assert_int_equal(dpfl_sim_round(sim, 2, &m, &err), DPFL_OK);
    assert_int_equal(o.n, 6);
    assert_int_equal(o.nonzero_prefix, 0);
    assert_int_equal(o.nonzero_rest, 6);
    assert_true(is_identity(global, T, 1));
    for (int32_t k = 0; k < 3; k++) {
        const float *st;
        dpfl_clients_state(dpfl_sim_clients(sim), k, &st);
        double moved = 0, from_id = 0;
        for (size_t i = 0; i < T; i++) {
            moved += fabs((double)st[i] - after1[k * T + i]);
            from_id += fabs((double)after1[k * T + i] - (i < 1 ? 1.0 : 0.0));
        }
        assert_true(moved > 0 && from_id > 0);
    }
    dpfl_sim_free(sim);
    free(global);
    free(after1);
    fl_fixture_free(&f);
}

/* Record-level DP-SGD (LDP) clips the whole extended model: one local step on a fixed batch of one record with a
 * tiny clip, noise removed through the test-only divisor, moves transform and model together by at most lr C;
 * the transform's share of that move is not zero (it is inside the clipped gradient, not beside it). */
static void ldp_clipping_covers_the_transform(void **state)
{
    (void)state;
    const int32_t sizes[] = {30};
    fl_fixture f;
    fl_fixture_make(&f, "transform:logreg", sizes, 1);
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "1");
    fixture_set(&f.cfg, "record_dp.clip", "0.001");
    fixture_set(&f.cfg, "record_dp.sampler", "fixed");
    fixture_set(&f.cfg, "fl.batch", "1");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "fl.lr", "1");
    fixture_set(&f.cfg, "fl.momentum", "0");
    const size_t P = f.model.nparam, T = f.model.layers[0].nparam;
    float *global = malloc(P * sizeof(float)), *start = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 4);
    dpfl_model_init(&f.model, global, &root);
    memcpy(start, global, P * sizeof(float));
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), 1.0);
    dpfl_round_metrics m;
    dpfl_test_noise_divisor = 1e12;
    dpfl_status st = dpfl_sim_round(sim, 1, &m, &err);
    dpfl_test_noise_divisor = 1.0;
    assert_int_equal(st, DPFL_OK);
    const float *tr;
    dpfl_clients_state(dpfl_sim_clients(sim), 0, &tr);
    double ss_tr = 0, ss_model = 0;
    for (size_t i = 0; i < T; i++) ss_tr += pow((double)tr[i] - start[i], 2);
    for (size_t i = T; i < P; i++) ss_model += pow((double)global[i] - start[i], 2);
    /* the gradients here are far larger than 0.001: the clip binds */
    assert_true(sqrt(ss_tr + ss_model) <= 0.001 * (1 + 1e-4));
    assert_true(sqrt(ss_tr + ss_model) > 0.0009);
    assert_true(ss_tr > 0);
    dpfl_sim_free(sim);
    free(global);
    free(start);
    fl_fixture_free(&f);
}

/* 2 rounds + resume to 4 == 4 rounds straight with the transforms (the clients' own state in the checkpoint). */
static void transforms_resume_bit_identically(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_pfl.ini";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pflA /tmp/dpfl_test_pflB"), 0);
    FILE *fp = fopen(cfgp, "w");
    assert_non_null(fp);
    fprintf(fp, "[data]\ndataset = synthetic\npartition = classes\nclients = 6\nclasses_per_client = 2\n"
                "test_per_client = 20\n\n[model]\narch = mlp:20-16-10\ntransform = affine\n\n"
                "[fl]\nrounds = 4\nsampling = poisson\nclient_rate = 0.5\nlocal_steps = 3\nlr = 0.1\n\n"
                "[record_dp]\nenabled = yes\nclip = 1\nnoise = 1\ndelta = 1e-5\n\n[run]\nseed = 5\nthreads = 2\n"
                "eval_every = 1\n");
    fclose(fp);
    dpfl_config cfg;
    dpfl_error err;
    dpfl_config_defaults(&cfg);
    int st = dpfl_config_load(&cfg, cfgp, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, DPFL_OK);
    dpfl_run_options straight = {.out_dir = "/tmp/dpfl_test_pflB", .quiet = 1};
    st = dpfl_run(&cfg, &straight, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, DPFL_OK);
    cfg.fl.rounds = 2;
    dpfl_run_options first = {.out_dir = "/tmp/dpfl_test_pflA", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &first, &err), DPFL_OK);
    cfg.fl.rounds = 4;
    dpfl_run_options resume = {.out_dir = "/tmp/dpfl_test_pflA", .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    fixture_checkpoints_match("/tmp/dpfl_test_pflA", "/tmp/dpfl_test_pflB");
    char *ma, *mb;
    size_t la, lb;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_pflA/diagnostics.jsonl", &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_pflB/diagnostics.jsonl", &mb, &lb, &err), DPFL_OK);
    assert_non_null(strstr(mb, "personal_accuracy_mean")); /* each client's transform + the global model */
    assert_non_null(strstr(mb, "emd_mean"));               /* over the losses of all sessions: resumed equal */
    const char *ea = strstr(ma + la - 400 > ma ? ma + la - 400 : ma, "emd_mean"), *eb = strstr(mb + lb - 400 > mb ? mb + lb - 400 : mb, "emd_mean");
    assert_non_null(ea);
    assert_non_null(eb);
    assert_int_equal(strncmp(ea, eb, 30), 0);
    free(ma);
    free(mb);
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_pflB/summary.json", &ma, &la, &err), DPFL_OK);
    assert_non_null(strstr(ma, "\"emd_mean\""));
    free(ma);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_pflA /tmp/dpfl_test_pflB"), 0);
}

/* Wasserstein-1 on hand-computed distributions, and the pairwise mean and spread. */
static void emd_on_hand_computed_distributions(void **state)
{
    (void)state;
    double a[] = {0, 1}, b[] = {1, 0}, c[] = {0}, d[] = {1}, e[] = {2, 0}, f[] = {3, 0, 2, 1}, g[] = {1.5};
    assert_close(dpfl_wasserstein1(a, 2, b, 2), 0.0, 1e-15);
    assert_close(dpfl_wasserstein1(c, 1, d, 1), 1.0, 1e-15);
    assert_close(dpfl_wasserstein1(e, 2, d, 1), 1.0, 1e-15); /* 0.5 on [0, 1) and 0.5 on [1, 2) */
    assert_close(dpfl_wasserstein1(f, 4, g, 1), 1.0, 1e-15); /* mean |x - 1.5| */
    assert_close(dpfl_wasserstein1(d, 1, f, 4), 1.0, 1e-15); /* mean |x - 1| = (1 + 0 + 1 + 2) / 4 */
    assert_true(isnan(dpfl_wasserstein1(a, 2, b, 0)));
    /* three clients {0}, {1}, {3}: distances 1, 3, 2 -> mean 2, std sqrt(2/3); an empty client is skipped */
    double s0[] = {0}, s1[] = {1}, s2[] = {3};
    double *samples[] = {s0, s1, NULL, s2};
    size_t counts[] = {1, 1, 0, 1};
    double mean, std;
    dpfl_emd_pairwise(samples, counts, 4, &mean, &std);
    assert_close(mean, 2.0, 1e-15);
    assert_close(std, sqrt(2.0 / 3.0), 1e-12);
    dpfl_emd_pairwise(samples, counts, 1, &mean, &std);
    assert_true(isnan(mean));
}

/* Client-level DP with per-step clipping keeps the shared model within S of the global model after every step but
 * leaves the client's own transform alone: the updates (without their zero transform slice) stay within S while
 * some transform moves further than S from the identity. */
static void per_step_clipping_leaves_the_transform_alone(void **state)
{
    (void)state;
    const int32_t sizes[] = {40, 50, 60};
    fl_fixture f;
    fl_fixture_make(&f, "transform:logreg", sizes, 3);
    fixture_set(&f.cfg, "fl.local_steps", "5");
    fixture_set(&f.cfg, "fl.lr", "0.5");
    fixture_set(&f.cfg, "fl.sampling", "all");
    fixture_set(&f.cfg, "client_dp.enabled", "yes");
    fixture_set(&f.cfg, "client_dp.clip_strategy", "per-step");
    fixture_set(&f.cfg, "client_dp.clip", "0.01");
    fixture_set(&f.cfg, "client_dp.noise", "1");
    const size_t P = f.model.nparam, T = f.model.layers[0].nparam;
    float *global = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 2);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    assert_int_equal(dpfl_server_set_noise(dpfl_sim_server(sim), 1, 1.0, &err), DPFL_OK);
    seen o = {0, T, 0, 0};
    dpfl_server_set_update_observer(dpfl_sim_server(sim), observe, &o);
    dpfl_round_metrics m;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    assert_int_equal(o.nonzero_prefix, 0);
    double far = 0;
    for (int32_t k = 0; k < 3; k++) {
        const float *st;
        dpfl_clients_state(dpfl_sim_clients(sim), k, &st);
        double d = 0;
        for (size_t i = 0; i < T; i++) d += pow((double)st[i] - (i < 1 ? 1.0 : 0.0), 2);
        far = fmax(far, sqrt(d));
    }
    assert_true(far > 0.02); /* twice S: the projection did not pull it back */
    dpfl_sim_free(sim);
    free(global);
    fl_fixture_free(&f);
}

/* The Table 1 ablation: transform = sigmoid | tanh | relu puts that function after the affine transform (still the
 * client's own first layer, identity at the start); a bad function name in a spec is refused with the syntax. */
static void transform_functions(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    strcpy(c.model.arch, "mlp:784-100-10");
    const char *names[] = {"sigmoid", "tanh", "relu"};
    const dpfl_layer_kind kinds[] = {DPFL_LAYER_SIGMOID, DPFL_LAYER_TANH, DPFL_LAYER_RELU};
    dpfl_error err;
    for (int i = 0; i < 3; i++) {
        fixture_set(&c, "model.transform", names[i]);
        char spec[256];
        dpfl_config_model_spec(&c, spec, sizeof spec);
        dpfl_model m;
        assert_int_equal(dpfl_model_create(spec, 1, 28, 28, 10, &m, &err), DPFL_OK);
        assert_int_equal(m.layers[0].kind, DPFL_LAYER_AFFINE);
        assert_int_equal(m.layers[1].kind, kinds[i]);
        assert_int_equal(m.nparam, 1 + 784 + 784 * 100 + 100 + 100 * 10 + 10);
        dpfl_model_free(&m);
    }
    dpfl_model m;
    assert_int_equal(dpfl_model_create("transform-cp-softmax:logreg", 1, 28, 28, 10, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "-sigmoid|-tanh|-relu"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transform_never_leaves_the_client),
        cmocka_unit_test(ldp_clipping_covers_the_transform),
        cmocka_unit_test(transforms_resume_bit_identically),
        cmocka_unit_test(emd_on_hand_computed_distributions),
        cmocka_unit_test(per_step_clipping_leaves_the_transform_alone),
        cmocka_unit_test(transform_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
