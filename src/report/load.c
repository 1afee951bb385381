/* A run directory read for the report: summary.json, config.ini, metrics.jsonl and diagnostics.jsonl, each
 * checked to be what dpfl train writes; errors name the file (and the line of a .jsonl file). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static dpfl_status read_run_file(const char *dir, const char *file, char **text, dpfl_error *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        if (e == ENOENT && !strcmp(file, "summary.json"))
            return dpfl_fail(err, DPFL_EIO, "not a finished run (%s): no such file (dpfl train writes it when a run "
                                            "ends; finish a killed run with dpfl train --resume %s)", path, dir);
        return dpfl_fail(err, DPFL_EIO, "not a run directory (%s): %s", path, strerror(e));
    }
    fclose(f);
    dpfl_error e2;
    if (dpfl_file_read_all(path, text, NULL, &e2)) return dpfl_fail(err, DPFL_EIO, "%s", e2.msg);
    return DPFL_OK;
}

/* One JSON object per line, each with a number "round". */
static dpfl_status load_jsonl(const char *dir, const char *file, rp_rows *rows, dpfl_error *err)
{
    char *text;
    dpfl_status st = read_run_file(dir, file, &text, err);
    if (st) return st;
    size_t lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    rows->row = calloc(lines, sizeof *rows->row);
    rows->n = 0;
    if (!rows->row) {
        free(text);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s/%s)", dir, file);
    }
    size_t lineno = 0;
    for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        lineno++;
        if ((nl = strchr(line, '\n'))) *nl = '\0';
        if (!*line) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
        if (!cJSON_IsObject(o) || !cJSON_IsNumber(r) || r->valuedouble < 0) {
            cJSON_Delete(o);
            free(text);
            return dpfl_fail(err, DPFL_EFORMAT, "corrupt run file (%s/%s:%zu): not a JSON object with a round number",
                             dir, file, lineno);
        }
        rows->row[rows->n++] = o;
    }
    free(text);
    return DPFL_OK;
}

dpfl_status rp_run_load(rp_run *r, const char *dir, dpfl_error *err)
{
    memset(r, 0, sizeof *r);
    r->dir = dir;
    struct stat sb;
    if (stat(dir, &sb) != 0) return dpfl_fail(err, DPFL_EIO, "cannot open run directory (%s): %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return dpfl_fail(err, DPFL_EIO, "not a run directory (%s): not a directory", dir);
    /* the name: the last non-empty component */
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(r->name, sizeof r->name, "%.*s", (int)(len - start), dir + start);

    char *text;
    dpfl_status st = read_run_file(dir, "summary.json", &text, err);
    if (st) return st;
    r->summary = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(r->summary) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r->summary, "rounds")) ||
        !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(r->summary, "private")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r->summary, "privacy")))
        return dpfl_fail(err, DPFL_EFORMAT, "corrupt run file (%s/summary.json): not a dpfl summary (a JSON object with "
                                            "rounds, private and privacy)", dir);
    if ((st = read_run_file(dir, "config.ini", &r->config_text, err))) return st;
    char path[1100];
    snprintf(path, sizeof path, "%s/config.ini", dir);
    dpfl_config_defaults(&r->cfg);
    dpfl_error e2;
    if (dpfl_config_load(&r->cfg, path, &e2))
        return dpfl_fail(err, DPFL_EFORMAT, "corrupt run file (%s): %s", path, e2.msg);
    if ((st = load_jsonl(dir, "metrics.jsonl", &r->metrics, err))) return st;
    if ((st = load_jsonl(dir, "diagnostics.jsonl", &r->diag, err))) return st;
    return DPFL_OK;
}

static void rows_free(rp_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++) cJSON_Delete(rows->row[i]);
    free(rows->row);
    rows->row = NULL;
    rows->n = 0;
}

void rp_run_free(rp_run *r)
{
    cJSON_Delete(r->summary);
    free(r->config_text);
    rows_free(&r->metrics);
    rows_free(&r->diag);
    memset(r, 0, sizeof *r);
}

/* The item at "a.b.c" under o. */
static const cJSON *at(const cJSON *o, const char *path)
{
    char key[128];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (path[n] == '.');
    }
    return o;
}

double rp_num(const cJSON *o, const char *path)
{
    const cJSON *v = at(o, path);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *rp_str(const cJSON *o, const char *path)
{
    const cJSON *v = at(o, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static dpfl_status xy_alloc(rp_xy *s, size_t n, int band, dpfl_error *err)
{
    memset(s, 0, sizeof *s);
    size_t m = n ? n : 1;
    s->x = malloc(m * sizeof *s->x);
    s->y = malloc(m * sizeof *s->y);
    if (band) {
        s->lo = malloc(m * sizeof *s->lo);
        s->hi = malloc(m * sizeof *s->hi);
    }
    if (!s->x || !s->y || (band && (!s->lo || !s->hi))) {
        rp_xy_free(s);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (report series)");
    }
    return DPFL_OK;
}

dpfl_status rp_series(const rp_rows *rows, const char *key, const char *band, rp_xy *out, dpfl_error *err)
{
    dpfl_status st = xy_alloc(out, rows->n, band != NULL, err);
    if (st) return st;
    for (size_t i = 0; i < rows->n; i++) {
        double y = rp_num(rows->row[i], key), b = band ? rp_num(rows->row[i], band) : 0.0;
        if (!isfinite(y) || !isfinite(b)) continue;
        out->x[out->n] = rp_num(rows->row[i], "round");
        out->y[out->n] = y;
        if (band) {
            out->lo[out->n] = y - b;
            out->hi[out->n] = y + b;
        }
        out->n++;
    }
    return DPFL_OK;
}

dpfl_status rp_series_spread(const rp_rows *rows, const char *key, int minmax, rp_xy *out, dpfl_error *err)
{
    dpfl_status st = xy_alloc(out, rows->n, 1, err);
    if (st) return st;
    for (size_t i = 0; i < rows->n; i++) {
        const cJSON *v = at(rows->row[i], key), *e;
        double sum = 0, sum2 = 0, mn = INFINITY, mx = -INFINITY;
        size_t k = 0;
        cJSON_ArrayForEach(e, v)
        {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble)) continue;
            double d = e->valuedouble;
            sum += d;
            sum2 += d * d;
            mn = fmin(mn, d);
            mx = fmax(mx, d);
            k++;
        }
        if (k < 2) continue;
        double mean = sum / (double)k, var = fmax(0.0, sum2 / (double)k - mean * mean);
        out->x[out->n] = rp_num(rows->row[i], "round");
        out->y[out->n] = mean;
        out->lo[out->n] = minmax ? mn : mean - sqrt(var);
        out->hi[out->n] = minmax ? mx : mean + sqrt(var);
        out->n++;
    }
    return DPFL_OK;
}

void rp_xy_free(rp_xy *s)
{
    free(s->x);
    free(s->y);
    free(s->lo);
    free(s->hi);
    memset(s, 0, sizeof *s);
}
