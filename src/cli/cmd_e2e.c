/* dpfl e2e: record-level and client-level guarantees of the same DP-SGD-in-clients run. */
#include "args.h"
#include "core/numtext.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* both guarantees: one JSON object, or three lines */
static void e2e_print(const dpfl_e2e_params *p, const dpfl_e2e_result *r, int json)
{
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "record_epsilon", r->record_epsilon);
        cJSON_AddNumberToObject(j, "record_order", r->record_order);
        cJSON_AddNumberToObject(j, "client_epsilon", r->client_epsilon);
        cJSON_AddStringToObject(j, "client_accountant", "exact: binomial mixture of Gaussian DP");
        cJSON_AddStringToObject(j, "client_sampler", "poisson, participation visible (replace-by-special)");
        cJSON_AddNumberToObject(j, "client_noise", r->client_noise);
        cJSON_AddNumberToObject(j, "client_mu_round", r->client_mu);
        cJSON_AddNumberToObject(j, "epsilon", r->record_epsilon);
        cJSON_AddNumberToObject(j, "delta", p->delta);
        cJSON_AddStringToObject(j, "accountant", r->record_order > 0 ? "rdp" : "pld");
        cJSON_AddStringToObject(j, "sampler", "poisson");
        cJSON_AddStringToObject(j, "adjacency", "add-remove");
        cJSON_AddStringToObject(j, "client_adjacency", dpfl_adjacency_name(p->client_adjacency));
        cJSON_AddNumberToObject(j, "noise", p->z);
        pcli_print_json(j);
        return;
    }
    char how[48];
    if (r->record_order > 0) snprintf(how, sizeof how, "RDP order %.4g", r->record_order);
    else snprintf(how, sizeof how, "PLD");
    printf("record level: epsilon = %s  (add-remove, Poisson q = %g within client, client rate %g, participation "
           "visible; %s)\n", dpfl_num_up(r->record_epsilon, 6).s, (double)p->batch / (double)p->n, p->client_rate, how);
    printf("client level: epsilon = %s  (%s, participation visible: Poisson rate %g with replacement by a special "
           "client; mu = %s per round, exact)\n",
           dpfl_num_up(r->client_epsilon, 6).s, dpfl_adjacency_name(p->client_adjacency), p->client_rate,
           dpfl_num_up(r->client_mu, 6).s);
    printf("delta = %g\n", p->delta);
}

int cli_e2e(int argc, char **argv)
{
    double z = NAN, c = NAN, delta = NAN, z2 = 0;
    long B = -1, n = -1, K = -1, R = -1;
    const char *adj = "zero-out";
    int json = 0;
    cli_opt o[] = {
        {.name = "--noise", .type = CLI_DOUBLE, .out = &z, .value = "Z", .required = 1,
         .help = "DP-SGD's noise multiplier inside each client (std / clip)"},
        {.name = "--batch", .type = CLI_LONG, .out = &B, .value = "B", .required = 1,
         .help = "the expected batch size: Poisson q = B/N"},
        {.name = "--n", .type = CLI_LONG, .out = &n, .value = "N", .required = 1, .help = "the records of a client"},
        {.name = "--local-steps", .type = CLI_LONG, .out = &K, .value = "K", .required = 1,
         .help = "local steps per round"},
        {.name = "--client-rate", .type = CLI_DOUBLE, .out = &c, .value = "C", .required = 1,
         .help = "the probability that a client takes part in a round"},
        {.name = "--rounds", .type = CLI_LONG, .out = &R, .value = "R", .required = 1, .help = "the number of rounds"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &delta, .value = "D", .required = 1, .help = "the delta of both"},
        {.name = "--server-noise", .type = CLI_DOUBLE, .out = &z2, .value = "Z2",
         .help = "the server also clips each update to S and adds std Z2 S to the sum (default 0: none)"},
        {.name = "--adjacency", .type = CLI_STRING, .out = &adj, .value = "zero-out|replace-one",
         .help = "client level: zero-out (default) or replace-one"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
    };
    cli_command cmd = {
        .name = "e2e",
        .usage = "dpfl e2e --noise Z --batch B --n N --local-steps K --client-rate C --rounds R --delta D\n"
                 "                [--server-noise Z2] [--adjacency zero-out|replace-one] [--json]",
        .about =
            "Record level: Poisson sampling q = B/N per local step inside a client, client sampled with probability C\n"
            "per round; a client that sits a round out releases nothing, visibly (two-stage: the smaller of the RDP bound\n"
            "by joint convexity and the PLD of the mixture).  Client level: the same noise protects a whole client with\n"
            "per-step multiplier Z/B (zero-out; Z/(2B) replace-one), composed over K steps to mu = sqrt(K) B / Z per\n"
            "round (GDP).  The noise is the client's own, so taking part is visible: rounds are accounted as Poisson\n"
            "sampling with replacement by a special client (not add-remove), exactly: J ~ Bin(R, C) participations,\n"
            "mu sqrt(J)-GDP given J.\n"
            "--server-noise: the server also clips each update to S and adds std Z2 S to the sum; noise on the same\n"
            "release can only help (mu = min(sqrt(K) B / Z, 2 / Z2)).  client_noise is 1 / mu.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    if (!(z > 0) || isinf(z)) return cli_error("--noise: %g must be finite and > 0", z);
    if (n < 1) return cli_error("--n: %ld must be >= 1", n);
    if (B < 1 || B > n) return cli_error("--batch: %ld must be in [1, --n]", B);
    if (K < 1) return cli_error("--local-steps: %ld must be >= 1", K);
    if (!(c > 0 && c <= 1)) return cli_error("--client-rate: %g must be in (0, 1]", c);
    if (R < 1) return cli_error("--rounds: %ld must be >= 1", R);
    if (!(delta > 0 && delta < 1)) return cli_error("--delta: %g must be in (0, 1)", delta);
    if (!(z2 >= 0) || isinf(z2)) return cli_error("--server-noise: %g must be finite and >= 0", z2);
    dpfl_adjacency a;
    if (!strcmp(adj, "zero-out")) a = DPFL_ADJ_ZERO_OUT;
    else if (!strcmp(adj, "replace-one")) a = DPFL_ADJ_REPLACE_ONE;
    else return cli_error("--adjacency: '%s' is not zero-out or replace-one", adj);
    dpfl_e2e_params p = {z, B, n, K, c, R, z2, a, delta};
    dpfl_e2e_result r;
    dpfl_error err;
    if (dpfl_e2e(&p, &r, &err)) return cli_error("e2e: %s", err.msg);
    e2e_print(&p, &r, json);
    return 0;
}
