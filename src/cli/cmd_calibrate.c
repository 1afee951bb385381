/* dpfl calibrate: the smallest noise multiplier meeting a target epsilon. */
#include "args.h"
#include "core/numtext.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cli_calibrate(int argc, char **argv)
{
    double target = NAN, delta = NAN, q = NAN;
    long T = -1;
    const char *acc = "rdp";
    int json = 0;
    cli_opt o[] = {
        {.name = "--target-epsilon", .type = CLI_DOUBLE, .out = &target, .value = "E", .required = 1,
         .help = "the epsilon to meet"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &delta, .value = "D", .required = 1, .help = "at this delta"},
        {.name = "--q", .type = CLI_DOUBLE, .out = &q, .value = "Q", .required = 1,
         .help = "the Poisson sampling probability of each step"},
        {.name = "--steps", .type = CLI_LONG, .out = &T, .value = "T", .required = 1, .help = "the number of steps"},
        {.name = "--accountant", .type = CLI_STRING, .out = &acc, .value = "rdp|pld", .help = "rdp (default) or pld"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
    };
    cli_command cmd = {
        .name = "calibrate",
        .usage = "dpfl calibrate --target-epsilon E --delta D --q Q --steps T [--accountant rdp|pld] [--json]",
        .about = "Smallest noise multiplier z (noise std / L2 sensitivity) such that T Poisson-sampled Gaussian steps at\n"
                 "rate Q are (E, D)-DP (add-remove adjacency).  The answer always satisfies the target: z is the upper end\n"
                 "of the final bisection bracket (relative width 1e-6 with rdp, 1e-4 with pld).\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    if (!(target > 0) || isinf(target)) return cli_error("--target-epsilon: %g must be finite and > 0", target);
    if (!(delta > 0 && delta < 1)) return cli_error("--delta: %g must be in (0, 1)", delta);
    if (!(q > 0 && q <= 1)) return cli_error("--q: %g must be in (0, 1]", q);
    if (T < 1) return cli_error("--steps: %ld must be >= 1", T);
    dpfl_calibrate_opts co = {DPFL_ACC_RDP, {DPFL_CONV_TIGHT, NULL, 0, 0}, 0};
    if (!strcmp(acc, "pld"))
        co.accountant = DPFL_ACC_PLD;
    else if (strcmp(acc, "rdp"))
        return cli_error("--accountant: '%s' is not rdp or pld", acc);
    dpfl_event ev = dpfl_event_poisson(q, 1.0, T);
    double z;
    dpfl_error err;
    if (dpfl_calibrate_noise(&ev, 1, target, delta, &co, &z, &err)) return cli_error("calibrate: %s", err.msg);
    ev.z = z;
    dpfl_guarantee g;
    if (dpfl_account_epsilon(&ev, 1, delta, co.accountant, &co.opts, &g, &err))
        return cli_error("calibrate: %s", err.msg);
    if (json) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "noise", z);
        cJSON_AddNumberToObject(r, "epsilon", g.epsilon);
        cJSON_AddNumberToObject(r, "target_epsilon", target);
        cJSON_AddNumberToObject(r, "delta", delta);
        cJSON_AddStringToObject(r, "accountant", dpfl_accountant_name(co.accountant));
        cJSON_AddStringToObject(r, "sampler", "poisson");
        cJSON_AddStringToObject(r, "adjacency", "add-remove");
        cJSON_AddNumberToObject(r, "q", q);
        cJSON_AddNumberToObject(r, "steps", (double)T);
        if (co.accountant == DPFL_ACC_RDP) cJSON_AddNumberToObject(r, "order", g.order);
        if (g.answered != co.accountant) {
            cJSON_AddStringToObject(r, "answered_by", dpfl_accountant_name(g.answered));
            cJSON_AddStringToObject(r, "fallback", g.fallback);
        }
        pcli_print_json(r);
    } else {
        printf("noise = %s  (epsilon = %s <= %g at delta = %g, %s, Poisson q = %g, %ld steps, add-remove)\n",
               dpfl_num_up(z, 6).s, dpfl_num_up(g.epsilon, 6).s, target, delta, dpfl_accountant_name(co.accountant), q,
               T);
        if (g.answered != co.accountant)
            printf("(epsilon answered by %s: %s)\n", dpfl_accountant_name(g.answered), g.fallback);
    }
    return 0;
}
