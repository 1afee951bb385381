/* Strict option-value parsing for the subcommands: a value that is not entirely a number is an error. */
#ifndef DPFL_CLI_ARGS_H
#define DPFL_CLI_ARGS_H
#include <stdint.h>

/* Return 0 and set *out, or print "dpfl: error: --opt: ..." and return nonzero. */
int cli_parse_double(const char *opt, const char *s, double *out);
int cli_parse_long(const char *opt, const char *s, long *out);
/* 1 if argv[i] is --help or -h anywhere */
int cli_wants_help(int argc, char **argv);
#endif
