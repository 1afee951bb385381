/* The clients' state store (PriFedSync, Zheng et al., Algorithm 1: each client's helper model h(i), kept across the
 * rounds it sits out; issue 35: 10,000 clients' state pages to disk): one row per client, its block (laid out as
 * state_layout.c says) allocated the first time it trains.  A worker borrows the block of the client it trains
 * (client.c); a client is trained by one worker at a time, so the state does not depend on the thread count.
 * The blocks in memory are a cache under fl.client_state_max_mb: a block the round does not need may be paged out
 * to its state file (client_store.c) and is read back, bit for bit, when its client is next sampled. */
#include "sim_internal.h"

#include "core/file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dpfl_status fl_store_init(fl_state_store *S, int keep, int32_t count, size_t floats, int cap_mb, dpfl_error *err)
{
    memset(S, 0, sizeof *S);
    S->count = S->files.count = count;
    S->floats = S->files.floats = floats;
    if (!keep) return DPFL_OK;
    S->cap = (size_t)cap_mb << 20;
    if (!(S->cstate = calloc((size_t)count, sizeof *S->cstate)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state: table of %d clients)", count);
    for (int32_t k = 0; k < count; k++) S->cstate[k].local_acc = NAN;
    return DPFL_OK;
}

void fl_store_free(fl_state_store *S)
{
    for (int32_t k = 0; S->cstate && k < S->count; k++) dpfl_free(S->cstate[k].state);
    free(S->cstate);
    free(S->files.dir);
    dpfl_free(S->scratch);
    S->cstate = NULL;
    S->files.dir = NULL;
    S->scratch = NULL;
}

void fl_store_begin_round(fl_state_store *S, int32_t round) { S->stamp = round; }

/* Room for one more block in memory: page out the least recently used blocks no client of the current round
 * needs (their file first if they changed since it) until it fits under the cap. */
static dpfl_status make_room(fl_state_store *S, int32_t k, dpfl_error *err)
{
    const size_t bytes = S->floats * sizeof(float);
    while ((size_t)(S->resident + 1) * bytes > S->cap) {
        int32_t v = -1, needed = 0;
        for (int32_t j = 0; j < S->count; j++) {
            const client_opt *o = &S->cstate[j];
            if (!o->state) continue;
            if (o->last_use >= S->stamp) needed++;
            else if (v < 0 || o->last_use < S->cstate[v].last_use) v = j;
        }
        if (v < 0)
            return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: client %d's state does not fit: %d clients "
                                               "of round %d already hold %d x %.3g MiB of the cap of %zu MiB; raise "
                                               "the cap or sample fewer clients per round", k, needed, S->stamp,
                             needed, (double)bytes / 1048576.0, S->cap >> 20);
        client_opt *o = &S->cstate[v];
        dpfl_status st;
        if (o->dirty) {
            if (!S->files.dir)
                return dpfl_fail(err, DPFL_EINVAL, "fl.client_state_max_mb: the clients' state is over the cap of "
                                                   "%zu MiB and this simulation has no folder to page it out to "
                                                   "(dpfl train pages to the run folder's clients/)", S->cap >> 20);
            if ((st = fl_files_write(&S->files, S->cstate, &v, 1, S->stamp, err))) return st;
        }
        dpfl_free(o->state);
        o->state = NULL;
        S->resident--;
        S->evictions++;
    }
    return DPFL_OK;
}

/* client k's block into memory: its file, or (its first participation) a new block as L lays it out */
static dpfl_status page_in(fl_state_store *S, const fl_state_layout *L, int32_t k, dpfl_error *err)
{
    client_opt *o = &S->cstate[k];
    dpfl_status st = make_room(S, k, err);
    if (st) return st;
    if (!(o->state = dpfl_calloc(S->floats, sizeof(float), err)))
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d, %zu floats)", k,
                         S->floats);
    S->resident++;
    if (o->gen > 0) {
        if ((st = fl_files_read(&S->files, o, k, o->state, err))) {
            dpfl_free(o->state);
            o->state = NULL;
            S->resident--;
            return st;
        }
        S->files.read++;
        o->dirty = 0;
        return DPFL_OK;
    }
    fl_layout_fresh(L, o->state);
    o->dirty = 1;
    return DPFL_OK;
}

dpfl_status fl_store_alloc(fl_state_store *S, const fl_state_layout *L, int32_t k, int64_t steps, dpfl_error *err)
{
    client_opt *o = S->cstate ? &S->cstate[k] : NULL;
    if (!o || S->floats == 0 || steps == 0) return DPFL_OK;
    o->last_use = S->stamp;
    dpfl_status st;
    if (!o->state && (st = page_in(S, L, k, err))) return st;
    o->dirty = 1; /* training changes it */
    o->eval_ok = 0;
    return DPFL_OK;
}

dpfl_status fl_store_set(fl_state_store *S, int32_t k, int64_t t, const float *state, dpfl_error *err)
{
    if (!S->cstate) return dpfl_fail(err, DPFL_EINVAL, "a client state was given to a run without per-client state");
    if (k < 0 || k >= S->count || t <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_state: bad client state (client %d of %d, %lld steps)", k,
                         S->count, (long long)t);
    const size_t n = S->floats;
    client_opt *o = &S->cstate[k];
    if (n > 0) {
        dpfl_status st;
        if (!o->state) {
            if ((st = make_room(S, k, err))) return st;
            if (!(o->state = dpfl_alloc(n * sizeof(float), err)))
                return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-client state of client %d)", k);
            S->resident++;
        }
        o->last_use = S->stamp;
        memcpy(o->state, state, n * sizeof(float));
        o->dirty = 1;
    }
    o->eval_ok = 0;
    o->t = t;
    return DPFL_OK;
}

dpfl_status fl_store_restore_ref(fl_state_store *S, int32_t k, int64_t t, int32_t gen, uint32_t crc,
                                 dpfl_error *err)
{
    if (!S->cstate || k < 0 || k >= S->count || t <= 0 || gen < 0 || (gen > 0) != (S->floats > 0))
        return dpfl_fail(err, DPFL_EFORMAT, "bad client state reference (client %d of %d, %lld steps, generation %d)",
                         k, S->count, (long long)t, gen);
    client_opt *o = &S->cstate[k];
    if (o->state) {
        dpfl_free(o->state);
        o->state = NULL;
        S->resident--;
    }
    o->t = t;
    o->gen = o->ref_gen = gen;
    o->crc = crc;
    o->dirty = o->eval_ok = 0;
    return DPFL_OK;
}

dpfl_status fl_store_use_dir(fl_state_store *S, const char *dir, dpfl_error *err)
{
    dpfl_status st = dpfl_file_make_dirs(dir, 0755, err);
    if (st) return st;
    char *d = strdup(dir);
    if (!d) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    free(S->files.dir);
    S->files.dir = d;
    return fl_files_prune(&S->files, S->cstate, err);
}

dpfl_status fl_store_flush(fl_state_store *S, int32_t gen, dpfl_error *err)
{
    int32_t n = 0;
    for (int32_t k = 0; S->cstate && k < S->count; k++) n += S->cstate[k].state && S->cstate[k].dirty;
    if (!n) return DPFL_OK;
    int32_t *ks = malloc((size_t)n * sizeof *ks);
    if (!ks) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client state files)");
    n = 0;
    for (int32_t k = 0; k < S->count; k++)
        if (S->cstate[k].state && S->cstate[k].dirty) ks[n++] = k;
    dpfl_status st = fl_files_write(&S->files, S->cstate, ks, n, gen, err);
    free(ks);
    return st;
}

void fl_store_commit(fl_state_store *S)
{
    for (int32_t k = 0; S->cstate && k < S->count; k++) {
        client_opt *o = &S->cstate[k];
        if (o->ref_gen == o->gen) continue;
        if (o->ref_gen > 0) fl_files_remove(&S->files, k, o->ref_gen); /* the durable checkpoint names gen now */
        o->ref_gen = o->gen;
    }
}

void fl_store_w0_changed(fl_state_store *S)
{
    for (int32_t k = 0; S->cstate && k < S->count; k++)
        if (!S->cstate[k].state && !S->cstate[k].gen) S->cstate[k].eval_ok = 0;
}

const float *fl_store_peek(const fl_state_store *S, int32_t k)
{
    const client_opt *o = &S->cstate[k];
    if (o->state || o->gen == 0) return o->state;
    fl_state_store *m = (fl_state_store *)S; /* the scratch block: a cache fill, not a change of state */
    if (!m->scratch && !(m->scratch = dpfl_alloc(S->floats * sizeof(float), NULL))) return NULL;
    return fl_files_read(&S->files, o, k, m->scratch, NULL) ? NULL : m->scratch;
}

const float *fl_store_helper(const fl_state_store *S, const fl_state_layout *L, int32_t k)
{
    return S->cstate[k].state || S->cstate[k].gen ? fl_store_peek(S, k) : L->w0;
}

void fl_store_sync_helpers(fl_state_store *S, const fl_state_layout *L, const dpfl_client_report *results,
                           int32_t n, const float *global)
{
    if (!L->helper) return; /* no helper models (fl.helper_alpha unset) */
    const size_t P = L->nparam;
    const float a = L->alpha, b = 1.0f - L->alpha;
    for (int32_t i = 0; i < n; i++) {
        const dpfl_client_report *r = &results[i];
        float *h = S->cstate[r->client].state;
        if (r->dropped || r->steps == 0 || !h) continue; /* did not sync: keeps its helper */
        S->cstate[r->client].dirty = 1;
        S->cstate[r->client].eval_ok = 0;
        for (size_t j = 0; j < P; j++) h[j] = b * h[j] + a * global[j];
    }
}
