/* dpfl audit CONFIG.ini [--set section.key=value]... [--canaries K] [--runs R] [--method one-run|multi-run]
 *                       [--confidence C] [--canary-value V] [--seed S] [--json] [--quiet]
 * An empirical lower bound on the record-level epsilon of the config's DP-SGD, beside the claimed epsilon. */
#include "args.h"
#include "cli.h"
#include "dpfl/audit.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse_method(const char *s, dpfl_audit_method *m)
{
    if (!strcmp(s, "one-run")) *m = DPFL_AUDIT_ONE_RUN;
    else if (!strcmp(s, "multi-run")) *m = DPFL_AUDIT_MULTI_RUN;
    else return cli_usage_error("audit", "--method: '%s' is not one-run or multi-run", s);
    return 0;
}

static const char *method_name(dpfl_audit_method m, int other)
{
    return (m == DPFL_AUDIT_ONE_RUN) != (other != 0) ? "one-run" : "multi-run";
}

static void add_bound(cJSON *j, const char *name, const dpfl_audit_bound *b)
{
    cJSON *o = cJSON_AddObjectToObject(j, name);
    cJSON_AddNumberToObject(o, "epsilon_lower", b->epsilon);
    cJSON_AddNumberToObject(o, "confidence", b->confidence);
    cJSON_AddNumberToObject(o, "tpr", b->tpr);
    cJSON_AddNumberToObject(o, "fpr", b->fpr);
    if (isfinite(b->threshold)) cJSON_AddNumberToObject(o, "threshold", b->threshold);
    if (isfinite(b->fpr_upper)) cJSON_AddNumberToObject(o, "fpr_upper", b->fpr_upper);
    if (isfinite(b->fnr_upper)) cJSON_AddNumberToObject(o, "fnr_upper", b->fnr_upper);
    cJSON_AddNumberToObject(o, "guesses", (double)b->guesses);
    cJSON_AddNumberToObject(o, "correct", (double)b->correct);
    cJSON_AddNumberToObject(o, "trials", (double)b->trials);
}

/* the audit of the config at config_path with the --set values over it */
static int audit(const char *config_path, const cli_strings *sets, dpfl_audit_options opt, int seed_given, int json)
{
    dpfl_config cfg;
    int rc = cli_config_read(&cfg, config_path, NULL, sets, 0);
    if (rc) return rc;
    dpfl_error err;
    if (dpfl_config_validate(&cfg, &err) || dpfl_config_check_ignored(&cfg, &err)) return cli_error("%s", err.msg);
    if (!seed_given && cfg.run.seed.given) opt.seed = cfg.run.seed.value;
    dpfl_dataset train, test;
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    if (dpfl_config_load_data(&cfg, opt.seed, &train, &test, &err)) return cli_error("%s", err.msg);
    const int32_t nabsent = dpfl_dataset_absent_count(&train);
    if (nabsent) {
        dpfl_dataset_free(&train);
        dpfl_dataset_free(&test);
        return cli_error("data.dataset: %d of its files are not here; the audit trains on every record", nabsent);
    }
    dpfl_audit_report rep;
    dpfl_status st = dpfl_audit_record_level(&cfg, &train, &test, &opt, &rep, &err);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    if (st) return cli_error("%s", err.msg);
    const dpfl_audit_bound *b = &rep.bound;
    const int violation = b->epsilon > rep.claimed_epsilon;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "claimed_epsilon", rep.claimed_epsilon);
        cJSON_AddNumberToObject(j, "delta", rep.delta);
        cJSON_AddNumberToObject(j, "noise", rep.noise);
        cJSON_AddStringToObject(j, "method", method_name(opt.method, 0));
        cJSON_AddNumberToObject(j, "epsilon_lower", b->epsilon);
        cJSON_AddNumberToObject(j, "confidence", b->confidence);
        cJSON_AddNumberToObject(j, "tpr", b->tpr);
        cJSON_AddNumberToObject(j, "fpr", b->fpr);
        cJSON_AddBoolToObject(j, "violation", violation);
        cJSON_AddNumberToObject(j, "canaries", opt.canaries);
        cJSON_AddNumberToObject(j, "runs", opt.runs);
        cJSON_AddNumberToObject(j, "canary_client", rep.canary_client);
        cJSON_AddNumberToObject(j, "free_features", rep.free_features);
        cJSON_AddNumberToObject(j, "seed", (double)opt.seed);
        add_bound(j, "one_run", opt.method == DPFL_AUDIT_ONE_RUN ? &rep.bound : &rep.other);
        if (isfinite(opt.method == DPFL_AUDIT_MULTI_RUN ? rep.bound.epsilon : rep.other.epsilon))
            add_bound(j, "multi_run", opt.method == DPFL_AUDIT_MULTI_RUN ? &rep.bound : &rep.other);
        cJSON_AddNumberToObject(j, "wall_seconds", rep.seconds);
        char *s = cJSON_Print(j);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
        return 0;
    }
    printf("claimed epsilon  %.4g  (record level, delta %g, noise multiplier %.4g, worst client, the simulation's "
           "ledger)\n", rep.claimed_epsilon, rep.delta, rep.noise);
    printf("epsilon_lower    %.4g  at %.0f%% confidence (%s, %d canaries x %d run%s in client 0)\n", b->epsilon,
           100 * b->confidence, method_name(opt.method, 0), opt.canaries, opt.runs, opt.runs > 1 ? "s" : "");
    if (opt.method == DPFL_AUDIT_ONE_RUN)
        printf("attack           %lld of %lld guesses correct; TPR %.3f, FPR %.3f (guessed in: the %lld highest "
               "scores)\n", (long long)b->correct, (long long)b->guesses, b->tpr, b->fpr, (long long)(b->guesses / 2));
    else
        printf("attack           TPR %.3f, FPR %.3f at the best threshold (FPR <= %.3g, FNR <= %.3g at the stated "
               "confidence)\n", b->tpr, b->fpr, b->fpr_upper, b->fnr_upper);
    if (isfinite(rep.other.epsilon))
        printf("other estimator  %s: epsilon_lower %.4g (TPR %.3f, FPR %.3f)\n", method_name(opt.method, 1),
               rep.other.epsilon, rep.other.tpr, rep.other.fpr);
    printf("time             %.1f s\n", rep.seconds);
    printf("verdict          %s\n", violation ? "VIOLATION: the attack proves more leakage than the claimed epsilon"
                                             : "consistent: epsilon_lower <= claimed epsilon (not a proof of privacy)");
    return 0;
}

int cli_audit(int argc, char **argv)
{
    dpfl_audit_options opt;
    dpfl_audit_defaults(&opt);
    long canaries = opt.canaries, runs = opt.runs, seed = (long)opt.seed;
    const char *method = "one-run";
    cli_strings sets = {NULL, 0};
    int json = 0, quiet = 0;
    cli_opt o[] = {
        {.name = "--set", .type = CLI_STRINGS, .out = &sets, .value = "section.key=value",
         .help = "override a key of the config (any number of times)"},
        {.name = "--canaries", .type = CLI_LONG, .out = &canaries, .value = "K", CLI_RANGE(1, 1e9),
         .help = "canaries per run (default 64; needs K free input features)"},
        {.name = "--runs", .type = CLI_LONG, .out = &runs, .value = "R", CLI_RANGE(1, 1e9),
         .help = "training runs (default 1)"},
        {.name = "--method", .type = CLI_STRING, .out = &method, .value = "M",
         .help = "one-run (Steinke, Nasr, Jagielski 2023; default): guesses on the most confident\n"
                 "canaries, binomial tail bound, valid for any R; multi-run (Jagielski, Ullman,\n"
                 "Oprea 2020): Clopper-Pearson bounds on FPR and FNR at the best threshold over all\n"
                 "R x K canary trials (threshold chosen on the same trials: nominal confidence)"},
        {.name = "--confidence", .type = CLI_DOUBLE, .out = &opt.confidence, .value = "C", .help = "default 0.95"},
        {.name = "--canary-value", .type = CLI_DOUBLE, .out = &opt.canary_value, .value = "V",
         .help = "the canary's non-zero feature (default 1)"},
        {.name = "--seed", .type = CLI_LONG, .out = &seed, .value = "S", CLI_RANGE(0, 1e9),
         .help = "canaries, initialisation and noise (default: run.seed, else 1)"},
        {.name = "--json", .type = CLI_FLAG, .out = &json, .help = "one JSON object"},
        {.name = "--quiet", .type = CLI_FLAG, .out = &quiet, .help = "no progress lines"},
    };
    cli_command cmd = {
        .name = "audit",
        .usage = "dpfl audit CONFIG.ini [--set section.key=value]... [--canaries K] [--runs R]\n"
                 "                  [--method one-run|multi-run] [--confidence C] [--canary-value V] [--seed S]\n"
                 "                  [--json] [--quiet]",
        .about = "Trains the config's federated DP-SGD (record_dp.enabled = yes) R times with K gradient canaries added\n"
                 "to client 0, each with probability 1/2 (a canary is an input that is zero except one feature that is\n"
                 "zero in every training record: MNIST's border pixels).  The attacker is the server, which sees client\n"
                 "0's update each round; a canary's score is that update on the canary's own first-layer weights,\n"
                 "projected on the canary's gradient.  Prints the claimed epsilon (the simulation's ledger), the\n"
                 "empirical LOWER bound epsilon_lower with its confidence, the attack's TPR/FPR and the run time.\n"
                 "A lower bound above the claim means the mechanism leaks more than its accounting says (a bug).\n",
        .after = "Only models whose first layer is linear (logreg, mlp, net:fc...) are supported.  Client-level\n"
                 "(client_dp) auditing is not implemented.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "CONFIG.ini",
        .min_args = 1,
        .max_args = 1,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    opt.canaries = (int32_t)canaries;
    opt.runs = (int32_t)runs;
    opt.seed = (uint64_t)seed;
    opt.quiet = quiet;
    rc = parse_method(method, &opt.method);
    if (!rc) rc = audit(cmd.arg.v[0], &sets, opt, cli_seen(&cmd, "--seed"), json);
    cli_done(&cmd);
    return rc;
}
