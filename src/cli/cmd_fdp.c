/* dpfl fdp: PriFedSync weak/strong federated Gaussian DP, CLT values and RDP upper bounds. */
#include "args.h"
#include "core/numtext.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>

int cli_fdp(int argc, char **argv)
{
    long m = -1, B = -1, n = -1, K = -1, R = -1, c = 1;
    double p = NAN, z = NAN, delta = 1e-5;
    int json = 0;
    cli_opt o[] = {
        {.name = "--clients", .type = CLI_LONG, .out = &m, .value = "M", .required = 1, .help = "the number of clients"},
        {.name = "--p", .type = CLI_DOUBLE, .out = &p, .value = "P", .required = 1,
         .help = "the probability that a client syncs in a round"},
        {.name = "--noise", .type = CLI_DOUBLE, .out = &z, .value = "Z", .required = 1,
         .help = "the noise std / 2C (replace-one)"},
        {.name = "--batch", .type = CLI_LONG, .out = &B, .value = "B", .required = 1, .help = "the batch size"},
        {.name = "--n", .type = CLI_LONG, .out = &n, .value = "N", .required = 1, .help = "the records of client j"},
        {.name = "--local-steps", .type = CLI_LONG, .out = &K, .value = "K", .required = 1,
         .help = "local steps per round"},
        {.name = "--rounds", .type = CLI_LONG, .out = &R, .value = "R", .required = 1, .help = "the number of rounds"},
        {.name = "--copies", .type = CLI_LONG, .out = &c, .value = "C",
         .help = "the clients holding the record (default 1); each one's releases compose"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &delta, .value = "D", .help = "default 1e-5"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
    };
    cli_command cmd = {
        .name = "fdp",
        .usage = "dpfl fdp --clients M --p P --noise Z --batch B --n N --local-steps K --rounds R [--copies C]\n"
                 "                [--delta D] [--json]",
        .about = "PriFedSync (Zheng et al.) federated f-DP of one record of client j.  Each client runs K steps per round on\n"
                 "batches of B of its N records drawn without replacement (replace-one; --noise = std / 2C) and syncs with\n"
                 "probability P.  mu / mu_strong (and epsilon_clt / epsilon_strong_clt, their conversions) are the paper's\n"
                 "CLT values (ASYMPTOTIC, not bounds; they ignore P).  epsilon is an RDP upper bound (fixed-size batches,\n"
                 "WBK) that keeps the client sampling P (a round of j is a mixture: with probability P, K steps on its\n"
                 "records); it holds against any observer -- one client (weak), all other clients together (strong), the\n"
                 "server -- since each sees a post-processing of j's releases.  Clients train only in rounds they sync.\n"
                 "The paper's Theorem 1 charges the weak notion P^2 per round; that ignores the global model carrying j's\n"
                 "round into later rounds, so dpfl does not report it (docs/privacy.md).  A record held by C clients is\n"
                 "released by each: --copies C composes them (C K R steps).\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    if (m < 1) return cli_error("--clients: %ld must be >= 1", m);
    if (!(p >= 0 && p <= 1)) return cli_error("--p: %g must be in [0, 1]", p);
    if (!(z > 0) || isinf(z)) return cli_error("--noise: %g must be finite and > 0", z);
    if (n < 1) return cli_error("--n: %ld must be >= 1", n);
    if (B < 1 || B > n) return cli_error("--batch: %ld must be in [1, --n]", B);
    if (K < 1) return cli_error("--local-steps: %ld must be >= 1", K);
    if (R < 1) return cli_error("--rounds: %ld must be >= 1", R);
    if (c < 1) return cli_error("--copies: %ld must be >= 1", c);
    if (!(delta > 0 && delta < 1)) return cli_error("--delta: %g must be in (0, 1)", delta);
    dpfl_fdp_params fp = {m, p, z, B, n, K, R, c};
    dpfl_fdp_result r;
    dpfl_error err;
    if (dpfl_fdp_prifedsync(&fp, delta, &r, &err)) return cli_error("fdp: %s", err.msg);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "mu", r.mu_weak);
        cJSON_AddNumberToObject(j, "mu_strong", r.mu_strong);
        cJSON_AddBoolToObject(j, "mu_asymptotic", 1);
        cJSON_AddNumberToObject(j, "epsilon_clt", r.eps_weak_clt);
        cJSON_AddNumberToObject(j, "epsilon_strong_clt", r.eps_strong_clt);
        cJSON_AddNumberToObject(j, "epsilon", r.eps_exact);
        cJSON_AddNumberToObject(j, "order", r.order_exact);
        cJSON_AddNumberToObject(j, "delta", delta);
        cJSON_AddStringToObject(j, "accountant", "rdp");
        cJSON_AddStringToObject(j, "sampler", "fixed");
        cJSON_AddStringToObject(j, "adjacency", "replace-one");
        cJSON_AddStringToObject(j, "unit", "record");
        cJSON_AddNumberToObject(j, "noise", z);
        cJSON_AddNumberToObject(j, "copies", (double)c);
        pcli_print_json(j);
    } else {
        printf("weak federated:   mu = %s (CLT, asymptotic) -> epsilon %s\n", dpfl_num_up(r.mu_weak, 4).s,
               dpfl_num_up(r.eps_weak_clt, 4).s);
        printf("strong federated: mu = %s (CLT, asymptotic) -> epsilon %s\n", dpfl_num_up(r.mu_strong, 4).s,
               dpfl_num_up(r.eps_strong_clt, 4).s);
        printf("any observer:     epsilon = %s (RDP upper bound keeping the sync probability p, order %.4g)\n",
               dpfl_num_up(r.eps_exact, 4).s, r.order_exact);
        printf("delta = %g  unit: record  adjacency: replace-one  sampler: fixed (without replacement)\n", delta);
    }
    return 0;
}
