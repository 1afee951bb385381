/* Record-level DP inside the round loop: the mechanism, the ledger and the run driver's crash safety. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/fl.h"
#include "dpfl/privacy.h"
#include "run/run_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    dpfl_dataset train, test;
    dpfl_model model;
    dpfl_config cfg;
} fixture;

static void fixture_make(fixture *f, int32_t n)
{
    dpfl_error err;
    fixture_split_synthetic(n, 100, 10, 3, 21, &f->train, &f->test);
    assert_int_equal(dpfl_model_create("mlp:10-8-3", 1, 1, 10, 3, &f->model, &err), DPFL_OK);
    dpfl_config_defaults(&f->cfg);
    fixture_set(&f->cfg, "data.dataset", "synthetic");
    f->cfg.run.threads = 2;
}

static void fixture_free(fixture *f)
{
    dpfl_model_free(&f->model);
    dpfl_dataset_free(&f->train);
    dpfl_dataset_free(&f->test);
}

static void train_rounds(fixture *f, const dpfl_partition *part, int rounds, float *out, dpfl_ledger *ledger)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 8);
    dpfl_model_init(&f->model, out, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, part, &root, out, &sim, &err), DPFL_OK);
    for (int r = 1; r <= rounds; r++) {
        const int32_t *sampled;
        int32_t m = dpfl_sim_sample(sim, r, &sampled);
        int64_t steps[16];
        for (int32_t i = 0; i < m; i++) steps[i] = dpfl_clients_steps(dpfl_sim_clients(sim), sampled[i]);
        dpfl_round_metrics met;
        assert_int_equal(dpfl_sim_train(sim, r, &met, &err), DPFL_OK);
        if (ledger) dpfl_ledger_charge(ledger, sampled, m, steps);
    }
    dpfl_sim_free(sim);
}

/* z = 0 and C = inf: DP-SGD is plain full-batch gradient descent (both samplers with B = n). */
static void dpsgd_without_noise_or_clipping_is_nonprivate_training(void **state)
{
    (void)state;
    const char *samplers[2] = {"poisson", "fixed"};
    for (int s = 0; s < 2; s++) {
        fixture f;
        fixture_make(&f, 120);
        int32_t sizes[3] = {30, 40, 50};
        dpfl_partition part = fixture_contiguous(sizes, 3);
        f.cfg.data.clients = 3;
        f.cfg.fl.local_steps = 3;
        f.cfg.fl.batch = 1000; /* B >= n_k: every record in every step */
        f.cfg.fl.lr = 0.2;
        size_t P = f.model.nparam;
        float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b);
        train_rounds(&f, &part, 2, a, NULL);
        f.cfg.record_dp.enabled = 1;
        fixture_set(&f.cfg, "record_dp.sampler", samplers[s]);
        f.cfg.record_dp.clip = INFINITY;
        f.cfg.record_dp.noise = 0.0;
        train_rounds(&f, &part, 2, b, NULL);
        double maxd = 0;
        for (size_t i = 0; i < P; i++) { /* a NaN parameter must fail this (fmax would skip it) */
            double d = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-3);
            if (!(d <= maxd)) maxd = d;
        }
        assert_true(maxd < 1e-4);
        /* with noise the result must differ */
        f.cfg.record_dp.noise = 1.0;
        f.cfg.record_dp.clip = 1.0;
        train_rounds(&f, &part, 2, b, NULL);
        maxd = 0;
        for (size_t i = 0; i < P; i++) maxd = fmax(maxd, fabs((double)a[i] - b[i]));
        assert_true(maxd > 1e-3);
        dpfl_partition_free(&part);
        free(a);
        free(b);
        fixture_free(&f);
    }
}

/* Seeded DP runs are bit-identical for 1, 2 and 3 threads: record-level DP-SGD (Poisson batches) and server noise,
 * with a model of more than one noise chunk (85,203 parameters), both with one client per round (the DP-SGD noise
 * then uses every thread) and with several (one thread each). */
static void dp_runs_are_identical_for_any_thread_count(void **state)
{
    (void)state;
    for (int one = 0; one < 2; one++) {
        fixture f;
        fixture_make(&f, 240);
        dpfl_error err;
        dpfl_model_free(&f.model);
        assert_int_equal(dpfl_model_create("mlp:10-400-200-3", 1, 1, 10, 3, &f.model, &err), DPFL_OK);
        assert_true(f.model.nparam > DPFL_NOISE_CHUNK);
        int32_t sizes[4] = {60, 50, 70, 60};
        dpfl_partition part = fixture_contiguous(sizes, 4);
        f.cfg.data.clients = 4;
        fixture_set(&f.cfg, "fl.sampling", one ? "fixed" : "poisson");
        f.cfg.fl.clients_per_round = 1;
        f.cfg.fl.client_rate = 0.7;
        f.cfg.fl.local_steps = 2;
        f.cfg.fl.batch = 16;
        f.cfg.record_dp.enabled = 1;
        f.cfg.record_dp.clip = 1.0;
        f.cfg.record_dp.noise = 0.8;
        f.cfg.client_dp.enabled = 1;
        f.cfg.client_dp.clip = 0.5;
        f.cfg.client_dp.noise = 0.7;
        const size_t P = f.model.nparam;
        float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b);
        f.cfg.run.threads = 1;
        train_rounds(&f, &part, 3, a, NULL);
        for (int t = 2; t <= 3; t++) {
            f.cfg.run.threads = t;
            train_rounds(&f, &part, 3, b, NULL);
            assert_memory_equal(a, b, P * sizeof *a);
        }
        dpfl_partition_free(&part);
        free(a);
        free(b);
        fixture_free(&f);
    }
}

/* Secure mode: with z = 0 the grid rounding alone changes training by a hair (grid = C / (1000 sqrt(P)));
 * with z > 0 the exact discrete noise moves the model; and its accounting uses integer orders only. */
static void secure_mode_discrete_noise(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 120);
    int32_t sizes[3] = {30, 40, 50};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    f.cfg.data.clients = 3;
    f.cfg.fl.local_steps = 3;
    f.cfg.fl.batch = 1000;
    f.cfg.fl.lr = 0.2;
    f.cfg.record_dp.enabled = 1;
    f.cfg.record_dp.sampler = DPFL_BATCH_FIXED;
    f.cfg.record_dp.clip = 10.0;
    f.cfg.record_dp.noise = 0.0;
    size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b);
    train_rounds(&f, &part, 2, a, NULL);
    f.cfg.record_dp.secure_mode = 1;
    train_rounds(&f, &part, 2, b, NULL);
    double maxd = 0, g = 2.0 * 10.0 / (1000.0 * sqrt((double)P));
    for (size_t i = 0; i < P; i++) maxd = fmax(maxd, fabs((double)a[i] - b[i]));
    assert_true(maxd > 0.0);                  /* the grid is really used */
    assert_true(maxd < 2 * 3 * 0.2 * g * 2);  /* at most half a grid step per step, times lr, steps, rounds */
    f.cfg.record_dp.noise = 1.0;
    train_rounds(&f, &part, 2, b, NULL);
    maxd = 0;
    for (size_t i = 0; i < P; i++) maxd = fmax(maxd, fabs((double)a[i] - b[i]));
    assert_true(maxd > 1e-3);
    /* integer orders: at least the refined real-order answer */
    dpfl_ledger l;
    assert_int_equal(dpfl_ledger_init(&l, 3, NULL), DPFL_OK);
    int32_t who[3] = {0, 1, 2};
    int64_t steps[3] = {50, 50, 50};
    dpfl_ledger_charge(&l, who, 3, steps);
    dpfl_record_accounting ri = {1.0, 1, 10, 1e-5, 0, 1}, rr = {1.0, 1, 10, 1e-5, 0, 0};
    dpfl_record_report repi, repr;
    dpfl_error err;
    assert_int_equal(dpfl_ledger_record_epsilon(&l, &part, &ri, &repi, NULL, &err), DPFL_OK);
    assert_int_equal(dpfl_ledger_record_epsilon(&l, &part, &rr, &repr, NULL, &err), DPFL_OK);
    assert_true(repi.epsilon >= repr.epsilon);
    assert_true(repi.order == floor(repi.order));
    dpfl_ledger_free(&l);
    dpfl_partition_free(&part);
    free(a);
    free(b);
    fixture_free(&f);
}

/* Clients of different sizes: the ledger charges each its own steps, the accountant sees q_k = B/n_k, and the
 * reported worst case is the max over the clients' exact events. */
static void ledger_charges_the_right_q_and_steps(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 300);
    int32_t sizes[3] = {50, 100, 150};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    f.cfg.data.clients = 3;
    f.cfg.fl.local_epochs = 1;
    f.cfg.fl.batch = 10;
    f.cfg.record_dp.enabled = 1;
    f.cfg.record_dp.noise = 1.1;
    f.cfg.record_dp.clip = 1.0;
    size_t P = f.model.nparam;
    float *w = malloc(P * sizeof *w);
    dpfl_ledger l;
    assert_int_equal(dpfl_ledger_init(&l, 3, NULL), DPFL_OK);
    train_rounds(&f, &part, 4, w, &l);
    assert_int_equal(l.rounds, 4);
    assert_int_equal(l.record_steps[0], 4 * 5);
    assert_int_equal(l.record_steps[1], 4 * 10);
    assert_int_equal(l.record_steps[2], 4 * 15);
    dpfl_record_accounting ra = {1.1, 1, 10, 1e-5, 0, 0};
    dpfl_record_report rep;
    double per[3];
    dpfl_error err;
    assert_int_equal(dpfl_ledger_record_epsilon(&l, &part, &ra, &rep, per, &err), DPFL_OK);
    double want = 0;
    int worst = -1;
    for (int k = 0; k < 3; k++) {
        dpfl_event ev = dpfl_event_poisson(10.0 / sizes[k], 1.1, l.record_steps[k]);
        dpfl_guarantee g;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        assert_close(per[k], g.epsilon, 1e-12);
        if (g.epsilon > want) {
            want = g.epsilon;
            worst = k;
        }
    }
    assert_close(rep.epsilon, want, 1e-12);
    assert_int_equal(rep.worst_client, worst);
    assert_close(rep.worst_q, 10.0 / sizes[worst], 1e-12);
    assert_int_equal(rep.worst_steps, l.record_steps[worst]);
    dpfl_ledger_free(&l);
    dpfl_partition_free(&part);
    free(w);
    fixture_free(&f);
}

/* Calibration: the calibrated z keeps every client within the target over all rounds, and 1% less noise
 * would not. */
static void calibration_covers_every_client(void **state)
{
    (void)state;
    int32_t sizes[3] = {50, 100, 150};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    cfg.fl.local_epochs = 1;
    cfg.fl.batch = 10;
    cfg.record_dp.enabled = 1;
    dpfl_error err;
    double z;
    assert_int_equal(dpfl_record_calibrate(&part, &cfg, 20, 3.0, &z, &err), DPFL_OK);
    double worst = 0, worst_less = 0;
    for (int k = 0; k < 3; k++) {
        int64_t steps = 20 * ((sizes[k] + 9) / 10);
        dpfl_event ev = dpfl_event_poisson(10.0 / sizes[k], z, steps), ev2 = dpfl_event_poisson(10.0 / sizes[k], 0.99 * z, steps);
        dpfl_guarantee g, g2;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        assert_int_equal(dpfl_account_epsilon(&ev2, 1, 1e-5, DPFL_ACC_RDP, NULL, &g2, &err), DPFL_OK);
        worst = fmax(worst, g.epsilon);
        worst_less = fmax(worst_less, g2.epsilon);
    }
    assert_true(worst <= 3.0);
    assert_true(worst_less > 3.0);
    dpfl_partition_free(&part);
}

/* ------------------------------------------------------------------------------------------ run driver */
static void write_config(const char *path, int rounds, double target)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\npartition = iid\nclients = 20\n\n[model]\narch = mlp:20-32-10\n\n"
               "[fl]\nrounds = %d\nsampling = poisson\nclient_rate = 0.5\nlocal_epochs = 1\nbatch = 25\nlr = 0.1\n\n"
               "[record_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.2\ntarget_epsilon = %g\ndelta = 1e-5\n\n"
               "[run]\nseed = 5\nthreads = 2\n",
            rounds, target);
    fclose(f);
}

static char *slurp(const char *path)
{
    char *t;
    size_t n;
    if (dpfl_file_read_all(path, &t, &n, NULL)) return NULL;
    return t;
}

static double json_number(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p) return NAN;
    return strtod(p + strlen(pat), NULL);
}

/* A run killed at an arbitrary moment and resumed ends bit-identical to an uninterrupted run: same model,
 * same ledger, same epsilon, one metrics line per round. */
static void killed_run_resumes_without_losing_a_charge(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_resume.ini";
    write_config(cfgp, 40, 0);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runA /tmp/dpfl_test_runB"), 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runA", .quiet = 1};
        _exit(dpfl_run(&cfg, &o, &err) == DPFL_OK ? 0 : 1);
    }
    struct stat sb;
    for (int i = 0; i < 20000 && stat("/tmp/dpfl_test_runA/checkpoint.bin", &sb) != 0; i++) usleep(500);
    usleep(3000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);

    dpfl_run_options resume = {.out_dir = "/tmp/dpfl_test_runA", .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    dpfl_run_options clean = {.out_dir = "/tmp/dpfl_test_runB", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &clean, &err), DPFL_OK);

    size_t la, lb;
    char *ma, *mb;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_runA/model.bin", &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_runB/model.bin", &mb, &lb, &err), DPFL_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(ma, mb, la);
    free(ma);
    free(mb);
    /* the checkpoints hold the ledgers; all but the wall time (and the metrics line, which carries it) agree.
     * Layout: 16 bytes of file header; payload head: rounds, clients, nparam, record z, client z (32 bytes),
     * wall (8), examples, S, event count (24), line length (8); then parameters, ledger, events, line; CRC. */
    fixture_checkpoints_match("/tmp/dpfl_test_runA", "/tmp/dpfl_test_runB");
    char *sa = slurp("/tmp/dpfl_test_runA/summary.json"), *sbj = slurp("/tmp/dpfl_test_runB/summary.json");
    assert_non_null(sa);
    assert_non_null(sbj);
    assert_close(json_number(sa, "epsilon"), json_number(sbj, "epsilon"), 1e-12);
    /* the run directory's config.ini is the config whose hash summary.json reports */
    char *ini = slurp("/tmp/dpfl_test_runA/config.ini"), sha[65];
    assert_non_null(ini);
    dpfl_sha256_hex(ini, strlen(ini), sha);
    assert_non_null(strstr(sa, sha));
    free(ini);
    assert_true(json_number(sa, "epsilon") > 0);
    free(sa);
    free(sbj);
    char *metrics = slurp("/tmp/dpfl_test_runA/metrics.jsonl");
    assert_non_null(metrics);
    int lines = 0, expect = 1;
    for (char *p = metrics; (p = strstr(p, "{\"round\":")); p++) {
        assert_int_equal(atoi(p + 9), expect);
        expect++;
        lines++;
    }
    assert_int_equal(lines, 40);
    /* the DP-SGD metrics: noise std z*C (Poisson: sensitivity C) and a clipping fraction in [0, 1] */
    assert_close(json_number(metrics, "noise_std"), 1.2, 1e-12);
    /* what no epsilon covers is in diagnostics.jsonl, labelled, and nowhere in metrics.jsonl */
    const char *raw[] = {"clip_fraction", "train_loss", "examples", "clients", "wall_seconds"};
    for (int i = 0; i < 5; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\"", raw[i]);
        if (strstr(metrics, key)) {
            print_error("metrics.jsonl carries %s, which no epsilon covers\n", raw[i]);
            fail();
        }
    }
    free(metrics);
    char *diag = slurp("/tmp/dpfl_test_runA/diagnostics.jsonl");
    assert_non_null(diag);
    lines = 0;
    for (char *p = diag; (p = strstr(p, "{\"round\":")); p++) lines++;
    assert_int_equal(lines, 40);
    assert_non_null(strstr(diag, "\"private\":false"));
    double cf = json_number(diag, "clip_fraction");
    assert_true(cf >= 0.0 && cf <= 1.0);
    free(diag);
    unlink(cfgp);
}

/* With a target epsilon, the run stops before the round that would exceed it: the reported epsilon is within
 * the target, and one more round's charge would not have been. */
static void stop_rule_never_releases_over_budget(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_stop.ini";
    write_config(cfgp, 1000, 3.0);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runC"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runC", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *sum = slurp("/tmp/dpfl_test_runC/summary.json");
    assert_non_null(sum);
    double eps = json_number(sum, "epsilon"), rounds = json_number(sum, "rounds");
    double q = json_number(sum, "worst_client_q"), steps = json_number(sum, "worst_client_steps");
    assert_true(strstr(sum, "\"stopped_at_budget\":\ttrue") != NULL);
    assert_true(eps <= 3.0);
    assert_true(rounds > 0 && rounds < 1000);
    /* dpfl account with the summary's values reproduces its epsilon */
    dpfl_event ev = dpfl_event_poisson(q, 1.2, (int64_t)steps);
    dpfl_guarantee g;
    assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_close(g.epsilon, eps, 1e-12);
    /* one more round (a local epoch: n/25 steps) for the worst client would exceed the target */
    ev.count += (int64_t)ceil(json_number(sum, "worst_client_n") / 25.0);
    assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_true(g.epsilon > 3.0);
    free(sum);
    unlink(cfgp);
}

/* A checkpoint resumes only under the settings it ran with (but fl.rounds, run.threads, run.eval_every): the ledger
 * keeps steps, and re-accounting them at another batch or sampler reported 0.90 after 27.86 in an audit.  Refused
 * with one line, the run directory left as it was; then resumed with the run's own settings and more rounds. */
static void a_resume_under_other_settings_is_refused(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_resume_cfg.ini", *dir = "/tmp/dpfl_test_runR";
    write_config(cfgp, 2, 0);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runR"), 0);
    dpfl_run_options o = {.out_dir = dir, .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *before, *after;
    size_t nb, na;
    assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_runR/checkpoint.bin", &before, &nb, &err), DPFL_OK);
    dpfl_run_options resume = {.out_dir = dir, .quiet = 1, .resume = 1};
    const char *changes[] = {"fl.batch=5", "record_dp.sampler=fixed", "record_dp.noise=0.9", "fl.client_rate=0.9"};
    for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
        dpfl_config other = cfg;
        assert_int_equal(dpfl_config_set(&other, changes[i], &err), DPFL_OK);
        other.fl.rounds = 3;
        memset(&err, 0, sizeof err);
        assert_int_equal(dpfl_run(&other, &resume, &err), DPFL_EINVAL);
        if (!strstr(err.msg, "differs from the checkpoint's")) print_error("%s: %s\n", changes[i], err.msg);
        assert_non_null(strstr(err.msg, "differs from the checkpoint's"));
        assert_int_equal(dpfl_file_read_all("/tmp/dpfl_test_runR/checkpoint.bin", &after, &na, &err), DPFL_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(after, before, nb); /* nothing written */
        free(after);
    }
    cfg.fl.rounds = 3;
    cfg.run.threads = 1;
    cfg.run.eval_every = 2;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    free(before);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runR"), 0);
}

/* A resume from a checkpoint older than the run's last released round (one put back by hand) would run those
 * rounds again: a second release of each, while the restored ledger counts them once.  The checkpoint is written
 * before each round's metrics line, so metrics.jsonl past the checkpoint's rounds says so: refused with one line,
 * nothing written (not even config.ini). */
static void a_resume_from_an_older_checkpoint_is_refused(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_older_cfg.ini", *dir = "/tmp/dpfl_test_runO";
    write_config(cfgp, 2, 0);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runO /tmp/dpfl_test_older_ckpt.bin"), 0);
    dpfl_run_options o = {.out_dir = dir, .quiet = 1}, resume = {.out_dir = dir, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    assert_int_equal(system("cp /tmp/dpfl_test_runO/checkpoint.bin /tmp/dpfl_test_older_ckpt.bin"), 0);
    cfg.fl.rounds = 4;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
    assert_int_equal(system("cp /tmp/dpfl_test_older_ckpt.bin /tmp/dpfl_test_runO/checkpoint.bin"), 0);
    const char *files[] = {"/tmp/dpfl_test_runO/metrics.jsonl", "/tmp/dpfl_test_runO/config.ini",
                           "/tmp/dpfl_test_runO/checkpoint.bin", "/tmp/dpfl_test_runO/summary.json"};
    char *before[4], *after;
    size_t nb[4], na;
    for (int i = 0; i < 4; i++) assert_int_equal(dpfl_file_read_all(files[i], &before[i], &nb[i], &err), DPFL_OK);
    cfg.fl.rounds = 5;
    memset(&err, 0, sizeof err);
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_EINVAL);
    if (!strstr(err.msg, "older than the rounds this run released")) print_error("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "metrics.jsonl has round 4 and checkpoint.bin has released 2 rounds"));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dpfl_file_read_all(files[i], &after, &na, &err), DPFL_OK);
        assert_int_equal(na, nb[i]);
        assert_memory_equal(after, before[i], na); /* nothing written */
        free(after);
        free(before[i]);
    }
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runO /tmp/dpfl_test_older_ckpt.bin"), 0);
}

/* The e2e settings of the runs below (Poisson records and clients, zero-out), for dpfl_e2e. */
static dpfl_e2e_params e2e_settings(void)
{
    dpfl_e2e_params pp = {0};
    pp.z = 1.5;
    pp.batch = 25;
    pp.n = 500;
    pp.local_steps = 4;
    pp.client_rate = 0.3;
    pp.rounds = 5;
    pp.client_adjacency = DPFL_ADJ_ZERO_OUT;
    pp.delta = 1e-5;
    return pp;
}

/* The client-level guarantee a training run reports with e2e = yes is the one `dpfl e2e` computes for the same
 * settings (Poisson records and clients, zero-out). */
static void e2e_in_training_matches_dpfl_e2e(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_e2e.ini";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 5\n"
               "sampling = poisson\nclient_rate = 0.3\nlocal_steps = 4\nbatch = 25\n\n[record_dp]\nenabled = yes\n"
               "clip = 1.0\nnoise = 1.5\ndelta = 1e-5\ne2e = yes\n\n[run]\nseed = 3\n");
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runE"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runE", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *sum = slurp("/tmp/dpfl_test_runE/summary.json");
    assert_non_null(sum);
    dpfl_e2e_params pp = e2e_settings();
    dpfl_e2e_result res;
    assert_int_equal(dpfl_e2e(&pp, &res, &err), DPFL_OK);
    assert_close(json_number(sum, "client_noise"), res.client_noise, 1e-12);
    assert_close(json_number(sum, "client_epsilon"), res.client_epsilon, 1e-9);
    free(sum);
    unlink(cfgp);
}

/* e2e with [client_dp] on: the server's noise lowers the client-level bound only where it is a Gaussian release
 * with a sensitivity bound, at the smallest multiplier of the rounds run.  Median clipping (not private) must give
 * the record-level noise's own bound (it gave 0.82 against 127,131 in an audit), and so must distributed DP's Skellam
 * sum (its Gaussian-DP equivalence is not established); a fixed clip's Gaussian lowers it;
 * metrics.jsonl names the e2e number client_epsilon_e2e (one client_epsilon key per line).  (A client noise
 * schedule is refused with e2e.) */
static double e2e_run(const char *client_dp, const char *what)
{
    const char *cfgp = "/tmp/dpfl_test_e2e_srv.ini";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 5\n"
               "sampling = poisson\nclient_rate = 0.3\nlocal_steps = 4\nbatch = 25\n\n[record_dp]\nenabled = yes\n"
               "clip = 1.0\nnoise = 1.5\ndelta = 1e-5\ne2e = yes\n\n[client_dp]\n%s\n[run]\nseed = 3\n", client_dp);
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runE2"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runE2", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *sum = slurp("/tmp/dpfl_test_runE2/summary.json"), *met = slurp("/tmp/dpfl_test_runE2/metrics.jsonl");
    assert_non_null(sum);
    assert_non_null(met);
    const double e = json_number(sum, "client_epsilon_e2e");
    size_t len = strlen(met);
    while (len && met[len - 1] == '\n') met[--len] = 0;
    const char *last = strrchr(met, '\n') ? strrchr(met, '\n') + 1 : met; /* the last round's line */
    const char *k1 = strstr(last, "\"client_epsilon\":");
    if (k1 && strstr(k1 + 1, "\"client_epsilon\":")) print_error("%s: two client_epsilon keys in a metrics line\n", what);
    assert_false(k1 && strstr(k1 + 1, "\"client_epsilon\":"));
    const char *m = strstr(last, "\"client_epsilon_e2e\":");
    assert_non_null(m);
    assert_close(strtod(m + strlen("\"client_epsilon_e2e\":"), NULL), e, 1e-9);
    free(sum);
    free(met);
    unlink(cfgp);
    return e;
}

static void e2e_counts_only_a_gaussian_server_release(void **state)
{
    (void)state;
    dpfl_e2e_params pp = e2e_settings(); /* the record-level noise alone */
    dpfl_e2e_result local;
    dpfl_error err;
    assert_int_equal(dpfl_e2e(&pp, &local, &err), DPFL_OK);
    const double median = e2e_run("enabled = yes\nclip_strategy = median\nnoise = 20\n", "median");
    assert_close(median, local.client_epsilon, 1e-9);
    const double fixed = e2e_run("enabled = yes\nclip = 1.0\nnoise = 20\n", "fixed");
    assert_true(fixed < 0.5 * local.client_epsilon); /* a Gaussian server release does help */
    const double ddp = e2e_run("enabled = yes\nmechanism = ddp\nclip = 1.0\nnoise = 0.5\n", "ddp");
    assert_close(ddp, local.client_epsilon, 1e-9); /* a Skellam sum: not counted as a Gaussian */
}

/* delta >= 1/n promises nothing (publish one record at random: (0, 1/n)-DP) and the accountant answered
 * epsilon = 0 for record_dp.delta = 0.5.  Refused (here 1.5 / n), naming the key, unless [run] allow_large_delta = yes, and then
 * run with a warning kept in summary.json; a delta below 1/n (the customary 1e-5 on MNIST is 0.6 / n) is not warned
 * about. */
static void delta_is_checked_against_the_dataset_size(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_delta.ini";
    const char *deltas[3] = {"1.5e-4", "9e-5", "1e-6"}; /* n = 10,000 records: 1/n = 1e-4 */
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(cfgp, "w");
        assert_non_null(f);
        fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 1\n"
                   "local_steps = 1\nbatch = 10\n\n[record_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.0\ndelta = %s\n\n"
                   "[run]\nseed = 3\n%s",
                deltas[i < 3 ? i : 0], i == 3 ? "allow_large_delta = yes\n" : "");
        fclose(f);
        dpfl_config cfg;
        dpfl_config_defaults(&cfg);
        dpfl_error err;
        assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
        assert_int_equal(system("rm -rf /tmp/dpfl_test_runD"), 0);
        dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runD", .quiet = 1};
        dpfl_status st = dpfl_run(&cfg, &o, &err);
        if (i == 0) {
            assert_int_equal(st, DPFL_EINVAL);
            assert_non_null(strstr(err.msg, "record_dp.delta"));
            assert_int_not_equal(access("/tmp/dpfl_test_runD/metrics.jsonl", F_OK), 0);
            continue;
        }
        assert_int_equal(st, DPFL_OK);
        char *sum = slurp("/tmp/dpfl_test_runD/summary.json");
        assert_non_null(sum);
        const int warned = strstr(sum, "\"warnings\"") != NULL;
        assert_int_equal(warned, i == 3); /* 1.5e-4 when allowed warns; 9e-5 (just below 1/n) and 1e-6 do not */
        if (i < 3) assert_true(json_number(sum, "epsilon") > 0);
        free(sum);
    }
    unlink(cfgp);
}

/* Issue 31, item 3: data.samples_per_client puts a record in several clients, and each runs its own DP-SGD steps on
 * it.  40 clients x 500 of the 10,000 synthetic records: every record in exactly 2 clients (the stream's passes end
 * on client boundaries), all taking part, 3 steps a round for 2 rounds: every record goes through 2 x 2 x 3 = 12
 * Poisson(25/500) steps at z = 1, not the 6 of one client.  Calibration plans for the copies too, and a record
 * twice in one client (one client of 10,001 slots) is refused before anything is written. */
static void replicated_records_are_charged_in_every_client(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_rep.ini";
    const char *privacy[2] = {"noise = 1.0\n", "target_epsilon = 2\n"};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(cfgp, "w");
        assert_non_null(f);
        fprintf(f, "[data]\ndataset = synthetic\nclients = %d\nsamples_per_client = %d\n\n[model]\narch = logreg\n\n"
                   "[fl]\nrounds = 2\nsampling = all\nlocal_steps = 3\nbatch = 25\n\n[record_dp]\nenabled = yes\n"
                   "clip = 1.0\n%sdelta = 1e-5\n\n[run]\nseed = 3\nthreads = 1\n",
                i < 2 ? 40 : 1, i < 2 ? 500 : 10001, privacy[i % 2]);
        fclose(f);
        dpfl_config cfg;
        dpfl_config_defaults(&cfg);
        dpfl_error err;
        assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
        assert_int_equal(system("rm -rf /tmp/dpfl_test_runR"), 0);
        dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runR", .quiet = 1};
        dpfl_status st = dpfl_run(&cfg, &o, &err);
        if (i == 2) {
            assert_int_equal(st, DPFL_EINVAL);
            assert_non_null(strstr(err.msg, "data.samples_per_client: client 0 holds record"));
            assert_int_not_equal(access("/tmp/dpfl_test_runR", F_OK), 0);
            continue;
        }
        assert_int_equal(st, DPFL_OK);
        char *sum = slurp("/tmp/dpfl_test_runR/summary.json");
        assert_non_null(sum);
        assert_close(json_number(sum, "worst_record_copies"), 2, 0);
        assert_close(json_number(sum, "worst_client_steps"), 12, 0);
        double z = json_number(sum, "noise");
        if (i == 0) assert_close(z, 1.0, 0);
        dpfl_event ev = dpfl_event_poisson(25.0 / 500.0, z, 12);
        dpfl_guarantee g;
        assert_int_equal(dpfl_account_epsilon(&ev, 1, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        assert_close(json_number(sum, "epsilon"), g.epsilon, 1e-12);
        if (i == 1) assert_true(g.epsilon <= 2.0 && g.epsilon > 1.99);
        free(sum);
    }
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runR"), 0);
}

/* With a fixed seed every noise draw can be recomputed: the printed guarantees (record and client level) are
 * followed by one line saying that they hold only if the seed is secret (once, not on every line), and so does
 * summary.json's privacy statement; a run without DP says "NOT differentially private" in both places and has no
 * seed caveat (no epsilon to qualify). */
static void guarantee_lines_name_the_seed_caveat_or_no_privacy(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    const char *cfgp = "/tmp/dpfl_test_seedline.ini";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 1\n"
               "local_steps = 1\nbatch = 10\n\n[record_dp]\nenabled = yes\nnoise = 1.0\ndelta = 1e-6\n\n"
               "[client_dp]\nenabled = yes\nnoise = 1.0\ndelta = 1e-3\n\n[run]\nseed = 3\n");
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/dpfl_test_runS && %s/dpfl train %s --out /tmp/dpfl_test_runS 2>&1",
             b ? b : "build", cfgp);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024];
    int lines = 0, caveats = 0, after = 0;
    while (fgets(line, sizeof line, p)) {
        if (strstr(line, ")-DP")) {
            lines++;
            if (caveats) after = 1; /* a guarantee line below the caveat */
        }
        if (strstr(line, "only if the seed is secret")) caveats++;
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(lines, 2);
    assert_int_equal(caveats, 1);
    assert_int_equal(after, 0);
    char *sum = slurp("/tmp/dpfl_test_runS/summary.json");
    assert_non_null(strstr(sum, "\"private\":\ttrue"));
    assert_non_null(strstr(sum, "only if the seed is secret"));
    free(sum);
    /* without any DP: "private": false, the statement and the last terminal line say so */
    f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 20\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 1\n"
               "local_steps = 1\nbatch = 10\n\n[run]\nseed = 3\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/dpfl_test_runS && %s/dpfl train %s --out /tmp/dpfl_test_runS 2>&1",
             b ? b : "build", cfgp);
    p = popen(cmd, "r");
    assert_non_null(p);
    int secret = 0;
    line[0] = 0;
    for (char next[1024]; fgets(next, sizeof next, p);) {
        secret += strstr(next, "secret") != NULL;
        snprintf(line, sizeof line, "%s", next);
    }
    pclose(p);
    assert_non_null(strstr(line, "NOT differentially private")); /* the last line */
    assert_int_equal(secret, 0);
    sum = slurp("/tmp/dpfl_test_runS/summary.json");
    assert_non_null(strstr(sum, "\"private\":\tfalse"));
    assert_non_null(strstr(sum, "\"privacy\":\t\"NOT differentially private"));
    assert_null(strstr(sum, "secret"));
    free(sum);
    unlink(cfgp);
}

/* The simulation owns its ledger: a library caller running rounds with dpfl_sim_round gets the record- and
 * client-level epsilon from dpfl_sim_epsilon without filling any accounting struct by hand; the values are those of
 * the events that ran (3 rounds, every client, 2 Poisson steps each; one Gaussian release per round). */
static void simulation_owns_its_ledger(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 120);
    int32_t sizes[3] = {40, 40, 40};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    f.cfg.data.clients = 3;
    f.cfg.fl.local_steps = 2;
    f.cfg.fl.batch = 10;
    f.cfg.record_dp.enabled = 1;
    f.cfg.record_dp.noise = 1.3;
    f.cfg.client_dp.enabled = 1;
    f.cfg.client_dp.noise = 2.0;
    float *g = malloc(f.model.nparam * sizeof *g);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 4);
    dpfl_model_init(&f.model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    assert_int_equal(dpfl_server_set_noise(dpfl_sim_server(sim), 1, 2.0, &err), DPFL_OK);
    for (int r = 1; r <= 3; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
    }
    dpfl_record_report rep;
    double ce;
    int priv;
    assert_int_equal(dpfl_sim_epsilon(sim, &rep, &ce, &priv, &err), DPFL_OK);
    assert_int_equal(dpfl_server_ledger(dpfl_sim_server(sim))->rounds, 3);
    dpfl_event rec = dpfl_event_poisson(10.0 / 40, 1.3, 6), cl = dpfl_event_gaussian(2.0, 3);
    dpfl_guarantee gr, gc;
    assert_int_equal(dpfl_account_epsilon(&rec, 1, 1e-5, DPFL_ACC_RDP, NULL, &gr, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&cl, 1, 1e-5, DPFL_ACC_RDP, NULL, &gc, &err), DPFL_OK);
    assert_close(rep.epsilon, gr.epsilon, 1e-12);
    assert_close(ce, gc.epsilon, 1e-12);
    assert_true(priv);
    dpfl_sim_free(sim);
    free(g);
    dpfl_partition_free(&part);
    fixture_free(&f);
}

/* Repeated identical rounds merge into one event whatever the bytes of the struct's padding (a memcmp merged them
 * or not at random, and a resumed run's epsilon differed from the uninterrupted one in its last digits). */
static void ledger_merges_equal_events_field_by_field(void **state)
{
    (void)state;
    dpfl_ledger l = {0};
    dpfl_error err;
    assert_int_equal(dpfl_ledger_init(&l, 3, &err), DPFL_OK);
    dpfl_event a, b;
    memset(&a, 0x00, sizeof a);
    memset(&b, 0xA5, sizeof b);
    dpfl_event p = dpfl_event_poisson(0.25, 1.5, 1);
    a.kind = b.kind = p.kind;
    a.adjacency = b.adjacency = p.adjacency;
    a.z = b.z = p.z;
    a.q = b.q = p.q;
    a.lambda = b.lambda = p.lambda;
    a.n = b.n = p.n;
    a.batch = b.batch = p.batch;
    a.inner = b.inner = p.inner;
    a.bound = b.bound = p.bound;
    a.d1 = b.d1 = p.d1;
    a.d2 = b.d2 = p.d2;
    a.count = b.count = 1;
    assert_int_equal(dpfl_ledger_charge_client(&l, &a, &err), DPFL_OK);
    assert_int_equal(dpfl_ledger_charge_client(&l, &b, &err), DPFL_OK);
    assert_int_equal(l.nclient_events, 1);
    assert_int_equal(l.client_events[0].count, 2);
    b.z = 1.6;
    assert_int_equal(dpfl_ledger_charge_client(&l, &b, &err), DPFL_OK);
    assert_int_equal(l.nclient_events, 2);
    dpfl_ledger_free(&l);
}

/* Without a seed every process draws a fresh root key; a resume must still redraw the same client partition (its
 * key is in the checkpoint), or records move between clients and their charges split across ledger slots (the
 * worst record's epsilon was under-reported).  A resume whose partition comes out different is refused. */
static void unseeded_resume_keeps_the_partition(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_unseeded.ini";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\npartition = dirichlet\nbeta = 0.5\nclients = 10\n\n[model]\n"
               "arch = mlp:20-8-10\n\n[fl]\nrounds = 2\nlocal_steps = 1\nbatch = 10\n\n[record_dp]\nenabled = yes\n"
               "noise = 1.0\ndelta = 1e-6\n\n[run]\nthreads = 1\n");
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runU"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runU", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *s1 = slurp("/tmp/dpfl_test_runU/summary.json");
    const char *p1 = strstr(s1, "\"partition_sha256\"");
    assert_non_null(p1);
    cfg.fl.rounds = 4;
    dpfl_run_options resume = {.out_dir = "/tmp/dpfl_test_runU", .quiet = 1, .resume = 1};
    for (int i = 0; i < 2; i++) { /* twice: two fresh root keys */
        assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_OK);
        char *s2 = slurp("/tmp/dpfl_test_runU/summary.json");
        const char *p2 = strstr(s2, "\"partition_sha256\"");
        assert_non_null(p2);
        assert_memory_equal(p1, p2, 90);
        free(s2);
        cfg.fl.rounds = 6;
    }
    free(s1);
    /* a different partition (another beta) is refused, and nothing changes */
    cfg.data.beta = 0.9;
    cfg.fl.rounds = 8;
    assert_int_equal(dpfl_run(&cfg, &resume, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "partition differs"));
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runU"), 0);
}

/* Client-level schedules: z_t changes at round 4; the accountant composes the rounds as they ran. */
static void client_noise_schedule_is_composed(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_sched.ini";
    FILE *f = fopen(cfgp, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = 10\n\n[model]\narch = mlp:20-8-10\n\n[fl]\nrounds = 6\n"
               "sampling = all\nlocal_steps = 2\nbatch = 20\n\n[client_dp]\nenabled = yes\nclip = 0.5\n"
               "noise = 2.0\nnoise_schedule = 1:2.0, 4:1.0\ndelta = 1e-5\n\n[run]\nseed = 3\n");
    fclose(f);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&cfg, cfgp, &err), DPFL_OK);
    assert_close(dpfl_round_client_noise(&cfg, 3, 2.0), 2.0, 0);
    assert_close(dpfl_round_client_noise(&cfg, 4, 2.0), 1.0, 0);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runS"), 0);
    dpfl_run_options o = {.out_dir = "/tmp/dpfl_test_runS", .quiet = 1};
    assert_int_equal(dpfl_run(&cfg, &o, &err), DPFL_OK);
    char *sum = slurp("/tmp/dpfl_test_runS/summary.json");
    assert_non_null(sum);
    dpfl_event ev[2] = {dpfl_event_gaussian(2.0, 3), dpfl_event_gaussian(1.0, 3)};
    dpfl_guarantee g;
    assert_int_equal(dpfl_account_epsilon(ev, 2, 1e-5, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    assert_close(json_number(sum, "client_epsilon"), g.epsilon, 1e-12);
    free(sum);
    /* malformed schedules are rejected when they are read, naming the key, and leave the schedule in force */
    assert_int_equal(dpfl_config_set(&cfg, "client_dp.noise_schedule=2:1.0", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "client_dp.noise_schedule (--set): the first entry must be round 1"));
    assert_close(dpfl_round_client_noise(&cfg, 4, 2.0), 1.0, 0);
    assert_int_equal(dpfl_config_set(&cfg, "fl.clients_per_round_schedule=1:5, 1:6", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.clients_per_round_schedule (--set): rounds must increase"));
    assert_int_equal(dpfl_config_set(&cfg, "client_dp.noise_schedule=1:1.0, 3:0", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "client_dp.noise_schedule (--set): the value of round 3 (0) is not a number in (0,"));
    /* counts beyond data.clients are a cross-key check */
    assert_int_equal(dpfl_config_set(&cfg, "fl.clients_per_round_schedule=1:5, 3:11", &err), DPFL_OK);
    assert_int_equal(dpfl_config_validate(&cfg, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.clients_per_round_schedule: 11 clients from round 3 is more than data.clients"));
    unlink(cfgp);
}

/* fl.client_state = keep: run 3 rounds, stop, resume to 8 (with another thread count) ends bit-identical to
 * 8 rounds straight, so the checkpoint carries every client's Adam moments and step count.  A checkpoint of
 * the other mode, or of version 1 (no client states), is refused for keep naming the key; version 1 still
 * resumes reset runs. */
static void write_keep_config(const char *path, const char *mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\npartition = iid\nclients = 20\n\n[model]\narch = mlp:20-32-10\n\n"
               "[fl]\nrounds = 8\nsampling = poisson\nclient_rate = 0.4\nlocal_steps = 4\nbatch = 16\nlr = 0.01\n"
               "optimizer = adam\nclient_state = %s\n\n"
               "[record_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.0\ndelta = 1e-5\nsampler = fixed\n\n"
               "[run]\nseed = 9\nthreads = 2\neval_every = 100\n",
            mode);
    fclose(f);
}

static void models_equal(const char *a, const char *b, int want_equal)
{
    char pa[256], pb[256], *ma, *mb;
    size_t la, lb;
    dpfl_error err;
    snprintf(pa, sizeof pa, "%s/model.bin", a);
    snprintf(pb, sizeof pb, "%s/model.bin", b);
    assert_int_equal(dpfl_file_read_all(pa, &ma, &la, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read_all(pb, &mb, &lb, &err), DPFL_OK);
    assert_int_equal(la, lb);
    if (want_equal) assert_memory_equal(ma, mb, la);
    else assert_memory_not_equal(ma, mb, la);
    free(ma);
    free(mb);
}

static void keep_state_survives_resume(void **state)
{
    (void)state;
    const char *cfgp = "/tmp/dpfl_test_keep.ini";
    const char *A = "/tmp/dpfl_test_keepA", *B = "/tmp/dpfl_test_keepB", *C = "/tmp/dpfl_test_keepC",
               *D = "/tmp/dpfl_test_keepD";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_keepA /tmp/dpfl_test_keepB /tmp/dpfl_test_keepC "
                            "/tmp/dpfl_test_keepD"), 0);
    dpfl_config keep, reset;
    dpfl_error err;
    write_keep_config(cfgp, "keep");
    dpfl_config_defaults(&keep);
    assert_int_equal(dpfl_config_load(&keep, cfgp, &err), DPFL_OK);
    write_keep_config(cfgp, "reset");
    dpfl_config_defaults(&reset);
    assert_int_equal(dpfl_config_load(&reset, cfgp, &err), DPFL_OK);

    dpfl_run_options straight = {.out_dir = B, .quiet = 1};
    assert_int_equal(dpfl_run(&keep, &straight, &err), DPFL_OK);
    keep.fl.rounds = 3;
    dpfl_run_options first = {.out_dir = A, .quiet = 1};
    assert_int_equal(dpfl_run(&keep, &first, &err), DPFL_OK);
    /* the other mode cannot pick up this checkpoint */
    reset.fl.rounds = 8;
    dpfl_run_options resume = {.out_dir = A, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&reset, &resume, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "fl.client_state"));
    keep.fl.rounds = 8;
    keep.run.threads = 1;
    assert_int_equal(dpfl_run(&keep, &resume, &err), DPFL_OK);
    models_equal(A, B, 1);
    /* all of the checkpoints but the wall time and the metrics line (layout: see the test above) agree, the
     * references to the client states included, and so do the state files they name */
    assert_true(fixture_checkpoints_match(A, B) > 16 + 88 + 2 * 20 * 8 + 2 * 20 * 20); /* names client states */
    assert_true(fixture_client_files_match(A, B) > 0);
    /* the same run with reset ends elsewhere: the states matter */
    dpfl_run_options r8 = {.out_dir = C, .quiet = 1};
    assert_int_equal(dpfl_run(&reset, &r8, &err), DPFL_OK);
    models_equal(B, C, 0);

    /* a checkpoint of an older format (2 and 1 copied structs byte for byte, padding included) is refused with a
     * clear error, and left as it was */
    reset.fl.rounds = 3;
    dpfl_run_options r3 = {.out_dir = D, .quiet = 1};
    assert_int_equal(dpfl_run(&reset, &r3, &err), DPFL_OK);
    void *payload;
    size_t len;
    assert_int_equal(dpfl_file_read("/tmp/dpfl_test_keepD/checkpoint.bin", 0x4b435044u, 9, &payload, &len, &err),
                     DPFL_OK);
    assert_int_equal(dpfl_file_write("/tmp/dpfl_test_keepD/checkpoint.bin", 0x4b435044u, 2, payload, len, &err),
                     DPFL_OK);
    free(payload);
    reset.fl.rounds = 8;
    dpfl_run_options resumeD = {.out_dir = D, .quiet = 1, .resume = 1};
    assert_int_equal(dpfl_run(&reset, &resumeD, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "format 2"));
    assert_non_null(strstr(err.msg, "older dpfl"));
    assert_int_equal(dpfl_file_read("/tmp/dpfl_test_keepD/checkpoint.bin", 0x4b435044u, 2, &payload, &len, &err),
                     DPFL_OK);
    free(payload);
    unlink(cfgp);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_keepA /tmp/dpfl_test_keepB /tmp/dpfl_test_keepC "
                            "/tmp/dpfl_test_keepD"), 0);
}

/* ------------------------------------------------------------------------------------------ pinned by value */
/* Issue 32 ("tests that see what matters"): values computed independently of src/privacy, by the scripts named. */

/* Calibration with fl.local_epochs when a client's size is not a multiple of the batch: the last, partial batch of
 * each epoch is a step (client.c runs ceil(n / B) of them), so the calibration must plan for it.  Sizes 15, 101, 40
 * with B = 10 and 2 epochs: 4, 22 and 8 steps per round.  The z that keeps the worst of them within epsilon 4 over
 * 5 rounds at delta 1e-5 is 3.6095376998 on integer orders (tests/reference/pin_calibrate.py, mpmath); dpfl may use
 * more orders (only lowering epsilon), so its z may be a little smaller, never larger by more than the bisection's
 * tolerance. */
static void calibration_counts_the_last_partial_batch(void **state)
{
    (void)state;
    int32_t sizes[3] = {15, 101, 40};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    cfg.fl.local_steps = 0;
    cfg.fl.local_epochs = 2;
    cfg.fl.batch = 10;
    cfg.record_dp.enabled = 1;
    cfg.record_dp.delta = 1e-5;
    dpfl_error err;
    double z;
    assert_int_equal(dpfl_record_calibrate(&part, &cfg, 5, 4.0, &z, &err), DPFL_OK);
    const double want = 3.6095376998;
    if (!(z <= want * (1 + 2e-4) && z >= want * (1 - 3e-3)))
        print_error("calibrated z %.10f, the reference's %.10f\n", z, want);
    assert_true(z <= want * (1 + 2e-4));
    assert_true(z >= want * (1 - 3e-3));
    dpfl_partition_free(&part);
}

/* The end-to-end client-level epsilon with fl.local_epochs on uneven clients (7, 30, 101 records, B = 10, 2
 * epochs: the worst client takes 2 * 11 = 22 steps a round, mu = sqrt(22) * 10 / 100) and a client-rate schedule
 * (1:0.2, 3:0.6, 5:0.1 over 6 rounds: the largest rate, 0.6, is what a visible participation is charged at).
 * tests/reference/pin_e2e.py (mpmath: the binomial mixture of sqrt(J) mu-GDP, solved for delta = 1e-5) gives
 * 4.438844710887036. */
static void e2e_client_level_pins_epochs_and_schedule(void **state)
{
    (void)state;
    int32_t sizes[3] = {7, 30, 101};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    fixture_set(&cfg, "fl.sampling", "poisson");
    fixture_set(&cfg, "fl.client_rate", "0.2");
    fixture_set(&cfg, "fl.client_rate_schedule", "1:0.2, 3:0.6, 5:0.1");
    fixture_set(&cfg, "fl.local_steps", "0");
    fixture_set(&cfg, "fl.local_epochs", "2");
    fixture_set(&cfg, "fl.batch", "10");
    fixture_set(&cfg, "record_dp.enabled", "yes");
    fixture_set(&cfg, "record_dp.delta", "1e-5");
    fixture_set(&cfg, "record_dp.e2e", "yes");
    double eps, noise;
    dpfl_error err;
    assert_int_equal(fl_e2e_client_epsilon(&cfg, &part, 6, 100.0, 0.0, &eps, &noise, NULL, &err), DPFL_OK);
    const double want = 4.438844710887036, mu = sqrt(22.0) * 10 / 100;
    if (fabs(eps - want) > 1e-6 * want) print_error("e2e client epsilon %.15g, the reference's %.15g\n", eps, want);
    assert_close(noise, 1 / mu, 1e-12);
    assert_true(eps >= want * (1 - 1e-9)); /* an upper bound: never below the exact value */
    assert_true(eps <= want * (1 + 1e-6));
    dpfl_partition_free(&part);
}

/* e2e: when a Poisson batch holds more than B records, the step's clipped sum is projected to norm <= B C, which
 * is what the client-level multiplier z / B assumes.  Every record here is the same example, so the b clipped
 * gradients are equal and their sum has norm exactly b C (C = 0.001 is far below any gradient's norm); with the
 * noise divided away, lr = 1, one step and the sum divided by the expected batch B, the model moves by exactly
 * C min(b, B) / B.  Without the projection a batch of b > B would move it by b C / B. */
static void e2e_step_sum_is_projected_to_b_times_c(void **state)
{
    (void)state;
    const int32_t sizes[] = {100};
    fl_fixture f;
    fl_fixture_make(&f, "mlp:10-8-3", sizes, 1);
    for (int32_t i = 1; i < f.train.n; i++) {
        memcpy(f.train.x + (size_t)i * 10, f.train.x, 10 * sizeof(float));
        f.train.y[i] = f.train.y[0];
    }
    fixture_set(&f.cfg, "record_dp.enabled", "yes");
    fixture_set(&f.cfg, "record_dp.noise", "1");
    fixture_set(&f.cfg, "record_dp.clip", "0.001");
    fixture_set(&f.cfg, "record_dp.sampler", "poisson");
    fixture_set(&f.cfg, "record_dp.e2e", "yes");
    fixture_set(&f.cfg, "fl.batch", "10");
    fixture_set(&f.cfg, "fl.local_steps", "1");
    fixture_set(&f.cfg, "fl.lr", "1");
    fixture_set(&f.cfg, "fl.momentum", "0");
    const size_t P = f.model.nparam;
    float *global = malloc(P * sizeof(float)), *start = malloc(P * sizeof(float));
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 6);
    dpfl_model_init(&f.model, global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &f.part, &root, global, &sim, &err), DPFL_OK);
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), 1.0);
    int over = 0, under = 0;
    for (int32_t r = 1; r <= 12; r++) {
        memcpy(start, global, P * sizeof(float));
        dpfl_round_metrics m;
        dpfl_test_noise_divisor = 1e12;
        dpfl_status st = dpfl_sim_round(sim, r, &m, &err);
        dpfl_test_noise_divisor = 1.0;
        assert_int_equal(st, DPFL_OK);
        double ss = 0;
        for (size_t j = 0; j < P; j++) ss += ((double)global[j] - start[j]) * ((double)global[j] - start[j]);
        const double b = (double)m.examples, want = 0.001 * fmin(b, 10.0) / 10.0;
        if (fabs(sqrt(ss) - want) > 1e-3 * want + 1e-9)
            print_error("round %d: batch %g, the model moved %.8g, expected %.8g\n", r, b, sqrt(ss), want);
        assert_true(fabs(sqrt(ss) - want) <= 1e-3 * want + 1e-9);
        over += b > 10;
        under += b > 0 && b <= 10;
    }
    assert_true(over >= 2); /* the projection was exercised */
    assert_true(under >= 2);
    dpfl_sim_free(sim);
    free(global);
    free(start);
    fl_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dpsgd_without_noise_or_clipping_is_nonprivate_training),
        cmocka_unit_test(dp_runs_are_identical_for_any_thread_count),
        cmocka_unit_test(ledger_charges_the_right_q_and_steps),
        cmocka_unit_test(secure_mode_discrete_noise),
        cmocka_unit_test(calibration_covers_every_client),
        cmocka_unit_test(calibration_counts_the_last_partial_batch),
        cmocka_unit_test(e2e_client_level_pins_epochs_and_schedule),
        cmocka_unit_test(e2e_step_sum_is_projected_to_b_times_c),
        cmocka_unit_test(killed_run_resumes_without_losing_a_charge),
        cmocka_unit_test(keep_state_survives_resume),
        cmocka_unit_test(stop_rule_never_releases_over_budget),
        cmocka_unit_test(client_noise_schedule_is_composed),
        cmocka_unit_test(e2e_in_training_matches_dpfl_e2e),
        cmocka_unit_test(a_resume_under_other_settings_is_refused),
        cmocka_unit_test(a_resume_from_an_older_checkpoint_is_refused),
        cmocka_unit_test(e2e_counts_only_a_gaussian_server_release),
        cmocka_unit_test(replicated_records_are_charged_in_every_client),
        cmocka_unit_test(delta_is_checked_against_the_dataset_size),
        cmocka_unit_test(simulation_owns_its_ledger),
        cmocka_unit_test(unseeded_resume_keeps_the_partition),
        cmocka_unit_test(ledger_merges_equal_events_field_by_field),
        cmocka_unit_test(guarantee_lines_name_the_seed_caveat_or_no_privacy),
    };
    return cmocka_run_group_tests_name("dp_train", tests, NULL, NULL);
}
