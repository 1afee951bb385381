/* Config values that are numbers written as text -- run.seed and the comma-separated lists (data.feature_mean,
 * feature_std, source_rows, record_dp.class_budgets) -- and fl.personal's list of layers, parsed once when the key is
 * read, and their canonical text for a run's config.ini (include/dpfl/config.h: every key is typed at parse time). */
#include "config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fl_number_text(double x, char *buf)
{
    if (x == floor(x) && fabs(x) < 9007199254740992.0) { /* 2^53: every whole number below it is exact */
        snprintf(buf, FL_NUMBER_TEXT, "%.0f", x);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, FL_NUMBER_TEXT, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

dpfl_status fl_number_list_parse(const char *text, const char *key, dpfl_number_list *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p == ' ') p++;
    while (*p) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x))
            return dpfl_fail(err, DPFL_EINVAL, "%s: value %d is not a number ('%.20s')", key, out->n + 1, p);
        if (out->n == DPFL_NUMBER_LIST_MAX)
            return dpfl_fail(err, DPFL_EINVAL, "%s: more than %d values", key, DPFL_NUMBER_LIST_MAX);
        out->v[out->n++] = x;
        while (*end == ' ') end++;
        if (*end == ',') end++;
        else if (*end) return dpfl_fail(err, DPFL_EINVAL, "%s: expected ',' after value %d", key, out->n);
        p = end;
        while (*p == ' ') p++;
    }
    return DPFL_OK;
}

size_t fl_number_list_text(const dpfl_number_list *l, char *out, size_t cap)
{
    size_t n = 0;
    if (cap) out[0] = '\0';
    for (int32_t i = 0; i < l->n; i++) {
        char v[FL_NUMBER_TEXT];
        n += (size_t)snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s%s", i ? ", " : "",
                              fl_number_text(l->v[i], v));
    }
    return n;
}

dpfl_status fl_seed_parse(const char *text, const char *key, dpfl_seed *out, dpfl_error *err)
{
    out->given = 0;
    out->value = 0;
    if (!text[0]) return DPFL_OK;
    const size_t digits = strspn(text, "0123456789");
    char *end;
    errno = 0;
    unsigned long long v = digits ? strtoull(text, &end, 10) : 0;
    if (!digits || text[digits] || errno)
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not a non-negative integer below 2^64 (leave it empty for OS "
                                           "entropy)", key, text);
    out->given = 1;
    out->value = (uint64_t)v;
    return DPFL_OK;
}

dpfl_status fl_personal_parse(const char *text, const char *key, dpfl_personal_layers *out, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const size_t n = strcspn(p, " ,");
        int digits = 1;
        for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
        dpfl_personal_layer item = {.kind = DPFL_PERSONAL_POSITION, .position = 0};
        if (n == 4 && !strncmp(p, "norm", 4)) item.kind = DPFL_PERSONAL_NORM;
        else if (n == 4 && !strncmp(p, "head", 4)) item.kind = DPFL_PERSONAL_HEAD;
        else if (digits && n <= 6) item.position = (int32_t)strtol(p, NULL, 10);
        else return dpfl_fail(err, DPFL_EINVAL, "%s: '%.*s' is not norm, head or a layer position", key, (int)n, p);
        if (out->n == DPFL_PERSONAL_MAX) /* not from a text value: each item but the last takes 2 characters */
            return dpfl_fail(err, DPFL_EINVAL, "%s: more than %d items", key, DPFL_PERSONAL_MAX);
        out->item[out->n++] = item;
        p += n;
    }
    return DPFL_OK;
}

size_t fl_personal_text(const dpfl_personal_layers *l, char *out, size_t cap)
{
    size_t n = 0;
    if (cap) out[0] = '\0';
    for (int32_t i = 0; i < l->n; i++) {
        const dpfl_personal_layer *it = &l->item[i];
        char *at = out + (n < cap ? n : cap);
        const size_t room = n < cap ? cap - n : 0, sep = i ? 1 : 0;
        if (it->kind == DPFL_PERSONAL_POSITION)
            n += (size_t)snprintf(at, room, "%s%d", sep ? "," : "", (int)it->position);
        else n += (size_t)snprintf(at, room, "%s%s", sep ? "," : "", it->kind == DPFL_PERSONAL_NORM ? "norm" : "head");
    }
    return n;
}
