#include "privacy_cli.h"

#include "args.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int pcli_parse(const char *cmd, int argc, char **argv, pcli_opt *opts, size_t nopts)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) return cli_usage_error(cmd, "unexpected argument '%s'", a);
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        pcli_opt *o = NULL;
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len)) o = &opts[k];
        if (!o) return cli_usage_error(cmd, "unknown option '%.*s'", (int)len, a);
        if (o->seen && o->type != OPT_DOUBLES) return cli_usage_error(cmd, "%s given twice", o->name);
        o->seen = 1;
        if (o->type == OPT_FLAG) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", o->name);
            *(int *)o->out = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) return cli_usage_error(cmd, "%s: missing value", o->name);
        switch (o->type) {
        case OPT_DOUBLE:
            if (cli_parse_double(o->name, val, (double *)o->out)) return 2;
            break;
        case OPT_LONG:
            if (cli_parse_long(o->name, val, (long *)o->out)) return 2;
            break;
        case OPT_STRING: *(const char **)o->out = val; break;
        case OPT_DOUBLES: {
            pcli_list *l = o->out;
            for (;;) {
                double *nv = realloc(l->v, (l->n + 1) * sizeof *nv);
                if (!nv) return cli_error("out of memory");
                l->v = nv;
                if (cli_parse_double(o->name, val, &l->v[l->n])) return 2;
                l->n++;
                if (eq || i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)) break;
                val = argv[++i];
            }
            break;
        }
        case OPT_FLAG: break;
        }
    }
    return 0;
}

int pcli_seen(const pcli_opt *opts, size_t nopts, const char *name)
{
    for (size_t k = 0; k < nopts; k++)
        if (!strcmp(opts[k].name, name)) return opts[k].seen;
    return 0;
}

void pcli_print_json(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        puts(s);
        free(s);
    }
    cJSON_Delete(o);
}
