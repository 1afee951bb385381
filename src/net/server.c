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
 * Its state is in three parts (server_internal.h): the connection layer (srv_link, server_link.c: the socket, the
 * keys, the clients' connections, frames in and out, each checked there), the run as the clients must see it
 * (srv_run: the hello, helper models' w0) and the round in progress (srv_round, server_round.c). */
#include "dpfl/run.h"
#include "net_internal.h"

#include <errno.h>
#include <math.h>
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

#include <sodium.h>

#include "server_internal.h"

/* ------------------------------------------------------------------------------------------ to the clients */
void net_srv_send_round(server *sv, int32_t k)
{
    dpfl_wire_msg m;
    net_srv_round_msg(&sv->rd, k, &m);
    const int32_t round = sv->rd.round;
    if (net_srv_send_frame(&sv->link, &sv->link.peers[k], &m) == 0) DETAIL(sv, "round %d: sent to client %d", round, k);
    else DETAIL(sv, "round %d: could not reach client %d now (it gets the round when it says hello again)", round, k);
}

static void hello_msg(const srv_run *run, dpfl_wire_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = DPFL_WIRE_HELLO;
    m->sender = DPFL_WIRE_SERVER;
    memcpy(m->config_digest, run->config_digest, 32);
    memcpy(m->partition_digest, run->partition_digest, 32);
    memcpy(m->partition_key, run->partition_key, 32);
    m->nparam = run->P;
    m->rounds = (uint32_t)run->cfg->fl.rounds;
    m->released = (uint32_t)run->released;
}

/* personalization = helper: the model round `round` released (0: the initial model w0) to client p. */
static void send_sync(srv_link *l, peer *p, int32_t round, const float *w, size_t P)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_SYNC;
    m.sender = DPFL_WIRE_SERVER;
    m.round = (uint32_t)round;
    dpfl_wire_model_digest(w, P, m.model_digest);
    m.nparam = P;
    m.fvec = w;
    if (net_srv_send_frame(l, p, &m)) LOG("round %d: could not reach a client with its helper models' sync", round);
}

/* After the release: every client whose update (or masked input) was added syncs its helper model with the
 * released model, as the simulation syncs exactly those (fl_store_sync_helpers).  A client that is not
 * connected now misses it and keeps the model it trained (said in docs/deployment.md). */
static void after_round(const dpfl_transport *t, const dpfl_round_job *job)
{
    server *sv = t->ctx;
    if (!sv->run.w0) return;
    for (int32_t i = 0; i < job->nsampled; i++)
        if (!job->reports[i].dropped)
            send_sync(&sv->link, &sv->link.peers[job->sampled[i]], job->round, job->global, sv->run.P);
}

/* ------------------------------------------------------------------------------------------ from the clients */
/* A client's HELLO: its config must be the server's; a reconnected client gets the round it owes (with
 * distributed DP only before secure aggregation's keys went out: its protocol state is in the process that
 * advertised). */
static void take_hello(server *sv, int32_t k, const srv_frame *f)
{
    peer *p = &sv->link.peers[k];
    if (memcmp(f->m.config_digest, sv->run.config_digest, 32)) {
        char a[17], b[17];
        LOG("refused client %d (%s): its config (digest %s) is not the server's (%s)", k, f->who,
            net_short_hex(f->m.config_digest, a), net_short_hex(sv->run.config_digest, b));
        net_srv_send_error_to(&sv->link, sv->rd.round, f->rid, f->rid_len, 4,
                              "refused: your config is not the server's (give the client the run's config.ini; only "
                              "fl.rounds, run.threads, run.eval_every, data_dir may differ)");
        p->rid_len = 0;
        return;
    }
    p->hello = 1;
    INFO(sv, "client %d joined (%s)", k, f->who);
    dpfl_wire_msg m;
    hello_msg(&sv->run, &m);
    net_srv_send_frame(&sv->link, p, &m);
    if (sv->run.w0) send_sync(&sv->link, p, 0, sv->run.w0, sv->run.P);
    if (sv->rd.seats[k].in_round >= 0 && (!sv->rd.job->ddp || sv->rd.ddp_step == DPFL_SECAGG_ADVERT))
        net_srv_send_round(sv, k);
}

/* Client k's heartbeat says the last round of this run it answered (client.bin; checked after its hello: of this
 * config).  A round past the one in flight (released + 1) means that this server resumed from an older checkpoint
 * than the rounds it released: running on would release them again while its ledger charges them once, so the
 * run stops. */
static void take_last_round(server *sv, int32_t k, uint32_t last)
{
    peer *p = &sv->link.peers[k];
    if (!p->hello) return;
    p->reported = 1;
    if (sv->halt_st || (int64_t)last <= (int64_t)sv->run.released + 1) return;
    sv->halt_st = dpfl_fail(&sv->halt_err, DPFL_EINVAL,
                            "dpfl serve: client %d has answered round %u of this run, and this checkpoint has "
                            "released %d rounds: it is older than the rounds this run released (they would go out "
                            "again, charged once); resume from the run's newest checkpoint.bin%s",
                            k, last, sv->run.released, sv->rd.job ? "" : " (nothing was trained or written)");
}

/* An authenticated frame of client k, by its type. */
static void dispatch(server *sv, int32_t k, const srv_frame *f)
{
    const dpfl_wire_msg *m = &f->m;
    peer *p = &sv->link.peers[k];
    switch (m->type) {
    case DPFL_WIRE_HELLO: take_hello(sv, k, f); break;
    case DPFL_WIRE_HEARTBEAT: {
        take_last_round(sv, k, m->round);
        dpfl_wire_msg r;
        memset(&r, 0, sizeof r);
        r.type = DPFL_WIRE_HEARTBEAT;
        r.sender = DPFL_WIRE_SERVER;
        r.round = (uint32_t)sv->rd.round;
        net_srv_send_frame(&sv->link, p, &r);
        break;
    }
    case DPFL_WIRE_UPDATE:
        if (sv->rd.job && sv->rd.job->ddp) {
            LOG("dropped an update from client %d (%s): distributed DP takes masked inputs only", k, f->who);
            net_srv_send_error_to(&sv->link, sv->rd.round, f->rid, f->rid_len, 2,
                                  "plain updates are refused: this run aggregates securely");
        } else if (net_srv_take_update(&sv->rd, &sv->link, k, m, f->who)) {
            DETAIL(sv, "round %d: update from client %d", sv->rd.round, k);
        }
        break;
    case DPFL_WIRE_SECAGG: net_srv_take_secagg(&sv->rd, &sv->link, k, m, f->who); break;
    case DPFL_WIRE_ERROR:
        LOG("client %d reports (round %u): %s", k, m->round, m->text);
        if (m->code == NET_ERROR_ROLLED_BACK && !sv->halt_st)
            sv->halt_st = dpfl_fail(&sv->halt_err, DPFL_EINVAL, "dpfl serve: client %d refused round %u: %s", k,
                                    m->round, m->text);
        net_srv_client_gone(&sv->rd, k);
        break;
    case DPFL_WIRE_BYE:
        INFO(sv, "client %d left: %s", k, m->text);
        net_srv_client_gone(&sv->rd, k);
        p->rid_len = 0;
        p->hello = 0;
        break;
    default: /* ROUND: the decoder refuses it from a client */
        break;
    }
}

/* One poll of the socket, waiting ms milliseconds at most; *handled: whether a frame came and was handled. */
static dpfl_status serve_one(server *sv, long ms, int *handled, dpfl_error *err)
{
    *handled = 0;
    zmq_pollitem_t it = {sv->link.sock, 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(&it, 1, ms);
    if (rc < 0 && errno != EINTR) return dpfl_fail(err, DPFL_EIO, "dpfl serve: poll failed: %s", zmq_strerror(errno));
    if (rc <= 0) return DPFL_OK;
    srv_frame f;
    const int32_t k = net_srv_receive(&sv->link, sv->rd.round, &f);
    if (k >= 0) dispatch(sv, k, &f);
    net_srv_frame_close(&f);
    *handled = 1;
    if (sv->halt_st) *err = sv->halt_err;
    return sv->halt_st;
}

dpfl_status net_srv_serve_until(server *sv, double deadline, int (*done)(const server *), dpfl_error *err)
{
    int handled;
    while (!done || !done(sv)) {
        double left = deadline - dpfl_now();
        if (left <= 0) return DPFL_OK;
        dpfl_status st = serve_one(sv, (long)ceil(left * 1000.0), &handled, err);
        if (st) return st;
    }
    return DPFL_OK;
}

/* The frames already queued (hellos, byes, late answers of a past round), handled without waiting for more. */
static dpfl_status serve_queued(server *sv, dpfl_error *err)
{
    int handled = 1;
    dpfl_status st = DPFL_OK;
    while (!st && handled) st = serve_one(sv, 0, &handled, err);
    return st;
}

int net_srv_round_done(const server *sv) { return sv->rd.pending == 0; }

/* --wait: the clients start waits for (all of them: -1 or more than K) */
static int32_t clients_wanted(const dpfl_serve_options *o, int32_t K)
{
    return o->wait_clients < 0 || o->wait_clients > K ? K : o->wait_clients;
}
/* clients joined that have said which round of this run they answered last (checked: take_last_round) */
static int32_t joined_and_reported(const server *sv)
{
    int32_t n = 0;
    for (int32_t k = 0; k < sv->link.K; k++) {
        const peer *p = &sv->link.peers[k];
        n += p->hello && p->rid_len && p->reported;
    }
    return n;
}
static int all_joined(const server *sv)
{
    return joined_and_reported(sv) >= clients_wanted(&sv->o, sv->link.K);
}

/* ------------------------------------------------------------------------------------------ the transport */
/* --max-empty-rounds: refuse the next round once that many in a row sampled clients and received nothing (their
 * rounds are charged and checkpointed by then; this one has sent nothing yet) */
static dpfl_status check_empty(const server *sv, int32_t round, dpfl_error *err)
{
    const srv_round *r = &sv->rd;
    if (sv->o.max_empty_rounds <= 0 || r->empty_streak < sv->o.max_empty_rounds) return DPFL_OK;
    return dpfl_fail(err, DPFL_EIO,
                     "dpfl serve: no update arrived in %d rounds in a row (rounds %d-%d; %d of %d clients connected "
                     "now): stopping before round %d; those rounds are charged and checkpointed, and `dpfl serve "
                     "--resume` continues the run (--max-empty-rounds 0: never stop)",
                     r->empty_streak, r->empty_first, r->empty_first + r->empty_streak - 1,
                     net_srv_joined(&sv->link), sv->link.K, round);
}

static dpfl_status run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    server *sv = t->ctx;
    srv_round *r = &sv->rd;
    const int32_t start = job->start, n = job->count;
    DPFL_ASSERT(start == 0 && n == job->nsampled); /* whole_round */
    dpfl_status st = check_empty(sv, job->round, err);
    if (st) return st;
    net_srv_unseat_all(r);
    r->round = 0;
    sv->run.released = job->released;
    if ((st = serve_queued(sv, err))) return st; /* what queued up between rounds first */
    const int32_t expected = net_srv_round_begin(r, job);
    if (job->ddp) return net_srv_run_ddp(sv, job, n, err);
    for (int32_t i = start; i < start + n; i++) {
        const int32_t k = job->sampled[i];
        if (r->seats[k].in_round < 0) continue;
        if (sv->link.peers[k].hello && sv->link.peers[k].rid_len) net_srv_send_round(sv, k);
        else DETAIL(sv, "round %d: client %d is not connected (it gets the round if it says hello in time)", r->round, k);
    }
    const double t0 = dpfl_now();
    if ((st = net_srv_serve_until(sv, t0 + sv->o.round_timeout, net_srv_round_done, err))) return st;
    if (r->arrive_st) {
        *err = r->arrive_err;
        return r->arrive_st;
    }
    for (int32_t k = 0; k < r->K; k++) {
        if (r->seats[k].in_round < 0) continue;
        DETAIL(sv, "round %d: client %d did not answer within %g s: a dropout (sampled and charged, no update)",
               r->round, k, sv->o.round_timeout);
        net_srv_client_gone(r, k);
    }
    char d[200];
    INFO(sv, "round %d: %d clients sampled, %d updates in %.2f s%s%s", r->round, n, r->updates, dpfl_now() - t0,
         net_srv_dropped_text(r, d, sizeof d), expected < n ? " (and those client_dp.dropout drew)" : "");
    net_srv_round_over(r, expected, r->updates);
    r->round = 0;
    return DPFL_OK;
}

/* What every hello carries, and w0 (helper models). */
static dpfl_status run_set_up(srv_run *run, const dpfl_transport_setup *setup, dpfl_error *err)
{
    run->cfg = setup->cfg;
    run->P = setup->nparam;
    run->released = setup->released;
    memcpy(run->partition_key, setup->partition_key, 32);
    memcpy(run->partition_digest, setup->partition_digest, 32);
    net_config_digest(setup->cfg, run->config_digest);
    if (setup->initial_model) {
        if (!(run->w0 = dpfl_alloc(run->P * sizeof *run->w0, err))) return DPFL_ENOMEM;
        dpfl_vec_copy(run->w0, setup->initial_model, run->P);
    }
    return DPFL_OK;
}

static dpfl_status start(const dpfl_transport *t, const dpfl_transport_setup *setup, dpfl_error *err)
{
    server *sv = t->ctx;
    const int32_t K = setup->clients;
    const size_t P = setup->nparam;
    dpfl_status st = run_set_up(&sv->run, setup, err);
    if (!st) st = net_srv_round_init(&sv->rd, K, P, err);
    if (st) return st;
    /* the largest frame a client may send is an update */
    int nallowed;
    if ((st = net_srv_link_open(&sv->link, sv->o.bind, K, DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER + 128 + 4 * P,
                                &nallowed, err)))
        return st;
    char pkz[41];
    dpfl_z85_encode(sv->link.pk, 32, pkz, NULL);
    const int32_t want = clients_wanted(&sv->o, K);
    LOG("listening on %s (server key %s), %d client keys in the allow-list %s; %d rounds released, waiting for "
        "%d of %d clients", sv->o.bind, pkz, nallowed, sv->link.zap.dir, setup->released, want, K);
    if (setup->cfg->run.seed.given && (setup->cfg->record_dp.enabled || setup->cfg->client_dp.enabled))
        LOG("fixed [run] seed (reproducible mode, for testing a deployment): this server and every client hold it and "
            "can recompute every noise draw and mask, so no epsilon of this run holds against any of them; leave "
            "run.seed unset with real data");
    st = net_srv_serve_until(sv, dpfl_now() + sv->o.join_timeout, all_joined, err);
    if (st) return st;
    if (!all_joined(sv))
        return dpfl_fail(err, DPFL_EIO,
                         "dpfl serve: %d of %d clients joined within %g s, %d needed (--wait %d): not starting the run "
                         "(nothing was trained or charged; start the missing clients' `dpfl join`, or lower --wait)",
                         joined_and_reported(sv), K, sv->o.join_timeout, want, want);
    return DPFL_OK;
}

static void finish(const dpfl_transport *t, int32_t released, dpfl_status st, const char *why)
{
    server *sv = t->ctx;
    srv_link *l = &sv->link;
    if (!l->sock) return;
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
    for (int32_t k = 0; k < l->K; k++)
        if (l->peers[k].rid_len) net_srv_send_frame(l, &l->peers[k], &m);
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
    net_zap *zap = &sv->link.zap;
    if (o->allow_dir) snprintf(zap->dir, sizeof zap->dir, "%s", o->allow_dir);
    else snprintf(zap->dir, sizeof zap->dir, "%s/clients", o->keys_dir);
    char path[1100];
    snprintf(path, sizeof path, "%s/server.key", o->keys_dir);
    if ((st = dpfl_net_key_read(path, sv->link.sk, err))) {
        free(sv);
        return st;
    }
    crypto_scalarmult_base(sv->link.pk, sv->link.sk);
    sv->t.run_clients = run_clients;
    sv->t.whole_round = 1;
    sv->t.start = start;
    sv->t.finish = finish;
    sv->t.secagg_finish = net_srv_secagg_finish;
    sv->t.after_round = after_round;
    sv->t.clients_hold_data = 1; /* files absent here are the sites' own (data.source_rows) */
    sv->t.ctx = sv;
    st = dpfl_run_with_transport(cfg, run, &sv->t, err);
    net_srv_link_close(&sv->link);
    dpfl_free(sv->run.w0);
    net_srv_round_free(&sv->rd);
    free(sv);
    return st;
}
#endif
