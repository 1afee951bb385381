/* dpfl account: epsilon (or delta) of T steps of a sampled Gaussian mechanism. */
#include "args.h"
#include "core/numtext.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* What the command line asks for. */
typedef struct {
    double z, q, delta, eps;
    long T, batch, n;
    const char *sampler, *adj, *acc, *conv;
    int json, has_d;
} account_args;

/* The event of T steps of the chosen sampler, its options checked against it. */
static int account_event(const account_args *a, cli_command *cmd, dpfl_event *ev)
{
    if (!strcmp(a->sampler, "poisson")) {
        if (!cli_seen(cmd, "--q")) return cli_usage_error("account", "--q is required with --sampler poisson");
        if (!(a->q >= 0 && a->q <= 1)) return cli_error("--q: %g must be in [0, 1]", a->q);
        if (cli_seen(cmd, "--batch") || cli_seen(cmd, "--n"))
            return cli_usage_error("account", "--batch/--n apply to --sampler fixed only");
        *ev = dpfl_event_poisson(a->q, a->z, a->T);
        if (a->adj && !strcmp(a->adj, "replace-one"))
            ev->adjacency = DPFL_ADJ_REPLACE_ONE;
        else if (a->adj && strcmp(a->adj, "add-remove") && strcmp(a->adj, "zero-out"))
            return cli_error("--adjacency: '%s' is not add-remove or replace-one", a->adj);
        return 0;
    }
    if (!strcmp(a->sampler, "fixed")) {
        if (a->n < 1) return cli_error("--n: %ld must be >= 1 (required with --sampler fixed)", a->n);
        if (a->batch < 1 || a->batch > a->n)
            return cli_error("--batch: %ld must be in [1, --n] (required with --sampler fixed)", a->batch);
        if (a->adj && strcmp(a->adj, "replace-one"))
            return cli_error("--adjacency: fixed-size sampling without replacement is accounted under replace-one "
                             "only (got '%s')", a->adj);
        if (cli_seen(cmd, "--q") && fabs(a->q - (double)a->batch / (double)a->n) > 1e-12)
            return cli_error("--q: %g disagrees with --batch/--n = %g", a->q, (double)a->batch / (double)a->n);
        *ev = dpfl_event_fixed(a->n, a->batch, a->z, a->T);
        return 0;
    }
    return cli_error("--sampler: '%s' is not poisson or fixed", a->sampler);
}

/* --conversion and --accountant as the library's values */
static int account_choices(const account_args *a, dpfl_account_opts *ao, dpfl_accountant *list, size_t *nl)
{
    *ao = (dpfl_account_opts){DPFL_CONV_TIGHT, NULL, 0, 0};
    if (!strcmp(a->conv, "classic"))
        ao->conversion = DPFL_CONV_CLASSIC;
    else if (strcmp(a->conv, "tight"))
        return cli_error("--conversion: '%s' is not tight or classic", a->conv);
    *nl = 0;
    if (!strcmp(a->acc, "rdp")) list[(*nl)++] = DPFL_ACC_RDP;
    else if (!strcmp(a->acc, "pld")) list[(*nl)++] = DPFL_ACC_PLD;
    else if (!strcmp(a->acc, "gdp")) list[(*nl)++] = DPFL_ACC_GDP;
    else if (!strcmp(a->acc, "all")) {
        list[(*nl)++] = DPFL_ACC_RDP;
        list[(*nl)++] = DPFL_ACC_PLD;
        list[(*nl)++] = DPFL_ACC_GDP;
    } else
        return cli_error("--accountant: '%s' is not rdp, pld, gdp or all", a->acc);
    return 0;
}

/* The checks the option table cannot express, then the event, the options and the accountants to ask. */
static int account_check(account_args *a, cli_command *cmd, dpfl_event *ev, dpfl_account_opts *ao,
                         dpfl_accountant *list, size_t *nl)
{
    if (!(a->z >= 0) || isinf(a->z)) return cli_error("--noise: %g must be finite and >= 0", a->z);
    if (a->T < 1) return cli_error("--steps: %ld must be >= 1", a->T);
    a->has_d = cli_seen(cmd, "--delta");
    if (a->has_d == cli_seen(cmd, "--epsilon")) return cli_usage_error("account", "give exactly one of --delta and --epsilon");
    if (a->has_d && !(a->delta > 0 && a->delta < 1)) return cli_error("--delta: %g must be in (0, 1)", a->delta);
    if (!a->has_d && (!(a->eps >= 0) || isinf(a->eps))) return cli_error("--epsilon: %g must be finite and >= 0", a->eps);
    int rc = account_event(a, cmd, ev);
    return rc ? rc : account_choices(a, ao, list, nl);
}

/* One accountant's answer: an object of the JSON, or a line of text. */
static void account_print(const account_args *a, dpfl_accountant acc, const dpfl_guarantee *g, cJSON *r)
{
    const char *an = dpfl_accountant_name(acc);
    if (r) {
        cJSON_AddStringToObject(r, "accountant", an);
        cJSON_AddNumberToObject(r, "epsilon", g->epsilon);
        cJSON_AddNumberToObject(r, "delta", g->delta);
        if (acc == DPFL_ACC_RDP) cJSON_AddNumberToObject(r, "order", g->order);
        if (acc == DPFL_ACC_GDP) cJSON_AddNumberToObject(r, "mu", g->mu);
        if (g->answered == DPFL_ACC_PLD && a->has_d) cJSON_AddNumberToObject(r, "epsilon_lower", g->epsilon_lower);
        cJSON_AddBoolToObject(r, "asymptotic", g->asymptotic);
        if (g->answered != acc) { /* PLD fell back: say which accountant's number this is, and why */
            cJSON_AddStringToObject(r, "answered_by", dpfl_accountant_name(g->answered));
            cJSON_AddStringToObject(r, "fallback", g->fallback);
        }
        return;
    }
    printf("%-4s  epsilon = %s  delta = %s", an, dpfl_num_up(g->epsilon, 6).s, dpfl_num_up(g->delta, 6).s);
    if (g->answered == DPFL_ACC_PLD && a->has_d)
        printf("  (lower estimate %s: the true epsilon lies in [%s, %s])", dpfl_num_down(g->epsilon_lower, 6).s,
               dpfl_num_down(g->epsilon_lower, 6).s, dpfl_num_up(g->epsilon, 6).s);
    if (acc == DPFL_ACC_RDP) printf("  (order %.4g, %s conversion)", g->order, a->conv);
    if (acc == DPFL_ACC_GDP)
        printf("  (mu = %s)%s", dpfl_num_up(g->mu, 6).s, g->asymptotic ? "  ASYMPTOTIC (CLT), not a bound" : "");
    if (g->answered != acc) printf("  (answered by %s: %s)", dpfl_accountant_name(g->answered), g->fallback);
    printf("\n");
}

/* --json: the best answer that is a bound (several accountants), what was accounted, printed */
static void account_json_finish(const account_args *a, const dpfl_event *ev, cJSON *root, cJSON *arr,
                                const char *best_acc, const dpfl_guarantee *best_g)
{
    if (arr) {
        if (best_acc) {
            cJSON_AddStringToObject(root, "accountant", best_acc);
            cJSON_AddNumberToObject(root, "epsilon", best_g->epsilon);
            cJSON_AddNumberToObject(root, "delta", best_g->delta);
        }
        cJSON_AddItemToObject(root, "results", arr);
    }
    cJSON_AddStringToObject(root, "unit", "record");
    cJSON_AddStringToObject(root, "sampler", a->sampler);
    cJSON_AddStringToObject(root, "adjacency", dpfl_adjacency_name(ev->adjacency));
    cJSON_AddNumberToObject(root, "noise", a->z);
    cJSON_AddNumberToObject(root, "steps", (double)a->T);
    if (!strcmp(a->sampler, "poisson")) cJSON_AddNumberToObject(root, "q", a->q);
    else cJSON_AddNumberToObject(root, "q", (double)a->batch / (double)a->n);
    pcli_print_json(root);
}

/* Every accountant asked, each answer printed (or put in the JSON); 1 when none answered. */
static int account_run(const account_args *ap, const dpfl_event *evp, const dpfl_account_opts *ao,
                       const dpfl_accountant *list, size_t nl)
{
    const account_args a = *ap;
    const dpfl_event ev = *evp;
    cJSON *root = cJSON_CreateObject(), *arr = nl > 1 ? cJSON_CreateArray() : NULL;
    double best = INFINITY;
    const char *best_acc = NULL;
    dpfl_guarantee best_g = {0};
    int failures = 0;
    for (size_t i = 0; i < nl; i++) {
        dpfl_guarantee g;
        dpfl_error err;
        dpfl_status s = a.has_d ? dpfl_account_epsilon(&ev, 1, a.delta, list[i], ao, &g, &err)
                                : dpfl_account_delta(&ev, 1, a.eps, list[i], ao, &g, &err);
        const char *an = dpfl_accountant_name(list[i]);
        if (s) {
            if (nl == 1) {
                cJSON_Delete(root);
                return cli_error("%s accountant: %s", an, err.msg);
            }
            if (!a.json) printf("%-4s  unavailable: %s\n", an, err.msg);
            failures++;
            continue;
        }
        double val = a.has_d ? g.epsilon : g.delta;
        if (!g.asymptotic && val < best) {
            best = val;
            best_acc = an;
            best_g = g;
        }
        cJSON *r = !a.json ? NULL : nl > 1 ? cJSON_CreateObject() : root;
        account_print(&a, list[i], &g, r);
        if (r && nl > 1) cJSON_AddItemToArray(arr, r);
    }
    if (!a.json) {
        printf("unit: record  adjacency: %s  sampler: %s  noise: %g  steps: %ld\n", dpfl_adjacency_name(ev.adjacency),
               a.sampler, a.z, a.T);
        cJSON_Delete(root);
        cJSON_Delete(arr); /* never attached without --json (valgrind found the leak) */
        return failures == (int)nl ? 1 : 0;
    }
    account_json_finish(&a, &ev, root, arr, best_acc, &best_g);
    return failures == (int)nl ? 1 : 0; /* as in text mode: an asymptotic answer is an answer, flagged as such */
}

int cli_account(int argc, char **argv)
{
    if (cli_has_arg(argc, argv, "--event")) return cli_account_event(argc, argv);
    account_args a = {.z = NAN, .q = NAN, .delta = NAN, .eps = NAN, .T = -1, .sampler = "poisson", .acc = "rdp",
                      .conv = "tight"};
    cli_opt o[] = {
        {.name = "--noise", .type = CLI_DOUBLE, .out = &a.z, .value = "Z", .required = 1,
         .help = "the noise standard deviation divided by the L2 sensitivity under the stated\n"
                 "adjacency (for a clipped sum under replace-one: 2C)"},
        {.name = "--q", .type = CLI_DOUBLE, .out = &a.q, .value = "Q",
         .help = "the sampling probability (--sampler poisson)"},
        {.name = "--steps", .type = CLI_LONG, .out = &a.T, .value = "T", .required = 1, .help = "the number of steps"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &a.delta, .value = "D", .help = "give epsilon at this delta"},
        {.name = "--epsilon", .type = CLI_DOUBLE, .out = &a.eps, .value = "E", .help = "give delta at this epsilon"},
        {.name = "--sampler", .type = CLI_STRING, .out = &a.sampler, .value = "poisson|fixed",
         .help = "poisson: each unit included independently with probability --q (default; add-remove)\n"
                 "fixed: batches of exactly --batch of --n without replacement (replace-one, WBK bound)"},
        {.name = "--batch", .type = CLI_LONG, .out = &a.batch, .value = "B", .help = "the batch size (--sampler fixed)"},
        {.name = "--n", .type = CLI_LONG, .out = &a.n, .value = "N", .help = "the number of units (--sampler fixed)"},
        {.name = "--adjacency", .type = CLI_STRING, .out = &a.adj, .value = "add-remove|replace-one",
         .help = "the neighbouring datasets (default: the sampler's)"},
        {.name = "--accountant", .type = CLI_STRING, .out = &a.acc, .value = "rdp|pld|gdp|all",
         .help = "rdp (default), pld (tightest), gdp (CLT: asymptotic, not a bound), all"},
        {.name = "--conversion", .type = CLI_STRING, .out = &a.conv, .value = "tight|classic",
         .help = "RDP to (epsilon, delta): tight (default) or classic"},
        {.name = "--json", .type = CLI_FLAG, .out = &a.json, .help = "one JSON object"},
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
    dpfl_event ev;
    dpfl_account_opts ao;
    dpfl_accountant list[3];
    size_t nl;
    if ((rc = account_check(&a, &cmd, &ev, &ao, list, &nl))) return rc;
    return account_run(&a, &ev, &ao, list, nl);
}
