/* dpfl serve / dpfl join / dpfl keygen: deployment over the network (include/dpfl/net.h). */
#include "args.h"
#include "cli.h"
#include "dpfl/net.h"

#include <stdlib.h>
#include <string.h>

static int need_zmq(const char *cmd)
{
    if (dpfl_net_available()) return 0;
    return cli_error("dpfl %s: this dpfl was built without ZeroMQ: install libzmq3-dev (scripts/setup.sh installs "
                     "it) and rebuild with make", cmd);
}

/* ------------------------------------------------------------------------------------------ keygen */
static void keygen_help(void)
{
    printf("usage: dpfl keygen DIR NAME [--force]\n\n"
           "Writes a CURVE key pair for deployment: DIR/NAME.key (the secret key, Z85, mode 0600) and DIR/NAME.pub\n"
           "(the public key, Z85).  The server's pair is named server; client K's is client<K> (that name lets it\n"
           "act as client K only).  Give the server a copy of every client's NAME.pub in its allow-list folder\n"
           "(--keys DIR: DIR/clients/), and every client a copy of server.pub.  An existing key is kept unless --force.\n");
}

int cli_keygen(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        keygen_help();
        return 0;
    }
    const char *pos[2] = {NULL, NULL};
    int npos = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force")) force = 1;
        else if (argv[i][0] == '-') return cli_usage_error("keygen", "unknown option '%s'", argv[i]);
        else if (npos < 2) pos[npos++] = argv[i];
        else return cli_usage_error("keygen", "too many arguments ('%s')", argv[i]);
    }
    if (npos != 2) return cli_usage_error("keygen", "needs DIR and NAME");
    dpfl_error err;
    char pub[41];
    if (dpfl_net_keygen(pos[0], pos[1], force, pub, &err)) return cli_error("%s", err.msg);
    printf("%s/%s.pub %s\n", pos[0], pos[1], pub);
    return 0;
}

/* ------------------------------------------------------------------------------------------ serve */
static void serve_help(void)
{
    printf("usage: dpfl serve CONFIG.ini --bind tcp://ADDR:PORT --keys DIR [--allow DIR] [--set section.key=value]...\n"
           "                  [--out DIR] [--force] [--wait N] [--join-timeout S] [--round-timeout S] [--quiet]\n"
           "       dpfl serve --resume RUN_DIR --bind ... --keys DIR [--set fl.rounds=N] ...\n\n"
           "Runs a federated training as dpfl train does (the same run directory, checkpoints, --resume), with each\n"
           "sampled client trained by its own `dpfl join` process over ZeroMQ with CURVE encryption.\n"
           "  --keys DIR          DIR/server.key is the server's secret key (dpfl keygen DIR server)\n"
           "  --allow DIR         the allow-list: client public keys NAME.pub (default DIR/clients of --keys); a key\n"
           "                      named client<K> may act as client K only; other keys are rejected and logged\n"
           "  --wait N            clients that must join before round 1 (default: all of the config's)\n"
           "  --join-timeout S    wait at most S seconds for them (default 300), then start with those present\n"
           "  --round-timeout S   a client that has not sent its update S seconds after the round began is a\n"
           "                      dropout (default 60): sampled and charged, its update missing\n"
           "With a [run] seed the run writes the same model.bin and epsilon as dpfl train of the same config.\n");
}

static int parse_double_opt(const char *opt, const char *v, double *out)
{
    return cli_parse_double(opt, v, out);
}

int cli_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        serve_help();
        return 0;
    }
    if (need_zmq("serve")) return 1;
    const char *config_path = NULL, *out = NULL, *resume = NULL;
    dpfl_serve_options so = {NULL, NULL, NULL, -1, 300.0, 60.0, 0};
    int quiet = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--set")) {
            i++;
        } else if (!strcmp(a, "--out") || !strcmp(a, "--resume") || !strcmp(a, "--bind") || !strcmp(a, "--keys") ||
                   !strcmp(a, "--allow") || !strcmp(a, "--wait") || !strcmp(a, "--join-timeout") ||
                   !strcmp(a, "--round-timeout")) {
            if (!v) return cli_usage_error("serve", "%s needs a value", a);
            i++;
            long n;
            if (!strcmp(a, "--out")) out = v;
            else if (!strcmp(a, "--resume")) resume = v;
            else if (!strcmp(a, "--bind")) so.bind = v;
            else if (!strcmp(a, "--keys")) so.keys_dir = v;
            else if (!strcmp(a, "--allow")) so.allow_dir = v;
            else if (!strcmp(a, "--wait")) {
                if (cli_parse_long(a, v, &n)) return 2;
                if (n < 0 || n > 1000000) return cli_usage_error("serve", "--wait: %ld is not a number of clients", n);
                so.wait_clients = (int32_t)n;
            } else if (!strcmp(a, "--join-timeout")) {
                if (parse_double_opt(a, v, &so.join_timeout)) return 2;
            } else if (parse_double_opt(a, v, &so.round_timeout)) {
                return 2;
            }
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-') {
            return cli_usage_error("serve", "unknown option '%s'", a);
        } else if (config_path) {
            return cli_usage_error("serve", "more than one config file given ('%s')", a);
        } else {
            config_path = a;
        }
    }
    if (!so.bind) return cli_usage_error("serve", "missing --bind tcp://ADDR:PORT");
    if (!so.keys_dir) return cli_usage_error("serve", "missing --keys DIR (dpfl keygen DIR server)");
    char resume_cfg[1100];
    if (resume) {
        if (config_path) return cli_usage_error("serve", "give either CONFIG.ini or --resume RUN_DIR, not both");
        if (out) return cli_usage_error("serve", "--out cannot be used with --resume");
        if (force) return cli_usage_error("serve", "--force cannot be used with --resume");
        snprintf(resume_cfg, sizeof resume_cfg, "%s/config.ini", resume);
        config_path = resume_cfg;
        out = resume;
    }
    if (!config_path) return cli_usage_error("serve", "missing CONFIG.ini");
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    if (dpfl_config_load(&cfg, config_path, &err)) return cli_error("%s", err.msg);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--set")) continue;
        if (i + 1 >= argc) return cli_usage_error("serve", "--set needs section.key=value");
        if (resume && strncmp(argv[i + 1], "fl.rounds=", 10) && strncmp(argv[i + 1], "run.threads=", 12) &&
            strncmp(argv[i + 1], "run.eval_every=", 15))
            return cli_error("--set %s: a resumed run keeps its config; only fl.rounds, run.threads and "
                             "run.eval_every may change", argv[i + 1]);
        if (dpfl_config_set(&cfg, argv[++i], &err)) return cli_error("%s", err.msg);
    }
    char outbuf[512];
    if (!out) {
        const char *base = strrchr(config_path, '/');
        base = base ? base + 1 : config_path;
        snprintf(outbuf, sizeof outbuf, "runs/%.*s", (int)strcspn(base, "."), base);
        out = outbuf;
    }
    so.quiet = quiet;
    dpfl_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.out_dir = out;
    opt.quiet = quiet;
    opt.resume = resume != NULL;
    opt.force = force;
    if (dpfl_net_serve(&cfg, &opt, &so, &err)) return cli_error("%s", err.msg);
    return 0;
}

/* ------------------------------------------------------------------------------------------ join */
static void join_help(void)
{
    printf("usage: dpfl join --server tcp://HOST:PORT --config CONFIG.ini --client K --keys DIR [--name NAME]\n"
           "                 [--data FILE] [--set section.key=value]... [--state DIR] [--idle-timeout S] [--delay S]\n"
           "                 [--quiet]\n\n"
           "Runs client K of a deployed training (dpfl serve): the same config, model and partition as the server,\n"
           "its own optimizer state, its own record-level ledger, and the simulation's local training for every\n"
           "round it is sent.  A named dataset (mnist, heart) is loaded whole and the client uses its part K; with\n"
           "data.dataset = csv:FILE, ... and data.source_rows only this client's own file must be here.\n"
           "  --data FILE         this client's own file, wherever it is: it stands for entry K of data.dataset\n"
           "  --keys DIR          DIR/NAME.key is this client's secret key, DIR/server.pub the server's public key\n"
           "  --name NAME         the key's name (default client<K>)\n"
           "  --state DIR         its ledger and state, client.bin and client.json (default runs/join-client<K>);\n"
           "                      a client restarted on the same folder carries on\n"
           "  --idle-timeout S    give up after S seconds without a word from the server (default 600)\n"
           "  --delay S           wait S seconds before sending each update (a slow link; to test deadlines)\n"
           "It exits 0 when the server says the run is over.\n");
}

int cli_join(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        join_help();
        return 0;
    }
    if (need_zmq("join")) return 1;
    const char *config_path = NULL;
    char state[512] = "";
    dpfl_join_options jo = {NULL, NULL, NULL, -1, NULL, 600.0, 0.0, 0, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) {
            jo.quiet = 1;
            continue;
        }
        if (a[0] != '-') return cli_usage_error("join", "unexpected argument '%s'", a);
        if (!v) return cli_usage_error("join", "%s needs a value", a);
        i++;
        long n;
        if (!strcmp(a, "--set")) continue;
        else if (!strcmp(a, "--server")) jo.server = v;
        else if (!strcmp(a, "--config")) config_path = v;
        else if (!strcmp(a, "--keys")) jo.keys_dir = v;
        else if (!strcmp(a, "--name")) jo.name = v;
        else if (!strcmp(a, "--data")) jo.data = v;
        else if (!strcmp(a, "--state")) snprintf(state, sizeof state, "%s", v);
        else if (!strcmp(a, "--client")) {
            if (cli_parse_long(a, v, &n)) return 2;
            if (n < 0 || n > 10000000) return cli_usage_error("join", "--client: %ld is not a client number", n);
            jo.client = (int32_t)n;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (cli_parse_double(a, v, &jo.idle_timeout)) return 2;
        } else if (!strcmp(a, "--delay")) {
            if (cli_parse_double(a, v, &jo.delay)) return 2;
        } else {
            return cli_usage_error("join", "unknown option '%s'", a);
        }
    }
    if (!jo.server) return cli_usage_error("join", "missing --server tcp://HOST:PORT");
    if (!config_path) return cli_usage_error("join", "missing --config CONFIG.ini");
    if (jo.client < 0) return cli_usage_error("join", "missing --client K");
    if (!jo.keys_dir) return cli_usage_error("join", "missing --keys DIR");
    if (!state[0]) snprintf(state, sizeof state, "runs/join-client%d", jo.client);
    jo.state_dir = state;
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    dpfl_error err;
    if (dpfl_config_load(&cfg, config_path, &err)) return cli_error("%s", err.msg);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--set") && dpfl_config_set(&cfg, argv[++i], &err)) return cli_error("%s", err.msg);
    if (dpfl_net_join(&cfg, &jo, &err)) return cli_error("%s", err.msg);
    return 0;
}
