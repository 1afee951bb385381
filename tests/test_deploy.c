/* Deployment end to end on 127.0.0.1: real `dpfl serve` and `dpfl join` processes (the dpfl binary beside this test's
 * build folder), keys from dpfl keygen's library call, free ports.
 *   1. deployed = simulated: server + 3 clients write the same model.bin, metrics.jsonl and epsilons as dpfl train
 *      of the same config, and each client's own ledger gives the simulation's epsilon of its records;
 *   2. a client whose key is not in the allow-list is rejected (and logged) and gets nothing of the model; a listed
 *      key claiming another client's number is refused; the run completes with the others;
 *   3. malformed frames sent by an authenticated peer, and raw bytes on the TCP port, are answered with errors or
 *      dropped, and the server goes on to finish the run;
 *   4. a client killed mid-round is a dropout (sampled and charged, the noise not reduced) and the run finishes;
 *   5. the server killed after a checkpoint and resumed: the clients carry on and the run is the uninterrupted one
 *      (model, metrics, epsilons; every client's own ledger charged once per round); resumed from an older
 *      checkpoint than the rounds it released, it is refused before it writes anything (a new run on the clients'
 *      old state folders is not: its partition key is another);
 *   6. scripts/deploy_heart.sh (the README's example) against dpfl train;
 *   7. distributed DP with secure aggregation on the wire, without and with a real dropout after key sharing, and
 *      with a client gone during the unmasking (its input stays in the sum);
 *   8. every client's own ledger gives the simulation's epsilon of its records with distributed DP, and for a client
 *      killed mid-round and restarted on its state folder.
 * Without libzmq the suite checks that serve says what is missing. */
#include "testutil.h"
#include "dpfl/net.h"
#include "fl/sim_internal.h" /* PURPOSE_DROPOUT: the simulation's dropout stream */

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef DPFL_HAVE_ZMQ
#include <zmq.h>
#endif

static char bin[1024];  /* the dpfl binary */
static char tmp[64];    /* this run's folder */

static const char *tp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *tp(const char *fmt, ...)
{
    static char buf[64][512]; /* rotating: callers keep what they need longer in their own arrays */
    static int next;
    char *b = buf[next++ % 64];
    int n = snprintf(b, 512, "%s/", tmp);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + n, (size_t)(512 - n), fmt, ap);
    va_end(ap);
    return b;
}

static uint64_t le_at(const uint8_t *p, int n);

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A port nothing listens on now (the kernel's pick). */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* the processes a test started and has not reaped: killed by its teardown if it fails midway */
static pid_t live[64];
static int nlive;

static void forget(pid_t pid)
{
    for (int i = 0; i < nlive; i++)
        if (live[i] == pid) live[i] = live[--nlive];
}

static int kill_leftovers(void **state)
{
    (void)state;
    for (int i = 0; i < nlive; i++) {
        kill(live[i], SIGKILL);
        waitpid(live[i], NULL, 0);
    }
    nlive = 0;
    return 0;
}

/* `dpfl ARGS` in the background, stdout and stderr into log; the pid is dpfl's own (exec). */
static pid_t spawn(const char *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *spawn_cwd; /* non-NULL: the folder the next processes run in */
static pid_t spawn(const char *log, const char *fmt, ...)
{
    char args[2048], cmd[3800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s%s%sexec '%s' %s >'%s' 2>&1", spawn_cwd ? "cd '" : "", spawn_cwd ? spawn_cwd : "",
             spawn_cwd ? "' && " : "", bin, args, log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (nlive < (int)(sizeof live / sizeof live[0])) live[nlive++] = pid;
    return pid;
}

/* The exit status of pid within timeout seconds; killed and -1 past it. */
static int wait_exit(pid_t pid, double timeout)
{
    const double end = now_s() + timeout;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            forget(pid);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        if (now_s() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            forget(pid);
            return -1;
        }
        sleep_s(0.02);
    }
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len;
    dpfl_error err;
    if (dpfl_file_read_all(path, &text, &len, &err)) return NULL;
    return text;
}

static int contains(const char *path, const char *s)
{
    char *t = slurp(path);
    int r = t && strstr(t, s);
    free(t);
    return r;
}

static int wait_for(const char *path, const char *s, double timeout)
{
    const double end = now_s() + timeout;
    while (now_s() < end) {
        if (contains(path, s)) return 1;
        sleep_s(0.02);
    }
    return 0;
}

static int count_lines(const char *path)
{
    char *t = slurp(path);
    int n = 0;
    for (char *p = t; p && *p; p++) n += *p == '\n';
    free(t);
    return n;
}

static void assert_same_file(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    if (!x || !y || strcmp(x, y)) {
        print_error("%s and %s differ\n", a, b);
        free(x), free(y);
        fail();
    }
    free(x), free(y);
}

static void assert_same_bytes(const char *a, const char *b)
{
    void *x, *y;
    size_t nx, ny;
    dpfl_error err;
    assert_int_equal(dpfl_file_read(a, 0x4D465044u /* "DPFM" */, 3u /* model.bin version 3 */, &x, &nx, &err), DPFL_OK);
    assert_int_equal(dpfl_file_read(b, 0x4D465044u, 3u, &y, &ny, &err), DPFL_OK);
    assert_int_equal(nx, ny);
    if (memcmp(x, y, nx)) {
        print_error("%s and %s hold different models\n", a, b);
        free(x), free(y);
        fail();
    }
    free(x), free(y);
}

static cJSON *json_file(const char *path)
{
    char *t = slurp(path);
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    free(t);
    if (!o) print_error("cannot parse %s\n", path);
    assert_non_null(o);
    return o;
}

/* The last line of a jsonl file as JSON. */
static cJSON *json_last_line(const char *path)
{
    char *t = slurp(path);
    assert_non_null(t);
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == '\n') t[--n] = '\0';
    char *last = strrchr(t, '\n');
    cJSON *o = cJSON_Parse(last ? last + 1 : t);
    free(t);
    assert_non_null(o);
    return o;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) print_error("no number %s\n", key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* summary.json values of two runs, equal to the last bit */
static void assert_same_summary_value(const char *a, const char *b, const char *key)
{
    cJSON *x = json_file(a), *y = json_file(b);
    double u = num(x, key), v = num(y, key);
    if (u != v) print_error("%s: %.17g in %s, %.17g in %s\n", key, u, a, v, b);
    cJSON_Delete(x), cJSON_Delete(y);
    assert_true(u == v);
}

/* ---------------------------------------------------------------------------------------------- set-up */
static void write_config_seed(const char *path, int clients, int rounds, const char *extra, int seed)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = synthetic\nclients = %d\n\n[model]\narch = mlp:20-16-10\n\n[fl]\nrounds = %d\n"
               "local_steps = 3\nbatch = 16\n%s\n[run]\nseed = %d\nallow_large_delta = yes\n",
            clients, rounds, extra, seed);
    fclose(f);
}

static void write_config(const char *path, int clients, int rounds, const char *extra)
{
    write_config_seed(path, clients, rounds, extra, 11);
}

static const char *DP = "optimizer = sgd\nmomentum = 0.9\nclient_state = keep\n\n"
                        "[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 1.0\ndelta = 1e-5\n\n"
                        "[client_dp]\nenabled = yes\nnoise = 0.8\nclip = 1.0\ndelta = 0.01\n";

static int setup(void **state)
{
    (void)state;
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 16);
    if (n <= 0) return -1;
    bin[n] = '\0';
    char *slash = strrchr(bin, '/'); /* BUILD/tests/test_deploy -> BUILD/dpfl */
    if (!slash) return -1;
    *slash = '\0';
    slash = strrchr(bin, '/');
    if (!slash) return -1;
    strcpy(slash, "/dpfl");
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "test_deploy: no dpfl binary at %s\n", bin);
        return -1;
    }
    strcpy(tmp, "/tmp/dpfl-test-deploy-XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    /* the server's pair, clients 0-3 and the allow-list with them; an intruder's pair named client2 */
    dpfl_error err;
    char dir[600];
    if (dpfl_net_keygen(tp("keys/server"), "server", 0, NULL, &err)) return -1;
    for (int k = 0; k < 4; k++) {
        char name[24];
        snprintf(name, sizeof name, "client%d", k);
        snprintf(dir, sizeof dir, "%s", tp("keys/c%d", k));
        if (dpfl_net_keygen(dir, name, 0, NULL, &err)) return -1;
    }
    if (dpfl_net_keygen(tp("keys/intruder"), "client2", 0, NULL, &err)) return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s/keys' && mkdir -p server/clients && cp c0/client0.pub c1/client1.pub "
                              "c2/client2.pub c3/client3.pub server/clients/ && for d in c0 c1 c2 c3 intruder; do "
                              "cp server/server.pub $d/; done", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static pid_t serve(int port, const char *cfg, const char *out, const char *log, const char *extra)
{
    return spawn(log, "serve '%s' --bind tcp://127.0.0.1:%d --keys '%s' --out '%s' %s", cfg, port, tp("keys/server"),
                 out, extra);
}

static pid_t join(int port, const char *cfg, int k, const char *keys, const char *state, const char *log,
                  const char *extra)
{
    return spawn(log, "join --server tcp://127.0.0.1:%d --config '%s' --client %d --keys '%s' --state '%s' "
                      "--idle-timeout 60 %s", port, cfg, k, keys, state, extra);
}

static void train(const char *cfg, const char *out)
{
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "'%s' train '%s' --out '%s' --force --quiet", bin, cfg, out);
    assert_int_equal(system(cmd), 0);
}

static void expect_exit(pid_t pid, int want, const char *log, double timeout)
{
    int rc = wait_exit(pid, timeout);
    if (rc != want) {
        char *t = slurp(log);
        print_error("%s: exit %d (expected %d):\n%s\n", log, rc, want, t ? t : "");
        free(t);
        fail();
    }
}

/* ---------------------------------------------------------------------------------------------- 1 */
static void deployed_run_equals_the_simulation(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t1.ini"));
    char extra[1024];
    snprintf(extra, sizeof extra, "sampling = poisson\nclient_rate = 0.7\n%s", DP);
    write_config(cfg, 3, 4, extra);
    train(cfg, tp("t1-sim"));
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t1-dep"), tp("t1-server.log"), "--round-timeout 30 --join-timeout 30");
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t1-state%d", k), tp("t1-client%d.log", k), "");
    expect_exit(srv, 0, tp("t1-server.log"), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("t1-client%d.log", k), 10);
    assert_same_bytes(tp("t1-sim/model.bin"), tp("t1-dep/model.bin"));
    assert_same_file(tp("t1-sim/metrics.jsonl"), tp("t1-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t1-sim/summary.json"), tp("t1-dep/summary.json"), "epsilon");
    assert_same_summary_value(tp("t1-sim/summary.json"), tp("t1-dep/summary.json"), "client_epsilon");
    /* each client's own ledger: the simulation's epsilon of that client's records */
    cJSON *last = json_last_line(tp("t1-sim/metrics.jsonl"));
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(last, "epsilon_per_client");
    assert_int_equal(cJSON_GetArraySize(per), 3);
    for (int k = 0; k < 3; k++) {
        cJSON *c = json_file(tp("t1-state%d/client.json", k));
        if (num(c, "epsilon") != cJSON_GetArrayItem(per, k)->valuedouble)
            print_error("client %d: own epsilon %.17g, simulation %.17g\n", k, num(c, "epsilon"),
                        cJSON_GetArrayItem(per, k)->valuedouble);
        assert_true(num(c, "epsilon") == cJSON_GetArrayItem(per, k)->valuedouble);
        cJSON_Delete(c);
    }
    cJSON_Delete(last);
}

/* The config of extra (an [fl] tail and what follows) trained by dpfl train and deployed on 3 clients: the same
 * model bytes, metrics and epsilons. */
static void deployed_equals_simulated(const char *name, int rounds, const char *extra)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("%s.ini", name));
    write_config(cfg, 3, rounds, extra);
    train(cfg, tp("%s-sim", name));
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("%s-dep", name), tp("%s-server.log", name), "--round-timeout 30 --join-timeout 30");
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("%s-state%d", name, k), tp("%s-client%d.log", name, k), "");
    expect_exit(srv, 0, tp("%s-server.log", name), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("%s-client%d.log", name, k), 10);
    assert_same_bytes(tp("%s-sim/model.bin", name), tp("%s-dep/model.bin", name));
    assert_same_file(tp("%s-sim/metrics.jsonl", name), tp("%s-dep/metrics.jsonl", name));
    assert_same_summary_value(tp("%s-sim/summary.json", name), tp("%s-dep/summary.json", name), "epsilon");
    cJSON *sim = json_file(tp("%s-sim/summary.json", name));
    const int client_level = cJSON_GetObjectItemCaseSensitive(sim, "client_epsilon") != NULL;
    cJSON_Delete(sim);
    if (client_level)
        assert_same_summary_value(tp("%s-sim/summary.json", name), tp("%s-dep/summary.json", name), "client_epsilon");
}

/* PrivateFL's input transforms (each client's own, kept in its process, never sent) and PriFedSync's helper models
 * (each client's own; the server syncs the clients whose update was added): with Poisson client sampling at 0.6 a
 * client sits rounds out, so a helper synced with the wrong round's model, or not at all, changes the bytes. */
static void personal_models_deployed_equal_the_simulation(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char extra[1024];
    snprintf(extra, sizeof extra, "sampling = poisson\nclient_rate = 0.6\n%s\n[model]\ntransform = affine\n", DP);
    deployed_equals_simulated("tr", 5, extra);
    snprintf(extra, sizeof extra, "sampling = poisson\nclient_rate = 0.6\npersonalization = helper\n"
                                  "helper_alpha = 0.3\nweighting = uniform\n%s", DP);
    deployed_equals_simulated("hp", 5, extra);
    /* fl.personal: PP-SGD's personal head stays with each client, like the transform */
    snprintf(extra, sizeof extra, "sampling = poisson\nclient_rate = 0.6\npersonal = head\n%s", DP);
    deployed_equals_simulated("ph", 5, extra);
    /* every client synced after its last round (its helper waits for nothing) */
    for (int k = 0; k < 3; k++) {
        assert_true(contains(tp("hp-client%d.log", k), "helper model synced with the released model"));
        FILE *f = fopen(tp("hp-state%d/client.bin", k), "rb");
        assert_non_null(f);
        uint8_t head[16 + 112];
        assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
        fclose(f);
        assert_int_equal((int32_t)le_at(head + 16 + 108, 4), 0);
    }
}

/* Cross-device participation (PrivateFL Table 11): the server draws the shuffled cohorts (one client of 3 a round, a
 * new order each pass) from the run's stream as the simulation does, each client trains in exactly 2 of the 6 rounds,
 * and the client level is charged one release a pass: a cohort or a charge that differed would change the bytes or
 * the epsilons. */
static void cross_device_deployed_equals_the_simulation(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char extra[1024];
    snprintf(extra, sizeof extra, "sampling = cross-device\nclient_rate = 0.3333333333333333\nparticipations = 2\n%s",
             DP);
    deployed_equals_simulated("xd", 6, extra);
    cJSON *sim = json_file(tp("xd-sim/summary.json"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(sim, "client_epsilon"));
    cJSON_Delete(sim);
}

/* DP-SCAFFOLD (fl.scaffold): the server keeps c, forms each dc_i from the update it receives and sends c with every
 * round; each client keeps its c_i in its own process (client.bin).  With Poisson client sampling at 0.6 clients sit
 * rounds out; 4 rounds, then server and clients resumed on their folders to 6 rounds (c from the server's
 * checkpoint, each c_i from its client.bin) against dpfl train --resume: a c not sent (zero at the clients), not
 * updated, formed from another update or lost on a restart changes the bytes. */
static void scaffold_deployed_equals_the_simulation(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    deployed_equals_simulated("sc", 4, "sampling = poisson\nclient_rate = 0.6\nscaffold = yes\nlr = 0.2\n\n"
                                       "[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 1.0\ndelta = 1e-5\n");
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "'%s' train --resume '%s' --set fl.rounds=6 --quiet", bin, tp("sc-sim"));
    assert_int_equal(system(cmd), 0);
    const int port = free_port();
    pid_t srv = spawn(tp("sc-server2.log"), "serve --resume '%s' --set fl.rounds=6 --bind tcp://127.0.0.1:%d --keys '%s' "
                                           "--join-timeout 30 --round-timeout 30", tp("sc-dep"), port, tp("keys/server"));
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, tp("sc.ini"), k, tp("keys/c%d", k), tp("sc-state%d", k), tp("sc-client%d-2.log", k), "");
    expect_exit(srv, 0, tp("sc-server2.log"), 60);
    for (int k = 0; k < 3; k++) {
        expect_exit(cl[k], 0, tp("sc-client%d-2.log", k), 10);
        assert_true(contains(tp("sc-client%d-2.log", k), "carrying on from"));
    }
    assert_same_bytes(tp("sc-sim/model.bin"), tp("sc-dep/model.bin"));
    assert_same_file(tp("sc-sim/metrics.jsonl"), tp("sc-dep/metrics.jsonl"));
    assert_same_summary_value(tp("sc-sim/summary.json"), tp("sc-dep/summary.json"), "epsilon");
}

/* rPDP-FL's individual Renyi filter (Feldman-Zrnic): each record's spend lives in the client that holds it, a
 * record that has spent its cap leaves that client's sampler, and client.bin keeps the spend.  4 rounds planned and
 * run (every record spends its cap), then server and clients resumed on their folders to 7 rounds: a client that
 * forgot its records' spend would sample them again, and the bytes would differ from dpfl train --resume's. */
static void the_filter_runs_deployed_and_its_spend_survives_a_restart(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    deployed_equals_simulated("flt", 4, "sampling = poisson\nclient_rate = 0.7\nlr = 0.2\n\n[record_dp]\nenabled = yes\n"
                                        "clip = 1.0\ndelta = 1e-3\nbudgets = threelevels\nbudget_policy = filter\n"
                                        "budget_rounds = 4\n");
    cJSON *sum = json_file(tp("flt-sim/summary.json"));
    for (int k = 0; k < 3; k++) { /* each client's own epsilon: its records' caps, as the simulation reports them */
        cJSON *c = json_file(tp("flt-state%d/client.json", k));
        if (num(c, "epsilon") != num(sum, "epsilon"))
            print_error("client %d: own epsilon %.17g, simulation %.17g\n", k, num(c, "epsilon"), num(sum, "epsilon"));
        assert_true(num(c, "epsilon") == num(sum, "epsilon"));
        cJSON_Delete(c);
    }
    cJSON_Delete(sum);
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "'%s' train --resume '%s' --set fl.rounds=7 --quiet", bin, tp("flt-sim"));
    assert_int_equal(system(cmd), 0);
    const int port = free_port();
    pid_t srv = spawn(tp("flt-server2.log"), "serve --resume '%s' --set fl.rounds=7 --bind tcp://127.0.0.1:%d --keys '%s' "
                                            "--join-timeout 30 --round-timeout 30", tp("flt-dep"), port, tp("keys/server"));
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, tp("flt.ini"), k, tp("keys/c%d", k), tp("flt-state%d", k), tp("flt-client%d-2.log", k), "");
    expect_exit(srv, 0, tp("flt-server2.log"), 60);
    for (int k = 0; k < 3; k++) {
        expect_exit(cl[k], 0, tp("flt-client%d-2.log", k), 10);
        assert_true(contains(tp("flt-client%d-2.log", k), "carrying on from"));
    }
    assert_same_bytes(tp("flt-sim/model.bin"), tp("flt-dep/model.bin"));
    assert_same_summary_value(tp("flt-sim/summary.json"), tp("flt-dep/summary.json"), "epsilon");
}

/* ---------------------------------------------------------------------------------------------- 2 */
static void unlisted_keys_and_impostors_are_refused(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t2.ini"));
    write_config(cfg, 3, 2, "[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 1.0\ndelta = 1e-5\n");
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t2-dep"), tp("t2-server.log"), "--wait 2 --join-timeout 30 --round-timeout 1 --verbose");
    /* client 0's key claiming to be client 1 */
    pid_t imp = join(port, cfg, 1, tp("keys/c0"), tp("t2-impostor"), tp("t2-impostor.log"), "--name client0");
    expect_exit(imp, 1, tp("t2-impostor.log"), 20);
    assert_true(contains(tp("t2-impostor.log"), "key client0 may not act as client 1"));
    /* a key the allow-list does not hold, named client2 */
    pid_t bad = join(port, cfg, 2, tp("keys/intruder"), tp("t2-intruder"), tp("t2-intruder.log"), "");
    expect_exit(bad, 1, tp("t2-intruder.log"), 20);
    assert_true(contains(tp("t2-intruder.log"), "the server refused this client's key (client2)"));
    assert_true(wait_for(tp("t2-server.log"), "rejected a connection from 127.0.0.1", 5));
    /* it got nothing: no round reached it, so it never trained or wrote a ledger */
    assert_int_not_equal(access(tp("t2-intruder/client.bin"), F_OK), 0);
    assert_int_not_equal(access(tp("t2-impostor/client.bin"), F_OK), 0);
    pid_t cl[2];
    for (int k = 0; k < 2; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t2-state%d", k), tp("t2-client%d.log", k), "");
    expect_exit(srv, 0, tp("t2-server.log"), 60);
    for (int k = 0; k < 2; k++) expect_exit(cl[k], 0, tp("t2-client%d.log", k), 10);
    assert_true(contains(tp("t2-server.log"), "that key may not act as that client"));
    assert_true(contains(tp("t2-server.log"), "round 2: client 2 did not answer within 1 s: a dropout"));
    /* both rounds ran with the two legitimate clients */
    assert_int_equal(count_lines(tp("t2-dep/metrics.jsonl")), 2);
    cJSON *d = json_last_line(tp("t2-dep/diagnostics.jsonl"));
    assert_int_equal((int)num(d, "replied"), 2);
    cJSON_Delete(d);
}

/* ---------------------------------------------------------------------------------------------- 3 */
#ifdef DPFL_HAVE_ZMQ
/* Send one message (parts: 1, or 2 for a multipart) and expect an ERROR frame saying `want`. */
static void expect_error_reply(void *sock, const void *a, size_t na, const void *b, size_t nb, const char *want)
{
    if (b) {
        assert_true(zmq_send(sock, a, na, ZMQ_SNDMORE) >= 0);
        assert_true(zmq_send(sock, b, nb, 0) >= 0);
    } else {
        assert_true(zmq_send(sock, a, na, 0) >= 0);
    }
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 20000), 1);
    uint8_t buf[4096];
    int n = zmq_recv(sock, buf, sizeof buf, 0);
    assert_true(n > 0);
    dpfl_wire_msg m;
    dpfl_error err;
    assert_int_equal(dpfl_wire_decode(buf, (size_t)n, &m, &err), DPFL_OK);
    assert_int_equal(m.type, DPFL_WIRE_ERROR);
    if (!strstr(m.text, want)) print_error("server answered '%s', expected '%s'\n", m.text, want);
    assert_non_null(strstr(m.text, want));
}

static size_t encode(const dpfl_wire_msg *m, uint8_t *out)
{
    uint8_t *buf;
    size_t len;
    dpfl_error err;
    assert_int_equal(dpfl_wire_encode(m, &buf, &len, &err), DPFL_OK);
    memcpy(out, buf, len);
    free(buf);
    return len;
}

static void reseal(uint8_t *buf, size_t len)
{
    uint32_t crc = dpfl_crc32(buf, len - 4);
    memcpy(buf + len - 4, &crc, 4);
}
#endif

static void malformed_frames_do_not_stop_the_server(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
#ifdef DPFL_HAVE_ZMQ
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t3.ini"));
    write_config(cfg, 2, 1, "");
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t3-dep"), tp("t3-server.log"), "--join-timeout 60 --round-timeout 20");
    /* raw bytes on the port: not even a handshake */
    for (int i = 0; i < 3; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const double end = now_s() + 10;
        while (connect(s, (struct sockaddr *)&a, sizeof a) != 0 && now_s() < end) {
            close(s);
            sleep_s(0.05);
            s = socket(AF_INET, SOCK_STREAM, 0);
        }
        char junk[300];
        for (size_t j = 0; j < sizeof junk; j++) junk[j] = (char)(j * 131 + (size_t)i * 7);
        if (i == 1) memcpy(junk, "\xff\0\0\0\0\0\0\0\x01\x7f", 10); /* a ZMTP greeting's start, then junk */
        assert_true(write(s, junk, sizeof junk) > 0);
        close(s);
    }
    /* an authenticated peer (client 0's key) sending bad frames */
    uint8_t sk[32], pk[32], spk[32];
    dpfl_error err;
    assert_int_equal(dpfl_net_key_read(tp("keys/c0/client0.key"), sk, &err), DPFL_OK);
    assert_int_equal(dpfl_net_key_read(tp("keys/c0/server.pub"), spk, &err), DPFL_OK);
    assert_int_equal(dpfl_net_key_read(tp("keys/c0/client0.pub"), pk, &err), DPFL_OK);
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    const int linger = 0;
    assert_int_equal(zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spk, 32), 0);
    assert_int_equal(zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pk, 32), 0);
    assert_int_equal(zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sk, 32), 0);
    assert_int_equal(zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger), 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    assert_int_equal(zmq_connect(sock, ep), 0);
    uint8_t f[512];
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_HEARTBEAT;
    m.sender = 0;
    const size_t hb = encode(&m, f);
    expect_error_reply(sock, "junk!", 5, NULL, 0, "truncated frame");
    f[0] = 'X';
    reseal(f, hb);
    expect_error_reply(sock, f, hb, NULL, 0, "bad magic");
    encode(&m, f);
    f[4] = 9;
    reseal(f, hb);
    expect_error_reply(sock, f, hb, NULL, 0, "version 9 is not supported");
    encode(&m, f);
    f[hb - 1] ^= 0x40;
    expect_error_reply(sock, f, hb, NULL, 0, "checksum");
    encode(&m, f);
    f[15] = 0x50; /* a payload of over a gigabyte announced */
    reseal(f, hb);
    expect_error_reply(sock, f, hb, NULL, 0, "oversized");
    encode(&m, f);
    expect_error_reply(sock, f, hb, f, hb, "multipart");
    m.sender = 1; /* client 0's key speaking for client 1 */
    encode(&m, f);
    expect_error_reply(sock, f, hb, NULL, 0, "may not act as client 1");
    m.sender = 5; /* no such client */
    encode(&m, f);
    expect_error_reply(sock, f, hb, NULL, 0, "may not act as client 5");
    dpfl_wire_msg h;
    memset(&h, 0, sizeof h);
    h.type = DPFL_WIRE_HELLO;
    h.sender = 0;
    memset(h.config_digest, 7, 32);
    expect_error_reply(sock, f, encode(&h, f), NULL, 0, "your config is not the server's");
    float u[4] = {1, 2, 3, 4};
    dpfl_wire_msg up;
    memset(&up, 0, sizeof up);
    up.type = DPFL_WIRE_UPDATE;
    up.sender = 0;
    up.round = 1;
    up.steps = 3;
    up.nparam = 4;
    up.fvec = u;
    expect_error_reply(sock, f, encode(&up, f), NULL, 0, "update of round 1 not expected (no round in progress)");
    zmq_close(sock);
    zmq_ctx_term(ctx);
    /* the real clients: the run goes on */
    pid_t cl[2];
    for (int k = 0; k < 2; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t3-state%d", k), tp("t3-client%d.log", k), "");
    expect_exit(srv, 0, tp("t3-server.log"), 60);
    for (int k = 0; k < 2; k++) expect_exit(cl[k], 0, tp("t3-client%d.log", k), 10);
    assert_true(contains(tp("t3-server.log"), "dropped a frame (key client0, 127.0.0.1): frame version 9"));
    assert_int_equal(count_lines(tp("t3-dep/metrics.jsonl")), 1);
#endif
}

/* client.bin field by field (src/net/client_state.c; the format every dpfl join has written): file head (magic
 * "DPCL", version 3, payload length), then i32 client, i32 clients, u64 nparam, the config and partition digests,
 * i64 participations, i64 record_steps, i32 replayed, f64 record_z, i32 sync_round, i64 t, u64 floats,
 * f32 state[floats], u64 nrec (the filter's spend), u8 run_key[32], i32 last_round, u8 last_digest[32],
 * u64 frame_len, the frame, and the CRC-32. */
static uint64_t le_at(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void assert_client_bin_layout(const char *path, int32_t k, int32_t clients, int64_t participations,
                                     int32_t last_round)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t b[1 << 22];
    const size_t len = fread(b, 1, sizeof b, f);
    fclose(f);
    assert_true(len >= 16 + 128 + 8 + 76 + 4 && len < sizeof b);
    assert_memory_equal(b, "DPCL", 4);
    assert_int_equal(le_at(b + 4, 4), 3);
    assert_int_equal(le_at(b + 8, 8), len - 20); /* the payload: all but the head and the CRC */
    const uint8_t *p = b + 16;
    assert_int_equal((int32_t)le_at(p, 4), k);
    assert_int_equal((int32_t)le_at(p + 4, 4), clients);
    assert_true(le_at(p + 8, 8) > 0);                                /* nparam */
    assert_int_equal((int64_t)le_at(p + 80, 8), participations);
    assert_true((int64_t)le_at(p + 88, 8) > 0);                      /* record_steps (record-level DP) */
    assert_int_equal((int32_t)le_at(p + 108, 4), 0);                 /* sync_round (no helper models) */
    const uint64_t floats = le_at(p + 120, 8);
    const uint8_t *a = p + 128 + 4 * floats;
    assert_int_equal(le_at(a, 8), 0); /* the filter's spend: none without it */
    a += 8;
    assert_true(a + 76 <= b + len - 4);
    a += 32; /* the run's partition key */
    assert_int_equal((int32_t)le_at(a, 4), last_round);
    assert_int_equal(le_at(a + 36, 8), (uint64_t)(b + len - 4 - (a + 44))); /* the frame, up to the CRC */
}

/* ---------------------------------------------------------------------------------------------- 4 */
static void a_client_killed_mid_round_is_a_dropout(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t4.ini"));
    write_config(cfg, 3, 2, DP);
    train(cfg, tp("t4-sim"));
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t4-dep"), tp("t4-server.log"), "--join-timeout 30 --round-timeout 1.5");
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t4-state%d", k), tp("t4-client%d.log", k),
                     k == 2 ? "--delay 30" : "");
    /* client 2 has trained round 1 and charged it (client.bin, then client.json, are written before the update
     * leaves), and is now on its slow link: killed there.  Waiting for client.bin alone raced with the accounting
     * that comes before client.json (seen under AddressSanitizer). */
    const double end = now_s() + 30;
    while (access(tp("t4-state2/client.json"), F_OK) != 0 && now_s() < end) sleep_s(0.02);
    assert_int_equal(access(tp("t4-state2/client.bin"), F_OK), 0);
    assert_int_equal(access(tp("t4-state2/client.json"), F_OK), 0);
    kill(cl[2], SIGKILL);
    assert_client_bin_layout(tp("t4-state2/client.bin"), 2, 3, 1, 1);
    assert_int_equal(wait_exit(cl[2], 5), 128 + SIGKILL);
    expect_exit(srv, 0, tp("t4-server.log"), 60);
    for (int k = 0; k < 2; k++) expect_exit(cl[k], 0, tp("t4-client%d.log", k), 10);
    /* one line a round says who dropped (the per-client lines need --verbose) */
    assert_true(contains(tp("t4-server.log"), "round 1: 3 clients sampled, 2 updates in "));
    assert_true(contains(tp("t4-server.log"), "round 2: 3 clients sampled, 2 updates in "));
    assert_true(contains(tp("t4-server.log"), "; dropped (1): client 2\n"));
    assert_false(contains(tp("t4-server.log"), "did not answer within"));
    assert_false(contains(tp("t4-server.log"), "sent to client"));
    /* summary.json and the final line say how many updates arrived */
    cJSON *sj = json_file(tp("t4-dep/summary.json")), *u = cJSON_GetObjectItemCaseSensitive(sj, "updates");
    assert_non_null(u);
    assert_int_equal((int)num(u, "sampled"), 6);
    assert_int_equal((int)num(u, "arrived"), 4);
    assert_int_equal((int)num(u, "rounds_without_update"), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(u, "per_round")), 2);
    cJSON_Delete(sj);
    assert_true(contains(tp("t4-server.log"), "dpfl: 4 of 6 sampled clients' updates arrived; 0 rounds without any"));
    /* both rounds released with two updates; charged for three clients, noise for the design's three */
    assert_int_equal(count_lines(tp("t4-dep/metrics.jsonl")), 2);
    cJSON *d = json_last_line(tp("t4-dep/diagnostics.jsonl")), *a = json_last_line(tp("t4-dep/metrics.jsonl")),
          *b = json_last_line(tp("t4-sim/metrics.jsonl"));
    assert_int_equal((int)num(d, "replied"), 2);
    assert_int_equal((int)num(d, "participants"), 3);
    assert_true(num(a, "update_noise_std") == num(b, "update_noise_std"));
    cJSON_Delete(d), cJSON_Delete(a), cJSON_Delete(b);
    assert_same_summary_value(tp("t4-sim/summary.json"), tp("t4-dep/summary.json"), "epsilon");
    assert_same_summary_value(tp("t4-sim/summary.json"), tp("t4-dep/summary.json"), "client_epsilon");
    /* the killed client's own ledger holds the round it trained */
    cJSON *c = json_file(tp("t4-state2/client.json"));
    assert_int_equal((int)num(c, "rounds_trained"), 1);
    cJSON_Delete(c);
}

/* ---------------------------------------------------------------------------------------------- 4b */
/* A server whose clients never join does not train (it used to wait out every round and write a finished-looking
 * run of the untrained model with its epsilon), and leaves no run folder. */
static void a_server_whose_clients_never_join_does_not_start(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t4b.ini"));
    write_config(cfg, 3, 3, DP);
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t4b-dep"), tp("t4b-server.log"), "--join-timeout 1 --round-timeout 1");
    expect_exit(srv, 1, tp("t4b-server.log"), 30);
    assert_true(contains(tp("t4b-server.log"), "0 of 3 clients joined within 1 s, 3 needed (--wait 3): not starting"));
    assert_int_not_equal(access(tp("t4b-dep"), F_OK), 0);
    /* one of the three joins; --wait 1 would start, the default (all) does not */
    srv = serve(port, cfg, tp("t4b-dep"), tp("t4b-server2.log"), "--join-timeout 3 --round-timeout 1");
    pid_t c0 = join(port, cfg, 0, tp("keys/c0"), tp("t4b-state0"), tp("t4b-client0.log"), "");
    expect_exit(srv, 1, tp("t4b-server2.log"), 30);
    assert_true(contains(tp("t4b-server2.log"), "1 of 3 clients joined within 3 s, 3 needed (--wait 3)"));
    assert_int_not_equal(access(tp("t4b-dep"), F_OK), 0);
    wait_exit(c0, 10);
}

/* Clients that join and then never answer: the server stops after --max-empty-rounds rounds without an update,
 * with those rounds checkpointed (charged), instead of running out the schedule. */
static void a_server_stops_after_rounds_without_updates(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t4c.ini"));
    write_config(cfg, 2, 6, DP);
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t4c-dep"), tp("t4c-server.log"),
                      "--join-timeout 30 --round-timeout 0.5 --max-empty-rounds 2");
    pid_t cl[2];
    for (int k = 0; k < 2; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t4c-state%d", k), tp("t4c-client%d.log", k), "--delay 60");
    expect_exit(srv, 1, tp("t4c-server.log"), 60);
    assert_true(contains(tp("t4c-server.log"), "no update arrived in 2 rounds in a row (rounds 1-2; "));
    assert_true(contains(tp("t4c-server.log"), "stopping before round 3"));
    assert_true(contains(tp("t4c-server.log"), "round 1: 2 clients sampled, 0 updates in "));
    /* the two rounds ran (released with noise only) and are charged in the checkpoint; the third never started */
    assert_int_equal(count_lines(tp("t4c-dep/metrics.jsonl")), 2);
    assert_int_equal(access(tp("t4c-dep/checkpoint.bin"), F_OK), 0);
    for (int k = 0; k < 2; k++) kill(cl[k], SIGKILL), wait_exit(cl[k], 5);
}

/* ---------------------------------------------------------------------------------------------- 5 */
static void a_resumed_server_finishes_the_uninterrupted_run(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t5.ini"));
    write_config(cfg, 3, 6, DP);
    train(cfg, tp("t5-sim"));
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t5-dep"), tp("t5-server1.log"), "--join-timeout 30 --round-timeout 30");
    pid_t cl[3];
    for (int k = 0; k < 3; k++) /* slow enough that the server can be killed in the middle of the run */
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t5-state%d", k), tp("t5-client%d.log", k), "--delay 0.25");
    const double end = now_s() + 60;
    while (count_lines(tp("t5-dep/metrics.jsonl")) < 2 && now_s() < end) sleep_s(0.01);
    kill(srv, SIGKILL);
    assert_int_equal(wait_exit(srv, 5), 128 + SIGKILL);
    const int done_before = count_lines(tp("t5-dep/metrics.jsonl"));
    assert_true(done_before >= 2 && done_before < 6);
    srv = spawn(tp("t5-server2.log"), "serve --resume '%s' --bind tcp://127.0.0.1:%d --keys '%s' --join-timeout 30 "
                                      "--round-timeout 30", tp("t5-dep"), port, tp("keys/server"));
    expect_exit(srv, 0, tp("t5-server2.log"), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("t5-client%d.log", k), 10);
    assert_same_bytes(tp("t5-sim/model.bin"), tp("t5-dep/model.bin"));
    assert_same_file(tp("t5-sim/metrics.jsonl"), tp("t5-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t5-sim/summary.json"), tp("t5-dep/summary.json"), "epsilon");
    assert_same_summary_value(tp("t5-sim/summary.json"), tp("t5-dep/summary.json"), "client_epsilon");
    /* no client paid twice for a round asked again */
    cJSON *last = json_last_line(tp("t5-sim/metrics.jsonl"));
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(last, "epsilon_per_client");
    for (int k = 0; k < 3; k++) {
        cJSON *c = json_file(tp("t5-state%d/client.json", k));
        assert_int_equal((int)num(c, "rounds_trained"), 6);
        assert_true(num(c, "epsilon") == cJSON_GetArrayItem(per, k)->valuedouble);
        cJSON_Delete(c);
    }
    cJSON_Delete(last);
}

/* SIGTERM (or Ctrl-C) to dpfl serve: it stops after the round in progress, says how to continue, exits 143 and leaves
 * an interrupted run (summary.json marked, model.bin); the clients, told so, wait, and `serve --resume` finishes the
 * run with them: the simulation's model.bin and metrics. */
static void a_server_stopped_by_a_signal_resumes(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t5s.ini"));
    write_config(cfg, 3, 6, DP);
    train(cfg, tp("t5s-sim"));
    const int port = free_port();
    pid_t srv = serve(port, cfg, tp("t5s-dep"), tp("t5s-server1.log"), "--join-timeout 30 --round-timeout 30");
    pid_t cl[3];
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t5s-state%d", k), tp("t5s-client%d.log", k), "--delay 0.25");
    const double end = now_s() + 60;
    while (count_lines(tp("t5s-dep/metrics.jsonl")) < 2 && now_s() < end) sleep_s(0.01);
    kill(srv, SIGTERM);
    expect_exit(srv, 128 + SIGTERM, tp("t5s-server1.log"), 60);
    assert_true(contains(tp("t5s-server1.log"), "continue with: dpfl serve --resume "));
    const int done_before = count_lines(tp("t5s-dep/metrics.jsonl"));
    assert_true(done_before >= 2 && done_before < 6);
    cJSON *sum = json_file(tp("t5s-dep/summary.json"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "interrupted")));
    assert_int_equal((int)num(sum, "rounds"), done_before);
    cJSON_Delete(sum);
    assert_int_equal(access(tp("t5s-dep/model.bin"), F_OK), 0);
    /* the clients were told, and wait for the resumed server */
    sleep_s(0.5);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(waitpid(cl[k], NULL, WNOHANG), 0);
        assert_true(contains(tp("t5s-client%d.log", k), "waiting for it to resume"));
    }
    srv = spawn(tp("t5s-server2.log"), "serve --resume '%s' --bind tcp://127.0.0.1:%d --keys '%s' --join-timeout 30 "
                                       "--round-timeout 30", tp("t5s-dep"), port, tp("keys/server"));
    expect_exit(srv, 0, tp("t5s-server2.log"), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("t5s-client%d.log", k), 10);
    assert_same_bytes(tp("t5s-sim/model.bin"), tp("t5s-dep/model.bin"));
    assert_same_file(tp("t5s-sim/metrics.jsonl"), tp("t5s-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t5s-sim/summary.json"), tp("t5s-dep/summary.json"), "epsilon");
}

/* ---------------------------------------------------------------------------------------------- 6 */
/* The README's example: scripts/deploy_heart.sh (the four heart-disease centres, rPDP-FL), here with Poisson client
 * sampling so that rounds a centre sits out are charged to its records when it learns they were released; --check
 * has the script compare model.bin and epsilon with dpfl train's; each centre's own ledger gives the epsilon the
 * server reports for that centre's records. */
static void the_heart_deployment_script_runs(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "DPFL='%s' PORT=%d scripts/deploy_heart.sh '%s' --check --set fl.rounds=6 --set "
                              "fl.sampling=poisson --set fl.client_rate=0.5 > '%s' 2>&1", bin, free_port(), tp("heart"),
             tp("heart.log"));
    if (system(cmd) != 0) {
        char *t = slurp(tp("heart.log"));
        print_error("%s\n%s\n", cmd, t ? t : "");
        free(t);
        fail();
    }
    assert_true(contains(tp("heart.log"), "--check: the same model.bin bytes and epsilon"));
    cJSON *sum = json_file(tp("heart/run/summary.json"));
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sum, "record_budgets"),
                                                        "per_client");
    assert_int_equal(cJSON_GetArraySize(per), 4);
    for (int k = 0; k < 4; k++) {
        cJSON *c = json_file(tp("heart/centre%d/client.json", k));
        const double want = num(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(per, k), "epsilon"), "max");
        if (num(c, "epsilon") != want) print_error("centre %d: own epsilon %.17g, server %.17g\n", k, num(c, "epsilon"), want);
        assert_true(num(c, "epsilon") == want);
        cJSON_Delete(c);
    }
    cJSON_Delete(sum);
}

/* Each site holds only its own file (examples/own_csv.ini lists the four centres' files with their row counts): the
 * script runs every centre in a folder holding its own file alone, under a name of its own given by --data, and
 * the server in one holding none, and gets dpfl train's bytes and epsilon; the server, with no test data, reports
 * no accuracy.  A client whose own file is not there refuses on one line naming it. */
static void sites_hold_only_their_own_files(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "DPFL='%s' PORT=%d scripts/deploy_heart.sh '%s' --own-files --check --set fl.rounds=4 "
                              "> '%s' 2>&1", bin, free_port(), tp("own"), tp("own.log"));
    if (system(cmd) != 0) {
        char *t = slurp(tp("own.log"));
        print_error("%s\n%s\n", cmd, t ? t : "");
        free(t);
        fail();
    }
    assert_true(contains(tp("own.log"), "--check: the same model.bin bytes and epsilon"));
    assert_true(contains(tp("own.log"), "no test data here"));
    assert_int_equal(access(tp("own/server/data"), F_OK), -1); /* the server's folder held no data */
    assert_int_equal(access(tp("own/site1/hungarian.csv"), F_OK), 0); /* its own file, under its own name ... */
    assert_int_equal(access(tp("own/site1/cleveland.csv"), F_OK), -1); /* ... and no other */
    assert_int_equal(access(tp("own/site1/data"), F_OK), -1);
    cJSON *sum = json_file(tp("own/run/summary.json"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(sum, "test_accuracy")));
    cJSON_Delete(sum);
    /* client 1 started where only client 0's file is */
    char cfgpath[4096], wd[700];
    assert_non_null(realpath("examples/own_csv.ini", cfgpath));
    snprintf(wd, sizeof wd, "%s", tp("own/site0"));
    const int port = free_port();
    spawn_cwd = tp("own/server");
    pid_t sv = serve(port, cfgpath, tp("own-run2"), tp("own2-server.log"), "--join-timeout 30");
    spawn_cwd = wd;
    pid_t cl = join(port, cfgpath, 1, tp("keys/c1"), tp("own2-c1"), tp("own2-c1.log"), "");
    spawn_cwd = NULL;
    expect_exit(cl, 1, tp("own2-c1.log"), 30);
    assert_true(contains(tp("own2-c1.log"), "cannot open data file (data/heart-disease/processed.hungarian.data): "
                                            "dpfl join trains client 1, whose records are in it"));
    kill(sv, SIGTERM);
    wait_exit(sv, 10);
    /* --data stands for entry K of a list of files with their counts, and for nothing else */
    pid_t bad = join(port, "examples/rpdp_heart.ini", 1, tp("keys/c1"), tp("own3-c1"), tp("own3-c1.log"),
                     "--data mine.csv");
    expect_exit(bad, 1, tp("own3-c1.log"), 30);
    assert_true(contains(tp("own3-c1.log"), "dpfl join --data: needs data.dataset = csv:FILE, FILE, ..."));
}

/* ---------------------------------------------------------------------------------------------- 7 */
/* Distributed DP over the wire: every client clips, rounds, noises and masks its own update; the server runs secure
 * aggregation with the clients' processes.  Without dropouts: the simulation's bytes.  With a real dropout -- client
 * 3 killed after it shared its keys, before its masked input -- the survivors unmask the sum without it (its
 * pairwise masks rebuilt from the shares), which is exactly the simulation in which client_dp.dropout drops client
 * 3 in that round (the simulated dropout too shares its keys first): the same model bytes. */
static const char *DDP = "[client_dp]\nenabled = yes\nmechanism = ddp\nnoise = 0.8\nclip = 1.0\ndelta = 0.01\n"
                         "ddp_tolerated_dropout = 0.25\n";

static void distributed_dp_runs_secure_aggregation_on_the_wire(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t7.ini"));
    write_config(cfg, 4, 3, DDP);
    train(cfg, tp("t7-sim"));
    int port = free_port();
    pid_t srv = serve(port, cfg, tp("t7-dep"), tp("t7-server.log"), "--join-timeout 30 --round-timeout 30");
    pid_t cl[4];
    for (int k = 0; k < 4; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t7-state%d", k), tp("t7-client%d.log", k), "");
    expect_exit(srv, 0, tp("t7-server.log"), 60);
    for (int k = 0; k < 4; k++) expect_exit(cl[k], 0, tp("t7-client%d.log", k), 10);
    assert_same_bytes(tp("t7-sim/model.bin"), tp("t7-dep/model.bin"));
    assert_same_file(tp("t7-sim/metrics.jsonl"), tp("t7-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t7-sim/summary.json"), tp("t7-dep/summary.json"), "client_epsilon");
    assert_true(
        contains(tp("t7-server.log"), "round 3: 4 clients sampled, the sum of 4 masked inputs unmasked (4 answers)"));
    /* the summary says where secure aggregation ran (it said "in process" for a deployment: audit 4) */
    assert_true(contains(tp("t7-dep/summary.json"), "between the server and the clients' processes"));
    assert_true(contains(tp("t7-sim/summary.json"), "in process: pairwise X25519 masks"));

    /* a seed whose simulated dropouts (p = 0.3) drop client 3 alone in round 1 */
    int seed = 0;
    for (int sd = 1; sd < 5000 && !seed; sd++) {
        dpfl_rng root, d;
        dpfl_rng_init_seed(&root, (uint64_t)sd);
        int pattern = 0;
        for (int k = 0; k < 4; k++) {
            dpfl_rng_derive(&root, &d, 1, (uint64_t)k, PURPOSE_DROPOUT);
            pattern |= dpfl_rng_bernoulli(&d, 0.3) << k;
        }
        if (pattern == 8) seed = sd;
    }
    assert_true(seed > 0);
    char extra[512], cfg2[512];
    snprintf(cfg2, sizeof cfg2, "%s", tp("t7b.ini"));
    write_config_seed(cfg2, 4, 1, DDP, seed);
    snprintf(extra, sizeof extra, "%sdropout = 0.3\n", DDP); /* the simulation: the same, client 3 dropping */
    write_config_seed(tp("t7b-sim.ini"), 4, 1, extra, seed);
    train(tp("t7b-sim.ini"), tp("t7b-sim"));
    port = free_port();
    srv = serve(port, cfg2, tp("t7b-dep"), tp("t7b-server.log"), "--join-timeout 30 --round-timeout 1.5 --verbose");
    for (int k = 0; k < 4; k++)
        cl[k] = join(port, cfg2, k, tp("keys/c%d", k), tp("t7b-state%d", k), tp("t7b-client%d.log", k),
                     k == 3 ? "--delay 30" : "");
    /* client 3's ledger is written when it has its masked input ready, after its shares went out: killed there */
    const double end = now_s() + 30;
    while (access(tp("t7b-state3/client.bin"), F_OK) != 0 && now_s() < end) sleep_s(0.02);
    assert_int_equal(access(tp("t7b-state3/client.bin"), F_OK), 0);
    kill(cl[3], SIGKILL);
    assert_int_equal(wait_exit(cl[3], 5), 128 + SIGKILL);
    expect_exit(srv, 0, tp("t7b-server.log"), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("t7b-client%d.log", k), 10);
    assert_true(contains(tp("t7b-server.log"), "round 1: client 3 did not send its masked input"));
    assert_true(contains(tp("t7b-server.log"), "the sum of 3 masked inputs unmasked (3 answers); dropped (1): client 3"));
    assert_same_bytes(tp("t7b-sim/model.bin"), tp("t7b-dep/model.bin"));
    assert_same_summary_value(tp("t7b-sim/summary.json"), tp("t7b-dep/summary.json"), "client_epsilon");
}

/* A distributed-DP round that samples one client can release nothing (secure aggregation needs two): nobody is asked
 * to train, deployed as in one process, so the client's kept state (momentum) does not move and the rounds after it
 * agree to the bit (model.bin, metrics.jsonl); the round is charged in both. */
static int participants_of_round(const char *diag, int round)
{
    char *t = slurp(diag);
    assert_non_null(t);
    int found = -1;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        if (o && num(o, "round") == round) found = (int)num(o, "participants");
        cJSON_Delete(o);
    }
    free(t);
    return found;
}

static void a_ddp_round_of_one_client_trains_nobody_deployed(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char extra[512], cfg[512];
    snprintf(extra, sizeof extra, "sampling = poisson\nclient_rate = 0.3\noptimizer = sgd\nmomentum = 0.9\n"
                                  "client_state = keep\n\n%s", DDP);
    snprintf(cfg, sizeof cfg, "%s", tp("t7c.ini"));
    int seed = 0; /* a seed whose round 2 samples one client and whose rounds 1 and 3 sample two or more */
    for (int sd = 1; sd < 200 && !seed; sd++) {
        write_config_seed(cfg, 4, 3, extra, sd);
        train(cfg, tp("t7c-sim"));
        const char *dg = tp("t7c-sim/diagnostics.jsonl");
        if (participants_of_round(dg, 2) == 1 && participants_of_round(dg, 1) >= 2 && participants_of_round(dg, 3) >= 2)
            seed = sd;
    }
    assert_true(seed > 0);
    int port = free_port();
    pid_t srv = serve(port, cfg, tp("t7c-dep"), tp("t7c-server.log"), "--join-timeout 30 --round-timeout 30");
    pid_t cl[4];
    for (int k = 0; k < 4; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t7c-state%d", k), tp("t7c-client%d.log", k), "");
    expect_exit(srv, 0, tp("t7c-server.log"), 60);
    for (int k = 0; k < 4; k++) expect_exit(cl[k], 0, tp("t7c-client%d.log", k), 10);
    assert_true(contains(tp("t7c-server.log"), "round 2: 1 client(s) sampled, too few for secure aggregation"));
    assert_same_bytes(tp("t7c-sim/model.bin"), tp("t7c-dep/model.bin"));
    assert_same_file(tp("t7c-sim/metrics.jsonl"), tp("t7c-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t7c-sim/summary.json"), tp("t7c-dep/summary.json"), "client_epsilon");
}

/* A client that sent its masked input and then dropped out during the unmasking: its input stays in the sum (the
 * other clients' shares of its self-mask seed unmask it, Bonawitz et al. 2017 round 3), so the release is the sum
 * of all four -- the simulation without any dropout, byte for byte -- and the server does not count it dropped.
 * Client 0 is slow with its masked input, so the unmasking request goes out after client 3 is gone. */
static void a_client_gone_during_the_unmasking_stays_in_the_sum(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("t7d.ini"));
    write_config_seed(cfg, 4, 1, DDP, 11);
    train(cfg, tp("t7d-sim"));
    int port = free_port();
    pid_t srv = serve(port, cfg, tp("t7d-dep"), tp("t7d-server.log"), "--join-timeout 30 --round-timeout 8 --verbose");
    pid_t cl[4];
    for (int k = 0; k < 4; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t7d-state%d", k), tp("t7d-client%d.log", k),
                     k == 0 ? "--delay 4" : "");
    const double end = now_s() + 30;
    while (!contains(tp("t7d-client3.log"), "round 1: masked input sent") && now_s() < end) sleep_s(0.02);
    assert_true(contains(tp("t7d-client3.log"), "round 1: masked input sent"));
    sleep_s(0.3); /* the frame is on its way to the server (a local socket); client 0 still holds its input back */
    kill(cl[3], SIGKILL);
    assert_int_equal(wait_exit(cl[3], 5), 128 + SIGKILL);
    expect_exit(srv, 0, tp("t7d-server.log"), 60);
    for (int k = 0; k < 3; k++) expect_exit(cl[k], 0, tp("t7d-client%d.log", k), 10);
    assert_false(contains(tp("t7d-client3.log"), "unmask"));
    assert_true(contains(tp("t7d-server.log"), "round 1: client 3 did not send its unmasking shares"));
    assert_true(contains(tp("t7d-server.log"), "the sum of 4 masked inputs unmasked (3 answers)\n"));
    assert_same_bytes(tp("t7d-sim/model.bin"), tp("t7d-dep/model.bin"));
    assert_same_file(tp("t7d-sim/metrics.jsonl"), tp("t7d-dep/metrics.jsonl"));
    assert_same_summary_value(tp("t7d-sim/summary.json"), tp("t7d-dep/summary.json"), "client_epsilon");
}

/* ---------------------------------------------------------------------------------------------- 8 */
/* Each client's own ledger equals the simulation's epsilon of its records, for every client: with distributed DP
 * (the ledger charged when the masked input is ready), and for a client killed in the middle of a round and
 * restarted on its own state folder (its ledger read back from client.bin, the round it owes answered with the same
 * bytes and charged once). */
static void own_epsilon_equals_the_simulations(const char *sim, const char *state_fmt, int clients)
{
    cJSON *last = json_last_line(tp("%s/metrics.jsonl", sim));
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(last, "epsilon_per_client");
    assert_int_equal(cJSON_GetArraySize(per), clients);
    for (int k = 0; k < clients; k++) {
        char st[600];
        snprintf(st, sizeof st, state_fmt, k);
        cJSON *c = json_file(tp("%s/client.json", st));
        const double want = cJSON_GetArrayItem(per, k)->valuedouble;
        if (num(c, "epsilon") != want) print_error("client %d: own epsilon %.17g, simulation %.17g\n", k, num(c, "epsilon"), want);
        assert_true(want > 0);
        assert_true(num(c, "epsilon") == want);
        cJSON_Delete(c);
    }
    cJSON_Delete(last);
}

static void every_clients_own_ledger_with_ddp_and_after_a_restart(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    /* distributed DP with record-level DP in the clients */
    char cfg[512], extra[1024];
    snprintf(cfg, sizeof cfg, "%s", tp("t8.ini"));
    snprintf(extra, sizeof extra, "[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 1.0\ndelta = 1e-5\n\n%s", DDP);
    write_config(cfg, 4, 2, extra);
    train(cfg, tp("t8-sim"));
    int port = free_port();
    pid_t srv = serve(port, cfg, tp("t8-dep"), tp("t8-server.log"), "--join-timeout 30 --round-timeout 30");
    pid_t cl[4];
    for (int k = 0; k < 4; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t8-state%d", k), tp("t8-client%d.log", k), "");
    expect_exit(srv, 0, tp("t8-server.log"), 60);
    for (int k = 0; k < 4; k++) expect_exit(cl[k], 0, tp("t8-client%d.log", k), 10);
    assert_same_bytes(tp("t8-sim/model.bin"), tp("t8-dep/model.bin"));
    assert_same_summary_value(tp("t8-sim/summary.json"), tp("t8-dep/summary.json"), "epsilon");
    own_epsilon_equals_the_simulations("t8-sim", "t8-state%d", 4);

    /* client 2 killed on its slow link in round 1 (trained, charged, saved, its update not yet sent), restarted on
     * its folder: the server gives it the round it owes, it answers with the saved bytes */
    snprintf(cfg, sizeof cfg, "%s", tp("t9.ini"));
    write_config(cfg, 3, 3, DP);
    train(cfg, tp("t9-sim"));
    port = free_port();
    srv = serve(port, cfg, tp("t9-dep"), tp("t9-server.log"), "--join-timeout 30 --round-timeout 30");
    for (int k = 0; k < 3; k++)
        cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("t9-state%d", k), tp("t9-client%d.log", k),
                     k == 2 ? "--delay 30" : "");
    const double end = now_s() + 30;
    while (access(tp("t9-state2/client.json"), F_OK) != 0 && now_s() < end) sleep_s(0.02);
    assert_int_equal(access(tp("t9-state2/client.json"), F_OK), 0);
    kill(cl[2], SIGKILL);
    assert_int_equal(wait_exit(cl[2], 5), 128 + SIGKILL);
    cl[2] = join(port, cfg, 2, tp("keys/c2"), tp("t9-state2"), tp("t9-client2b.log"), "");
    expect_exit(srv, 0, tp("t9-server.log"), 60);
    for (int k = 0; k < 2; k++) expect_exit(cl[k], 0, tp("t9-client%d.log", k), 10);
    expect_exit(cl[2], 0, tp("t9-client2b.log"), 10);
    assert_true(contains(tp("t9-client2b.log"), "carrying on from"));
    assert_same_bytes(tp("t9-sim/model.bin"), tp("t9-dep/model.bin"));
    assert_same_summary_value(tp("t9-sim/summary.json"), tp("t9-dep/summary.json"), "epsilon");
    cJSON *c = json_file(tp("t9-state2/client.json"));
    assert_int_equal((int)num(c, "rounds_trained"), 3);
    cJSON_Delete(c);
    own_epsilon_equals_the_simulations("t9-sim", "t9-state%d", 3);
}

/* An operator resumes the server from an OLDER checkpoint than the rounds the run released (a backup copied back):
 * the server would release rounds 3-4 again and charge them once, while each client has charged them already.  The
 * clients' last answers (round 4, said at once after the hello) are past the checkpoint's rounds: the server refuses
 * to start, with one line and exit 1, before it writes anything (metrics.jsonl, summary.json and the checkpoint as
 * they were); every client's own epsilon is the one the server reported for its records.  With the Gaussian
 * mechanism (updates in the clear) and with distributed DP (secure aggregation). */
static void older_checkpoint_is_refused(const char *name, int clients, const char *extra)
{
    char cfg[512], dep[600], cmd[2048];
    snprintf(cfg, sizeof cfg, "%s", tp("%s.ini", name));
    snprintf(dep, sizeof dep, "%s", tp("%s-dep", name));
    write_config(cfg, clients, 2, extra);
    const int port = free_port();
    pid_t cl[4];
    for (int session = 1; session <= 3; session++) { /* rounds 1-2; resumed to 4; resumed from round 2's checkpoint */
        const char *log = tp("%s-server%d.log", name, session);
        pid_t srv = session == 1 ? serve(port, cfg, dep, log, "--join-timeout 30 --round-timeout 30")
                                 : spawn(log, "serve --resume '%s' --set fl.rounds=%d --bind tcp://127.0.0.1:%d --keys "
                                              "'%s' --join-timeout 30 --round-timeout 30",
                                         dep, 2 * session, port, tp("keys/server"));
        for (int k = 0; k < clients; k++)
            cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("%s-state%d", name, k),
                         tp("%s-client%d-%d.log", name, k, session), "");
        expect_exit(srv, session < 3 ? 0 : 1, log, 60);
        for (int k = 0; k < clients; k++)
            if (session < 3) expect_exit(cl[k], 0, tp("%s-client%d-%d.log", name, k, session), 10);
            else assert_int_not_equal(wait_exit(cl[k], 10), 0); /* told that the server stopped */
        if (session == 1) /* the backup (a checkpoint put back alone is refused by its metrics: test_dp_train) */
            snprintf(cmd, sizeof cmd, "cp '%s/checkpoint.bin' '%s/%s-ckpt2.bin' && cp '%s/metrics.jsonl' '%s/%s-metrics2'",
                     dep, tmp, name, dep, tmp, name);
        else if (session == 2) /* the run as released; the backup put back */
            snprintf(cmd, sizeof cmd, "cd '%s' && cp metrics.jsonl ../%s-metrics4 && cp summary.json ../%s-summary4 && "
                                      "cp ../%s-ckpt2.bin checkpoint.bin && cp ../%s-metrics2 metrics.jsonl",
                     dep, name, name, name, name);
        if (session < 3) assert_int_equal(system(cmd), 0);
        if (session == 2) assert_int_equal(count_lines(tp("%s-metrics4", name)), 4);
    }
    const char *log = tp("%s-server3.log", name);
    assert_true(contains(log, "of this run, and this checkpoint has released 2 rounds: it is older than the rounds "
                              "this run released"));
    assert_true(contains(log, "resume from the run's newest checkpoint.bin (nothing was trained or written)"));
    /* nothing written: the metrics, the summary and the checkpoint put back are as they were */
    assert_same_file(tp("%s-metrics2", name), tp("%s-dep/metrics.jsonl", name));
    assert_same_file(tp("%s-summary4", name), tp("%s-dep/summary.json", name));
    snprintf(cmd, sizeof cmd, "cmp -s '%s/%s-ckpt2.bin' '%s/checkpoint.bin'", tmp, name, dep);
    assert_int_equal(system(cmd), 0);
    /* each client charged 4 rounds, and the epsilon reported for its records is its own ledger's */
    cJSON *last = json_last_line(tp("%s-metrics4", name)); /* the rounds released before the backup was put back */
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(last, "epsilon_per_client");
    cJSON *sum = json_file(tp("%s-dep/summary.json", name));
    for (int k = 0; k < clients; k++) {
        cJSON *c = json_file(tp("%s-state%d/client.json", name, k));
        assert_int_equal((int)num(c, "rounds_trained"), 4);
        assert_int_equal((int)num(c, "last_round"), 4);
        assert_true(num(c, "epsilon") == cJSON_GetArrayItem(per, k)->valuedouble);
        assert_true(num(sum, "epsilon") >= num(c, "epsilon"));
        cJSON_Delete(c);
    }
    cJSON_Delete(sum);
    cJSON_Delete(last);
}

static void a_server_resumed_from_an_older_checkpoint_is_refused(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    older_checkpoint_is_refused("rb", 3, DP);
    char extra[1024];
    snprintf(extra, sizeof extra, "[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 1.0\ndelta = 1e-5\n\n%s", DDP);
    older_checkpoint_is_refused("rbd", 4, extra);
}

/* What tells a run from a new one is the server's partition key, which a run without a seed draws afresh (and its
 * checkpoint keeps).  A new run (no seed; the heart centres' natural partition comes out the same, so the clients'
 * old folders are accepted) is its own run: each client's last answer was the other run's, forgotten, its ledger
 * carried on (4 rounds trained over both), and the server runs. */
static void a_new_run_on_the_clients_old_folders_is_its_own_run(void **state)
{
    (void)state;
    if (!dpfl_net_available()) skip();
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s", tp("nr.ini"));
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "[data]\ndataset = heart\npartition = natural\nclients = 4\n\n[model]\narch = logreg\n\n[fl]\nrounds = 2\n"
               "local_steps = 3\nlr = 0.5\n\n[record_dp]\nenabled = yes\nnoise = 1.0\nclip = 0.5\ndelta = 1e-3\n");
    fclose(f);
    const int port = free_port();
    pid_t cl[4];
    for (int run = 1; run <= 2; run++) {
        pid_t srv = serve(port, cfg, tp("nr-dep%d", run), tp("nr-server%d.log", run), "--join-timeout 30 --round-timeout 30");
        for (int k = 0; k < 4; k++)
            cl[k] = join(port, cfg, k, tp("keys/c%d", k), tp("nr-state%d", k), tp("nr-client%d-%d.log", k, run), "");
        expect_exit(srv, 0, tp("nr-server%d.log", run), 60);
        for (int k = 0; k < 4; k++) expect_exit(cl[k], 0, tp("nr-client%d-%d.log", k, run), 10);
    }
    for (int k = 0; k < 4; k++) {
        assert_true(contains(tp("nr-client%d-2.log", k), "client.bin of another run (another partition key)"));
        cJSON *c = json_file(tp("nr-state%d/client.json", k));
        assert_int_equal((int)num(c, "rounds_trained"), 4);
        assert_int_equal((int)num(c, "last_round"), 2);
        cJSON_Delete(c);
    }
}

/* Without libzmq: serve and join fail with one line naming what is missing. */
static void without_zmq_serve_says_what_is_missing(void **state)
{
    (void)state;
    if (dpfl_net_available()) skip();
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "'%s' serve examples/demo.ini --bind tcp://127.0.0.1:1 --keys /tmp 2>&1 | grep -q "
                              "'built without ZeroMQ'", bin);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(deployed_run_equals_the_simulation, kill_leftovers),
        cmocka_unit_test_teardown(personal_models_deployed_equal_the_simulation, kill_leftovers),
        cmocka_unit_test_teardown(cross_device_deployed_equals_the_simulation, kill_leftovers),
        cmocka_unit_test_teardown(scaffold_deployed_equals_the_simulation, kill_leftovers),
        cmocka_unit_test_teardown(the_filter_runs_deployed_and_its_spend_survives_a_restart, kill_leftovers),
        cmocka_unit_test_teardown(unlisted_keys_and_impostors_are_refused, kill_leftovers),
        cmocka_unit_test_teardown(malformed_frames_do_not_stop_the_server, kill_leftovers),
        cmocka_unit_test_teardown(a_client_killed_mid_round_is_a_dropout, kill_leftovers),
        cmocka_unit_test_teardown(a_server_whose_clients_never_join_does_not_start, kill_leftovers),
        cmocka_unit_test_teardown(a_server_stops_after_rounds_without_updates, kill_leftovers),
        cmocka_unit_test_teardown(a_resumed_server_finishes_the_uninterrupted_run, kill_leftovers),
        cmocka_unit_test_teardown(a_server_stopped_by_a_signal_resumes, kill_leftovers),
        cmocka_unit_test_teardown(the_heart_deployment_script_runs, kill_leftovers),
        cmocka_unit_test_teardown(sites_hold_only_their_own_files, kill_leftovers),
        cmocka_unit_test_teardown(distributed_dp_runs_secure_aggregation_on_the_wire, kill_leftovers),
        cmocka_unit_test_teardown(a_ddp_round_of_one_client_trains_nobody_deployed, kill_leftovers),
        cmocka_unit_test_teardown(a_client_gone_during_the_unmasking_stays_in_the_sum, kill_leftovers),
        cmocka_unit_test_teardown(every_clients_own_ledger_with_ddp_and_after_a_restart, kill_leftovers),
        cmocka_unit_test_teardown(a_server_resumed_from_an_older_checkpoint_is_refused, kill_leftovers),
        cmocka_unit_test_teardown(a_new_run_on_the_clients_old_folders_is_its_own_run, kill_leftovers),
        cmocka_unit_test_teardown(without_zmq_serve_says_what_is_missing, kill_leftovers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
