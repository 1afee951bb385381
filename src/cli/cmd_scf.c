/* dpfl scf: rPDP-FL per-record budgets <-> sampling probabilities. */
#include "args.h"
#include "core/numtext.h"
#include "cli.h"
#include "privacy_cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_budgets(const char *path, cli_doubles *l)
{
    double *v;
    size_t n;
    dpfl_error err;
    if (dpfl_budgets_read(path, &v, &n, &err)) return cli_error("--budgets: %s", err.msg);
    double *nv = realloc(l->v, (l->n + n + 1) * sizeof *nv);
    if (!nv) {
        free(v);
        return cli_error("out of memory");
    }
    l->v = nv;
    if (n) memcpy(l->v + l->n, v, n * sizeof *v);
    l->n += n;
    free(v);
    return 0;
}

/* --p: the exact epsilon of each sampling probability */
static int scf_forward(const dpfl_rpdp_params *pp, const cli_doubles *ps, int json, cJSON *j)
{
    dpfl_error err;
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToObject(j, "epsilons", arr);
    for (size_t i = 0; i < ps->n; i++) {
        double e;
        if (!(ps->v[i] >= 0 && ps->v[i] <= 1)) return cli_error("--p: %g must be in [0, 1]", ps->v[i]);
        if (dpfl_rpdp_epsilon(pp, ps->v[i], &e, &err)) return cli_error("scf: %s", err.msg);
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(e));
        if (!json) printf("p = %g  epsilon = %.7g\n", ps->v[i], e);
    }
    if (ps->n == 1) cJSON_AddNumberToObject(j, "epsilon", cJSON_GetArrayItem(arr, 0)->valuedouble);
    return 0;
}

/* The exact SCF grid p = 0.001 .. 0.1 by 0.001, then 0.11 .. 1 by 0.01, and its epsilons: the safe inverse's
 * fallback above 1,000 budgets. */
static int scf_grid(const dpfl_rpdp_params *pp, double *gp, double *ge, size_t *ng)
{
    dpfl_error err;
    *ng = 0;
    for (int i = 1; i <= 100; i++) gp[(*ng)++] = 0.001 * i;
    for (int i = 11; i <= 100; i++) gp[(*ng)++] = 0.01 * i;
    for (size_t i = 0; i < *ng; i++)
        if (dpfl_rpdp_epsilon(pp, gp[i], &ge[i], &err)) return cli_error("scf: %s", err.msg);
    return 0;
}

/* --epsilon / --budgets: for each budget the largest safe p (exact up to 1,000 budgets, the grid's above), and the
 * fit's estimate with its exact epsilon */
static int scf_inverse(const dpfl_rpdp_params *pp, const cli_doubles *eps, int json, cJSON *j)
{
    dpfl_error err;
    dpfl_scf_fit fit;
    if (dpfl_scf_fit_curve(pp, &fit, &err)) return cli_error("scf: %s", err.msg);
    double gp[200], ge[200]; /* the exact grid again, for the safe inverse */
    size_t ng;
    if (scf_grid(pp, gp, ge, &ng)) return 1;
    cJSON_AddNumberToObject(j, "a", fit.a);
    cJSON_AddNumberToObject(j, "b", fit.b);
    cJSON_AddNumberToObject(j, "c", fit.c);
    cJSON_AddNumberToObject(j, "r2", fit.r2);
    if (!json) printf("fit: eps(p) = exp(%.6g p + %.6g) + %.6g   R^2 = %.6f\n", fit.a, fit.b, fit.c, fit.r2);
    const int check_fit = eps->n <= 1000; /* the exact epsilon of each estimate costs one accountant call */
    double eps1;
    if (dpfl_rpdp_epsilon(pp, 1.0, &eps1, &err)) return cli_error("scf: %s", err.msg);
    cJSON *pa = cJSON_CreateArray(), *sa = cJSON_CreateArray(), *fe = cJSON_CreateArray();
    cJSON_AddItemToObject(j, "p_safe", sa);
    cJSON_AddItemToObject(j, "p_fit", pa);
    if (check_fit) cJSON_AddItemToObject(j, "p_fit_epsilon", fe);
    else cJSON_Delete(fe);
    for (size_t i = 0; i < eps->n; i++) {
        double p = dpfl_scf_rate(&fit, eps->v[i]);
        double safe = 0, pe = NAN;
        if (check_fit) { /* exact: the largest safe p (a few accountant calls) */
            if (dpfl_rpdp_safe_rate(pp, &fit, eps->v[i], eps1, 0, 0, &safe, &err)) return cli_error("scf: %s", err.msg);
        } else { /* many budgets: the largest grid p within the budget */
            for (size_t k = 0; k < ng; k++)
                if (ge[k] <= eps->v[i]) safe = gp[k];
        }
        if (check_fit && dpfl_rpdp_epsilon(pp, p, &pe, &err)) return cli_error("scf: %s", err.msg);
        cJSON_AddItemToArray(sa, cJSON_CreateNumber(safe));
        cJSON_AddItemToArray(pa, cJSON_CreateNumber(p));
        if (check_fit) cJSON_AddItemToArray(fe, cJSON_CreateNumber(pe));
        if (!json && check_fit)
            printf("epsilon = %g  p_safe = %s   (estimate: p_fit = %.6g, whose exact epsilon is %s%s)\n", eps->v[i],
                   dpfl_num_down(safe, 6).s, p, dpfl_num_up(pe, 4).s,
                   pe > eps->v[i] ? ": over the budget, not a guarantee" : "");
    }
    cJSON_AddStringToObject(j, "p_fit_is", "an estimate (SCF curve fit), not a guarantee: p_safe is");
    return 0;
}

/* The checks of the command line that its table cannot express; 0 when it may run, else the exit status. */
static int scf_check(double z, double lam, long K, long R, double delta, const cli_doubles *eps, const char *budgets,
                     const cli_doubles *ps, const char *bound, dpfl_rpdp_params *pp)
{
    if (!(z > 0) || isinf(z)) return cli_error("--noise: %g must be finite and > 0", z);
    if (!(lam >= 0 && lam <= 1)) return cli_error("--client-rate: %g must be in [0, 1]", lam);
    if (K < 1) return cli_error("--local-steps: %ld must be >= 1", K);
    if (R < 1) return cli_error("--rounds: %ld must be >= 1", R);
    if (!(delta > 0 && delta < 1)) return cli_error("--delta: %g must be in (0, 1)", delta);
    for (size_t i = 0; i < eps->n; i++)
        if (!(eps->v[i] > 0) || isinf(eps->v[i])) return cli_error("--epsilon: %g must be finite and > 0", eps->v[i]);
    if ((eps->n > 0) + (budgets != NULL) + (ps->n > 0) != 1)
        return cli_usage_error("scf", "give exactly one of --epsilon, --budgets and --p");
    *pp = (dpfl_rpdp_params){z, lam, K, R, delta, DPFL_BOUND_RPDP, 0, NULL, 0};
    if (!strcmp(bound, "pld")) pp->use_pld = 1;
    else if (!strcmp(bound, "zhu-wang"))
        return cli_error("--bound: zhu-wang was removed: Zhu-Wang 2019 assumes a client that sits a round out is "
                         "indistinguishable from one that took part, and in dpfl it is not; use rpdp or pld");
    else if (strcmp(bound, "rpdp")) return cli_error("--bound: '%s' is not rpdp or pld", bound);
    return 0;
}

/* the answer's JSON head: the query */
static cJSON *scf_head(const dpfl_rpdp_params *pp, double z, double delta, const char *bound)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "delta", delta);
    cJSON_AddNumberToObject(j, "noise", z);
    cJSON_AddStringToObject(j, "accountant", pp->use_pld ? "pld" : "rdp");
    cJSON_AddStringToObject(j, "bound", bound);
    cJSON_AddStringToObject(j, "sampler", "poisson (two-stage)");
    cJSON_AddStringToObject(j, "adjacency", "add-remove");
    return j;
}

int cli_scf(int argc, char **argv)
{
    double z = NAN, lam = NAN, delta = NAN;
    long K = -1, R = -1;
    const char *bound = "rpdp", *budgets = NULL;
    cli_doubles eps = {NULL, 0}, ps = {NULL, 0};
    int json = 0;
    cli_opt o[] = {
        {.name = "--noise", .type = CLI_DOUBLE, .out = &z, .value = "Z", .required = 1,
         .help = "the noise multiplier of each local step"},
        {.name = "--client-rate", .type = CLI_DOUBLE, .out = &lam, .value = "L", .required = 1,
         .help = "the probability that a client takes part in a round"},
        {.name = "--local-steps", .type = CLI_LONG, .out = &K, .value = "K", .required = 1,
         .help = "local steps per round"},
        {.name = "--rounds", .type = CLI_LONG, .out = &R, .value = "R", .required = 1, .help = "the number of rounds"},
        {.name = "--delta", .type = CLI_DOUBLE, .out = &delta, .value = "D", .required = 1, .help = "the delta"},
        {.name = "--bound", .type = CLI_STRING, .out = &bound, .value = "rpdp|pld",
         .help = "the accountant: rpdp (default) or pld (below)"},
        {.name = "--epsilon", .type = CLI_DOUBLES, .out = &eps, .value = "E...",
         .help = "per-record budgets: the largest safe sampling probability of each"},
        {.name = "--budgets", .type = CLI_STRING, .out = &budgets, .value = "FILE",
         .help = "the budgets from a file, one budget > 0 per line"},
        {.name = "--p", .type = CLI_DOUBLES, .out = &ps, .value = "P...", .help = "sampling probabilities: the epsilon of each"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
    };
    cli_command cmd = {
        .name = "scf",
        .usage = "dpfl scf --noise Z --client-rate L --local-steps K --rounds R --delta D [--bound rpdp|pld]\n"
                 "                (--epsilon E... | --budgets FILE | --p P...) [--json]",
        .about =
            "rPDP-FL two-stage sampling: a client takes part with probability L per round, then K local steps each\n"
            "include a record with probability p.  --p gives epsilon*(p) (forward).  --epsilon / --budgets (one budget\n"
            "> 0 per line) give 'p_safe', the largest p whose exact epsilon*(p) is within the budget (to 1e-4; above\n"
            "1,000 budgets the largest SCF grid p): the guarantee.\n"
            "'p_fit' is the paper's SCF estimate through the fit eps(p) = exp(a p + b) + c; it can exceed the budget, and\n"
            "its exact epsilon*(p_fit) is printed beside it.\n",
        .after =
            "--bound rpdp: the published bound (joint convexity; integer orders 2..994); pld: the privacy loss distribution\n"
            "of the two-stage round ((1 - L) no output + L K steps) composed over the rounds, with the published RDP bound\n"
            "as its floor (the tightest; slower).  Both hold for participation that is visible (a client that sits a round\n"
            "out releases nothing), as it is in dpfl; Zhu-Wang 2019 (removed) does not.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    dpfl_rpdp_params pp;
    if (!(rc = scf_check(z, lam, K, R, delta, &eps, budgets, &ps, bound, &pp))) {
        cJSON *j = scf_head(&pp, z, delta, bound);
        if (ps.n) rc = scf_forward(&pp, &ps, json, j);
        else rc = (budgets && read_budgets(budgets, &eps)) ? 1 : scf_inverse(&pp, &eps, json, j);
        if (!rc && json) pcli_print_json(j);
        else cJSON_Delete(j);
    }
    cli_done(&cmd);
    return rc;
}
