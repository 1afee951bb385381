/* How many clients' updates reached the server, for summary.json and the final line (issue 35: a deployment whose
 * clients never answered must not look like a finished run).  Read back from diagnostics.jsonl, whose lines a resume
 * keeps in step with the checkpoint, so the counts cover every session of the run.  Like that file they are covered
 * by no epsilon: under client sampling the number of participants depends on who took part (docs/privacy.md). */
#include "run_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fl_report_updates(const char *dir, run_progress *pr, cJSON *sum)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
    FILE *f = fopen(path, "r");
    pr->upd_sampled = pr->upd_arrived = 0;
    pr->upd_empty = 0;
    if (!f) return;
    cJSON *per = cJSON_CreateArray();
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "participants");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "replied");
        if (cJSON_IsNumber(s) && cJSON_IsNumber(r)) {
            pr->upd_sampled += (int64_t)s->valuedouble;
            pr->upd_arrived += (int64_t)r->valuedouble;
            pr->upd_empty += s->valuedouble > 0 && r->valuedouble == 0;
            cJSON_AddItemToArray(per, cJSON_CreateNumber(r->valuedouble));
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    cJSON *u = cJSON_AddObjectToObject(sum, "updates");
    cJSON_AddBoolToObject(u, "private", 0);
    cJSON_AddNumberToObject(u, "sampled", (double)pr->upd_sampled);
    cJSON_AddNumberToObject(u, "arrived", (double)pr->upd_arrived);
    cJSON_AddNumberToObject(u, "rounds_without_update", pr->upd_empty);
    cJSON_AddItemToObject(u, "per_round", per);
}
