/* The one command-line parser of the dpfl subcommands.  Each subcommand describes itself in a cli_command: its
 * options as a table of cli_opt rows (name, type, where the value goes, its help line, an optional range), its
 * positional arguments, and the prose of its --help.  cli_parse reads argv against that table, and --help is
 * printed from the same table, so that an option cannot be accepted without being documented or the reverse.
 *
 * Every error cli_parse reports is one line "dpfl: error: <option>: <why> (see 'dpfl CMD --help')" and exit
 * status 2: an unknown option, a missing value, a value that is not entirely a number, a number out of the row's
 * range, an option given twice (list options excepted), a flag given a value, a required option or a positional
 * argument missing, a positional argument too many. */
#ifndef DPFL_CLI_ARGS_H
#define DPFL_CLI_ARGS_H
#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_FLAG,    /* no value: sets *(int *)out to 1 */
    CLI_STRING,  /* const char **out: the value as given */
    CLI_DOUBLE,  /* double *out: the whole value is a number (strtod), not NaN */
    CLI_LONG,    /* long *out: the whole value is a decimal integer */
    CLI_DOUBLES, /* cli_doubles *out: one or more numbers, the arguments after the option up to the next one
                    starting with "--"; may be repeated, each time appending */
    CLI_STRINGS, /* cli_strings *out: may be repeated, each occurrence appends its value (--set) */
} cli_type;

typedef struct {
    double *v;
    size_t n;
} cli_doubles;

typedef struct {
    const char **v; /* pointers into argv */
    size_t n;
} cli_strings;

typedef struct {
    const char *name;  /* "--noise" */
    const char *alias; /* another spelling ("-o"), or NULL */
    cli_type type;
    void *out;         /* as the type says */
    const char *value; /* the value's name in --help ("Z", "FILE"); NULL for a flag */
    const char *help;  /* its --help text; each '\n' starts a line aligned under the first */
    int required;      /* 1: cli_parse fails when it is not given */
    int ranged;        /* CLI_LONG / CLI_DOUBLE: the value must lie in [lo, hi] (CLI_RANGE) */
    double lo, hi;
    int seen;          /* set by cli_parse: how many times it was given */
} cli_opt;

#define CLI_RANGE(l, h) .ranged = 1, .lo = (l), .hi = (h)

typedef struct {
    const char *name;        /* "account": errors end "(see 'dpfl account --help')" */
    const char *usage;       /* the synopsis after "usage: ", continuation lines indented by 7 */
    const char *about;       /* the paragraphs between the synopsis and the options, or NULL */
    const char *after;       /* the paragraphs after the options, or NULL */
    void (*more)(FILE *f);   /* prints what follows them (text computed at run time), or NULL */
    cli_opt *opts;
    size_t nopts;
    const char *args;        /* the positional arguments as "missing ..." names them ("CONFIG.ini"); NULL: none */
    int min_args, max_args;  /* how many (max_args < 0: any number) */
    cli_strings arg;         /* set by cli_parse: the positional arguments, in order */
} cli_command;

/* cli_parse's answer when the command is to run */
#define CLI_RUN (-1)

/* Read argv[1..argc-1] (argv[0] is the subcommand) against c.  Returns CLI_RUN with every option's out and c->arg
 * filled; or, when argv holds --help or -h anywhere, prints the help on stdout and returns 0; or prints one error
 * line and returns 2.  Unless it returns CLI_RUN it has freed what it allocated; after CLI_RUN, cli_done does. */
int cli_parse(cli_command *c, int argc, char **argv);
/* Free the lists cli_parse filled (CLI_DOUBLES, CLI_STRINGS, the positional arguments). */
void cli_done(cli_command *c);
/* The help text of c on f: the usage block, about, "options:" with one entry per row, after, more. */
void cli_help(const cli_command *c, FILE *f);
/* How many times option `name` was given (0 when c has no such row). */
int cli_seen(const cli_command *c, const char *name);
/* 1 if argv[1..argc-1] holds the argument `word` itself (account's --event mode) */
int cli_has_arg(int argc, char **argv, const char *word);
/* 1 if argv[1..argc-1] holds --help or -h: cli_parse will print the help */
int cli_wants_help(int argc, char **argv);
#endif
