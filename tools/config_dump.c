/* Prints the resolved config (dpfl_config_to_ini, include/dpfl/fl.h) of the library's defaults with the
 * "section.key=value" assignments given as arguments applied in order, e.g. `config_dump fl.algorithm=dp-sgd`.
 * tools/gen_config_doc.py reads it for docs/config.md's defaults and presets, so that they come from the library
 * itself, not from a copy of its table. */
#include <stdio.h>
#include <stdlib.h>

#include "dpfl/fl.h"

int main(int argc, char **argv)
{
    dpfl_config c;
    dpfl_error err;
    dpfl_config_defaults(&c);
    for (int i = 1; i < argc; i++)
        if (dpfl_config_set(&c, argv[i], &err) != DPFL_OK) {
            fprintf(stderr, "config_dump: %s\n", err.msg);
            return 1;
        }
    char *ini = dpfl_config_to_ini(&c);
    if (!ini) {
        fprintf(stderr, "config_dump: out of memory\n");
        return 1;
    }
    fputs(ini, stdout);
    free(ini);
    return 0;
}
