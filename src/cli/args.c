#include "args.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_double(const char *opt, const char *s, double *out)
{
    if (!s) return cli_error("%s: missing value", opt);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || isnan(v))
        return cli_error("%s: '%s' is not a number", opt, s);
    *out = v;
    return 0;
}

int cli_parse_long(const char *opt, const char *s, long *out)
{
    if (!s) return cli_error("%s: missing value", opt);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE) return cli_error("%s: '%s' is not an integer", opt, s);
    *out = v;
    return 0;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}
