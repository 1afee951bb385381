/* The run's checkpoint: the released model, the privacy ledger that paid for it and the round's metrics line, in
 * one atomic, checksummed file, written before anything of the round is released; the clients' own state
 * (PriFedSync's helper models and Adam state, Zheng et al., Algorithm 1) in a file per client beside it, which
 * the checkpoint names by generation and CRC (fl/client_store.c): a round writes only the clients that changed. */
#include "run_internal.h"
#include "core/bytes.h"
#include "fl/sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define CKPT_MAGIC 0x4b435044u /* "DPCK" */
#define CKPT_VERSION FL_CKPT_VERSION

/* The fields go through core/bytes.h; w0 is written from where it lives (no copy): those floats are
 * little-endian on a little-endian host only. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoints are little-endian; add byte swaps here");

/* Checkpoint: the released model and the ledger that paid for it, in one atomic file (magic, version, CRC-32 by
 * dpfl_file_write_parts).  Every field is written explicitly, little-endian, never a struct's memory:
 *   head    i32 rounds, i32 clients, u64 nparam, f64 record_z, f64 client_z, f64 wall, i64 examples, f64 S,
 *           i64 nevents, i64 line_len
 *   data    u8 partition_key[32] (the stream the client partition was drawn from), u8 partition_digest[32],
 *           u8 config_digest[32] (the settings a resume must keep: run/config_digest.c)
 *   model   f32 params[nparam]
 *   ledger  i64 participations[clients], i64 record_steps[clients],
 *           events[nevents]: i32 kind, i32 adjacency, f64 z, f64 q, f64 lambda, i64 n, i64 batch, i64 inner,
 *           i32 bound, i64 count
 *   states  i32 flags (1: per-client state, 2: helper models, 4: SCAFFOLD's c), i32 nstates, u64 floats; then
 *           per client with a state, in client order: i32 client, i64 t, i32 generation, u32 crc (its state file
 *           clients/client<k>.g<generation>.bin and that file's CRC-32: fl/client_store.c; 0, 0 when floats is 0);
 *           with helper models, f32 w0[nparam] (the helper of every client that has not synced yet); with
 *           fl.scaffold, f32 c[nparam] (the server's control variate, src/fl/scaffold.c; flag 4 came without a new
 *           format number: format-8 files without it read as before)
 *   budgets i32 on (record_dp.budgets); if 1: i64 records, i32 nlevels, i32 planned_rounds, f64 z; per level f64
 *           budget, f64 p, i32 rounds, i32 opted_out; per record f64 budget, i32 level
 *   line    the round's metrics line (line_len bytes), so a crash between checkpoint and metrics loses nothing */
enum { HEAD_BYTES = 4 + 4 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 32 + 32 + 32, EVENT_BYTES = 4 + 4 + 8 * 3 + 8 * 3 + 4 + 8 + 8 * 2,
       STATE_HEAD_BYTES = 4 + 4 + 8, STATE_INDEX_BYTES = 4 + 8 + 4 + 4, RPDP_HEAD_BYTES = 8 + 4 + 4 + 8,
       RPDP_LEVEL_BYTES = 8 + 8 + 4 + 4, RPDP_RECORD_BYTES = 8 + 4 };

/* Through core/bytes.h: writes never overrun (sizes are computed first); reads past the end give zeros and set
 * short_read, which is checked after each run of reads.
 *
 * The event's fields in schema order (dpfl/privacy.h DPFL_EVENT_FIELDS): enums as i32, then f64 / i64. */
#define PUT_DPFL_EVT_ENUM(name) dpfl_bytes_put_i32(c, (int32_t)e->name);
#define PUT_DPFL_EVT_F64(name) dpfl_bytes_put_f64(c, e->name);
#define PUT_DPFL_EVT_I64(name) dpfl_bytes_put_i64(c, e->name);
#define PUT_FIELD(codec, ctype, name, key, kinds) PUT_##codec(name)
static void put_event(dpfl_bytes_writer *c, const dpfl_event *e)
{
    DPFL_EVENT_FIELDS(PUT_FIELD)
}

#define GET_DPFL_EVT_ENUM(ctype, name) dpfl_bytes_get_i32(c, &v32), e->name = (ctype)v32;
#define GET_DPFL_EVT_F64(ctype, name) dpfl_bytes_get_f64(c, &e->name);
#define GET_DPFL_EVT_I64(ctype, name) dpfl_bytes_get_i64(c, &e->name);
#define GET_FIELD(codec, ctype, name, key, kinds) GET_##codec(ctype, name)
/* 0 for a kind, adjacency or bound outside its enum or fields out of range (the accountant must never see one) */
static int get_event(dpfl_bytes_reader *c, dpfl_event *e)
{
    memset(e, 0, sizeof *e);
    int32_t v32;
    DPFL_EVENT_FIELDS(GET_FIELD)
    return dpfl_event_check(e, NULL) == DPFL_OK;
}

/* The budgets block (its own buffer: it follows w0 in the file). */
static size_t rpdp_bytes(const fl_rpdp *rp)
{
    if (!rp || !rp->on) return 4;
    const int64_t n = rp->rec.n;
    return 4 + RPDP_HEAD_BYTES + (size_t)rp->levels.nlevels * RPDP_LEVEL_BYTES + (size_t)n * RPDP_RECORD_BYTES +
           (rp->filter.on ? 16 + (size_t)n * 8 : 0);
}

/* The block's first word: 0 no budgets, 1 budgets with rates, 2 budgets under the filter (then alpha, conv and
 * every record's Renyi loss so far follow the records). */
static void put_rpdp(dpfl_bytes_writer *c, const fl_rpdp *rp)
{
    dpfl_bytes_put_i32(c, rp && rp->on ? 1 + (rp->filter.on != 0) : 0);
    if (!rp || !rp->on) return;
    const fl_rpdp_levels *L = &rp->levels;
    const fl_rpdp_records *rec = &rp->rec;
    dpfl_bytes_put_i64(c, rec->n);
    dpfl_bytes_put_i32(c, L->nlevels);
    dpfl_bytes_put_i32(c, L->planned_rounds);
    dpfl_bytes_put_f64(c, L->mech.z);
    for (int32_t k = 0; k < L->nlevels; k++) {
        dpfl_bytes_put_f64(c, L->lv[k].budget);
        dpfl_bytes_put_f64(c, L->lv[k].p);
        dpfl_bytes_put_i32(c, L->lv[k].rounds);
        dpfl_bytes_put_i32(c, L->lv[k].opted_out);
    }
    for (int64_t i = 0; i < rec->n; i++) dpfl_bytes_put_f64(c, rec->budget[i]);
    for (int64_t i = 0; i < rec->n; i++) dpfl_bytes_put_i32(c, rec->level[i]);
    if (!rp->filter.on) return;
    dpfl_bytes_put_f64(c, rp->filter.alpha);
    dpfl_bytes_put_f64(c, rp->filter.conv);
    for (int64_t i = 0; i < rec->n; i++) dpfl_bytes_put_f64(c, rp->filter.spent[i]);
}

/* The filter's part of the block (after the records): alpha, conv and every record's spend within its cap. */
static dpfl_status get_filter(dpfl_bytes_reader *c, fl_rpdp_filter *f, const fl_rpdp_records *rec, const char *path,
                              dpfl_error *err)
{
    const int64_t n = rec->n;
    f->on = 1;
    dpfl_bytes_get_f64(c, &f->alpha);
    dpfl_bytes_get_f64(c, &f->conv);
    f->cap = malloc((size_t)n * sizeof *f->cap);
    f->spent = malloc((size_t)n * sizeof *f->spent);
    if (!f->cap || !f->spent) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (per-record filter)");
    if (c->short_read || !(f->alpha > 1) || !(f->conv >= 0) || dpfl_bytes_left(c) < (size_t)n * 8)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): per-record filter", path);
    for (int64_t i = 0; i < n; i++) {
        f->cap[i] = fmax(rec->budget[i] - f->conv, 0.0);
        dpfl_bytes_get_f64(c, &f->spent[i]);
        if (!(f->spent[i] >= 0 && f->spent[i] <= f->cap[i]))
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): filter loss of record %lld", path,
                             (long long)i);
    }
    return DPFL_OK;
}

/* rp: the run's (on or not), or NULL for a caller without budgets; an absent block where rp expects one (or the
 * reverse) is a config mismatch. */
static dpfl_status get_rpdp(dpfl_bytes_reader *c, fl_rpdp *rp, int32_t clients, const char *path, dpfl_error *err)
{
    int32_t on;
    dpfl_bytes_get_i32(c, &on);
    if (c->short_read || on < 0 || on > 2) return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
    if ((on != 0) != (rp && rp->on))
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) was written %s; resume with the run's own config.ini",
                         path, on ? "with per-record budgets and the config has record_dp.budgets = none"
                                  : "without per-record budgets and the config sets record_dp.budgets");
    if (!on) return DPFL_OK;
    const int filter = on == 2;
    if (filter != (rp->filter.on != 0))
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) was written with record_dp.budget_policy %s filter and "
                                            "the config says otherwise; resume with the run's own config.ini",
                         path, filter ? "=" : "!=");
    int64_t n;
    int32_t nlevels, planned;
    double z;
    dpfl_bytes_get_i64(c, &n);
    dpfl_bytes_get_i32(c, &nlevels);
    dpfl_bytes_get_i32(c, &planned);
    dpfl_bytes_get_f64(c, &z);
    if (c->short_read || n != rp->rec.n || nlevels < 0 || nlevels > FL_RPDP_LEVELS || planned < 1 || !(z > 0) ||
        dpfl_bytes_left(c) < (size_t)nlevels * RPDP_LEVEL_BYTES + (size_t)n * RPDP_RECORD_BYTES)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): per-record budgets", path);
    dpfl_status st = fl_rpdp_alloc(rp, n, clients, nlevels, err);
    if (st) return st;
    rp->levels.planned_rounds = planned;
    rp->levels.mech.z = z;
    for (int32_t k = 0; k < nlevels; k++) {
        fl_rpdp_level *lv = &rp->levels.lv[k];
        dpfl_bytes_get_f64(c, &lv->budget);
        dpfl_bytes_get_f64(c, &lv->p);
        dpfl_bytes_get_i32(c, &lv->rounds);
        dpfl_bytes_get_i32(c, &lv->opted_out);
        if (!(lv->budget > 0) || !(lv->p >= 0 && lv->p <= 1) || lv->rounds < 0 || (lv->opted_out & ~1))
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): budget level %d", path, k);
    }
    for (int64_t i = 0; i < n; i++)
        if (dpfl_bytes_get_f64(c, &rp->rec.budget[i]) || !(rp->rec.budget[i] > 0))
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s): budget of record %lld", path, (long long)i);
    for (int64_t i = 0; i < n; i++) dpfl_bytes_get_i32(c, &rp->rec.level[i]); /* checked by fl_rpdp_rates */
    return filter ? get_filter(c, &rp->filter, &rp->rec, path, err) : DPFL_OK;
}

/* head, data, model and ledger (the layout above) */
static void put_head_model_ledger(dpfl_bytes_writer *c, const float *params, size_t nparam, const dpfl_ledger *l,
                                  const run_state *rs, size_t line_len)
{
    dpfl_bytes_put_i32(c, l->rounds);
    dpfl_bytes_put_i32(c, l->clients);
    dpfl_bytes_put_i64(c, (int64_t)nparam);
    dpfl_bytes_put_f64(c, rs->record_z);
    dpfl_bytes_put_f64(c, rs->client_z);
    dpfl_bytes_put_f64(c, rs->wall);
    dpfl_bytes_put_i64(c, rs->examples);
    dpfl_bytes_put_f64(c, rs->S);
    dpfl_bytes_put_i64(c, l->nclient_events);
    dpfl_bytes_put_i64(c, (int64_t)line_len);
    dpfl_bytes_put(c, rs->partition_key, 32);
    dpfl_bytes_put(c, rs->partition_digest, 32);
    dpfl_bytes_put(c, rs->config_digest, 32);
    dpfl_bytes_put_f32s(c, params, nparam);
    for (int32_t k = 0; k < l->clients; k++) dpfl_bytes_put_i64(c, l->participations[k]);
    for (int32_t k = 0; k < l->clients; k++) dpfl_bytes_put_i64(c, l->record_steps[k]);
    for (int32_t i = 0; i < l->nclient_events; i++) put_event(c, &l->client_events[i]);
}

dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, dpfl_clients *cs, const float *cv, const fl_rpdp *rp,
                               const char *line, dpfl_error *err)
{
    size_t ll = strlen(line);
    const int keep = cs && dpfl_clients_keep_state(cs);
    const float *w0 = cs ? dpfl_clients_initial_model(cs) : NULL;
    const size_t floats = keep ? dpfl_clients_state_floats(cs) : 0;
    fl_state_store *cl = keep ? &cs->store : NULL;
    dpfl_status st;
    /* first the files of the clients that changed since their last one, durable before the checkpoint names them */
    if (floats && (st = fl_store_flush(cl, l->rounds, err))) return st;
    int32_t nstates = 0;
    for (int32_t k = 0; keep && k < l->clients; k++) nstates += cl->cstate[k].t > 0;
    size_t len = HEAD_BYTES + nparam * sizeof(float) + 2 * (size_t)l->clients * 8 +
                 (size_t)l->nclient_events * EVENT_BYTES + STATE_HEAD_BYTES + (size_t)nstates * STATE_INDEX_BYTES;
    const int nparts = 3 + (w0 != NULL) + (cv != NULL);
    const size_t rlen = rpdp_bytes(rp);
    char *buf = malloc(len), *rbuf = malloc(rlen);
    if (!buf || !rbuf) {
        free(buf);
        free(rbuf);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (checkpoint)");
    }
    const void *parts[5];
    size_t lens[5];
    dpfl_bytes_writer c = dpfl_bytes_writer_over(buf, len);
    put_head_model_ledger(&c, params, nparam, l, rs, ll);
    dpfl_bytes_put_i32(&c, keep | (w0 ? 2 : 0) | (cv ? 4 : 0));
    dpfl_bytes_put_i32(&c, nstates);
    dpfl_bytes_put_i64(&c, (int64_t)floats);
    for (int32_t k = 0; keep && k < l->clients; k++) {
        const client_opt *o = &cl->cstate[k];
        if (o->t == 0) continue;
        DPFL_ASSERT(!o->dirty && (o->gen > 0) == (floats > 0));
        dpfl_bytes_put_i32(&c, k);
        dpfl_bytes_put_i64(&c, o->t);
        dpfl_bytes_put_i32(&c, o->gen);
        dpfl_bytes_put_u32(&c, o->crc);
    }
    int np = 1;
    if (w0) {
        parts[np] = w0;
        lens[np++] = nparam * sizeof(float);
    }
    if (cv) {
        parts[np] = cv;
        lens[np++] = nparam * sizeof(float);
    }
    DPFL_ASSERT(c.p == c.end);
    parts[0] = buf;
    lens[0] = len;
    dpfl_bytes_writer rc = dpfl_bytes_writer_over(rbuf, rlen);
    put_rpdp(&rc, rp);
    DPFL_ASSERT(rc.p == rc.end);
    parts[np] = rbuf;
    lens[np++] = rlen;
    parts[np] = line;
    lens[np++] = ll;
    DPFL_ASSERT(np == nparts);
    char path[1100];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    st = dpfl_file_write_parts(path, CKPT_MAGIC, CKPT_VERSION, parts, lens, nparts, err);
    free(buf);
    free(rbuf);
    /* durable: the generations it no longer names can go */
    if (!st && floats) fl_store_commit(cl);
    return st;
}

/* The client states' references (client, t, generation, CRC), in client order; the files are read when the
 * clients next need them. */
static dpfl_status load_states(dpfl_bytes_reader *c, fl_state_store *cl, int32_t clients, int32_t nstates,
                               dpfl_error *err)
{
    if (dpfl_bytes_left(c) < (size_t)nstates * STATE_INDEX_BYTES) return DPFL_EFORMAT;
    int32_t prev = -1;
    for (int32_t i = 0; i < nstates; i++) {
        int32_t k, gen;
        int64_t t;
        uint32_t crc;
        dpfl_bytes_get_i32(c, &k);
        dpfl_bytes_get_i64(c, &t);
        dpfl_bytes_get_i32(c, &gen);
        dpfl_bytes_get_u32(c, &crc);
        if (k <= prev || k >= clients || t <= 0) return DPFL_EFORMAT;
        prev = k;
        dpfl_status st = fl_store_restore_ref(cl, k, t, gen, crc, err);
        if (st) return st;
    }
    return DPFL_OK;
}

typedef struct {
    int32_t rounds, clients;
    int64_t nparam, nevents, line_len;
    run_state rs;
} ckpt_head;

static ckpt_head read_head(dpfl_bytes_reader *c)
{
    ckpt_head h;
    memset(&h, 0, sizeof h);
    dpfl_bytes_get_i32(c, &h.rounds);
    dpfl_bytes_get_i32(c, &h.clients);
    dpfl_bytes_get_i64(c, &h.nparam);
    dpfl_bytes_get_f64(c, &h.rs.record_z);
    dpfl_bytes_get_f64(c, &h.rs.client_z);
    dpfl_bytes_get_f64(c, &h.rs.wall);
    dpfl_bytes_get_i64(c, &h.rs.examples);
    dpfl_bytes_get_f64(c, &h.rs.S);
    dpfl_bytes_get_i64(c, &h.nevents);
    dpfl_bytes_get_i64(c, &h.line_len);
    dpfl_bytes_get(c, h.rs.partition_key, 32);
    dpfl_bytes_get(c, h.rs.partition_digest, 32);
    dpfl_bytes_get(c, h.rs.config_digest, 32);
    return h;
}

/* The payload of dir/checkpoint.bin (path gets its name; checked: magic, version, CRC); an older format is a
 * clear error. */
static dpfl_status read_checkpoint(const char *dir, char path[1100], void **buf, size_t *len, dpfl_error *err)
{
    snprintf(path, 1100, "%s/checkpoint.bin", dir);
    dpfl_status st = dpfl_file_read(path, CKPT_MAGIC, CKPT_VERSION, buf, len, err);
    if (!st) return DPFL_OK;
    dpfl_error old;
    for (uint32_t v = 1; v < CKPT_VERSION; v++)
        if (dpfl_file_read(path, CKPT_MAGIC, v, buf, len, &old) == DPFL_OK) {
            free(*buf);
            return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) is format %u, written by an older dpfl (format %u "
                                                "is this one's); resume it with that version, or start a new run",
                             path, v, CKPT_VERSION);
        }
    return st; /* the error for the current version */
}

dpfl_status fl_checkpoint_peek(const char *dir, run_state *rs, dpfl_error *err)
{
    char path[1100];
    void *buf;
    size_t len;
    dpfl_status st = read_checkpoint(dir, path, &buf, &len, err);
    if (st) return st;
    dpfl_bytes_reader c = dpfl_bytes_reader_over(buf, len);
    ckpt_head h = read_head(&c);
    free(buf);
    if (c.short_read) return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
    *rs = h.rs;
    return DPFL_OK;
}

/* The client states' head (flags, count, floats per client), checked against the config; *nstates gets the count. */
static dpfl_status get_states_head(dpfl_bytes_reader *c, int helper, int scaffold, int keep, size_t floats,
                                   int32_t clients, const char *path, int32_t *nstates, dpfl_error *err)
{
    int32_t sflags;
    uint64_t sfloats;
    dpfl_bytes_get_i32(c, &sflags);
    dpfl_bytes_get_i32(c, nstates);
    dpfl_bytes_get_u64(c, &sfloats);
    if (c->short_read || (sflags & ~7) || ((sflags & 6) && !(sflags & 1)))
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
    const int skeep = sflags & 1, shelper = (sflags & 2) != 0;
    if (shelper != helper)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) was written with fl.personalization = %s; the config "
                                            "says %s", path, shelper ? "helper" : "none", helper ? "helper" : "none");
    const int sscaffold = (sflags & 4) != 0;
    if (sscaffold != scaffold)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) %s; the config says fl.scaffold = %s", path,
                         sscaffold ? "holds SCAFFOLD's server control variate"
                                   : "holds no SCAFFOLD control variate (fl.scaffold = no, or a dpfl that recomputed "
                                     "it each round: start a new run)",
                         scaffold ? "yes" : "no");
    if (skeep != keep)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s) was written with fl.client_state = %s; the config says %s",
                         path, skeep ? "keep" : "reset", keep ? "keep" : "reset");
    if (sfloats != floats)
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint (%s): the clients' own state holds %llu floats per client, "
                                            "the config needs %zu (fl.client_state, fl.optimizer, "
                                            "fl.personalization)", path, (unsigned long long)sfloats, floats);
    if (*nstates < 0 || *nstates > clients || (!keep && *nstates != 0)) /* states need keep (found by fuzzing) */
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
    return DPFL_OK;
}

dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_clients *cs, float *cv, fl_rpdp *rp, char **line, dpfl_error *err)
{
    char path[1100];
    void *buf;
    size_t len;
    dpfl_status st = read_checkpoint(dir, path, &buf, &len, err);
    if (st) return st;
    const int keep = cs && dpfl_clients_keep_state(cs);
    const size_t floats = keep ? dpfl_clients_state_floats(cs) : 0;
    const int helper = cs && dpfl_clients_initial_model(cs);
    dpfl_bytes_reader c = dpfl_bytes_reader_over(buf, len);
    ckpt_head h = read_head(&c);
    int32_t rounds = h.rounds, clients = h.clients;
    int64_t np = h.nparam, nevents = h.nevents, line_len = h.line_len;
    run_state r = h.rs;
    if (c.short_read) goto bad;
    if ((uint64_t)np != nparam || clients != l->clients) {
        free(buf);
        return dpfl_fail(err, DPFL_EFORMAT, "checkpoint does not match the run's config (%s): %lld parameters and "
                                            "%d clients, expected %zu and %d", path, (long long)np, clients, nparam,
                         l->clients);
    }
    if (rounds < 0 || nevents < 0 || line_len < 0 || (size_t)nevents > len / EVENT_BYTES || (size_t)line_len > len)
        goto bad;
    dpfl_bytes_get_f32s(&c, params, nparam);
    for (int32_t k = 0; k < clients; k++) dpfl_bytes_get_i64(&c, &l->participations[k]);
    for (int32_t k = 0; k < clients; k++) dpfl_bytes_get_i64(&c, &l->record_steps[k]);
    if (c.short_read) goto bad;
    l->rounds = rounds;
    l->nclient_events = 0;
    for (int64_t i = 0; i < nevents; i++) {
        dpfl_event ev;
        if (!get_event(&c, &ev) || c.short_read) goto bad;
        if ((st = dpfl_ledger_charge_client(l, &ev, err))) {
            free(buf);
            return st;
        }
    }
    int32_t nstates;
    if ((st = get_states_head(&c, helper, cv != NULL, keep, floats, clients, path, &nstates, err))) {
        free(buf);
        return st;
    }
    if ((st = load_states(&c, keep ? &cs->store : NULL, clients, nstates, err))) {
        free(buf);
        return st == DPFL_EFORMAT ? dpfl_fail(err, st, "checkpoint is malformed (%s): client states", path) : st;
    }
    if (helper) {
        if (dpfl_bytes_left(&c) < nparam * sizeof(float)) goto bad;
        dpfl_clients_set_initial_model(cs, (const float *)(const void *)c.p); /* memcpy inside: no alignment */
        c.p += nparam * sizeof(float);
    }
    if (cv) {
        if (dpfl_bytes_left(&c) < nparam * sizeof(float)) goto bad;
        dpfl_bytes_get_f32s(&c, cv, nparam);
    }
    if ((st = get_rpdp(&c, rp, clients, path, err))) {
        free(buf);
        return st;
    }
    if (dpfl_bytes_left(&c) != (size_t)line_len) goto bad;
    *rs = r;
    if (!(*line = malloc((size_t)line_len + 1))) {
        free(buf);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (checkpoint)");
    }
    memcpy(*line, c.p, (size_t)line_len);
    (*line)[line_len] = '\0';
    free(buf);
    return DPFL_OK;
bad:
    free(buf);
    return dpfl_fail(err, DPFL_EFORMAT, "checkpoint is malformed (%s)", path);
}

dpfl_status fl_metrics_check_resume(const char *dir, int32_t rounds, dpfl_error *err)
{
    char path[1100], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (dpfl_file_read_all(path, &text, &len, NULL) != DPFL_OK) return DPFL_OK; /* no metrics yet */
    int last = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        int r;
        if (!nl) break; /* a partial last line: cut away by the resume */
        if (sscanf(line, "{\"round\":%d", &r) == 1 && r > last) last = r;
        line = nl + 1;
    }
    free(text);
    if (last <= rounds) return DPFL_OK;
    return dpfl_fail(err, DPFL_EINVAL,
                     "resume (%s): metrics.jsonl has round %d and checkpoint.bin has released %d rounds: the "
                     "checkpoint is older than the rounds this run released (they would be released again, charged "
                     "once); resume from the run's newest checkpoint.bin (nothing was written)",
                     path, last, (int)rounds);
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

