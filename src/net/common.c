/* What the server and its clients agree on before any round: the config (a digest), the per-record rates of
 * each client (rPDP-FL), and which settings the network transport runs. */
#include "net_internal.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void net_config_digest(const dpfl_config *cfg, uint8_t out[32])
{
    dpfl_config c = *cfg, d;
    dpfl_config_defaults(&d);
    c.run.threads = d.run.threads;
    c.run.eval_every = d.run.eval_every;
    c.fl.rounds = d.fl.rounds;
    memcpy(c.data.data_dir, d.data.data_dir, sizeof c.data.data_dir);
    char *ini = dpfl_config_to_ini(&c);
    if (!ini) { /* out of memory: a digest no peer matches */
        memset(out, 0xff, 32);
        return;
    }
    crypto_generichash(out, 32, (const unsigned char *)ini, strlen(ini), NULL, 0);
    free(ini);
}

dpfl_status net_check_config(const dpfl_config *cfg, dpfl_error *err)
{
    if (cfg->client_dp.enabled && cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP && !cfg->client_dp.ddp_secagg)
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.ddp_secagg = no would send each client's noisy update to the "
                                           "server in the clear: over the network distributed DP runs secure "
                                           "aggregation (ddp_secagg = yes)");
    if (cfg->record_dp.enabled && cfg->record_dp.budgets != DPFL_BUDGETS_NONE) {
        int generated = cfg->record_dp.budgets != DPFL_BUDGETS_FILE && cfg->record_dp.budgets != DPFL_BUDGETS_CLASS;
        if (generated && !cfg->run.seed.given)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.budgets = %s draws the budgets from the run's seed, which a "
                                               "deployed run without [run] seed does not share: give the budgets "
                                               "(budgets = file or class) or set [run] seed",
                             dpfl_config_choice(cfg, "record_dp.budgets"));
    }
    return DPFL_OK;
}

void net_log(const char *who, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dpfl %s: %s\n", who, line);
    fflush(stderr);
}

const char *net_short_hex(const uint8_t *d, char buf[17])
{
    for (int i = 0; i < 8; i++) snprintf(buf + 2 * i, 3, "%02x", d[i]);
    return buf;
}
