/* A deployed client's own ledger and state (dpfl join): what it has released of its records, charged before the
 * update leaves, and client.bin in its state folder (magic "DPCL", checksummed, atomic) with the ledger, its
 * per-client state and its last answer, written before the answer is sent; client.json says the same for people.
 * Every field goes through core/bytes.h (little-endian, the checkpoint's convention). */
#ifdef DPFL_HAVE_ZMQ
#include "client_internal.h"
#include "core/bytes.h"
#include "core/file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_MAGIC 0x4c435044u /* "DPCL" */
#define STATE_VERSION 3u /* 2: sync_round (helper models), the filter's spend; 3: the run of the last answer */

static void state_path(const client_own *own, const char *file, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", own->state_dir, file);
}

/* rPDP-FL: charge the rounds the server has released up to `released`, as the server's run did (opt-outs, then the
 * round's charge). */
dpfl_status net_client_rpdp_catch_up(client_own *own, int32_t released, dpfl_error *err)
{
    fl_node *n = own->node;
    int changed;
    for (; n->acct.rpdp.on && own->replayed < released; own->replayed++) {
        dpfl_status st = fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, err);
        if (st) return st;
        fl_rpdp_charge(&n->acct.rpdp.levels);
    }
    if (!n->acct.rpdp.on && own->replayed < released) own->replayed = released;
    return DPFL_OK;
}

/* This client's record-level epsilon over what it has released (NAN without record-level DP). */
dpfl_status net_client_own_epsilon(client_own *own, double *eps, dpfl_error *err)
{
    fl_node *n = own->node;
    *eps = NAN;
    if (!n->in.rdp_on) return DPFL_OK;
    if (n->acct.rpdp.on && n->acct.rpdp.filter.on) { /* the individual filter: each record's guarantee is its cap, as
                                                      * the simulation reports it (fl_rpdp_filter_epsilon) */
        const int32_t *idx = n->in.part.index + n->in.part.offset[own->k];
        double last_cap = -1, e = 0;
        *eps = 0;
        for (int32_t i = 0; i < dpfl_partition_size(&n->in.part, own->k); i++) {
            const double cap = n->acct.rpdp.filter.cap[idx[i]];
            dpfl_status st = cap == last_cap ? DPFL_OK : fl_rpdp_filter_epsilon(&n->acct.rpdp, n->in.cfg, idx[i], &e, err);
            if (st) return st;
            last_cap = cap;
            if (e > *eps) *eps = e;
        }
        return DPFL_OK;
    }
    if (n->acct.rpdp.on) { /* every record's level is charged every released round (the two-stage bound) */
        double *e = malloc((size_t)n->acct.rpdp.levels.nlevels * sizeof *e), max;
        if (!e) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        dpfl_status st = fl_rpdp_epsilons(&n->acct.rpdp.levels, n->in.cfg, e, &max, err);
        if (!st) {
            *eps = 0;
            const int32_t *idx = n->in.part.index + n->in.part.offset[own->k];
            for (int32_t i = 0; i < dpfl_partition_size(&n->in.part, own->k); i++) {
                int32_t l = n->acct.rpdp.rec.level[idx[i]];
                if (l >= 0 && e[l] > *eps) *eps = e[l];
            }
        }
        free(e);
        return st;
    }
    dpfl_record_report r;
    dpfl_status st = dpfl_ledger_record_epsilon(&n->acct.ledger, &n->in.part, &n->acct.ra, &r, NULL, err);
    if (!st) *eps = r.epsilon;
    return st;
}

/* client.bin: every field explicit, little-endian (the checkpoint's convention):
 *   head    i32 client, i32 clients, u64 nparam, u8 config_digest[32], u8 partition_digest[32]
 *           i64 participations, i64 record_steps, i32 replayed, f64 record_z, i32 sync_round
 *   state   i64 t, u64 floats, f32 state[floats]          (per-client state; floats = 0 without one)
 *   filter  u64 nrec, f64 spent[nrec]                     (record_dp.budget_policy = filter: the Renyi loss each of
 *                                                          this client's records has spent, in partition order;
 *                                                          nrec = 0 without the filter)
 *   answer  u8 run_key[32], i32 last_round, u8 last_digest[32], u64 frame_len, u8 frame[frame_len]
 *                                                         (the last answer, as sent, and the run it answered: the
 *                                                          server's partition key, drawn afresh by every new run
 *                                                          without a seed and kept by its checkpoint) */
typedef struct {
    int32_t client, clients, replayed, sync_round;
    uint64_t nparam, floats;
    uint8_t config_digest[32], partition_digest[32];
    int64_t participations, record_steps, t;
    double record_z;
} state_head;

enum { HEAD_BYTES = 4 + 4 + 8 + 32 + 32 + 8 + 8 + 4 + 8 + 4 + 8 + 8, ANSWER_BYTES = 32 + 4 + 32 + 8 };

/* client.json: client.bin's ledger for people. */
static dpfl_status write_json(client_own *own, const state_head *h, dpfl_error *err)
{
    const fl_node *n = own->node;
    double eps;
    dpfl_status st = net_client_own_epsilon(own, &eps, err);
    if (st) return st;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "client", own->k);
    cJSON_AddNumberToObject(o, "rounds_trained", (double)h->participations);
    cJSON_AddNumberToObject(o, "last_round", own->last_round);
    if (n->in.rdp_on) {
        cJSON_AddNumberToObject(o, "record_steps", (double)h->record_steps);
        cJSON_AddNumberToObject(o, "epsilon", eps);
        cJSON_AddNumberToObject(o, "delta", n->in.cfg->record_dp.delta);
        cJSON_AddNumberToObject(o, "noise", n->acct.rs.record_z);
        cJSON_AddStringToObject(o, "epsilon_covers",
                                n->acct.rpdp.filter.on ? "this client's records, each within its own cap (the "
                                                         "individual Renyi filter; the largest here)"
                                : n->acct.rpdp.on ? "this client's records, each against its own budget (the largest "
                                                  "here); every released round of the run is charged (two-stage bound)"
                                                : "this client's records: the rounds it trained and sent an update");
        if (n->in.root.seeded)
            cJSON_AddStringToObject(o, "caveat", "reproducible mode ([run] seed): epsilon holds only if the seed is "
                                                 "secret; not for deployment");
    } else {
        cJSON_AddStringToObject(o, "epsilon_covers", "nothing: record-level DP is off");
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    char path[1100];
    state_path(own, "client.json", path, sizeof path);
    st = dpfl_file_write_text(path, text, strlen(text), err);
    free(text);
    return st;
}

dpfl_status net_client_state_save(client_own *own, dpfl_error *err)
{
    const fl_node *n = own->node;
    const float *state = NULL;
    state_head h = {.client = own->k, .clients = n->in.part.clients, .replayed = own->replayed, .nparam = own->P,
                    .participations = n->acct.ledger.participations[own->k],
                    .record_steps = n->acct.ledger.record_steps[own->k], .record_z = n->acct.rs.record_z,
                    .sync_round = own->sync_round};
    h.t = dpfl_clients_state(n->in.clients, own->k, &state);
    h.floats = state ? dpfl_clients_state_floats(n->in.clients) : 0;
    const fl_rpdp *rp = &n->acct.rpdp;
    const int32_t *idx = n->in.part.index + n->in.part.offset[own->k];
    const uint64_t nrec = rp->on && rp->filter.on ? (uint64_t)dpfl_partition_size(&n->in.part, own->k) : 0;
    const size_t len = HEAD_BYTES + 4 * h.floats + 8 + 8 * nrec + ANSWER_BYTES + own->last_len;
    uint8_t *buf = malloc(len);
    if (!buf) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (client.bin)");
    dpfl_bytes_writer w = dpfl_bytes_writer_over(buf, len);
    dpfl_bytes_put_i32(&w, h.client);
    dpfl_bytes_put_i32(&w, h.clients);
    dpfl_bytes_put_u64(&w, h.nparam);
    dpfl_bytes_put(&w, own->config_digest, 32);
    dpfl_bytes_put(&w, n->acct.rs.partition_digest, 32);
    dpfl_bytes_put_i64(&w, h.participations);
    dpfl_bytes_put_i64(&w, h.record_steps);
    dpfl_bytes_put_i32(&w, h.replayed);
    dpfl_bytes_put_f64(&w, h.record_z);
    dpfl_bytes_put_i32(&w, h.sync_round);
    dpfl_bytes_put_i64(&w, h.t);
    dpfl_bytes_put_u64(&w, h.floats);
    if (h.floats) dpfl_bytes_put_f32s(&w, state, h.floats);
    dpfl_bytes_put_u64(&w, nrec);
    for (uint64_t i = 0; i < nrec; i++) dpfl_bytes_put_f64(&w, rp->filter.spent[idx[i]]);
    dpfl_bytes_put(&w, own->run_key, 32);
    dpfl_bytes_put_i32(&w, own->last_round);
    dpfl_bytes_put(&w, own->last_digest, 32);
    dpfl_bytes_put_u64(&w, own->last_len);
    dpfl_bytes_put(&w, own->last_frame, own->last_len);
    DPFL_ASSERT(w.p == w.end);
    char path[1100];
    state_path(own, "client.bin", path, sizeof path);
    const void *parts[1] = {buf};
    dpfl_status st = dpfl_file_write_parts(path, STATE_MAGIC, STATE_VERSION, parts, &len, 1, err);
    free(buf);
    return st ? st : write_json(own, &h, err);
}

static void head_read(dpfl_bytes_reader *r, state_head *h)
{
    dpfl_bytes_get_i32(r, &h->client);
    dpfl_bytes_get_i32(r, &h->clients);
    dpfl_bytes_get_u64(r, &h->nparam);
    dpfl_bytes_get(r, h->config_digest, 32);
    dpfl_bytes_get(r, h->partition_digest, 32);
    dpfl_bytes_get_i64(r, &h->participations);
    dpfl_bytes_get_i64(r, &h->record_steps);
    dpfl_bytes_get_i32(r, &h->replayed);
    dpfl_bytes_get_f64(r, &h->record_z);
    dpfl_bytes_get_i32(r, &h->sync_round);
    dpfl_bytes_get_i64(r, &h->t);
    dpfl_bytes_get_u64(r, &h->floats);
}

/* NULL if the head read from r is this client's, of this run; else why not. */
static const char *head_check(const client_own *own, const state_head *h, const dpfl_bytes_reader *r)
{
    const fl_node *n = own->node;
    if (r->short_read) return "truncated";
    if (h->client != own->k || h->clients != n->in.part.clients || h->nparam != own->P ||
        memcmp(h->config_digest, own->config_digest, 32) || memcmp(h->partition_digest, n->acct.rs.partition_digest, 32))
        return "it belongs to another client or run (use another --state folder)";
    if (h->floats != (h->t > 0 ? dpfl_clients_state_floats(n->in.clients) : 0) || h->floats > dpfl_bytes_left(r) / 4 ||
        h->participations < 0 || h->record_steps < 0 || h->replayed < 0 || h->sync_round < 0 ||
        (n->in.rdp_on && h->record_z != n->acct.rs.record_z))
        return "its state does not fit this run";
    return NULL;
}

/* The per-client state (t > 0) back into the simulation; NULL, or why not (e holds the message). */
static const char *state_read(client_own *own, dpfl_bytes_reader *r, const state_head *h, dpfl_error *e)
{
    const char *why = NULL;
    float *state = h->floats ? malloc(4 * h->floats) : NULL;
    if (h->floats && !state) return "out of memory";
    if (h->floats) dpfl_bytes_get_f32s(r, state, h->floats);
    if (!r->short_read && dpfl_clients_set_state(own->node->in.clients, own->k, h->t, state, e)) why = e->msg;
    free(state);
    return why;
}

/* The filter's spend of this client's records back, and the rates it leaves them (a spent record is out); NULL, or
 * why not. */
static const char *spent_read(client_own *own, dpfl_bytes_reader *r, dpfl_error *e)
{
    fl_node *n = own->node;
    fl_rpdp *rp = &n->acct.rpdp;
    const int32_t *idx = n->in.part.index + n->in.part.offset[own->k];
    uint64_t nrec;
    dpfl_bytes_get_u64(r, &nrec);
    const uint64_t want = rp->on && rp->filter.on ? (uint64_t)dpfl_partition_size(&n->in.part, own->k) : 0;
    if (r->short_read || nrec != want || nrec > dpfl_bytes_left(r) / 8) return "its filter spend does not fit this run";
    for (uint64_t i = 0; i < nrec; i++) {
        double v;
        dpfl_bytes_get_f64(r, &v);
        if (!(v >= 0 && v <= rp->filter.cap[idx[i]])) return "its filter spend is out of range";
        rp->filter.spent[idx[i]] = v;
    }
    if (nrec && fl_rpdp_rates(rp, &n->in.part, e)) return e->msg;
    return NULL;
}

/* The last answer (distributed DP keeps no frame: the round whose masked input went out); NULL, or why not.  An
 * answer to another run (another partition key: a new run whose config and partition came out the same) is not
 * this run's: forgotten (the ledger carries on, charged by both runs). */
static const char *answer_read(client_own *own, dpfl_bytes_reader *r, int *other_run)
{
    int32_t last_round;
    uint8_t key[32], ld[32];
    uint64_t flen;
    dpfl_bytes_get(r, key, 32);
    dpfl_bytes_get_i32(r, &last_round);
    dpfl_bytes_get(r, ld, 32);
    dpfl_bytes_get_u64(r, &flen);
    if (r->short_read || flen != dpfl_bytes_left(r) || last_round < 0) return "truncated";
    *other_run = memcmp(key, own->run_key, 32) != 0;
    if (*other_run) return NULL;
    if (flen) {
        if (!(own->last_frame = malloc(flen))) return "out of memory";
        memcpy(own->last_frame, r->p, flen), own->last_len = flen;
    }
    own->last_round = last_round;
    memcpy(own->last_digest, ld, 32);
    return NULL;
}

/* A client restarted on its own folder carries on: its ledger, its state and its last answer. */
dpfl_status net_client_state_load(client_own *own, int *carried_on, dpfl_error *err)
{
    fl_node *n = own->node;
    char path[1100];
    state_path(own, "client.bin", path, sizeof path);
    void *payload;
    size_t len;
    *carried_on = 0;
    if (access(path, F_OK) != 0) return DPFL_OK; /* a fresh client */
    dpfl_status st = dpfl_file_read(path, STATE_MAGIC, STATE_VERSION, &payload, &len, err);
    if (st) return st;
    dpfl_bytes_reader r = dpfl_bytes_reader_over(payload, len);
    state_head h;
    head_read(&r, &h);
    const char *why = head_check(own, &h, &r);
    dpfl_error e;
    if (!why && h.t > 0) why = state_read(own, &r, &h, &e);
    if (!why) why = spent_read(own, &r, &e);
    int other_run = 0;
    if (!why) why = answer_read(own, &r, &other_run);
    if (!why) {
        n->acct.ledger.participations[own->k] = h.participations;
        n->acct.ledger.record_steps[own->k] = h.record_steps;
        own->rounds_trained = h.participations;
        own->sync_round = h.sync_round;
        st = net_client_rpdp_catch_up(own, h.replayed, err); /* the rPDP-FL levels as they were */
    }
    free(payload);
    if (st) return st;
    if (why) return dpfl_fail(err, DPFL_EFORMAT, "dpfl join: state file (%s): %s", path, why);
    *carried_on = other_run ? 2 : 1;
    return DPFL_OK;
}
#endif
