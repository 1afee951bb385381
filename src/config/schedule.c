/* Per-round schedules "ROUND:VALUE, ROUND:VALUE, ...": piecewise constant from each listed round on (Geyer et
 * al.'s growing m_t and changing sigma_t).  The accountant composes the heterogeneous rounds as they ran. */
#include "dpfl/fl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_schedule_parse(const char *text, const char *key, dpfl_schedule *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        if (out->n == DPFL_SCHEDULE_MAX)
            return dpfl_fail(err, DPFL_EINVAL, "%s: more than %d entries", key, DPFL_SCHEDULE_MAX);
        char *end;
        errno = 0;
        long r = strtol(p, &end, 10);
        if (end == p || *end != ':' || errno || r < 1 || r > 100000000)
            return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not a list of ROUND:VALUE (rounds from 1)", key, text);
        p = end + 1;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0)
            return dpfl_fail(err, DPFL_EINVAL, "%s: bad value in '%s' (a non-negative number is expected)", key, text);
        if (out->n > 0 && r <= out->round[out->n - 1])
            return dpfl_fail(err, DPFL_EINVAL, "%s: rounds must increase ('%s')", key, text);
        if (out->n == 0 && r != 1)
            return dpfl_fail(err, DPFL_EINVAL, "%s: the first entry must be round 1 ('%s')", key, text);
        out->round[out->n] = (int32_t)r;
        out->value[out->n] = v;
        out->n++;
        p = end;
        while (*p == ' ') p++;
        if (*p && *p != ',') return dpfl_fail(err, DPFL_EINVAL, "%s: expected ',' in '%s'", key, text);
    }
    return DPFL_OK;
}

double dpfl_schedule_at(const dpfl_schedule *s, int32_t round, double fallback)
{
    double v = fallback;
    for (int i = 0; i < s->n && s->round[i] <= round; i++) v = s->value[i];
    return v;
}

static double at(const char *text, int32_t round, double fallback)
{
    dpfl_schedule s;
    if (!text[0] || dpfl_schedule_parse(text, "schedule", &s, NULL)) return fallback; /* validated at load */
    return dpfl_schedule_at(&s, round, fallback);
}

double dpfl_round_client_rate(const dpfl_config *c, int32_t round)
{
    return at(c->fl.client_rate_schedule, round, c->fl.client_rate);
}

int32_t dpfl_round_clients_per_round(const dpfl_config *c, int32_t round)
{
    return (int32_t)at(c->fl.clients_per_round_schedule, round, c->fl.clients_per_round);
}

double dpfl_round_client_noise(const dpfl_config *c, int32_t round, double z)
{
    return at(c->client_dp.noise_schedule, round, z);
}
