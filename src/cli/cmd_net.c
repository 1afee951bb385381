/* dpfl serve / dpfl join / dpfl keygen: deployment over the network (include/dpfl/net.h). */
#include "dpfl/run.h"
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
int cli_keygen(int argc, char **argv)
{
    int force = 0;
    cli_opt o[] = {
        {.name = "--force", .type = CLI_FLAG, .out = &force, .help = "replace an existing key"},
    };
    cli_command cmd = {
        .name = "keygen",
        .usage = "dpfl keygen DIR NAME [--force]",
        .about = "Writes a CURVE key pair for deployment: DIR/NAME.key (the secret key, Z85, mode 0600) and DIR/NAME.pub\n"
                 "(the public key, Z85).  The server's pair is named server; client K's is client<K> (that name lets it\n"
                 "act as client K only).  Give the server a copy of every client's NAME.pub in its allow-list folder\n"
                 "(--keys DIR: DIR/clients/), and every client a copy of server.pub.  An existing key is kept unless --force.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "DIR and NAME",
        .min_args = 2,
        .max_args = 2,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    dpfl_error err;
    char pub[41];
    rc = dpfl_net_keygen(cmd.arg.v[0], cmd.arg.v[1], force, pub, &err) ? cli_error("%s", err.msg) : 0;
    if (!rc) printf("%s/%s.pub %s\n", cmd.arg.v[0], cmd.arg.v[1], pub);
    cli_done(&cmd);
    return rc;
}

/* ------------------------------------------------------------------------------------------ serve */
/* the served training of the config at config_path (or of the run directory resume) with the --set values over it */
static int serve(const char *config_path, const char *resume, const cli_strings *sets, const char *out, int force,
                 dpfl_serve_options so)
{
    dpfl_config cfg;
    cli_run_paths paths;
    int rc = cli_run_config("serve", config_path, resume, NULL, sets, &out, force, &cfg, &paths);
    if (rc) return rc;
    dpfl_error err;
    dpfl_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.out_dir = out;
    opt.quiet = so.quiet;
    opt.resume = resume != NULL;
    opt.force = force;
    char how[1400];
    snprintf(how, sizeof how, "dpfl serve --resume %s (with this --bind and --keys)", out);
    opt.stop = cli_stop_catch(how);
    if (dpfl_net_serve(&cfg, &opt, &so, &err)) return cli_error("%s", err.msg);
    return cli_stop_status();
}

int cli_serve(int argc, char **argv)
{
    const char *out = NULL, *resume = NULL;
    dpfl_serve_options so = {NULL, NULL, NULL, -1, 300.0, 60.0, 0, 0, 3};
    cli_strings sets = {NULL, 0};
    long wait = -1, max_empty = 3;
    int force = 0;
    cli_opt o[] = {
        {.name = "--bind", .type = CLI_STRING, .out = &so.bind, .value = "tcp://ADDR:PORT", .required = 1,
         .help = "where the clients connect"},
        {.name = "--keys", .type = CLI_STRING, .out = &so.keys_dir, .value = "DIR", .required = 1,
         .help = "DIR/server.key is the server's secret key (dpfl keygen DIR server)"},
        {.name = "--allow", .type = CLI_STRING, .out = &so.allow_dir, .value = "DIR",
         .help = "the allow-list: client public keys NAME.pub (default DIR/clients of --keys); a key\n"
                 "named client<K> may act as client K only; other keys are rejected and logged"},
        {.name = "--set", .type = CLI_STRINGS, .out = &sets, .value = "section.key=value",
         .help = "override a key of the config (any number of times)"},
        {.name = "--out", .alias = "-o", .type = CLI_STRING, .out = &out, .value = "DIR",
         .help = "the run directory (default runs/<config name>)"},
        {.name = "--resume", .type = CLI_STRING, .out = &resume, .value = "RUN_DIR",
         .help = "continue the run in RUN_DIR from its last checkpoint, with its own config"},
        {.name = "--force", .type = CLI_FLAG, .out = &force, .help = "replace an existing non-empty run directory"},
        {.name = "--wait", .type = CLI_LONG, .out = &wait, .value = "N", CLI_RANGE(0, 1000000),
         .help = "clients that must join before round 1 (default: all of the config's)"},
        {.name = "--join-timeout", .type = CLI_DOUBLE, .out = &so.join_timeout, .value = "S",
         .help = "wait at most S seconds for them (default 300); fewer by then: an error, nothing is\n"
                 "trained or charged"},
        {.name = "--round-timeout", .type = CLI_DOUBLE, .out = &so.round_timeout, .value = "S",
         .help = "a client that has not sent its update S seconds after the round began is a\n"
                 "dropout (default 60): sampled and charged, its update missing"},
        {.name = "--max-empty-rounds", .type = CLI_LONG, .out = &max_empty, .value = "N", CLI_RANGE(0, 1000000),
         .help = "stop (an error; the run can be resumed) once N rounds in a row sampled clients and\n"
                 "received no update (default 3; 0: never)"},
        {.name = "--verbose", .type = CLI_FLAG, .out = &so.verbose,
         .help = "a log line per client and message, besides the one line per round"},
        {.name = "--quiet", .type = CLI_FLAG, .out = &so.quiet, .help = "no progress lines"},
    };
    cli_command cmd = {
        .name = "serve",
        .usage = "dpfl serve CONFIG.ini --bind tcp://ADDR:PORT --keys DIR [--allow DIR] [--set section.key=value]...\n"
                 "                  [--out DIR] [--force] [--wait N] [--join-timeout S] [--round-timeout S]\n"
                 "                  [--max-empty-rounds N] [--verbose] [--quiet]\n"
                 "       dpfl serve --resume RUN_DIR --bind ... --keys DIR [--set fl.rounds=N] ...",
        .about = "Runs a federated training as dpfl train does (the same run directory, checkpoints, --resume), with each\n"
                 "sampled client trained by its own `dpfl join` process over ZeroMQ with CURVE encryption.\n",
        .after = "With a [run] seed the run writes the same model.bin and epsilon as dpfl train of the same config.\n"
                 "Ctrl-C (SIGINT) or SIGTERM stops the run after the round in progress, as in dpfl train (summary.json\n"
                 "marked interrupted, model.bin written; exit 130 or 143); the clients are told and wait, up to their\n"
                 "--idle-timeout, for `dpfl serve --resume RUN_DIR` (with the same --bind and --keys) to continue.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "CONFIG.ini",
        .min_args = 0,
        .max_args = 1,
    };
    /* before the arguments are read: scripts/deploy_heart.sh asks a bare `dpfl serve` whether ZeroMQ is built in */
    if (!cli_wants_help(argc, argv) && need_zmq("serve")) return 1;
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    so.wait_clients = (int32_t)wait;
    so.max_empty_rounds = (int32_t)max_empty;
    rc = serve(cmd.arg.n ? cmd.arg.v[0] : NULL, resume, &sets, out, force, so);
    cli_done(&cmd);
    return rc;
}

/* ------------------------------------------------------------------------------------------ join */
/* client jo.client of the served training of the config at config_path with the --set values over it */
static int join(const char *config_path, const cli_strings *sets, const char *state, dpfl_join_options jo)
{
    char state_buf[512];
    if (state) snprintf(state_buf, sizeof state_buf, "%s", state);
    else snprintf(state_buf, sizeof state_buf, "runs/join-client%d", jo.client);
    jo.state_dir = state_buf;
    dpfl_config cfg;
    int rc = cli_config_read(&cfg, config_path, NULL, sets, 0);
    if (rc) return rc;
    dpfl_error err;
    if (dpfl_net_join(&cfg, &jo, &err)) return cli_error("%s", err.msg);
    return 0;
}

int cli_join(int argc, char **argv)
{
    const char *config_path = NULL, *state = NULL;
    dpfl_join_options jo = {NULL, NULL, NULL, -1, NULL, 600.0, 0.0, 0, NULL};
    cli_strings sets = {NULL, 0};
    long client = -1;
    cli_opt o[] = {
        {.name = "--server", .type = CLI_STRING, .out = &jo.server, .value = "tcp://HOST:PORT", .required = 1,
         .help = "the server's address (dpfl serve --bind)"},
        {.name = "--config", .type = CLI_STRING, .out = &config_path, .value = "CONFIG.ini", .required = 1,
         .help = "the config the server runs"},
        {.name = "--client", .type = CLI_LONG, .out = &client, .value = "K", .required = 1, CLI_RANGE(0, 10000000),
         .help = "which client this is"},
        {.name = "--keys", .type = CLI_STRING, .out = &jo.keys_dir, .value = "DIR", .required = 1,
         .help = "DIR/NAME.key is this client's secret key, DIR/server.pub the server's public key"},
        {.name = "--name", .type = CLI_STRING, .out = &jo.name, .value = "NAME", .help = "the key's name (default client<K>)"},
        {.name = "--data", .type = CLI_STRING, .out = &jo.data, .value = "FILE",
         .help = "this client's own file, wherever it is: it stands for entry K of data.dataset"},
        {.name = "--set", .type = CLI_STRINGS, .out = &sets, .value = "section.key=value",
         .help = "override a key of the config (any number of times)"},
        {.name = "--state", .type = CLI_STRING, .out = &state, .value = "DIR",
         .help = "its ledger and state, client.bin and client.json (default runs/join-client<K>);\n"
                 "a client restarted on the same folder carries on"},
        {.name = "--idle-timeout", .type = CLI_DOUBLE, .out = &jo.idle_timeout, .value = "S",
         .help = "give up after S seconds without a word from the server (default 600)"},
        {.name = "--delay", .type = CLI_DOUBLE, .out = &jo.delay, .value = "S",
         .help = "wait S seconds before sending each update (a slow link; to test deadlines)"},
        {.name = "--quiet", .type = CLI_FLAG, .out = &jo.quiet, .help = "no progress lines"},
    };
    cli_command cmd = {
        .name = "join",
        .usage = "dpfl join --server tcp://HOST:PORT --config CONFIG.ini --client K --keys DIR [--name NAME]\n"
                 "                 [--data FILE] [--set section.key=value]... [--state DIR] [--idle-timeout S] [--delay S]\n"
                 "                 [--quiet]",
        .about = "Runs client K of a deployed training (dpfl serve): the same config, model and partition as the server,\n"
                 "its own optimizer state, its own record-level ledger, and the simulation's local training for every\n"
                 "round it is sent.  A named dataset (mnist, heart) is loaded whole and the client uses its part K; with\n"
                 "data.dataset = csv:FILE, ... and data.source_rows only this client's own file must be here.\n",
        .after = "It exits 0 when the server says the run is over; when the server was interrupted it waits, up to\n"
                 "--idle-timeout, for the resumed server.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    if (!cli_wants_help(argc, argv) && need_zmq("join")) return 1; /* as serve */
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    jo.client = (int32_t)client;
    rc = join(config_path, &sets, state, jo);
    cli_done(&cmd);
    return rc;
}
