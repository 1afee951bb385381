/* Per-round schedules "ROUND:VALUE, ROUND:VALUE, ...": piecewise constant from each listed round on (Geyer et
 * al.'s growing m_t and changing sigma_t).  A schedule key is parsed once, when the config is read (config.c), into
 * a dpfl_schedule; the rounds look it up here.  The accountant composes the heterogeneous rounds as they ran. */
#include "config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
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

size_t fl_schedule_text(const dpfl_schedule *s, char *out, size_t cap)
{
    size_t n = 0;
    if (cap) out[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        char v[FL_NUMBER_TEXT];
        int w = snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s%d:%s", i ? ", " : "", (int)s->round[i],
                         fl_number_text(s->value[i], v));
        n += (size_t)w;
    }
    return n;
}

double dpfl_schedule_at(const dpfl_schedule *s, int32_t round, double fallback)
{
    double v = fallback;
    for (int i = 0; i < s->n && s->round[i] <= round; i++) v = s->value[i];
    return v;
}

double dpfl_round_client_rate(const dpfl_config *c, int32_t round)
{
    return dpfl_schedule_at(&c->fl.client_rate_schedule, round, c->fl.client_rate);
}

int32_t dpfl_round_clients_per_round(const dpfl_config *c, int32_t round)
{
    return (int32_t)dpfl_schedule_at(&c->fl.clients_per_round_schedule, round, c->fl.clients_per_round);
}

/* Clipping-threshold decay (the thesis's Algorithm 6: "clip <- max(clip, low); train; clip <- clip - clip decay"):
 * C_t = max(C_0 (1 - decay)^(t-1), C_min).  A function of the round alone, so it is public and a resumed or
 * deployed client computes the same C_t. */
double dpfl_round_record_clip(const dpfl_config *c, int32_t round)
{
    const double c0 = c->record_dp.clip, d = c->record_dp.clip_decay;
    if (!(d > 0.0) || round <= 1) return c0;
    const double ct = c0 * pow(1.0 - d, (double)(round - 1));
    return ct > c->record_dp.clip_min ? ct : c->record_dp.clip_min;
}

double dpfl_round_client_noise(const dpfl_config *c, int32_t round, double z)
{
    return dpfl_schedule_at(&c->client_dp.noise_schedule, round, z);
}
