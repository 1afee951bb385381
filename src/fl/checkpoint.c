/* The run's checkpoint: the released model, the privacy ledger that paid for it and the round's metrics line, in
 * one atomic, checksummed file, written before anything of the round is released. */
#include "run_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC 0x4b435044u /* "DPCK" */
#define CKPT_VERSION 1u

/* Checkpoint: the released model and the ledger that paid for it, in one atomic file.
 * Layout: head (rounds, clients, nparam, record_z, client_z, wall, examples, update clip S, number of client
 * events, metrics line length), f32 params[nparam], i64 participations[clients], i64 record_steps[clients],
 * dpfl_event events[], the round's metrics line. */
typedef struct {
    int32_t rounds, clients;
    uint64_t nparam;
    double record_z, client_z, wall;
    int64_t examples;
    double S;
    int64_t nevents;
    int64_t line_len; /* the round's metrics line, so a crash between checkpoint and metrics loses nothing */
} ckpt_head;


dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, const char *line, dpfl_error *err)
{
    size_t ll = strlen(line);
    size_t len = sizeof(ckpt_head) + nparam * sizeof(float) + 2 * (size_t)l->clients * sizeof(int64_t) +
                 (size_t)l->nclient_events * sizeof(dpfl_event) + ll;
    char *buf = malloc(len);
    if (!buf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (checkpoint)");
    ckpt_head h = {l->rounds, l->clients, nparam, rs->record_z, rs->client_z, rs->wall, rs->examples, rs->S,
                   l->nclient_events, (int64_t)ll};
    char *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, params, nparam * sizeof(float));
    p += nparam * sizeof(float);
    memcpy(p, l->participations, (size_t)l->clients * sizeof(int64_t));
    p += (size_t)l->clients * sizeof(int64_t);
    memcpy(p, l->record_steps, (size_t)l->clients * sizeof(int64_t));
    p += (size_t)l->clients * sizeof(int64_t);
    if (l->nclient_events) memcpy(p, l->client_events, (size_t)l->nclient_events * sizeof(dpfl_event));
    p += (size_t)l->nclient_events * sizeof(dpfl_event);
    memcpy(p, line, ll);
    char path[1100];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    dpfl_status st = dpfl_file_write(path, CKPT_MAGIC, CKPT_VERSION, buf, len, err);
    free(buf);
    return st;
}

dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               char **line, dpfl_error *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    void *buf;
    size_t len;
    dpfl_status st = dpfl_file_read(path, CKPT_MAGIC, CKPT_VERSION, &buf, &len, err);
    if (st) return st;
    ckpt_head h;
    if (len < sizeof h) goto bad;
    memcpy(&h, buf, sizeof h);
    if (h.nparam != nparam || h.clients != l->clients || h.nevents < 0 || h.line_len < 0 ||
        len != sizeof h + nparam * sizeof(float) + 2 * (size_t)h.clients * sizeof(int64_t) +
                   (size_t)h.nevents * sizeof(dpfl_event) + (size_t)h.line_len) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint does not match the run's config (%s): %llu parameters and "
                                            "%d clients, expected %zu and %d", path, (unsigned long long)h.nparam,
                         h.clients, nparam, l->clients);
    }
    const char *p = (const char *)buf + sizeof h;
    memcpy(params, p, nparam * sizeof(float));
    p += nparam * sizeof(float);
    memcpy(l->participations, p, (size_t)l->clients * sizeof(int64_t));
    p += (size_t)l->clients * sizeof(int64_t);
    memcpy(l->record_steps, p, (size_t)l->clients * sizeof(int64_t));
    p += (size_t)l->clients * sizeof(int64_t);
    l->rounds = h.rounds;
    l->nclient_events = 0;
    for (int64_t i = 0; i < h.nevents; i++) {
        dpfl_event ev;
        memcpy(&ev, p + (size_t)i * sizeof ev, sizeof ev);
        if ((st = dpfl_ledger_charge_client(l, &ev, err))) {
            free(buf);
            return st;
        }
    }
    p += (size_t)h.nevents * sizeof(dpfl_event);
    *rs = (run_state){h.record_z, h.client_z, h.wall, h.S, h.examples};
    *line = malloc((size_t)h.line_len + 1);
    if (!*line) {
        free(buf);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (checkpoint)");
    }
    memcpy(*line, p, (size_t)h.line_len);
    (*line)[h.line_len] = '\0';
    free(buf);
    return DPFL_OK;
bad:
    free(buf);
    return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
}

/* Keep only metrics lines of rounds <= rounds, and restore the last round's line from the checkpoint if the run
 * died between its checkpoint and its metrics line. */
dpfl_status fl_metrics_truncate(const char *path, int32_t rounds, const char *last_line, dpfl_error *err)
{
    char *text;
    size_t len;
    if (dpfl_file_read_all(path, &text, &len, NULL) != DPFL_OK) return DPFL_OK; /* no metrics yet */
    size_t keep = 0;
    int last = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) break; /* partial last line */
        int r = -1;
        if (sscanf(line, "{\"round\":%d", &r) != 1 || r > rounds) break;
        keep = (size_t)(nl + 1 - text);
        last = r;
        line = nl + 1;
    }
    size_t ll = strlen(last_line);
    if (last == rounds - 1 && ll > 0) {
        char *t = realloc(text, keep + ll + 2);
        if (!t) {
            free(text);
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (%s)", path);
        }
        text = t;
        memcpy(text + keep, last_line, ll);
        text[keep + ll] = '\n';
        keep += ll + 1;
    }
    dpfl_status st = dpfl_file_write_text(path, text, keep, err);
    free(text);
    return st;
}

