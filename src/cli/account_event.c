/* dpfl account --event FILE: recompute a run's epsilons from the events it recorded (summary.json's "events", or
 * one event object as `dpfl_run_event_json` writes it) and check them against the numbers the run reported. */
#include "args.h"
#include "cli.h"
#include "privacy_cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one entry: recompute, print, compare; 0 when it agrees (or the run gave no number to compare) */
static int recompute(const char *path, const char *name, const cJSON *o, int json, cJSON *out)
{
    char what[512];
    snprintf(what, sizeof what, "%s: events.%s", path, name);
    char *text = cJSON_PrintUnformatted(o);
    dpfl_run_event r;
    dpfl_error err;
    dpfl_guarantee g;
    dpfl_status st = text ? dpfl_run_event_parse(text, what, &r, &err) : DPFL_ENOMEM;
    free(text);
    if (st) return cli_error("%s", st == DPFL_ENOMEM && !text ? "out of memory" : err.msg);
    st = dpfl_run_event_epsilon(&r, &g, &err);
    if (st) {
        dpfl_run_event_free(&r);
        return cli_error("%s: %s", what, err.msg);
    }
    int agree = isnan(r.epsilon) || fabs(g.epsilon - r.epsilon) <= 1e-9 * fmax(1.0, fabs(r.epsilon));
    if (json) {
        cJSON *e = cJSON_AddObjectToObject(out, name);
        cJSON_AddNumberToObject(e, "epsilon", g.epsilon);
        if (!isnan(r.epsilon)) cJSON_AddNumberToObject(e, "reported", r.epsilon);
        cJSON_AddNumberToObject(e, "delta", r.delta);
        cJSON_AddStringToObject(e, "accountant", dpfl_accountant_name(r.accountant));
        cJSON_AddBoolToObject(e, "agrees", agree);
    } else {
        printf("%-10s epsilon %.6g at delta %g (%s, %zu event%s, held by %lld)", name, g.epsilon, r.delta,
               dpfl_accountant_name(r.accountant), r.nevents, r.nevents == 1 ? "" : "s", (long long)r.held_by);
        if (!isnan(r.epsilon)) printf("  reported %.6g", r.epsilon);
        putchar('\n');
    }
    dpfl_run_event_free(&r);
    if (!agree)
        return cli_error("%s: the recomputed epsilon %.17g differs from the reported %.17g", what, g.epsilon,
                         r.epsilon);
    return 0;
}

int cli_account_event(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    cli_opt o[] = {
        {.name = "--event", .type = CLI_STRING, .out = &path, .value = "FILE", .required = 1,
         .help = "a run's summary.json (every entry of its \"events\": the worst record, the\n"
                 "clients), or one event object"},
        {.name = "--json", .type = CLI_FLAG, .out = &json,
         .help = "one JSON object: per entry the recomputed epsilon, the reported one, delta,\n"
                 "the accountant and whether the two agree"},
    };
    cli_command cmd = {
        .name = "account",
        .usage = "dpfl account --event FILE [--json]",
        .about = "Recompute epsilon from the privacy events a run recorded.  Each is accounted with the accountant, the\n"
                 "orders and the delta the run used; the exit status is 1 when a recomputed epsilon differs from the one\n"
                 "the run reported.  docs/privacy.md maps the event kinds to Google dp_accounting's DpEvent classes.\n",
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    char *text;
    size_t len;
    dpfl_error err;
    if (dpfl_file_read_all(path, &text, &len, &err)) return cli_error("%s", err.msg);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return cli_error("%s: not a JSON object", path);
    }
    cJSON *out = cJSON_CreateObject();
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "events");
    int bad = 0, n = 0;
    if (cJSON_IsObject(events)) {
        for (const cJSON *e = events->child; e; e = e->next, n++) bad |= recompute(path, e->string, e, json, out);
    } else if (cJSON_GetObjectItemCaseSensitive(root, "composed")) {
        bad = recompute(path, "event", root, json, out);
        n = 1;
    }
    cJSON_Delete(root);
    if (n == 0) {
        cJSON_Delete(out);
        return cli_error("%s: no \"events\" (a summary.json of this version) and no \"composed\" (one event)", path);
    }
    if (json) {
        char *s = cJSON_Print(out);
        if (s) puts(s);
        free(s);
    }
    cJSON_Delete(out);
    return bad;
}
