/* dpfl audit: train with canaries and turn a membership-inference attack into a lower bound on epsilon. */
#include "args.h"
#include "cli.h"
#include "privacy_cli.h"
#include "dpfl/audit.h"
#include "dpfl/mech.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *HELP =
    "usage: dpfl audit [--noise Z] [--canaries M] [--runs R] [--steps T] [--batch B] [--n N] [--clip C] [--lr LR]\n"
    "                  [--delta D] [--beta BETA] [--seed S] [--json]\n\n"
    "Record-level DP-SGD (Poisson batches, one client) on synthetic data (N records, 20 features, 10 classes) plus\n"
    "M canaries, each with a feature of its own and included with probability 1/2; logistic regression; each\n"
    "canary scored by how far training moved the model's margin for its label on its own input.  Prints the\n"
    "accountant's claimed epsilon and epsilon_lower, a LOWER bound from the attack at confidence 1 - BETA:\n"
    "one run (Steinke, Nasr, Jagielski 2023) and, with --runs R > 1, the canaries of R runs pooled with\n"
    "Clopper-Pearson rates (Jagielski, Ullman, Oprea 2020).  epsilon_lower <= claimed for a correct mechanism;\n"
    "above it, the claim or the mechanism is wrong.  Defaults: Z 1, M 200, R 1, T 200, B 100, N 1000, C 1,\n"
    "LR 2, D 1e-5, BETA 0.05.\n";

int cli_audit(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(HELP, stdout);
        return 0;
    }
    double z = 1.0, clip = 1.0, lr = 2.0, delta = 1e-5, beta = 0.05;
    long m = 200, runs = 1, T = 200, B = 100, n = 1000, seed = 0;
    int json = 0;
    pcli_opt o[] = {{"--noise", OPT_DOUBLE, &z, 0},   {"--canaries", OPT_LONG, &m, 0}, {"--runs", OPT_LONG, &runs, 0},
                    {"--steps", OPT_LONG, &T, 0},      {"--batch", OPT_LONG, &B, 0},    {"--n", OPT_LONG, &n, 0},
                    {"--clip", OPT_DOUBLE, &clip, 0},  {"--lr", OPT_DOUBLE, &lr, 0},    {"--delta", OPT_DOUBLE, &delta, 0},
                    {"--beta", OPT_DOUBLE, &beta, 0},  {"--seed", OPT_LONG, &seed, 0},  {"--json", OPT_FLAG, &json, 0}};
    int rc = pcli_parse("audit", argc, argv, o, sizeof o / sizeof o[0]);
    if (rc) return rc;
    if (!(z >= 0) || isinf(z)) return cli_error("--noise: %g must be finite and >= 0", z);
    if (m < 8 || m > 100000) return cli_error("--canaries: %ld must be in [8, 100000]", m);
    if (runs < 1 || runs > 10000) return cli_error("--runs: %ld must be in [1, 10000]", runs);
    if (T < 1 || B < 1 || n < 10) return cli_error("--steps, --batch must be >= 1 and --n >= 10");
    if (!(delta > 0 && delta < 1) || !(beta > 0 && beta < 1)) return cli_error("--delta and --beta must be in (0, 1)");
    if (seed < 0) return cli_error("--seed: %ld must be >= 0 (0: OS entropy)", seed);
    if (dpfl_mech_test_noise_divisor() > 1)
        fprintf(stderr, "dpfl: warning: DPFL_TEST_NOISE_DIVISOR=%g is set: the noise is divided by it while the "
                        "accountant claims the full noise (a deliberately broken mechanism, for tests)\n",
                dpfl_mech_test_noise_divisor());
    dpfl_audit_params p = {(int32_t)m, (int32_t)runs, (int32_t)n, (int32_t)B, T, z, clip, lr, delta, beta, 10.0,
                           (uint64_t)seed};
    dpfl_audit_result r;
    dpfl_error err;
    if (dpfl_audit_run(&p, &r, &err)) return cli_error("audit: %s", err.msg);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "claimed_epsilon", r.claimed_epsilon);
        cJSON_AddNumberToObject(j, "delta", delta);
        cJSON_AddNumberToObject(j, "epsilon_lower", r.eps_one_run);
        cJSON_AddNumberToObject(j, "confidence", 1 - beta);
        cJSON_AddNumberToObject(j, "correct_guesses", r.correct);
        cJSON_AddNumberToObject(j, "guesses", r.guesses);
        if (runs > 1) cJSON_AddNumberToObject(j, "epsilon_lower_multi_run", r.eps_multi_run);
        cJSON_AddNumberToObject(j, "mean_score_in", r.mean_in);
        cJSON_AddNumberToObject(j, "mean_score_out", r.mean_out);
        cJSON_AddNumberToObject(j, "seconds", r.seconds);
        cJSON_AddStringToObject(j, "unit", "record");
        cJSON_AddStringToObject(j, "accountant", "rdp");
        pcli_print_json(j);
    } else {
        printf("claimed: record-level (%.4g, %g)-DP (RDP, Poisson, add-remove)\n", r.claimed_epsilon, delta);
        printf("epsilon_lower = %.4g at confidence %g (one run: %d of %d guesses correct, %ld canaries)\n",
               r.eps_one_run, 1 - beta, r.correct, r.guesses, m);
        if (runs > 1)
            printf("epsilon_lower = %.4g at confidence %g (%ld runs pooled, Clopper-Pearson)\n", r.eps_multi_run,
                   1 - beta, runs);
        printf("%s  (mean score in %.4g, out %.4g; %.1f s)\n",
               fmax(r.eps_one_run, runs > 1 ? r.eps_multi_run : 0) > r.claimed_epsilon
                   ? "THE ATTACK BEATS THE CLAIM: the mechanism or its accounting is wrong"
                   : "consistent with the claim (a lower bound, not a guarantee)",
               r.mean_in, r.mean_out, r.seconds);
    }
    return 0;
}
