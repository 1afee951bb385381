/* The one command-line parser of the dpfl subcommands (args.h): argv read against a command's option table, and
 * the command's --help printed from the same table. */
#include "args.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the widest "  -o, --out FILE" that keeps its help on the same line */
enum { HELP_COLUMN_MAX = 26 };

static size_t left_width(const cli_opt *o)
{
    size_t w = 2 + strlen(o->name);
    if (o->alias) w += strlen(o->alias) + 2;
    if (o->value) w += 1 + strlen(o->value);
    return w;
}

void cli_help(const cli_command *c, FILE *f)
{
    fprintf(f, "usage: %s\n", c->usage);
    if (c->about) fprintf(f, "\n%s", c->about);
    size_t col = 2 + strlen("-h, --help");
    for (size_t i = 0; i < c->nopts; i++) {
        size_t w = left_width(&c->opts[i]);
        if (w > col && w <= HELP_COLUMN_MAX) col = w;
    }
    col += 2;
    fputs("\noptions:\n", f);
    for (size_t i = 0; i < c->nopts; i++) {
        const cli_opt *o = &c->opts[i];
        int w = fprintf(f, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                        o->value ? " " : "", o->value ? o->value : "");
        if (w < 0) return;
        if ((size_t)w + 2 > col) { /* too wide: the help starts on the next line */
            fputc('\n', f);
            w = 0;
        }
        fprintf(f, "%*s", (int)(col - (size_t)w), "");
        for (const char *h = o->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "%*s", (int)col, "");
        }
        fputc('\n', f);
    }
    fprintf(f, "  -h, --help%*sthis text\n", (int)(col - strlen("  -h, --help")), "");
    if (c->after) fprintf(f, "\n%s", c->after);
    if (c->more) c->more(f);
}

void cli_done(cli_command *c)
{
    for (size_t i = 0; i < c->nopts; i++) {
        cli_opt *o = &c->opts[i];
        if (o->type == CLI_DOUBLES) {
            cli_doubles *l = o->out;
            free(l->v);
            l->v = NULL;
            l->n = 0;
        } else if (o->type == CLI_STRINGS) {
            cli_strings *l = o->out;
            free(l->v);
            l->v = NULL;
            l->n = 0;
        }
    }
    free(c->arg.v);
    c->arg.v = NULL;
    c->arg.n = 0;
}

int cli_seen(const cli_command *c, const char *name)
{
    for (size_t i = 0; i < c->nopts; i++)
        if (!strcmp(c->opts[i].name, name)) return c->opts[i].seen;
    return 0;
}

int cli_has_arg(int argc, char **argv, const char *word)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], word)) return 1;
    return 0;
}

int cli_wants_help(int argc, char **argv)
{
    return cli_has_arg(argc, argv, "--help") || cli_has_arg(argc, argv, "-h");
}

static int push_string(cli_strings *l, const char *s)
{
    const char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v) return cli_error("out of memory");
    l->v = v;
    l->v[l->n++] = s;
    return 0;
}

/* the value of option o (spelt `as`) into its out; 0, or the error printed and 2 */
static int take_value(const cli_command *c, const cli_opt *o, const char *as, const char *s, double *num)
{
    char *end;
    errno = 0;
    if (o->type == CLI_LONG) {
        long v = strtol(s, &end, 10);
        if (end == s || *end != '\0' || errno == ERANGE) return cli_usage_error(c->name, "%s: '%s' is not an integer", as, s);
        if (o->ranged && (v < o->lo || v > o->hi))
            return cli_usage_error(c->name, "%s: %ld is out of range [%.0f, %.0f]", as, v, o->lo, o->hi);
        *(long *)o->out = v;
        return 0;
    }
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || isnan(v))
        return cli_usage_error(c->name, "%s: '%s' is not a number", as, s);
    if (o->ranged && !(v >= o->lo && v <= o->hi))
        return cli_usage_error(c->name, "%s: %g is out of range [%g, %g]", as, v, o->lo, o->hi);
    *num = v;
    return 0;
}

/* argv[*i] is option o, spelt `as` (the part before any '='); eq its "=value" or NULL */
static int take_option(cli_command *c, cli_opt *o, const char *as, const char *eq, int argc, char **argv, int *i)
{
    if (o->seen && o->type != CLI_DOUBLES && o->type != CLI_STRINGS)
        return cli_usage_error(c->name, "%s given twice", o->name);
    o->seen++;
    if (o->type == CLI_FLAG) {
        if (eq) return cli_usage_error(c->name, "%s takes no value", o->name);
        *(int *)o->out = 1;
        return 0;
    }
    const char *val = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!val) return cli_usage_error(c->name, "%s: missing value", as);
    double d;
    switch (o->type) {
    case CLI_STRING: *(const char **)o->out = val; return 0;
    case CLI_STRINGS: return push_string(o->out, val);
    case CLI_LONG: return take_value(c, o, as, val, &d);
    case CLI_DOUBLE:
        if (take_value(c, o, as, val, &d)) return 2;
        *(double *)o->out = d;
        return 0;
    case CLI_DOUBLES: {
        cli_doubles *l = o->out;
        for (;;) {
            double *nv = realloc(l->v, (l->n + 1) * sizeof *nv);
            if (!nv) return cli_error("out of memory");
            l->v = nv;
            if (take_value(c, o, as, val, &l->v[l->n])) return 2;
            l->n++;
            if (eq || *i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) return 0;
            val = argv[++*i];
        }
    }
    case CLI_FLAG: break;
    }
    return 0;
}

static int parse(cli_command *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { /* a positional argument ("-" is one: standard input, or a file so named) */
            if (c->max_args == 1 && c->arg.n == 1)
                return cli_usage_error(c->name, "more than one %s given ('%s')", c->args, a);
            if (c->max_args >= 0 && c->arg.n >= (size_t)c->max_args)
                return cli_usage_error(c->name, "unexpected argument '%s'", a);
            if (push_string(&c->arg, a)) return 1;
            continue;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL; /* --name=value */
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        cli_opt *o = NULL;
        for (size_t k = 0; k < c->nopts && !o; k++) {
            const cli_opt *r = &c->opts[k];
            if ((strlen(r->name) == len && !strncmp(r->name, a, len)) ||
                (r->alias && strlen(r->alias) == len && !strncmp(r->alias, a, len)))
                o = &c->opts[k];
        }
        if (!o) return cli_usage_error(c->name, "unknown option '%.*s'", (int)len, a);
        char as[64];
        snprintf(as, sizeof as, "%.*s", (int)(len < sizeof as ? len : sizeof as - 1), a);
        if (take_option(c, o, as, eq, argc, argv, &i)) return 2;
    }
    for (size_t k = 0; k < c->nopts; k++)
        if (c->opts[k].required && !c->opts[k].seen) return cli_usage_error(c->name, "%s is required", c->opts[k].name);
    if (c->arg.n < (size_t)c->min_args) return cli_usage_error(c->name, "missing %s", c->args ? c->args : "argument");
    return 0;
}

int cli_parse(cli_command *c, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        cli_help(c, stdout);
        return 0;
    }
    for (size_t k = 0; k < c->nopts; k++) c->opts[k].seen = 0;
    c->arg.v = NULL;
    c->arg.n = 0;
    if (parse(c, argc, argv)) {
        cli_done(c);
        return 2;
    }
    return CLI_RUN;
}
