/* The run's checkpoint: the released model, the privacy ledger that paid for it and the round's metrics line, in
 * one atomic, checksummed file, written before anything of the round is released. */
#include "run_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC 0x4b435044u /* "DPCK" */
#define CKPT_VERSION 2u     /* 2: per-client optimizer state (fl.client_state = keep) */
#define CKPT_VERSION_OLD 1u /* 1: no client-state section; still loads with fl.client_state = reset */

/* Checkpoint: the released model and the ledger that paid for it, in one atomic file.
 * Layout: head (rounds, clients, nparam, record_z, client_z, wall, examples, update clip S, number of client
 * events, metrics line length), f32 params[nparam], i64 participations[clients], i64 record_steps[clients],
 * dpfl_event events[], [version 2: client-state section], the round's metrics line.
 * Client-state section: state head (keep, number of clients with a state, floats per state), then one
 * ckpt_state_index per such client in client order, then their states (f32[floats] each) in the same order. */
typedef struct {
    int32_t rounds, clients;
    uint64_t nparam;
    double record_z, client_z, wall;
    int64_t examples;
    double S;
    int64_t nevents;
    int64_t line_len; /* the round's metrics line, so a crash between checkpoint and metrics loses nothing */
} ckpt_head;

typedef struct {
    int32_t keep;    /* fl.client_state: 0 reset, 1 keep */
    int32_t nstates; /* clients with a state */
    uint64_t floats; /* floats per client state */
} ckpt_state_head;

typedef struct {
    int32_t client, pad;
    int64_t t; /* optimizer steps over all the client's rounds */
} ckpt_state_index;

dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, const dpfl_sim *sim, const char *line, dpfl_error *err)
{
    size_t ll = strlen(line);
    const int keep = sim && dpfl_sim_keeps_client_state(sim);
    const size_t floats = keep ? dpfl_sim_client_state_floats(sim) : 0;
    int32_t nstates = 0;
    for (int32_t k = 0; keep && k < l->clients; k++) nstates += dpfl_sim_client_state(sim, k, NULL) > 0;
    /* the fixed part is one buffer; each client's state is written from where it lives (no copy) */
    size_t len = sizeof(ckpt_head) + nparam * sizeof(float) + 2 * (size_t)l->clients * sizeof(int64_t) +
                 (size_t)l->nclient_events * sizeof(dpfl_event) + sizeof(ckpt_state_head) +
                 (size_t)nstates * sizeof(ckpt_state_index);
    const int nparts = 2 + (floats ? nstates : 0);
    char *buf = malloc(len);
    const void **parts = malloc((size_t)nparts * sizeof *parts);
    size_t *lens = malloc((size_t)nparts * sizeof *lens);
    if (!buf || !parts || !lens) {
        free(buf);
        free(parts);
        free(lens);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (checkpoint)");
    }
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
    ckpt_state_head sh = {keep, nstates, floats};
    memcpy(p, &sh, sizeof sh);
    p += sizeof sh;
    int np = 1;
    for (int32_t k = 0; keep && k < l->clients; k++) {
        const float *state;
        ckpt_state_index ix = {k, 0, dpfl_sim_client_state(sim, k, &state)};
        if (ix.t == 0) continue;
        memcpy(p, &ix, sizeof ix);
        p += sizeof ix;
        if (floats) {
            parts[np] = state;
            lens[np++] = floats * sizeof(float);
        }
    }
    parts[0] = buf;
    lens[0] = len;
    parts[np] = line;
    lens[np++] = ll;
    DPFL_ASSERT(np == nparts);
    char path[1100];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    dpfl_status st = dpfl_file_write_parts(path, CKPT_MAGIC, CKPT_VERSION, parts, lens, nparts, err);
    free(buf);
    free(parts);
    free(lens);
    return st;
}

dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_sim *sim, char **line, dpfl_error *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    void *buf;
    size_t len;
    uint32_t version = CKPT_VERSION;
    dpfl_status st = dpfl_file_read(path, CKPT_MAGIC, CKPT_VERSION, &buf, &len, err);
    if (st) {
        dpfl_error old_err;
        if (dpfl_file_read(path, CKPT_MAGIC, CKPT_VERSION_OLD, &buf, &len, &old_err) != DPFL_OK)
            return st; /* the error for the current version */
        version = CKPT_VERSION_OLD;
    }
    const int keep = sim && dpfl_sim_keeps_client_state(sim);
    const size_t floats = keep ? dpfl_sim_client_state_floats(sim) : 0;
    if (version == CKPT_VERSION_OLD && keep) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) is version 1, from before per-client optimizer state "
                                            "was saved: it resumes only with fl.client_state = reset", path);
    }
    ckpt_head h;
    if (len < sizeof h) goto bad;
    memcpy(&h, buf, sizeof h);
    size_t fixed = sizeof h + nparam * sizeof(float) + 2 * (size_t)l->clients * sizeof(int64_t);
    if (h.nparam == nparam && h.clients == l->clients &&
        (h.nevents < 0 || h.line_len < 0 || len < fixed || (uint64_t)h.nevents > (len - fixed) / sizeof(dpfl_event)))
        goto bad; /* counts the file cannot hold (and whose byte sizes would overflow) */
    if (h.nparam != nparam || h.clients != l->clients ||
        len - fixed - (size_t)h.nevents * sizeof(dpfl_event) < (uint64_t)h.line_len) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint does not match the run's config (%s): %llu parameters and "
                                            "%d clients, expected %zu and %d", path, (unsigned long long)h.nparam,
                         h.clients, nparam, l->clients);
    }
    fixed += (size_t)h.nevents * sizeof(dpfl_event);
    ckpt_state_head sh = {0, 0, 0};
    if (version >= 2) {
        if (len < fixed + sizeof sh) goto bad;
        memcpy(&sh, (const char *)buf + fixed, sizeof sh);
        if (sh.keep != keep) {
            free(buf);
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) was written with fl.client_state = %s; the config "
                                                "says %s", path, sh.keep ? "keep" : "reset", keep ? "keep" : "reset");
        }
        if (sh.floats != floats) {
            free(buf);
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s): fl.client_state holds %llu floats per client, the "
                                                "config's optimizer needs %zu", path,
                             (unsigned long long)sh.floats, floats);
        }
        if (sh.nstates < 0 || sh.nstates > l->clients || (sh.nstates > 0 && !keep)) goto bad;
        fixed += sizeof sh + (size_t)sh.nstates * (sizeof(ckpt_state_index) + floats * sizeof(float));
    }
    if (len != fixed + (size_t)h.line_len) goto bad;
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
        dpfl_error why;
        if (dpfl_event_check(&ev, &why) != DPFL_OK) {
            free(buf);
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): client-level event %lld: %s", path,
                             (long long)i, why.msg);
        }
        if ((st = dpfl_ledger_charge_client(l, &ev, err))) {
            free(buf);
            return st;
        }
    }
    p += (size_t)h.nevents * sizeof(dpfl_event);
    if (version >= 2) {
        p += sizeof sh;
        const char *states = p + (size_t)sh.nstates * sizeof(ckpt_state_index);
        int32_t prev = -1;
        for (int32_t i = 0; i < sh.nstates; i++) {
            ckpt_state_index ix;
            memcpy(&ix, p + (size_t)i * sizeof ix, sizeof ix);
            if (ix.client <= prev || ix.client >= l->clients || ix.t <= 0) goto bad;
            prev = ix.client;
            const float *state = (const float *)(const void *)(states + (size_t)i * floats * sizeof(float));
            if ((st = dpfl_sim_set_client_state(sim, ix.client, ix.t, state, err))) {
                free(buf);
                return st;
            }
        }
        p = states + (size_t)sh.nstates * floats * sizeof(float);
    }
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

