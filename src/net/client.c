/* One client of a deployment (dpfl join): it sets up the run exactly as the server does (fl_run_setup without the
 * run's files: the same dataset, model, noise calibration and rPDP-FL plan; the partition drawn from the key the
 * server's hello carries), keeps its own per-client state (optimizer state with fl.client_state = keep) in this
 * process, and answers each ROUND with the simulation's own local training (dpfl_sim_client_round).
 *
 * Its own ledger (record-level DP): what it has released of its records, charged before the update leaves --
 * client.bin in its state folder (magic "DPCL", checksummed, atomic) holds the ledger, its per-client state and
 * its last answer, and is written before the update is sent.  A round the server asks again with the same model
 * (the server was killed and resumed from its checkpoint) is answered with the same bytes and charged once; the
 * folder also lets a killed client carry on where it was.  client.json says the same for people.
 *
 * What it checks before training: the server's config digest and partition (hello), then in every round the
 * mechanism it is asked to run -- learning rate, record-level noise multiplier, its records' sampling rates
 * (rPDP-FL) -- against its own: a mismatch is answered with an ERROR frame and nothing is trained.  Statistics the
 * update reports besides the update itself (loss, example and clip counts) are covered by no epsilon, so with
 * record-level DP they are not sent. */
#include "net_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef DPFL_HAVE_ZMQ
dpfl_status dpfl_net_join(const dpfl_config *cfg, const dpfl_join_options *o, dpfl_error *err)
{
    (void)cfg, (void)o;
    return dpfl_fail(err, DPFL_EINVAL, "dpfl join: this dpfl was built without ZeroMQ (libzmq with CURVE): install "
                                       "libzmq3-dev (scripts/setup.sh does) and rebuild with make");
}
#else
#include "core/bytes.h"
#include "core/file.h"
#include "dpfl/secagg.h"
#include "run/run_internal.h"

#include <cjson/cJSON.h>
#include <sodium.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define STATE_MAGIC 0x4c435044u /* "DPCL" */
#define STATE_VERSION 1u
#define HEARTBEAT_S 1.0

typedef struct {
    dpfl_join_options o;
    char name[65], who[16];
    void *zctx, *sock, *mon;
    uint8_t server_pk[32], pk[32], sk[32];
    const dpfl_config *cfg;
    dpfl_config own_cfg; /* with --data: the config with this client's file in its place */
    uint8_t config_digest[32];
    int32_t k;
    /* set up at the server's first hello */
    run_ctx *c;
    dpfl_run_options ropt;
    size_t P;
    float *update;
    int32_t replayed;     /* rPDP-FL: rounds of the server's ledger charged on this client's copy of the levels
                             (every released round charges every record: the rounds it trained as it sends them,
                             the others when a later round or the bye says they were released) */
    int64_t rounds_trained;
    /* the last answer */
    int32_t last_round;
    uint8_t *last_frame;
    size_t last_len;
    uint8_t last_digest[32];
    int handshake_failures;
    /* distributed DP: the round in progress (secure aggregation's client and this client's encoded update) */
    int ddp;
    dpfl_secagg_client *sa;
    int32_t sa_round, enc_round;
    uint32_t *enc;
    uint8_t enc_digest[32];
} client;

#define LOG(cl, ...) net_log((cl)->who, __VA_ARGS__)
#define INFO(cl, ...) ((cl)->o.quiet ? (void)0 : net_log((cl)->who, __VA_ARGS__))

static int send_msg(client *cl, const dpfl_wire_msg *m)
{
    uint8_t *buf;
    size_t len;
    dpfl_error err;
    if (dpfl_wire_encode(m, &buf, &len, &err)) {
        LOG(cl, "cannot encode a %s frame: %s", dpfl_wire_type_name(m->type), err.msg);
        return -1;
    }
    int rc = zmq_send(cl->sock, buf, len, ZMQ_DONTWAIT);
    free(buf);
    return rc < 0 ? -1 : 0;
}

static void send_simple(client *cl, dpfl_wire_type type, uint32_t code, uint32_t round, const char *text)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.sender = (uint32_t)cl->k;
    m.code = code;
    m.round = round;
    if (text) dpfl_wire_set_text(&m, "%s", text);
    send_msg(cl, &m);
}

static void send_hello(client *cl)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_HELLO;
    m.sender = (uint32_t)cl->k;
    memcpy(m.config_digest, cl->config_digest, 32);
    send_msg(cl, &m);
}

/* ------------------------------------------------------------------------------------------ own ledger and state */
static void state_path(const client *cl, const char *file, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", cl->o.state_dir, file);
}

/* rPDP-FL: charge the rounds the server has released up to `released`, as the server's run did (opt-outs, then the
 * round's charge). */
static dpfl_status rpdp_catch_up(client *cl, int32_t released, dpfl_error *err)
{
    run_ctx *c = cl->c;
    int changed;
    for (; c->rpdp.on && cl->replayed < released; cl->replayed++) {
        dpfl_status st = fl_rpdp_before_round(&c->rpdp, c->cfg, &changed, err);
        if (st) return st;
        fl_rpdp_charge(&c->rpdp);
    }
    if (!c->rpdp.on && cl->replayed < released) cl->replayed = released;
    return DPFL_OK;
}

/* This client's record-level epsilon over what it has released (NAN without record-level DP). */
static dpfl_status own_epsilon(client *cl, double *eps, dpfl_error *err)
{
    run_ctx *c = cl->c;
    *eps = NAN;
    if (!c->rdp_on) return DPFL_OK;
    if (c->rpdp.on) { /* every record's level is charged every released round (the two-stage bound) */
        double *e = malloc((size_t)c->rpdp.nlevels * sizeof *e), max;
        if (!e) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        dpfl_status st = fl_rpdp_epsilons(&c->rpdp, c->cfg, e, &max, err);
        if (!st) {
            *eps = 0;
            const int32_t *idx = c->part.index + c->part.offset[cl->k];
            for (int32_t i = 0; i < dpfl_partition_size(&c->part, cl->k); i++) {
                int32_t l = c->rpdp.level[idx[i]];
                if (l >= 0 && e[l] > *eps) *eps = e[l];
            }
        }
        free(e);
        return st;
    }
    dpfl_record_report r;
    dpfl_status st = dpfl_ledger_record_epsilon(&c->ledger, &c->part, &c->ra, &r, NULL, err);
    if (!st) *eps = r.epsilon;
    return st;
}

/* client.bin: every field explicit, little-endian (the checkpoint's convention):
 *   i32 client, i32 clients, u64 nparam, u8 config_digest[32], u8 partition_digest[32]
 *   i64 participations, i64 record_steps, i32 replayed, f64 record_z
 *   i64 t, u64 floats, f32 state[floats]          (per-client state; floats = 0 without one)
 *   i32 last_round, u8 last_digest[32], u64 frame_len, u8 frame[frame_len]   (the last answer, as sent) */
static dpfl_status state_save(client *cl, dpfl_error *err)
{
    run_ctx *c = cl->c;
    const float *state = NULL;
    const int64_t t = dpfl_sim_client_state(c->sim, cl->k, &state);
    const uint64_t floats = state ? dpfl_sim_client_state_floats(c->sim) : 0;
    const int32_t head[2] = {cl->k, c->part.clients};
    const uint64_t nparam = cl->P, flen = cl->last_len;
    const int64_t led[2] = {c->ledger.participations[cl->k], c->ledger.record_steps[cl->k]};
    const double z = c->rs.record_z;
    const void *parts[] = {head, &nparam, cl->config_digest, c->rs.partition_digest, led, &cl->replayed, &z, &t,
                           &floats, state ? (const void *)state : (const void *)"", &cl->last_round, cl->last_digest,
                           &flen, cl->last_frame ? (const void *)cl->last_frame : (const void *)""};
    const size_t lens[] = {8, 8, 32, 32, 16, 4, 8, 8, 8, 4 * floats, 4, 32, 8, cl->last_len};
    char path[1100];
    state_path(cl, "client.bin", path, sizeof path);
    dpfl_status st = dpfl_file_write_parts(path, STATE_MAGIC, STATE_VERSION, parts, lens, 14, err);
    if (st) return st;
    /* client.json: the same for people */
    double eps;
    if ((st = own_epsilon(cl, &eps, err))) return st;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "client", cl->k);
    cJSON_AddNumberToObject(o, "rounds_trained", (double)led[0]);
    cJSON_AddNumberToObject(o, "last_round", cl->last_round);
    if (c->rdp_on) {
        cJSON_AddNumberToObject(o, "record_steps", (double)led[1]);
        cJSON_AddNumberToObject(o, "epsilon", eps);
        cJSON_AddNumberToObject(o, "delta", c->cfg->record_dp.delta);
        cJSON_AddNumberToObject(o, "noise", c->rs.record_z);
        cJSON_AddStringToObject(o, "epsilon_covers",
                                c->rpdp.on ? "this client's records, each against its own budget (the largest here); "
                                             "every released round of the run is charged (two-stage bound)"
                                           : "this client's records: the rounds it trained and sent an update");
        if (c->root.seeded)
            cJSON_AddStringToObject(o, "caveat", "reproducible mode ([run] seed): epsilon holds only if the seed is "
                                                 "secret; not for deployment");
    } else {
        cJSON_AddStringToObject(o, "epsilon_covers", "nothing: record-level DP is off");
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    state_path(cl, "client.json", path, sizeof path);
    st = dpfl_file_write_text(path, text, strlen(text), err);
    free(text);
    return st;
}

/* A client restarted on its own folder carries on: its ledger, its state and its last answer. */
static dpfl_status state_load(client *cl, dpfl_error *err)
{
    run_ctx *c = cl->c;
    char path[1100];
    state_path(cl, "client.bin", path, sizeof path);
    void *payload;
    size_t len;
    if (access(path, F_OK) != 0) return DPFL_OK; /* a fresh client */
    dpfl_status st = dpfl_file_read(path, STATE_MAGIC, STATE_VERSION, &payload, &len, err);
    if (st) return st;
    dpfl_bytes_reader r = dpfl_bytes_reader_over(payload, len);
    int32_t head[2], replayed, last_round;
    uint64_t nparam, floats, flen;
    uint8_t cd[32], pd[32], ld[32];
    int64_t led[2], t;
    double z;
    dpfl_bytes_get_i32(&r, &head[0]);
    dpfl_bytes_get_i32(&r, &head[1]);
    dpfl_bytes_get_u64(&r, &nparam);
    dpfl_bytes_get(&r, cd, 32);
    dpfl_bytes_get(&r, pd, 32);
    dpfl_bytes_get_i64(&r, &led[0]);
    dpfl_bytes_get_i64(&r, &led[1]);
    dpfl_bytes_get_i32(&r, &replayed);
    dpfl_bytes_get_f64(&r, &z);
    dpfl_bytes_get_i64(&r, &t);
    dpfl_bytes_get_u64(&r, &floats);
    const char *why = NULL;
    if (r.short_read) why = "truncated";
    else if (head[0] != cl->k || head[1] != c->part.clients || nparam != cl->P || memcmp(cd, cl->config_digest, 32) ||
             memcmp(pd, c->rs.partition_digest, 32))
        why = "it belongs to another client or run (use another --state folder)";
    else if (floats != (t > 0 ? dpfl_sim_client_state_floats(c->sim) : 0) || floats > dpfl_bytes_left(&r) / 4 ||
             led[0] < 0 || led[1] < 0 || replayed < 0 || (c->rdp_on && z != c->rs.record_z))
        why = "its state does not fit this run";
    dpfl_error e;
    if (!why && t > 0) {
        float *state = floats ? malloc(4 * floats) : NULL;
        if (floats && !state) why = "out of memory";
        else {
            if (floats) dpfl_bytes_get_f32s(&r, state, floats);
            if (!r.short_read && dpfl_sim_set_client_state(c->sim, cl->k, t, state, &e)) why = e.msg;
            free(state);
        }
    }
    if (!why) {
        dpfl_bytes_get_i32(&r, &last_round);
        dpfl_bytes_get(&r, ld, 32);
        dpfl_bytes_get_u64(&r, &flen);
        if (r.short_read || flen != dpfl_bytes_left(&r)) why = "truncated";
    }
    if (!why && flen) {
        if (!(cl->last_frame = malloc(flen))) why = "out of memory";
        else memcpy(cl->last_frame, r.p, flen), cl->last_len = flen;
    }
    if (!why) { /* distributed DP keeps no frame: the round whose masked input went out */
        cl->last_round = last_round;
        memcpy(cl->last_digest, ld, 32);
    }
    if (!why) {
        c->ledger.participations[cl->k] = led[0];
        c->ledger.record_steps[cl->k] = led[1];
        cl->rounds_trained = led[0];
        st = rpdp_catch_up(cl, replayed, err); /* the rPDP-FL levels as they were */
    }
    free(payload);
    if (st) return st;
    if (why) return dpfl_fail(err, DPFL_EFORMAT, "dpfl join: state file (%s): %s", path, why);
    INFO(cl, "carrying on from %s: %lld rounds trained, last answer round %d", path, (long long)cl->rounds_trained,
         cl->last_round);
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ the run */
/* The server's hello: set up the same run (once), or check that a restarted server runs the same one. */
static dpfl_status on_hello(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    char a[17], b[17];
    if (memcmp(m->config_digest, cl->config_digest, 32))
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: the server runs another config (digest %s, this client's %s): "
                                           "give the client the run's config.ini",
                         net_short_hex(m->config_digest, a), net_short_hex(cl->config_digest, b));
    if (!cl->c) {
        run_ctx *c = calloc(1, sizeof *c);
        if (!c) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        cl->c = c;
        cl->ropt.out_dir = cl->o.state_dir;
        cl->ropt.quiet = 1;
        c->cfg = cl->cfg;
        c->opt = &cl->ropt;
        c->cprivate = 1;
        c->ledger_eps = NAN;
        c->no_files = 1;
        c->partition_key = m->partition_key;
        c->absent_ok = 1; /* the other sites' files need not be here; this client's own must (below) */
        dpfl_status st;
        if (cl->cfg->run.seed.given) {
            c->seed = cl->cfg->run.seed.value;
            dpfl_rng_init_seed(&c->root, c->seed);
        } else if ((st = dpfl_rng_init_os(&c->root, err))) { /* this client's own noise, from its own entropy */
            return st;
        }
        if ((st = fl_run_setup(c, err))) return st;
        c->partition_key = NULL;
        int32_t copies = 1; /* this client's ledger sees its own steps only: a replicated record's other copies not */
        if (cl->cfg->record_dp.enabled && (st = dpfl_record_copies(&c->part, &copies, err))) return st;
        if (copies > 1)
            return dpfl_fail(err, DPFL_EINVAL, "dpfl join: data.samples_per_client puts records in several clients; a "
                                               "deployed client could not charge the other copies: replicate in "
                                               "simulation only");
        cl->P = c->model.nparam;
        if (cl->k >= c->part.clients)
            return dpfl_fail(err, DPFL_EINVAL, "dpfl join: --client %d, but the run has clients 0 to %d", cl->k,
                             c->part.clients - 1);
        if ((st = fl_client_data_here(c, cl->k, "dpfl join", err))) return st;
        if (!(cl->update = dpfl_alloc(cl->P * sizeof(float), err))) return DPFL_ENOMEM;
        if ((st = state_load(cl, err))) return st;
    }
    if (memcmp(m->partition_digest, cl->c->rs.partition_digest, 32) || m->nparam != cl->P)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: this client's partition or model (%zu parameters) is not the "
                                           "server's (%llu): the same dataset files and config are needed",
                         cl->P, (unsigned long long)m->nparam);
    INFO(cl, "joined: the server has released %u of %u rounds; %d records here", m->released, m->rounds,
         dpfl_partition_size(&cl->c->part, cl->k));
    return DPFL_OK;
}

/* The mechanism the server asks for must be the one this client runs; "" if it is. */
static const char *check_round(client *cl, const dpfl_wire_msg *m, char *why, size_t cap)
{
    run_ctx *c = cl->c;
    dpfl_sim *s = c->sim;
    const double lr = dpfl_sim_round_lr(s, (int32_t)m->round);
    const double z = c->rdp_on ? c->rs.record_z : 0.0;
    uint8_t rd[32], md[32];
    why[0] = '\0';
    if (m->nparam != cl->P)
        snprintf(why, cap, "%llu parameters, this client's model has %zu", (unsigned long long)m->nparam, cl->P);
    else if (m->lr != lr) snprintf(why, cap, "learning rate %.17g, this client's schedule gives %.17g", m->lr, lr);
    else if (m->record_z != z)
        snprintf(why, cap, "record-level noise multiplier %.17g, this client's is %.17g (same config and fl.rounds?)",
                 m->record_z, z);
    if (why[0]) return why;
    if (c->rpdp.on) {
        dpfl_error err;
        if ((int32_t)m->released < cl->replayed) {
            snprintf(why, cap, "the server has released %u rounds, this client has already charged %d (a server "
                               "resumed from an older checkpoint than its last round)", m->released, cl->replayed);
            return why;
        }
        int changed;
        if (rpdp_catch_up(cl, (int32_t)m->released, &err) ||
            fl_rpdp_before_round(&c->rpdp, c->cfg, &changed, &err)) {
            snprintf(why, cap, "rPDP-FL ledger: %.300s", err.msg);
            return why;
        }
    }
    dpfl_sim_rates_digest(s, cl->k, rd);
    if (memcmp(rd, m->rates_digest, 32)) {
        snprintf(why, cap, "per-record sampling rates differ from this client's (rPDP-FL budgets or plan)");
        return why;
    }
    dpfl_wire_model_digest(c->global, cl->P, md);
    if (memcmp(md, m->model_digest, 32)) snprintf(why, cap, "the model does not match its digest");
    return why;
}

/* Charged before anything of the round's training leaves: the steps the server's ledger charges for this client,
 * and with rPDP-FL the round itself (released with this client's contribution in it). */
static void charge_own(client *cl, int32_t round)
{
    run_ctx *c = cl->c;
    const int64_t steps = dpfl_sim_client_steps(c->sim, cl->k);
    dpfl_ledger_charge(&c->ledger, &cl->k, 1, &steps);
    cl->rounds_trained++;
    if (c->rpdp.on && cl->replayed < round) {
        fl_rpdp_charge(&c->rpdp);
        cl->replayed = round;
    }
}

static void send_secagg(client *cl, uint32_t round, const dpfl_secagg_msg *sm)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_SECAGG;
    m.sender = (uint32_t)cl->k;
    m.round = round;
    m.data = sm->data;
    m.data_len = sm->len;
    send_msg(cl, &m);
}

static void refuse(client *cl, uint32_t round, const char *why)
{
    LOG(cl, "round %u refused: %s", round, why);
    send_simple(cl, DPFL_WIRE_ERROR, 5, round, why);
}

/* Distributed DP: train and encode (clip, rotate, round, Skellam noise, wrap: the simulation's fl_ddp_client) and
 * advertise this round's secure-aggregation keys; the rest of the protocol follows the server's messages
 * (on_secagg).  The encoded update is kept for the round and model: a protocol the server restarts before this
 * client sent its masked input reuses it (nothing of it has left). */
static dpfl_status on_ddp_round(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    run_ctx *c = cl->c;
    dpfl_sim *s = c->sim;
    char why[600];
    if (m->cohort == 0) {
        refuse(cl, m->round, "the round carries no distributed-DP values (this client runs client_dp.mechanism = ddp)");
        return DPFL_OK;
    }
    if ((int32_t)m->round == cl->last_round) { /* a resumed server, or a replay */
        refuse(cl, m->round, "this client has sent its masked input of this round already: a second secure "
                             "aggregation of it could reveal it by difference");
        return DPFL_OK;
    }
    dpfl_error e;
    if (m->update_clip != c->cfg->client_dp.clip) {
        snprintf(why, sizeof why, "update clip %.17g, this client's is %.17g", m->update_clip, c->cfg->client_dp.clip);
        refuse(cl, m->round, why);
        return DPFL_OK;
    }
    dpfl_sim_set_update_clip(s, m->update_clip);
    if (dpfl_sim_set_client_noise(s, (int32_t)m->round, dpfl_round_client_noise(c->cfg, (int32_t)m->round,
                                                                                 c->rs.client_z), &e) ||
        dpfl_sim_ddp_client_setup(s, (int32_t)m->round, (int32_t)m->cohort, (int32_t)m->threshold, m->ddp_seed, &e)) {
        refuse(cl, m->round, e.msg);
        return DPFL_OK;
    }
    const dpfl_ddp_plan *plan = dpfl_sim_ddp_plan(s); /* set: the set-up above checked it */
    if (plan->z != m->client_z) {
        snprintf(why, sizeof why, "client-level noise multiplier %.17g, this client's is %.17g", m->client_z,
                 plan->z);
        refuse(cl, m->round, why);
        return DPFL_OK;
    }
    if (!cl->enc && !(cl->enc = dpfl_alloc(plan->d * sizeof(uint32_t), err))) return DPFL_ENOMEM;
    if (cl->enc_round != (int32_t)m->round || memcmp(cl->enc_digest, m->model_digest, 32)) {
        dpfl_client_report res;
        double norm;
        dpfl_status st = dpfl_sim_client_round(s, (int32_t)m->round, m->update_clip, cl->k, cl->update, &res, err);
        if (st) return st;
        if (dpfl_sim_ddp_client_encode(s, cl->k, cl->update, cl->enc, &norm, &e)) {
            refuse(cl, m->round, e.msg);
            return DPFL_OK;
        }
        cl->enc_round = (int32_t)m->round;
        memcpy(cl->enc_digest, m->model_digest, 32);
    }
    dpfl_secagg_client_free(cl->sa);
    cl->sa = NULL;
    const dpfl_secagg_params sp = {m->cohort, m->threshold, (uint32_t)plan->bits, plan->d};
    uint8_t seed[32];
    if (c->root.seeded) dpfl_sim_secagg_seed(&c->root, (int32_t)m->round, cl->k, seed);
    dpfl_secagg_msg adv = {0};
    if (dpfl_secagg_client_create(&sp, m->index, c->root.seeded ? seed : NULL, &cl->sa, &e) ||
        dpfl_secagg_client_advertise(cl->sa, &adv, &e)) {
        refuse(cl, m->round, e.msg);
        dpfl_secagg_client_free(cl->sa);
        cl->sa = NULL;
        return DPFL_OK;
    }
    cl->sa_round = (int32_t)m->round;
    send_secagg(cl, m->round, &adv);
    dpfl_secagg_msg_free(&adv);
    INFO(cl, "round %u: trained, encoded; keys advertised (secure-aggregation id %u of %u, threshold %u)", m->round,
         m->index, m->cohort, m->threshold);
    return DPFL_OK;
}

/* The server's secure-aggregation messages of the round in progress: keys -> shares, shares for this client ->
 * masked input (charged and saved first), unmasking request -> unmasking shares. */
static dpfl_status on_secagg(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    if (!cl->sa || (int32_t)m->round != cl->sa_round) {
        LOG(cl, "dropped a secure-aggregation message of round %u: no protocol of that round here", m->round);
        return DPFL_OK;
    }
    dpfl_secagg_msg out = {0};
    dpfl_error e;
    dpfl_status st = DPFL_OK;
    const int type = m->data[5];
    switch (type) {
    case DPFL_SECAGG_KEYS: st = dpfl_secagg_client_share_keys(cl->sa, m->data, m->data_len, &out, &e); break;
    case DPFL_SECAGG_SHARES_FOR:
        st = dpfl_secagg_client_masked_input(cl->sa, m->data, m->data_len, cl->enc, &out, &e);
        if (!st) {
            charge_own(cl, (int32_t)m->round);
            cl->last_round = (int32_t)m->round; /* this round's input is out: never again */
            memcpy(cl->last_digest, cl->enc_digest, 32);
            free(cl->last_frame);
            cl->last_frame = NULL;
            cl->last_len = 0;
            dpfl_status sst = state_save(cl, err);
            if (sst) {
                dpfl_secagg_msg_free(&out);
                return sst;
            }
            if (cl->o.delay > 0) { /* a slow link */
                struct timespec ts = {(time_t)cl->o.delay, (long)((cl->o.delay - floor(cl->o.delay)) * 1e9)};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
            }
        }
        break;
    case DPFL_SECAGG_UNMASK_REQ: st = dpfl_secagg_client_unmask(cl->sa, m->data, m->data_len, &out, &e); break;
    default: st = dpfl_fail(&e, DPFL_EFORMAT, "unexpected secure-aggregation message type %d", type); break;
    }
    if (st) {
        refuse(cl, m->round, e.msg);
        dpfl_secagg_client_free(cl->sa);
        cl->sa = NULL;
        return DPFL_OK;
    }
    send_secagg(cl, m->round, &out);
    dpfl_secagg_msg_free(&out);
    if (type == DPFL_SECAGG_SHARES_FOR) {
        double eps = NAN;
        own_epsilon(cl, &eps, NULL);
        if (cl->c->rdp_on) INFO(cl, "round %u: masked input sent (%lld rounds trained, epsilon %.4g for its records)",
                                m->round, (long long)cl->rounds_trained, eps);
        else INFO(cl, "round %u: masked input sent", m->round);
    }
    if (type == DPFL_SECAGG_UNMASK_REQ) { /* done: its secrets are wiped */
        dpfl_secagg_client_free(cl->sa);
        cl->sa = NULL;
    }
    return DPFL_OK;
}

static dpfl_status on_round(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    if (!cl->c) {
        LOG(cl, "round %u before the server's hello: ignored", m->round);
        return DPFL_OK;
    }
    run_ctx *c = cl->c;
    if (!cl->ddp && (int32_t)m->round == cl->last_round && cl->last_frame &&
        !memcmp(m->model_digest, cl->last_digest, 32)) {
        /* asked again (a resumed server): the same answer, charged once */
        INFO(cl, "round %u: asked again for the same model; the same answer", m->round);
        if (zmq_send(cl->sock, cl->last_frame, cl->last_len, ZMQ_DONTWAIT) < 0) /* the server asks again */
            LOG(cl, "round %u: could not send now: %s", m->round, zmq_strerror(errno));
        return DPFL_OK;
    }
    if (!cl->ddp && (int32_t)m->round <= cl->last_round)
        LOG(cl, "round %u again, from another model than this client answered (its state has moved on): trains and "
                "is charged again", m->round);
    if (m->nparam == cl->P) dpfl_wire_floats(m, c->global);
    char why[512];
    if (check_round(cl, m, why, sizeof why)[0]) {
        refuse(cl, m->round, why);
        return DPFL_OK;
    }
    if (cl->ddp) return on_ddp_round(cl, m, err);
    dpfl_client_report res;
    dpfl_status st = dpfl_sim_client_round(c->sim, (int32_t)m->round, m->update_clip, cl->k, cl->update, &res, err);
    if (st) return st;
    charge_own(cl, (int32_t)m->round);
    dpfl_wire_msg u;
    memset(&u, 0, sizeof u);
    u.type = DPFL_WIRE_UPDATE;
    u.sender = (uint32_t)cl->k;
    u.round = m->round;
    memcpy(u.model_digest, m->model_digest, 32);
    u.steps = res.steps;
    if (!c->rdp_on) { /* without record-level DP nothing is private anyway: the diagnostics go along */
        u.flags = DPFL_WIRE_STATS;
        u.examples = res.examples;
        u.loss_sum = res.loss_sum;
        u.clipped = res.clipped;
    }
    u.nparam = cl->P;
    u.fvec = cl->update;
    uint8_t *frame;
    size_t flen;
    if (dpfl_wire_encode(&u, &frame, &flen, err)) {
        LOG(cl, "round %u: cannot send its update: %s", m->round, err->msg);
        send_simple(cl, DPFL_WIRE_ERROR, 6, m->round, err->msg);
        return DPFL_OK;
    }
    free(cl->last_frame);
    cl->last_frame = frame;
    cl->last_len = flen;
    cl->last_round = (int32_t)m->round;
    memcpy(cl->last_digest, m->model_digest, 32);
    if ((st = state_save(cl, err))) return st;
    if (cl->o.delay > 0) { /* a slow link */
        struct timespec ts = {(time_t)cl->o.delay, (long)((cl->o.delay - floor(cl->o.delay)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    /* never blocks: a server that has gone asks again when it is back, and gets the same bytes */
    if (zmq_send(cl->sock, frame, flen, ZMQ_DONTWAIT) < 0)
        LOG(cl, "round %u: could not send the update now (%s); it goes when the server asks again", m->round,
            zmq_strerror(errno));
    double eps = NAN;
    own_epsilon(cl, &eps, NULL);
    if (c->rdp_on) INFO(cl, "round %u: update sent (%lld rounds trained, epsilon %.4g for its records)", m->round,
                        (long long)cl->rounds_trained, eps);
    else INFO(cl, "round %u: update sent", m->round);
    return DPFL_OK;
}

/* Monitor events of the socket: handshakes (a restarted server is greeted again), refusals. */
static dpfl_status on_event(client *cl, dpfl_error *err)
{
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    zmq_msg_init(&b);
    int ok = zmq_msg_recv(&a, cl->mon, 0) >= 0 && zmq_msg_more(&a) && zmq_msg_recv(&b, cl->mon, 0) >= 0;
    uint16_t ev = 0;
    if (ok && zmq_msg_size(&a) >= 2) memcpy(&ev, zmq_msg_data(&a), 2);
    zmq_msg_close(&a);
    zmq_msg_close(&b);
    switch (ev) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        cl->handshake_failures = 0;
        INFO(cl, "connected to %s", cl->o.server);
        send_hello(cl);
        return DPFL_OK;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: the server refused this client's key (%s): %s.pub is not in its "
                                           "allow-list", cl->name, cl->name);
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        if (++cl->handshake_failures >= 5)
            return dpfl_fail(err, DPFL_EIO, "dpfl join: no secure handshake with %s after 5 tries (is server.pub the "
                                            "server's key?)", cl->o.server);
        return DPFL_OK;
    case ZMQ_EVENT_DISCONNECTED:
        INFO(cl, "lost the server; reconnecting");
        return DPFL_OK;
    default:
        return DPFL_OK;
    }
}

static dpfl_status join_loop(client *cl, dpfl_error *err)
{
    double heard = dpfl_now(), beat = dpfl_now();
    for (;;) {
        const double now = dpfl_now();
        if (now - heard > cl->o.idle_timeout)
            return dpfl_fail(err, DPFL_EIO, "dpfl join: no word from the server (%s) for %g s", cl->o.server,
                             cl->o.idle_timeout);
        if (now - beat >= HEARTBEAT_S && cl->c) {
            send_simple(cl, DPFL_WIRE_HEARTBEAT, 0, (uint32_t)(cl->last_round > 0 ? cl->last_round : 0), NULL);
            beat = now;
        }
        zmq_pollitem_t it[2] = {{cl->sock, 0, ZMQ_POLLIN, 0}, {cl->mon, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, (long)(HEARTBEAT_S * 1000)) < 0) {
            if (errno == EINTR) continue;
            return dpfl_fail(err, DPFL_EIO, "dpfl join: poll: %s", zmq_strerror(errno));
        }
        dpfl_status st;
        if ((it[1].revents & ZMQ_POLLIN) && (st = on_event(cl, err))) return st;
        if (!(it[0].revents & ZMQ_POLLIN)) continue;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, cl->sock, 0) < 0) {
            zmq_msg_close(&msg);
            continue;
        }
        dpfl_wire_msg m;
        dpfl_error e = {{0}};
        const char *bad = NULL;
        if (zmq_msg_more(&msg)) bad = "a multipart message";
        else if (dpfl_wire_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &m, &e)) bad = e.msg;
        else if (m.sender != DPFL_WIRE_SERVER) bad = "not sent by the server";
        if (bad) {
            LOG(cl, "dropped a frame from the server: %s", bad);
            int more = zmq_msg_more(&msg);
            while (more) { /* the rest of a multipart message */
                zmq_msg_t x;
                zmq_msg_init(&x);
                more = zmq_msg_recv(&x, cl->sock, 0) >= 0 && zmq_msg_more(&x);
                zmq_msg_close(&x);
            }
            zmq_msg_close(&msg);
            continue;
        }
        heard = dpfl_now();
        st = DPFL_OK;
        switch (m.type) {
        case DPFL_WIRE_HELLO: st = on_hello(cl, &m, err); break;
        case DPFL_WIRE_ROUND: st = on_round(cl, &m, err); break;
        case DPFL_WIRE_SECAGG: st = on_secagg(cl, &m, err); break;
        case DPFL_WIRE_ERROR:
            LOG(cl, "the server says (round %u): %s", m.round, m.text);
            if (m.code == 3 || m.code == 4) st = dpfl_fail(err, DPFL_EINVAL, "dpfl join: %s", m.text);
            break;
        case DPFL_WIRE_BYE:
            zmq_msg_close(&msg);
            if (m.code) return dpfl_fail(err, DPFL_EIO, "dpfl join: %s", m.text);
            /* the rounds released after this client's last one still charged its records (rPDP-FL) */
            if (cl->c && (int32_t)m.round > cl->replayed && cl->c->rpdp.on &&
                ((st = rpdp_catch_up(cl, (int32_t)m.round, err)) || (st = state_save(cl, err))))
                return st;
            INFO(cl, "the server says bye: %s", m.text);
            return DPFL_OK;
        default: break; /* HEARTBEAT: the server is there */
        }
        zmq_msg_close(&msg);
        if (st) return st;
    }
}

static void client_close(client *cl)
{
    /* monitoring stops first: libzmq's I/O thread blocks sending an event to a monitor socket nobody reads */
    if (cl->sock) zmq_socket_monitor(cl->sock, NULL, 0);
    if (cl->mon) zmq_close(cl->mon);
    if (cl->sock) zmq_close(cl->sock);
    if (cl->zctx) zmq_ctx_term(cl->zctx);
    if (cl->c) {
        fl_run_free(cl->c);
        free(cl->c);
    }
    dpfl_free(cl->update);
    dpfl_free(cl->enc);
    dpfl_secagg_client_free(cl->sa);
    free(cl->last_frame);
    sodium_memzero(cl->sk, sizeof cl->sk);
}

/* --data PATH: the config with entry k of its data.dataset list replaced by PATH (only a list of plain files whose
 * row counts data.source_rows gives: then entry k is source k, and the others need not be here). */
static dpfl_status own_file(const dpfl_config *cfg, int32_t k, const char *path, dpfl_config *out, dpfl_error *err)
{
    const char *ds = cfg->data.dataset;
    if (!dpfl_dataset_is_files(ds) || !cfg->data.source_rows.n || strpbrk(ds, "*?["))
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: needs data.dataset = csv:FILE, FILE, ... or idx:FOLDER, "
                                           "FOLDER, ... (one per site, no pattern) with data.source_rows; this config "
                                           "has '%s'", ds);
    if (strchr(path, ',') || !*path)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: '%s' is not one file path", path);
    *out = *cfg;
    char buf[sizeof out->data.dataset];
    int32_t item = 0;
    size_t len = (size_t)snprintf(buf, sizeof buf, "%.4s", ds);
    for (const char *p = ds + 4; *p && len < sizeof buf;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (item == k) len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", item ? "," : "", path);
        else len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%.*s", item ? "," : "", (int)n, p);
        item++;
        p = e ? e + 1 : p + n;
    }
    if (len >= sizeof buf)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: the list with '%s' in it is too long", path);
    if (k >= item)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: --client %d, but data.dataset lists %d files", k, item);
    memcpy(out->data.dataset, buf, len + 1);
    return DPFL_OK;
}

dpfl_status dpfl_net_join(const dpfl_config *cfg, const dpfl_join_options *o, dpfl_error *err)
{
    dpfl_status st;
    if ((st = dpfl_config_validate(cfg, err)) || (st = net_check_config(cfg, err))) return st;
    if (!o->server || !o->keys_dir || !o->state_dir || o->client < 0)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: needs --server, --keys, --client and a state folder");
    if (!(o->idle_timeout > 0) || !(o->delay >= 0))
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: the idle timeout must be > 0 and the delay >= 0");
    if (sodium_init() < 0) return dpfl_fail(err, DPFL_EIO, "libsodium could not start");
    client *cl = calloc(1, sizeof *cl);
    if (!cl) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    cl->o = *o;
    cl->cfg = cfg;
    cl->k = o->client;
    cl->ddp = cfg->client_dp.enabled && cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP;
    cl->enc_round = -1;
    snprintf(cl->who, sizeof cl->who, "join %d", o->client);
    if (o->name) snprintf(cl->name, sizeof cl->name, "%s", o->name);
    else snprintf(cl->name, sizeof cl->name, "client%d", o->client);
    net_config_digest(cfg, cl->config_digest); /* the run's config, whatever path --data gives */
    if (o->data && (st = own_file(cfg, o->client, o->data, &cl->own_cfg, err))) {
        free(cl);
        return st;
    }
    if (o->data) cl->cfg = &cl->own_cfg;
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.key", o->keys_dir, cl->name);
    if (!dpfl_net_key_name_ok(cl->name)) st = dpfl_fail(err, DPFL_EINVAL, "dpfl join: bad key name '%s'", cl->name);
    if (!st) st = dpfl_net_key_read(path, cl->sk, err);
    snprintf(path, sizeof path, "%s/server.pub", o->keys_dir);
    if (!st) st = dpfl_net_key_read(path, cl->server_pk, err);
    if (!st) st = dpfl_file_make_dirs(o->state_dir, 0700, err);
    if (!st) {
        crypto_scalarmult_base(cl->pk, cl->sk);
        const int linger = 2000, ivl = 200, ivl_max = 2000;
        const int64_t maxmsg = (int64_t)(DPFL_WIRE_MAX_PAYLOAD + DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER);
        char mon[64];
        snprintf(mon, sizeof mon, "inproc://dpfl-join-monitor-%d", o->client);
        if (!(cl->zctx = zmq_ctx_new()) || !(cl->sock = zmq_socket(cl->zctx, ZMQ_DEALER)) ||
            zmq_setsockopt(cl->sock, ZMQ_CURVE_SERVERKEY, cl->server_pk, 32) ||
            zmq_setsockopt(cl->sock, ZMQ_CURVE_PUBLICKEY, cl->pk, 32) ||
            zmq_setsockopt(cl->sock, ZMQ_CURVE_SECRETKEY, cl->sk, 32) ||
            zmq_setsockopt(cl->sock, ZMQ_LINGER, &linger, sizeof linger) ||
            zmq_setsockopt(cl->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl) ||
            zmq_setsockopt(cl->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max) ||
            zmq_setsockopt(cl->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
            zmq_socket_monitor(cl->sock, mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                                  ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_DISCONNECTED) ||
            !(cl->mon = zmq_socket(cl->zctx, ZMQ_PAIR)) || zmq_connect(cl->mon, mon) ||
            zmq_connect(cl->sock, o->server))
            st = dpfl_fail(err, DPFL_EIO, "dpfl join: cannot connect to %s: %s", o->server, zmq_strerror(errno));
    }
    if (!st) {
        INFO(cl, "client %d (key %s) connecting to %s", cl->k, cl->name, o->server);
        st = join_loop(cl, err);
        if (st && cl->sock) { /* tell the server, so that it need not wait for the deadline (if it can hear) */
            const int linger = 500;
            send_simple(cl, DPFL_WIRE_BYE, 1, (uint32_t)(cl->last_round > 0 ? cl->last_round : 0), err->msg);
            zmq_setsockopt(cl->sock, ZMQ_LINGER, &linger, sizeof linger);
        }
    }
    if (!st && cl->c) {
        double eps = NAN;
        if (!own_epsilon(cl, &eps, err) && cl->c->rdp_on && !o->quiet)
            LOG(cl, "done: %lld rounds trained; record-level epsilon %.6g (delta %g) for this client's records%s",
                (long long)cl->rounds_trained, eps, cfg->record_dp.delta,
                cl->c->root.seeded ? " -- holds only if the seed is secret (reproducible mode)" : "");
    }
    client_close(cl);
    free(cl);
    return st;
}
#endif
