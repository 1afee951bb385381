/* Option tables shared by the privacy subcommands (account, calibrate, fdp, scf, e2e). */
#ifndef DPFL_CLI_PRIVACY_CLI_H
#define DPFL_CLI_PRIVACY_CLI_H
#include "dpfl/privacy.h"

#include <cjson/cJSON.h>

typedef enum { OPT_DOUBLE, OPT_LONG, OPT_STRING, OPT_FLAG, OPT_DOUBLES } opt_type;

typedef struct {
    const char *name; /* "--noise" */
    opt_type type;
    void *out;        /* double*, long*, const char**, int*, or pcli_list* */
    int seen;
} pcli_opt;

typedef struct {
    double *v;
    size_t n;
} pcli_list;

/* Parse argv[1..] against opts; prints the error and returns nonzero on an unknown option or a bad value.
 * OPT_DOUBLES takes every following argument that is not an option. */
int pcli_parse(const char *cmd, int argc, char **argv, pcli_opt *opts, size_t nopts);
/* 1 if option `name` was given. */
int pcli_seen(const pcli_opt *opts, size_t nopts, const char *name);
/* Print a cJSON object on stdout and free it. */
void pcli_print_json(cJSON *o);
#endif
