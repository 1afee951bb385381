/* The server of a deployment: dpfl_run's loop (fl_run) with a network transport in place of the in-process
 * threads.  Everything about a round -- sampling, simulated dropouts, the order in which updates are added, the
 * client-level release, the ledger, the checkpoint -- is the simulation's; this file only carries the round to the
 * clients that hold the sampled data and their updates back.
 *
 *   start        ZAP handler (a thread: inproc://zeromq.zap.01 admits the allow-list's keys), a CURVE ROUTER
 *                socket bound to the endpoint; waits until wait_clients clients have said hello
 *   run_clients  one call per round (whole_round): ROUND to every sampled client that has not dropped out (the
 *                model, the mechanism it must run), then every frame that comes in until each has answered or the
 *                round's deadline passes; a client that has not answered by then is a dropout (results[i].dropped:
 *                sampled and charged, its update missing, exactly as client_dp.dropout in the simulation)
 *   finish       BYE to every client, sockets closed
 * Every frame is decoded strictly (wire.c) and checked against the peer it came from: the key the ZAP handler
 * admitted must be client<K> for a frame that claims to be client K.  A frame that fails any check is logged,
 * answered with an ERROR frame and otherwise ignored. */
#include "net_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int dpfl_net_available(void)
{
#ifdef DPFL_HAVE_ZMQ
    return 1;
#else
    return 0;
#endif
}

#ifndef DPFL_HAVE_ZMQ
dpfl_status dpfl_net_serve(const dpfl_config *cfg, const dpfl_run_options *run, const dpfl_serve_options *o,
                           dpfl_error *err)
{
    (void)cfg, (void)run, (void)o;
    return dpfl_fail(err, DPFL_EINVAL, "dpfl serve: this dpfl was built without ZeroMQ (libzmq with CURVE): install "
                                       "libzmq3-dev (scripts/setup.sh does) and rebuild with make");
}
#else
#include "dpfl/transport.h"

#include "dpfl/secagg.h"
#include "zap.h"

#include <dirent.h>
#include <pthread.h>
#include <sodium.h>
#include <zmq.h>

#include "server_internal.h"


/* ------------------------------------------------------------------------------------------ frames */
int net_srv_send_frame(server *sv, peer *p, const dpfl_wire_msg *m)
{
    if (!p->rid_len) return -1;
    uint8_t *buf;
    size_t len;
    dpfl_error err;
    if (dpfl_wire_encode(m, &buf, &len, &err)) {
        LOG("cannot encode a %s frame: %s", dpfl_wire_type_name(m->type), err.msg);
        return -1;
    }
    int rc = zmq_send(sv->sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0) rc = zmq_send(sv->sock, buf, len, ZMQ_DONTWAIT);
    free(buf);
    if (rc < 0) {
        if (errno == EHOSTUNREACH) p->rid_len = 0; /* that connection is gone: the client reconnects with a hello */
        return -1;
    }
    return 0;
}

/* ERROR to a connection that may belong to no known client (a frame that did not decode) */
void net_srv_send_error_to(server *sv, const uint8_t *rid, size_t rid_len, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void net_srv_send_error_to(server *sv, const uint8_t *rid, size_t rid_len, uint32_t code, const char *fmt, ...)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_ERROR;
    m.sender = DPFL_WIRE_SERVER;
    m.code = code;
    m.round = (uint32_t)sv->round;
    va_list ap;
    va_start(ap, fmt);
    char text[DPFL_WIRE_MAX_TEXT + 1];
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dpfl_wire_set_text(&m, "%s", text);
    peer tmp;
    memcpy(tmp.rid, rid, rid_len);
    tmp.rid_len = rid_len;
    net_srv_send_frame(sv, &tmp, &m);
}

void net_srv_send_round(server *sv, int32_t k)
{
    peer *p = &sv->peers[k];
    const dpfl_round_job *job = sv->job;
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_ROUND;
    m.sender = DPFL_WIRE_SERVER;
    m.round = (uint32_t)sv->round;
    m.released = (uint32_t)job->released;
    m.lr = job->lr;
    m.update_clip = job->update_clip;
    m.record_z = job->record_z;
    dpfl_clients_rates_digest(dpfl_sim_clients(job->sim), k, m.rates_digest);
    memcpy(m.model_digest, sv->model_digest, 32);
    if (job->ddp) { /* the round's public values of distributed DP */
        m.cohort = (uint32_t)job->nsampled;
        m.index = (uint32_t)p->in_round;
        m.threshold = (uint32_t)job->ddp->threshold;
        m.client_z = job->ddp->client_z;
        memcpy(m.ddp_seed, job->ddp->seed, 32);
    }
    m.nparam = sv->P;
    m.fvec = job->global;
    m.ncontrol = job->control ? sv->P : 0; /* fl.scaffold: the server's c, which the client's steps use */
    m.fcvec = job->control;
    if (net_srv_send_frame(sv, p, &m) == 0) DETAIL(sv, "round %d: sent to client %d", sv->round, k);
    else DETAIL(sv, "round %d: could not reach client %d now (it gets the round when it says hello again)", sv->round, k);
}

static void say_hello(server *sv, peer *p)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_HELLO;
    m.sender = DPFL_WIRE_SERVER;
    memcpy(m.config_digest, sv->config_digest, 32);
    memcpy(m.partition_digest, sv->partition_digest, 32);
    memcpy(m.partition_key, sv->partition_key, 32);
    m.nparam = sv->P;
    m.rounds = (uint32_t)sv->cfg->fl.rounds;
    m.released = (uint32_t)sv->released;
    net_srv_send_frame(sv, p, &m);
}

/* personalization = helper: the model round `round` released (0: the initial model w0) to client p. */
static void send_sync(server *sv, peer *p, int32_t round, const float *w)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_SYNC;
    m.sender = DPFL_WIRE_SERVER;
    m.round = (uint32_t)round;
    dpfl_wire_model_digest(w, sv->P, m.model_digest);
    m.nparam = sv->P;
    m.fvec = w;
    if (net_srv_send_frame(sv, p, &m)) LOG("round %d: could not reach a client with its helper models' sync", round);
}

/* After the release: every client whose update (or masked input) was added syncs its helper model with the
 * released model, as the simulation syncs exactly those (fl_clients_sync_helpers).  A client that is not
 * connected now misses it and keeps the model it trained (said in docs/deployment.md). */
static void after_round(const dpfl_transport *t, const dpfl_round_job *job)
{
    server *sv = t->ctx;
    if (!sv->w0) return;
    for (int32_t i = 0; i < job->nsampled; i++)
        if (!job->reports[i].dropped) send_sync(sv, &sv->peers[job->sampled[i]], job->round, job->global);
}

/* The client sent its update of the round in progress: decoded into the one update buffer and handed to the
 * server's sum at once (job->arrive: exact and order-independent), so the server holds O(model), not a slot per
 * sampled client. */
static void take_update(server *sv, int32_t k, const dpfl_wire_msg *m, const char *who)
{
    peer *p = &sv->peers[k];
    if (p->in_round < 0 || (int32_t)m->round != sv->round) {
        LOG("dropped an update of round %u from client %d (%s): %s", m->round, k, who,
            sv->round ? "it owes this round nothing (a late or repeated answer)" : "no round is in progress");
        if (sv->round) net_srv_send_error_to(sv, p->rid, p->rid_len, 2, "update of round %u not expected (round %d in progress)",
                                     m->round, sv->round);
        else net_srv_send_error_to(sv, p->rid, p->rid_len, 2, "update of round %u not expected (no round in progress)", m->round);
        return;
    }
    if (m->nparam != sv->P || memcmp(m->model_digest, sv->model_digest, 32)) {
        LOG("dropped an update of round %u from client %d (%s): %s", m->round, k, who,
            m->nparam != sv->P ? "wrong number of parameters" : "trained from another model than this round's");
        net_srv_send_error_to(sv, p->rid, p->rid_len, 2, "update does not match round %d (%s)", sv->round,
                      m->nparam != sv->P ? "parameters" : "model digest");
        return;
    }
    const int32_t i = p->in_round;
    dpfl_client_report *r = &sv->job->reports[i];
    float *slot = sv->ubuf;
    dpfl_wire_floats(m, slot);
    r->steps = m->steps;
    r->examples = m->examples;
    r->loss_sum = m->loss_sum;
    r->clipped = m->clipped;
    if (sv->job->client_level) r->norm = dpfl_vec_norm2(slot, sv->P); /* the server's own view, not the client's word */
    if (!sv->arrive_st) sv->arrive_st = sv->job->arrive(sv->job, i, slot, &sv->arrive_err);
    p->in_round = -1;
    sv->pending--;
    sv->updates++;
    DETAIL(sv, "round %d: update from client %d", sv->round, k);
}

/* A client leaves the round without an update (error, bye, the deadline).  With distributed DP one whose masked
 * input was added stays in the round's sum (the others' shares unmask it); it only stops being waited for. */
void net_srv_client_gone(server *sv, int32_t k)
{
    peer *p = &sv->peers[k];
    if (p->in_round < 0) return;
    if (sv->job->ddp) {
        if (p->owes) p->owes = 0, sv->pending--;
        if (sv->ddp_step == DPFL_SECAGG_UNMASK) return;
    } else {
        sv->pending--;
    }
    sv->job->reports[p->in_round].dropped = 1;
    p->in_round = -1;
    const size_t len = strlen(sv->gone);
    if (len + 16 < sizeof sv->gone) snprintf(sv->gone + len, sizeof sv->gone - len, "%s%d", sv->ngone ? ", " : " ", k);
    else if (len + 5 < sizeof sv->gone && !strstr(sv->gone, "...")) strcat(sv->gone, ", ...");
    sv->ngone++;
}

/* The round is over: arrived of expected updates (or masked inputs summed); counts the rounds in a row that
 * expected some and received none. */
void net_srv_round_over(server *sv, int32_t expected, int32_t arrived)
{
    if (expected <= 0) return; /* nobody was asked: neither empty nor not */
    if (arrived > 0) {
        sv->empty_streak = 0;
    } else if (sv->empty_streak++ == 0) {
        sv->empty_first = sv->round;
    }
}

/* "; dropped: clients 2, 5" (or nothing) for the round's line */
const char *net_srv_dropped_text(const server *sv, char *buf, size_t n)
{
    if (!sv->ngone) return "";
    snprintf(buf, n, "; dropped (%d): client%s%s", sv->ngone, sv->ngone > 1 ? "s" : "", sv->gone);
    return buf;
}

/* One message from the socket (blocking: the caller polled). */
/* A client's HELLO: its config must be the server's; a reconnected client gets the round it owes (with
 * distributed DP only before secure aggregation's keys went out: its protocol state is in the process that
 * advertised). */
static void take_hello(server *sv, peer *p, int32_t k, const dpfl_wire_msg *m, const uint8_t *rid, size_t rid_len,
                       const char *who)
{
    if (memcmp(m->config_digest, sv->config_digest, 32)) {
        char a[17], b[17];
        LOG("refused client %d (%s): its config (digest %s) is not the server's (%s)", k, who,
            net_short_hex(m->config_digest, a), net_short_hex(sv->config_digest, b));
        net_srv_send_error_to(sv, rid, rid_len, 4, "refused: your config is not the server's (give the client the run's "
                                           "config.ini; only fl.rounds, run.threads, run.eval_every, data_dir "
                                           "may differ)");
        p->rid_len = 0;
        return;
    }
    p->hello = 1;
    INFO(sv, "client %d joined (%s)", k, who);
    say_hello(sv, p);
    if (sv->w0) send_sync(sv, p, 0, sv->w0);
    if (p->in_round >= 0 && (!sv->job->ddp || sv->ddp_step == DPFL_SECAGG_ADVERT)) net_srv_send_round(sv, k);
}

/* An authenticated frame of client k (peer p), by its type. */
static void dispatch(server *sv, peer *p, int32_t k, const dpfl_wire_msg *m, const uint8_t *rid, size_t rid_len,
                     const char *who)
{
    switch (m->type) {
    case DPFL_WIRE_HELLO: take_hello(sv, p, k, m, rid, rid_len, who); break;
    case DPFL_WIRE_HEARTBEAT: {
        dpfl_wire_msg r;
        memset(&r, 0, sizeof r);
        r.type = DPFL_WIRE_HEARTBEAT;
        r.sender = DPFL_WIRE_SERVER;
        r.round = (uint32_t)sv->round;
        net_srv_send_frame(sv, p, &r);
        break;
    }
    case DPFL_WIRE_UPDATE:
        if (sv->job && sv->job->ddp) {
            LOG("dropped an update from client %d (%s): distributed DP takes masked inputs only", k, who);
            net_srv_send_error_to(sv, rid, rid_len, 2, "plain updates are refused: this run aggregates securely");
        } else {
            take_update(sv, k, m, who);
        }
        break;
    case DPFL_WIRE_SECAGG: net_srv_take_secagg(sv, k, m, who); break;
    case DPFL_WIRE_ERROR:
        LOG("client %d reports (round %u): %s", k, m->round, m->text);
        net_srv_client_gone(sv, k);
        break;
    case DPFL_WIRE_BYE:
        INFO(sv, "client %d left: %s", k, m->text);
        net_srv_client_gone(sv, k);
        p->rid_len = 0;
        p->hello = 0;
        break;
    default: /* ROUND: the decoder refuses it from a client */
        break;
    }
}

/* The rest of a multipart message, dropped: a frame is one message part. */
static void drain_multipart(server *sv)
{
    int more = 1;
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        more = zmq_msg_recv(&extra, sv->sock, 0) >= 0 && zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
}

static void handle_message(server *sv)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, sv->sock, 0) < 0) goto out;
    if (!zmq_msg_more(&id)) goto out;
    if (zmq_msg_recv(&body, sv->sock, 0) < 0) goto out;
    uint8_t rid[RID_MAX];
    const size_t rid_len = zmq_msg_size(&id) <= RID_MAX ? zmq_msg_size(&id) : 0;
    if (rid_len) memcpy(rid, zmq_msg_data(&id), rid_len);
    const char *user = zmq_msg_gets(&body, "User-Id");
    const char *addr = zmq_msg_gets(&body, "Peer-Address");
    char who[160];
    snprintf(who, sizeof who, "key %s, %s", user && user[0] ? user : "?", addr ? addr : "?");
    if (zmq_msg_more(&body)) { /* a frame is one message part */
        drain_multipart(sv);
        LOG("dropped a multipart message (%s): a frame is one message", who);
        if (rid_len) net_srv_send_error_to(sv, rid, rid_len, 1, "multipart message: one frame per message");
        goto out;
    }
    dpfl_wire_msg m;
    dpfl_error err;
    if (dpfl_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m, &err)) {
        LOG("dropped a frame (%s): %s", who, err.msg);
        if (rid_len) net_srv_send_error_to(sv, rid, rid_len, 1, "%s", err.msg);
        goto out;
    }
    char expect[32];
    snprintf(expect, sizeof expect, "client%u", m.sender);
    if (m.sender >= (uint32_t)sv->K || !user || strcmp(user, expect)) {
        LOG("dropped a %s frame claiming to be client %u (%s): %s", dpfl_wire_type_name(m.type), m.sender, who,
            m.sender >= (uint32_t)sv->K ? "no such client in this run" : "that key may not act as that client");
        if (rid_len) net_srv_send_error_to(sv, rid, rid_len, 3, "refused: key %s may not act as client %u", user ? user : "?",
                                   m.sender);
        goto out;
    }
    const int32_t k = (int32_t)m.sender;
    peer *p = &sv->peers[k];
    if (rid_len && (p->rid_len != rid_len || memcmp(p->rid, rid, rid_len))) { /* a new connection of client k */
        memcpy(p->rid, rid, rid_len);
        p->rid_len = rid_len;
        p->hello = 0;
    }
    dispatch(sv, p, k, &m, rid, rid_len, who);
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}

/* Handle messages until the deadline (dpfl_now() seconds) or until done(sv) holds. */
dpfl_status net_srv_serve_until(server *sv, double deadline, int (*done)(const server *), dpfl_error *err)
{
    while (!done(sv)) {
        double left = deadline - dpfl_now();
        if (left <= 0) return DPFL_OK;
        zmq_pollitem_t it = {sv->sock, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)ceil(left * 1000.0));
        if (rc < 0) {
            if (errno == EINTR) continue;
            return dpfl_fail(err, DPFL_EIO, "dpfl serve: poll failed: %s", zmq_strerror(errno));
        }
        if (rc > 0) handle_message(sv);
    }
    return DPFL_OK;
}

int net_srv_round_done(const server *sv) { return sv->pending == 0; }
static int never(const server *sv) { (void)sv; return 0; }

static int32_t joined(const server *sv)
{
    int32_t n = 0;
    for (int32_t k = 0; k < sv->K; k++) n += sv->peers[k].hello && sv->peers[k].rid_len;
    return n;
}
static int all_joined(const server *sv)
{
    int32_t want = sv->o.wait_clients < 0 || sv->o.wait_clients > sv->K ? sv->K : sv->o.wait_clients;
    return joined(sv) >= want;
}

/* ------------------------------------------------------------------------------------------ the transport */
/* --max-empty-rounds: refuse the next round once that many in a row sampled clients and received nothing (their
 * rounds are charged and checkpointed by then; this one has sent nothing yet) */
static dpfl_status check_empty(const server *sv, int32_t round, dpfl_error *err)
{
    if (sv->o.max_empty_rounds <= 0 || sv->empty_streak < sv->o.max_empty_rounds) return DPFL_OK;
    return dpfl_fail(err, DPFL_EIO,
                     "dpfl serve: no update arrived in %d rounds in a row (rounds %d-%d; %d of %d clients connected "
                     "now): stopping before round %d; those rounds are charged and checkpointed, and `dpfl serve "
                     "--resume` continues the run (--max-empty-rounds 0: never stop)",
                     sv->empty_streak, sv->empty_first, sv->empty_first + sv->empty_streak - 1, joined(sv), sv->K, round);
}

static dpfl_status run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    server *sv = t->ctx;
    const int32_t start = job->start, n = job->count;
    DPFL_ASSERT(start == 0 && n == job->nsampled); /* whole_round */
    dpfl_status st = check_empty(sv, job->round, err);
    if (st) return st;
    for (int32_t k = 0; k < sv->K; k++) sv->peers[k].in_round = -1, sv->peers[k].owes = 0;
    sv->round = 0;
    if ((st = net_srv_serve_until(sv, dpfl_now(), never, err))) return st; /* what queued up between rounds first */
    sv->job = job;
    sv->released = job->released;
    sv->round = job->round;
    sv->updates = sv->ngone = 0;
    sv->gone[0] = 0;
    dpfl_wire_model_digest(job->global, sv->P, sv->model_digest);
    if (job->ddp) {
        for (int32_t i = start; i < start + n; i++)
            if (!job->reports[i].dropped) sv->peers[job->sampled[i]].in_round = i;
        return net_srv_run_ddp(sv, job, n, err);
    }
    sv->pending = 0;
    for (int32_t i = start; i < start + n; i++) {
        if (job->reports[i].dropped) continue; /* client_dp.dropout: the simulation's dropout, drawn by the server */
        sv->peers[job->sampled[i]].in_round = i;
        sv->pending++;
    }
    const int32_t expected = sv->pending;
    for (int32_t i = start; i < start + n; i++) {
        const int32_t k = job->sampled[i];
        if (sv->peers[k].in_round < 0) continue;
        if (sv->peers[k].hello && sv->peers[k].rid_len) net_srv_send_round(sv, k);
        else DETAIL(sv, "round %d: client %d is not connected (it gets the round if it says hello in time)", sv->round, k);
    }
    const double t0 = dpfl_now();
    sv->arrive_st = DPFL_OK;
    if ((st = net_srv_serve_until(sv, t0 + sv->o.round_timeout, net_srv_round_done, err))) return st;
    if (sv->arrive_st) {
        *err = sv->arrive_err;
        return sv->arrive_st;
    }
    for (int32_t k = 0; k < sv->K; k++) {
        if (sv->peers[k].in_round < 0) continue;
        DETAIL(sv, "round %d: client %d did not answer within %g s: a dropout (sampled and charged, no update)",
               sv->round, k, sv->o.round_timeout);
        net_srv_client_gone(sv, k);
    }
    char d[200];
    INFO(sv, "round %d: %d clients sampled, %d updates in %.2f s%s%s", sv->round, n, sv->updates, dpfl_now() - t0,
         net_srv_dropped_text(sv, d, sizeof d), expected < n ? " (and those client_dp.dropout drew)" : "");
    net_srv_round_over(sv, expected, sv->updates);
    sv->round = 0;
    return DPFL_OK;
}

static dpfl_status start(const dpfl_transport *t, const dpfl_transport_setup *setup, dpfl_error *err)
{
    server *sv = t->ctx;
    sv->cfg = setup->cfg;
    sv->K = setup->clients;
    sv->P = setup->nparam;
    sv->released = setup->released;
    memcpy(sv->partition_key, setup->partition_key, 32);
    memcpy(sv->partition_digest, setup->partition_digest, 32);
    net_config_digest(setup->cfg, sv->config_digest);
    if (setup->initial_model) {
        if (!(sv->w0 = dpfl_alloc(sv->P * sizeof *sv->w0, err))) return DPFL_ENOMEM;
        dpfl_vec_copy(sv->w0, setup->initial_model, sv->P);
    }
    if (!(sv->ubuf = dpfl_alloc(sv->P * sizeof *sv->ubuf, err))) return DPFL_ENOMEM;
    if (!(sv->peers = calloc((size_t)sv->K, sizeof *sv->peers))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    for (int32_t k = 0; k < sv->K; k++) sv->peers[k].in_round = -1;
    /* the largest frame a client may send is an update; anything much larger is cut by ZeroMQ before it is read */
    sv->max_frame = DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER + 128 + 4 * sv->P;
    if (!(sv->zctx = zmq_ctx_new()))
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot start ZeroMQ: %s", zmq_strerror(errno));
    int nallowed;
    dpfl_status st = net_zap_start(&sv->zap, sv->zctx, &nallowed, err);
    if (st) return st;
    const int one = 1, linger = 2000;
    const int64_t maxmsg = (int64_t)(2 * sv->max_frame + 65536);
    if (!(sv->sock = zmq_socket(sv->zctx, ZMQ_ROUTER)) || zmq_setsockopt(sv->sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sv->sock, ZMQ_CURVE_SECRETKEY, sv->sk, 32) ||
        zmq_setsockopt(sv->sock, ZMQ_ZAP_DOMAIN, "dpfl", 4) ||
        zmq_setsockopt(sv->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) ||
        zmq_setsockopt(sv->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(sv->sock, ZMQ_LINGER, &linger, sizeof linger))
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot set up the socket: %s", zmq_strerror(errno));
    if (zmq_bind(sv->sock, sv->o.bind) != 0)
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot listen on %s: %s", sv->o.bind, zmq_strerror(errno));
    char pkz[41];
    dpfl_z85_encode(sv->pk, 32, pkz, NULL);
    LOG("listening on %s (server key %s), %d client keys in the allow-list %s; %d rounds released, waiting for "
        "%d of %d clients", sv->o.bind, pkz, nallowed, sv->zap.dir, setup->released,
        sv->o.wait_clients < 0 || sv->o.wait_clients > sv->K ? sv->K : sv->o.wait_clients, sv->K);
    st = net_srv_serve_until(sv, dpfl_now() + sv->o.join_timeout, all_joined, err);
    if (st) return st;
    if (!all_joined(sv)) {
        const int32_t want = sv->o.wait_clients < 0 || sv->o.wait_clients > sv->K ? sv->K : sv->o.wait_clients;
        return dpfl_fail(err, DPFL_EIO,
                         "dpfl serve: %d of %d clients joined within %g s, %d needed (--wait %d): not starting the run "
                         "(nothing was trained or charged; start the missing clients' `dpfl join`, or lower --wait)",
                         joined(sv), sv->K, sv->o.join_timeout, want, want);
    }
    return DPFL_OK;
}

static void finish(const dpfl_transport *t, int32_t released, dpfl_status st, const char *why)
{
    server *sv = t->ctx;
    if (!sv->sock) return;
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_BYE;
    m.sender = DPFL_WIRE_SERVER;
    m.code = st ? 1 : 0;
    m.round = (uint32_t)released;
    if (st) dpfl_wire_set_text(&m, "the server stopped: %s", why);
    else if (why && *why) /* interrupted: the clients wait for `dpfl serve --resume` */
        m.code = 2, dpfl_wire_set_text(&m, "the server was interrupted after round %u; the run can be resumed", m.round);
    else dpfl_wire_set_text(&m, "run finished after %u rounds", m.round);
    for (int32_t k = 0; k < sv->K; k++)
        if (sv->peers[k].rid_len) net_srv_send_frame(sv, &sv->peers[k], &m);
}

static void server_close(server *sv)
{
    if (sv->sock) zmq_close(sv->sock); /* lingers up to 2 s for the byes */
    if (sv->zctx) zmq_ctx_shutdown(sv->zctx); /* the ZAP thread's recv returns ETERM */
    net_zap_stop(&sv->zap);
    if (sv->zctx) zmq_ctx_term(sv->zctx);
    free(sv->peers);
    dpfl_free(sv->w0);
    dpfl_free(sv->ubuf);
    sodium_memzero(sv->sk, sizeof sv->sk);
}

dpfl_status dpfl_net_serve(const dpfl_config *cfg, const dpfl_run_options *run, const dpfl_serve_options *o,
                           dpfl_error *err)
{
    dpfl_status st = net_check_config(cfg, err);
    if (st) return st;
    if (!o->bind || !o->keys_dir) return dpfl_fail(err, DPFL_EINVAL, "dpfl serve: needs --bind and --keys");
    if (!(o->round_timeout > 0) || !(o->join_timeout >= 0))
        return dpfl_fail(err, DPFL_EINVAL, "dpfl serve: the round timeout must be > 0 and the join timeout >= 0");
    if (sodium_init() < 0) return dpfl_fail(err, DPFL_EIO, "libsodium could not start");
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    sv->o = *o;
    if (o->allow_dir) snprintf(sv->zap.dir, sizeof sv->zap.dir, "%s", o->allow_dir);
    else snprintf(sv->zap.dir, sizeof sv->zap.dir, "%s/clients", o->keys_dir);
    char path[1100];
    snprintf(path, sizeof path, "%s/server.key", o->keys_dir);
    if ((st = dpfl_net_key_read(path, sv->sk, err))) {
        free(sv);
        return st;
    }
    crypto_scalarmult_base(sv->pk, sv->sk);
    sv->t.run_clients = run_clients;
    sv->t.whole_round = 1;
    sv->t.start = start;
    sv->t.finish = finish;
    sv->t.secagg_finish = net_srv_secagg_finish;
    sv->t.after_round = after_round;
    sv->t.clients_hold_data = 1; /* files absent here are the sites' own (data.source_rows) */
    sv->t.ctx = sv;
    st = dpfl_run_with_transport(cfg, run, &sv->t, err);
    server_close(sv);
    free(sv);
    return st;
}
#endif
