/* The --json output of the privacy subcommands (privacy_cli.h). */
#include "privacy_cli.h"

#include <stdio.h>
#include <stdlib.h>

void pcli_print_json(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        puts(s);
        free(s);
    }
    cJSON_Delete(o);
}
