/* What the privacy subcommands (account, calibrate, fdp, scf, e2e) share: their --json output. */
#ifndef DPFL_CLI_PRIVACY_CLI_H
#define DPFL_CLI_PRIVACY_CLI_H
#include "dpfl/privacy.h"

#include <cjson/cJSON.h>

/* Print a cJSON object on stdout, one line, and free it. */
void pcli_print_json(cJSON *o);
#endif
