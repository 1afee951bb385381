/* dpfl account: epsilon (or delta) of T steps of a sampled Gaussian mechanism. */
#include "args.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cli_account(int argc, char **argv)
{
    if (cli_has_arg(argc, argv, "--event")) return cli_account_event(argc, argv);
    double z = NAN, q = NAN, delta = NAN, eps = NAN;
    long T = -1, batch = 0, n = 0;
    const char *sampler = "poisson", *adj = NULL, *acc = "rdp", *conv = "tight";
    int json = 0;
    cli_opt o[] = {
        {.name = "--noise", .type = CLI_DOUBLE, .out = &z, .value = "Z", .required = 1,
         .help = "the noise standard deviation divided by the L2 sensitivity under the stated\n"
                 "adjacency (for a clipped sum under replace-one: 2C)"},
        {.name = "--q", .type = CLI_DOUBLE, .out = &q, .value = "Q",
         .help = "the sampling probability (--sampler poisson)"},
        {.name = "--steps", .type = CLI_LONG, .out = &T, .value = "T", .required = 1, .help = "the number of steps"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &delta, .value = "D", .help = "give epsilon at this delta"},
        {.name = "--epsilon", .type = CLI_DOUBLE, .out = &eps, .value = "E", .help = "give delta at this epsilon"},
        {.name = "--sampler", .type = CLI_STRING, .out = &sampler, .value = "poisson|fixed",
         .help = "poisson: each unit included independently with probability --q (default; add-remove)\n"
                 "fixed: batches of exactly --batch of --n without replacement (replace-one, WBK bound)"},
        {.name = "--batch", .type = CLI_LONG, .out = &batch, .value = "B", .help = "the batch size (--sampler fixed)"},
        {.name = "--n", .type = CLI_LONG, .out = &n, .value = "N", .help = "the number of units (--sampler fixed)"},
        {.name = "--adjacency", .type = CLI_STRING, .out = &adj, .value = "add-remove|replace-one",
         .help = "the neighbouring datasets (default: the sampler's)"},
        {.name = "--accountant", .type = CLI_STRING, .out = &acc, .value = "rdp|pld|gdp|all",
         .help = "rdp (default), pld (tightest), gdp (CLT: asymptotic, not a bound), all"},
        {.name = "--conversion", .type = CLI_STRING, .out = &conv, .value = "tight|classic",
         .help = "RDP to (epsilon, delta): tight (default) or classic"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
    };
    cli_command cmd = {
        .name = "account",
        .usage = "dpfl account --noise Z --q Q --steps T (--delta D | --epsilon E)\n"
                 "                    [--sampler poisson|fixed --batch B --n N] [--adjacency add-remove|replace-one]\n"
                 "                    [--accountant rdp|pld|gdp|all] [--conversion tight|classic] [--json]\n"
                 "       dpfl account --event FILE [--json]   (a run's events: see dpfl account --event --help)",
        .about = "Privacy of T steps of the Gaussian mechanism on sampled batches: epsilon at --delta, or delta at\n"
                 "--epsilon.\n",
        .after = "Every number is an upper bound on the true epsilon/delta except gdp values marked asymptotic.\n"
                 "Where PLD answers an epsilon it also prints its lower estimate (the optimistic discretization of the same\n"
                 "composition): the true epsilon lies between the two (--json: \"epsilon_lower\").\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    if (!(z >= 0) || isinf(z)) return cli_error("--noise: %g must be finite and >= 0", z);
    if (T < 1) return cli_error("--steps: %ld must be >= 1", T);
    int has_d = cli_seen(&cmd, "--delta"), has_e = cli_seen(&cmd, "--epsilon");
    if (has_d == has_e) return cli_usage_error("account", "give exactly one of --delta and --epsilon");
    if (has_d && !(delta > 0 && delta < 1)) return cli_error("--delta: %g must be in (0, 1)", delta);
    if (has_e && (!(eps >= 0) || isinf(eps))) return cli_error("--epsilon: %g must be finite and >= 0", eps);
    dpfl_event ev;
    if (!strcmp(sampler, "poisson")) {
        if (!cli_seen(&cmd, "--q")) return cli_usage_error("account", "--q is required with --sampler poisson");
        if (!(q >= 0 && q <= 1)) return cli_error("--q: %g must be in [0, 1]", q);
        if (cli_seen(&cmd, "--batch") || cli_seen(&cmd, "--n"))
            return cli_usage_error("account", "--batch/--n apply to --sampler fixed only");
        ev = dpfl_event_poisson(q, z, T);
        if (adj && !strcmp(adj, "replace-one"))
            ev.adjacency = DPFL_ADJ_REPLACE_ONE;
        else if (adj && strcmp(adj, "add-remove") && strcmp(adj, "zero-out"))
            return cli_error("--adjacency: '%s' is not add-remove or replace-one", adj);
    } else if (!strcmp(sampler, "fixed")) {
        if (n < 1) return cli_error("--n: %ld must be >= 1 (required with --sampler fixed)", n);
        if (batch < 1 || batch > n) return cli_error("--batch: %ld must be in [1, --n] (required with --sampler fixed)", batch);
        if (adj && strcmp(adj, "replace-one"))
            return cli_error("--adjacency: fixed-size sampling without replacement is accounted under replace-one "
                             "only (got '%s')", adj);
        if (cli_seen(&cmd, "--q") && fabs(q - (double)batch / (double)n) > 1e-12)
            return cli_error("--q: %g disagrees with --batch/--n = %g", q, (double)batch / (double)n);
        ev = dpfl_event_fixed(n, batch, z, T);
    } else {
        return cli_error("--sampler: '%s' is not poisson or fixed", sampler);
    }
    dpfl_account_opts ao = {DPFL_CONV_TIGHT, NULL, 0, 0};
    if (!strcmp(conv, "classic"))
        ao.conversion = DPFL_CONV_CLASSIC;
    else if (strcmp(conv, "tight"))
        return cli_error("--conversion: '%s' is not tight or classic", conv);
    dpfl_accountant list[3];
    size_t nl = 0;
    if (!strcmp(acc, "rdp")) list[nl++] = DPFL_ACC_RDP;
    else if (!strcmp(acc, "pld")) list[nl++] = DPFL_ACC_PLD;
    else if (!strcmp(acc, "gdp")) list[nl++] = DPFL_ACC_GDP;
    else if (!strcmp(acc, "all")) {
        list[nl++] = DPFL_ACC_RDP;
        list[nl++] = DPFL_ACC_PLD;
        list[nl++] = DPFL_ACC_GDP;
    } else
        return cli_error("--accountant: '%s' is not rdp, pld, gdp or all", acc);

    const char *adjname = dpfl_adjacency_name(ev.adjacency);
    cJSON *root = cJSON_CreateObject(), *arr = nl > 1 ? cJSON_CreateArray() : NULL;
    double best = INFINITY;
    const char *best_acc = NULL;
    dpfl_guarantee best_g = {0};
    int failures = 0;
    for (size_t i = 0; i < nl; i++) {
        dpfl_guarantee g;
        dpfl_error err;
        dpfl_status s = has_d ? dpfl_account_epsilon(&ev, 1, delta, list[i], &ao, &g, &err)
                              : dpfl_account_delta(&ev, 1, eps, list[i], &ao, &g, &err);
        const char *an = dpfl_accountant_name(list[i]);
        if (s) {
            if (nl == 1) {
                cJSON_Delete(root);
                return cli_error("%s accountant: %s", an, err.msg);
            }
            if (!json) printf("%-4s  unavailable: %s\n", an, err.msg);
            failures++;
            continue;
        }
        double val = has_d ? g.epsilon : g.delta;
        if (!g.asymptotic && val < best) {
            best = val;
            best_acc = an;
            best_g = g;
        }
        if (json) {
            cJSON *r = nl > 1 ? cJSON_CreateObject() : root;
            cJSON_AddStringToObject(r, "accountant", an);
            cJSON_AddNumberToObject(r, "epsilon", g.epsilon);
            cJSON_AddNumberToObject(r, "delta", g.delta);
            if (list[i] == DPFL_ACC_RDP) cJSON_AddNumberToObject(r, "order", g.order);
            if (list[i] == DPFL_ACC_GDP) cJSON_AddNumberToObject(r, "mu", g.mu);
            if (g.answered == DPFL_ACC_PLD && has_d) cJSON_AddNumberToObject(r, "epsilon_lower", g.epsilon_lower);
            cJSON_AddBoolToObject(r, "asymptotic", g.asymptotic);
            if (g.answered != list[i]) { /* PLD fell back: say which accountant's number this is, and why */
                cJSON_AddStringToObject(r, "answered_by", dpfl_accountant_name(g.answered));
                cJSON_AddStringToObject(r, "fallback", g.fallback);
            }
            if (nl > 1) cJSON_AddItemToArray(arr, r);
        } else {
            printf("%-4s  epsilon = %.6g  delta = %.6g", an, g.epsilon, g.delta);
            if (g.answered == DPFL_ACC_PLD && has_d)
                printf("  (lower estimate %.6g: the true epsilon lies in [%.6g, %.6g])", g.epsilon_lower,
                       g.epsilon_lower, g.epsilon);
            if (list[i] == DPFL_ACC_RDP) printf("  (order %.4g, %s conversion)", g.order, conv);
            if (list[i] == DPFL_ACC_GDP) printf("  (mu = %.6g)%s", g.mu, g.asymptotic ? "  ASYMPTOTIC (CLT), not a bound" : "");
            if (g.answered != list[i])
                printf("  (answered by %s: %s)", dpfl_accountant_name(g.answered), g.fallback);
            printf("\n");
        }
    }
    if (!json) {
        printf("unit: record  adjacency: %s  sampler: %s  noise: %g  steps: %ld\n", adjname, sampler, z, T);
        cJSON_Delete(root);
        cJSON_Delete(arr); /* never attached without --json (valgrind found the leak) */
        return failures == (int)nl ? 1 : 0;
    }
    if (nl > 1) {
        if (best_acc) {
            cJSON_AddStringToObject(root, "accountant", best_acc);
            cJSON_AddNumberToObject(root, "epsilon", best_g.epsilon);
            cJSON_AddNumberToObject(root, "delta", best_g.delta);
        }
        cJSON_AddItemToObject(root, "results", arr);
    }
    cJSON_AddStringToObject(root, "unit", "record");
    cJSON_AddStringToObject(root, "sampler", sampler);
    cJSON_AddStringToObject(root, "adjacency", adjname);
    cJSON_AddNumberToObject(root, "noise", z);
    cJSON_AddNumberToObject(root, "steps", (double)T);
    if (!strcmp(sampler, "poisson")) cJSON_AddNumberToObject(root, "q", q);
    else cJSON_AddNumberToObject(root, "q", (double)batch / (double)n);
    pcli_print_json(root);
    return failures == (int)nl ? 1 : 0; /* as in text mode: an asymptotic answer is an answer, flagged as such */
}
