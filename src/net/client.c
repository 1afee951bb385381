/* One client of a deployment (dpfl join): it sets up the run's node exactly as the server does (fl_node_setup, the
 * run without its files: the same dataset, model, noise calibration and rPDP-FL plan; the partition drawn from the
 * key the server's hello carries), keeps its own per-client state (optimizer state with fl.client_state = keep) in this
 * process, and answers each ROUND with the simulation's own local training (dpfl_sim_client_round).
 *
 * Its own ledger (record-level DP): what it has released of its records, charged before the update leaves --
 * client.bin in its state folder (magic "DPCL", checksummed, atomic) holds the ledger, its per-client state and
 * its last answer, and is written before the update is sent.  A round the server asks again with the same model
 * (the server was killed and resumed from its checkpoint) is answered with the same bytes and charged once; one
 * this client answered from another model (a server resumed from an older checkpoint than the rounds it released)
 * is refused, and the server stops on it -- it also hears this client's last round at once after its hello and
 * stops before anything runs.  The folder also lets a killed client carry on where it was.  client.json says the same for people (client_state.c;
 * distributed DP's secure aggregation: client_secagg.c).
 *
 * What it checks before training: the server's config digest and partition (hello), then in every round the
 * mechanism it is asked to run -- learning rate, record-level noise multiplier, its records' sampling rates
 * (rPDP-FL) -- against its own: a mismatch is answered with an ERROR frame and nothing is trained.  Statistics the
 * update reports besides the update itself (loss, example and clip counts) are covered by no epsilon, so with
 * record-level DP they are not sent. */
#include "net_internal.h"
#include "core/numtext.h"

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
#include "client_internal.h"
#include "core/file.h"

#include <sodium.h>
#include <time.h>
#include <zmq.h>

#define HEARTBEAT_S 1.0

int net_client_send(client_link *l, const dpfl_wire_msg *m)
{
    uint8_t *buf;
    size_t len;
    dpfl_error err;
    if (dpfl_wire_encode(m, &buf, &len, &err)) {
        LOG(l, "cannot encode a %s frame: %s", dpfl_wire_type_name(m->type), err.msg);
        return -1;
    }
    int rc = zmq_send(l->sock, buf, len, ZMQ_DONTWAIT);
    free(buf);
    return rc < 0 ? -1 : 0;
}

void net_client_send_simple(client_link *l, dpfl_wire_type type, uint32_t code, uint32_t round, const char *text)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.sender = (uint32_t)l->k;
    m.code = code;
    m.round = round;
    if (text) dpfl_wire_set_text(&m, "%s", text);
    net_client_send(l, &m);
}

static void send_hello(client_link *l, const uint8_t config_digest[32])
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_HELLO;
    m.sender = (uint32_t)l->k;
    memcpy(m.config_digest, config_digest, 32);
    net_client_send(l, &m);
}

/* ------------------------------------------------------------------------------------------ the run */
/* The server's hello: set up the same run (once), or check that a restarted server runs the same one. */
static dpfl_status on_hello(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    char a[17], b[17];
    if (memcmp(m->config_digest, cl->own.config_digest, 32))
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: the server runs another config (digest %s, this client's %s): "
                                           "give the client the run's config.ini",
                         net_short_hex(m->config_digest, a), net_short_hex(cl->own.config_digest, b));
    if (!cl->own.node) {
        fl_node *n = calloc(1, sizeof *n);
        if (!n) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
        cl->own.node = n;
        /* the other sites' files need not be here; this client's own must (below) */
        dpfl_status st = fl_node_setup(n, cl->cfg, m->partition_key, err);
        if (st) return st;
        int32_t copies = 1; /* this client's ledger sees its own steps only: a replicated record's other copies not */
        if (cl->cfg->record_dp.enabled && (st = dpfl_record_copies(&n->in.part, &copies, err))) return st;
        if (copies > 1)
            return dpfl_fail(err, DPFL_EINVAL, "dpfl join: data.samples_per_client puts records in several clients; a "
                                               "deployed client could not charge the other copies: replicate in "
                                               "simulation only");
        cl->own.P = n->in.model.nparam;
        if (cl->own.k >= n->in.part.clients)
            return dpfl_fail(err, DPFL_EINVAL, "dpfl join: --client %d, but the run has clients 0 to %d", cl->own.k,
                             n->in.part.clients - 1);
        if ((st = fl_node_data_here(n, cl->own.k, "dpfl join", err))) return st;
        if (!(cl->update = dpfl_alloc(cl->own.P * sizeof(float), err))) return DPFL_ENOMEM;
        memcpy(cl->own.run_key, m->partition_key, 32);
        int carried_on;
        if ((st = net_client_state_load(&cl->own, &carried_on, err))) return st;
        if (carried_on == 1)
            INFO(&cl->link, "carrying on from %s/client.bin: %lld rounds trained, last answer round %d",
                 cl->own.state_dir, (long long)cl->own.rounds_trained, cl->own.last_round);
        else if (carried_on == 2)
            INFO(&cl->link, "carrying on from %s/client.bin of another run (another partition key): its ledger "
                 "(%lld rounds trained) goes on; its last answer was that run's", cl->own.state_dir,
                 (long long)cl->own.rounds_trained);
    } else if (memcmp(m->partition_key, cl->own.run_key, 32)) { /* a restarted server runs a new run */
        INFO(&cl->link, "the server runs a new run (another partition key): this client's last answer (round %d) "
             "was the other run's; its ledger goes on", cl->own.last_round);
        memcpy(cl->own.run_key, m->partition_key, 32);
        cl->own.last_round = 0;
        free(cl->own.last_frame);
        cl->own.last_frame = NULL;
        cl->own.last_len = 0;
    }
    if (memcmp(m->partition_digest, cl->own.node->acct.rs.partition_digest, 32) || m->nparam != cl->own.P)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: this client's partition or model (%zu parameters) is not the "
                                           "server's (%llu): the same dataset files and config are needed",
                         cl->own.P, (unsigned long long)m->nparam);
    INFO(&cl->link, "joined: the server has released %u of %u rounds; %d records here", m->released, m->rounds,
         dpfl_partition_size(&cl->own.node->in.part, cl->own.k));
    /* the last round this client answered in this run, at once: the server refuses to run if it has released
     * fewer rounds than that one's predecessor (resumed from an older checkpoint) */
    net_client_send_simple(&cl->link, DPFL_WIRE_HEARTBEAT, 0, (uint32_t)cl->own.last_round, NULL);
    return DPFL_OK;
}

/* A round this client has already answered in this run from another model -- the server was resumed from an
 * older checkpoint than the rounds it released, and would release them twice while its ledger charges them once
 * -- "" if not.  (The same model again is a normal resume's round in flight: answered with the same bytes, before
 * this; distributed DP refuses its own round again as a dropout, net_client_ddp_round.) */
static const char *rolled_back(const client *cl, const dpfl_wire_msg *m, char *why, size_t cap)
{
    why[0] = '\0';
    const int32_t r = (int32_t)m->round, last = cl->own.last_round;
    if (cl->ddp ? r < last : r <= last)
        snprintf(why, cap, "round %d again, and this client already answered round %d of this run from another model: "
                           "the server runs an older checkpoint than the rounds it released (released twice, charged "
                           "once); resume it from its newest checkpoint", r, last);
    return why;
}

/* The mechanism the server asks for must be the one this client runs; "" if it is. */
static const char *check_round(client_own *own, const dpfl_wire_msg *m, char *why, size_t cap)
{
    fl_node *n = own->node;
    const double lr = dpfl_clients_round_lr(n->in.clients, (int32_t)m->round);
    const double z = n->in.rdp_on ? n->acct.rs.record_z : 0.0;
    uint8_t rd[32], md[32];
    why[0] = '\0';
    if (m->nparam != own->P)
        snprintf(why, cap, "%llu parameters, this client's model has %zu", (unsigned long long)m->nparam, own->P);
    else if (m->lr != lr) snprintf(why, cap, "learning rate %.17g, this client's schedule gives %.17g", m->lr, lr);
    else if (m->record_z != z)
        snprintf(why, cap, "record-level noise multiplier %.17g, this client's is %.17g (same config and fl.rounds?)",
                 m->record_z, z);
    else if ((m->ncontrol != 0) != (dpfl_server_control(n->in.server) != NULL))
        snprintf(why, cap, "the round %s SCAFFOLD's control variate, this client's config has fl.scaffold = %s",
                 m->ncontrol ? "carries" : "lacks", dpfl_server_control(n->in.server) ? "yes" : "no");
    if (why[0]) return why;
    if (n->acct.rpdp.on) {
        dpfl_error err;
        if ((int32_t)m->released < own->replayed) {
            snprintf(why, cap, "the server has released %u rounds, this client has already charged %d (a server "
                               "resumed from an older checkpoint than its last round)", m->released, own->replayed);
            return why;
        }
        int changed;
        if (net_client_rpdp_catch_up(own, (int32_t)m->released, &err) ||
            fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, &err)) {
            snprintf(why, cap, "rPDP-FL ledger: %.300s", err.msg);
            return why;
        }
    }
    dpfl_record_dp_rates_digest(n->in.record_dp, own->k, rd);
    /* under the filter a record leaves the sampler here, as it spends (client.c): the server cannot follow its rates,
     * and needs not (what it reports for a record is its cap) */
    if (!n->acct.rpdp.filter.on && memcmp(rd, m->rates_digest, 32)) {
        snprintf(why, cap, "per-record sampling rates differ from this client's (rPDP-FL budgets or plan)");
        return why;
    }
    dpfl_wire_model_digest(n->in.global, own->P, md);
    if (memcmp(md, m->model_digest, 32)) snprintf(why, cap, "the model does not match its digest");
    return why;
}

/* Charged before anything of the round's training leaves: the steps the server's ledger charges for this client,
 * and with rPDP-FL the round itself (released with this client's contribution in it). */
void net_client_charge_own(client_own *own, int32_t round)
{
    fl_node *n = own->node;
    const int64_t steps = dpfl_clients_steps(n->in.clients, own->k);
    dpfl_ledger_charge(&n->acct.ledger, &own->k, 1, &steps);
    own->rounds_trained++;
    /* its helper model now holds what it trained: mixed with the round's released model once the server says
     * its update was added (the simulation syncs exactly the clients whose update arrived) */
    if (n->in.cfg->fl.personalization == DPFL_PERSONAL_HELPER && steps > 0) own->sync_round = round;
    if (n->acct.rpdp.on && own->replayed < round) {
        fl_rpdp_charge(&n->acct.rpdp.levels);
        own->replayed = round;
    }
}

void net_client_pause(double delay)
{
    if (delay > 0) { /* a slow link */
        struct timespec ts = {(time_t)delay, (long)((delay - floor(delay)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
}

void net_client_refuse(client_link *l, uint32_t round, const char *why)
{
    LOG(l, "round %u refused: %s", round, why);
    net_client_send_simple(l, DPFL_WIRE_ERROR, NET_ERROR_REFUSED, round, why);
}

static dpfl_status on_round(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    if (!cl->own.node) {
        LOG(&cl->link, "round %u before the server's hello: ignored", m->round);
        return DPFL_OK;
    }
    fl_node *n = cl->own.node;
    if (!cl->ddp && (int32_t)m->round == cl->own.last_round && cl->own.last_frame &&
        !memcmp(m->model_digest, cl->own.last_digest, 32)) {
        /* asked again (a resumed server): the same answer, charged once */
        INFO(&cl->link, "round %u: asked again for the same model; the same answer", m->round);
        if (zmq_send(cl->link.sock, cl->own.last_frame, cl->own.last_len, ZMQ_DONTWAIT) < 0) /* the server asks again */
            LOG(&cl->link, "round %u: could not send now: %s", m->round, zmq_strerror(errno));
        return DPFL_OK;
    }
    char why[512];
    if (rolled_back(cl, m, why, sizeof why)[0]) { /* nothing trained: the server stops the run */
        LOG(&cl->link, "round %u refused: %s", m->round, why);
        net_client_send_simple(&cl->link, DPFL_WIRE_ERROR, NET_ERROR_ROLLED_BACK, m->round, why);
        return DPFL_OK;
    }
    if (m->nparam == cl->own.P) dpfl_wire_floats(m, n->in.global);
    if (check_round(&cl->own, m, why, sizeof why)[0]) {
        net_client_refuse(&cl->link, m->round, why);
        return DPFL_OK;
    }
    if (cl->ddp) return net_client_ddp_round(cl, m, err);
    if (m->ncontrol) dpfl_wire_control(m, dpfl_server_control(n->in.server)); /* fl.scaffold: the server's c */
    dpfl_client_report res;
    dpfl_status st =
        dpfl_sim_client_round(n->in.sim, (int32_t)m->round, m->update_clip, cl->own.k, cl->update, &res, err);
    if (st) return st;
    net_client_charge_own(&cl->own, (int32_t)m->round);
    dpfl_wire_msg u;
    memset(&u, 0, sizeof u);
    u.type = DPFL_WIRE_UPDATE;
    u.sender = (uint32_t)cl->own.k;
    u.round = m->round;
    memcpy(u.model_digest, m->model_digest, 32);
    u.steps = res.steps;
    if (!n->in.rdp_on) { /* without record-level DP nothing is private anyway: the diagnostics go along */
        u.flags = DPFL_WIRE_STATS;
        u.examples = res.examples;
        u.loss_sum = res.loss_sum;
        u.clipped = res.clipped;
    }
    u.nparam = cl->own.P;
    u.fvec = cl->update;
    uint8_t *frame;
    size_t flen;
    if (dpfl_wire_encode(&u, &frame, &flen, err)) {
        LOG(&cl->link, "round %u: cannot send its update: %s", m->round, err->msg);
        net_client_send_simple(&cl->link, DPFL_WIRE_ERROR, 6, m->round, err->msg);
        return DPFL_OK;
    }
    free(cl->own.last_frame);
    cl->own.last_frame = frame;
    cl->own.last_len = flen;
    cl->own.last_round = (int32_t)m->round;
    memcpy(cl->own.last_digest, m->model_digest, 32);
    if ((st = net_client_state_save(&cl->own, err))) return st;
    net_client_pause(cl->o.delay);
    /* never blocks: a server that has gone asks again when it is back, and gets the same bytes */
    if (zmq_send(cl->link.sock, frame, flen, ZMQ_DONTWAIT) < 0)
        LOG(&cl->link, "round %u: could not send the update now (%s); it goes when the server asks again", m->round,
            zmq_strerror(errno));
    double eps = NAN;
    net_client_own_epsilon(&cl->own, &eps, NULL);
    if (n->in.rdp_on)
        INFO(&cl->link, "round %u: update sent (%lld rounds trained, epsilon %s for its records)", m->round,
             (long long)cl->own.rounds_trained, dpfl_num_up(eps, 4).s);
    else INFO(&cl->link, "round %u: update sent", m->round);
    return DPFL_OK;
}

dpfl_status net_client_on_sync(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    fl_node *n = cl->own.node;
    uint8_t md[32];
    if (!n || n->in.cfg->fl.personalization != DPFL_PERSONAL_HELPER || m->nparam != cl->own.P) {
        LOG(&cl->link, "dropped a sync of round %u: %s", m->round,
            !n ? "before the server's hello" : m->nparam != cl->own.P ? "wrong number of parameters"
                                                                      : "this run has no helper models");
        return DPFL_OK;
    }
    if (m->round != 0 && (int32_t)m->round != cl->own.sync_round) { /* a repeat, or a round it did not train */
        INFO(&cl->link, "sync of round %u ignored (its helper waits for %d)", m->round, cl->own.sync_round);
        return DPFL_OK;
    }
    float *w = dpfl_alloc(cl->own.P * sizeof *w, err);
    if (!w) return DPFL_ENOMEM;
    dpfl_wire_floats(m, w);
    dpfl_wire_model_digest(w, cl->own.P, md);
    dpfl_status st = DPFL_OK;
    if (memcmp(md, m->model_digest, 32)) {
        LOG(&cl->link, "dropped a sync of round %u: the model does not match its digest", m->round);
    } else if (m->round == 0) { /* w0: every helper model until its first sync (Algorithm 1: h_i <- w0) */
        dpfl_clients_set_initial_model(n->in.clients, w);
    } else {
        dpfl_clients_sync(n->in.clients, cl->own.k, w);
        cl->own.sync_round = 0;
        st = net_client_state_save(&cl->own, err);
        INFO(&cl->link, "round %u: helper model synced with the released model", m->round);
    }
    dpfl_free(w);
    return st;
}

/* Monitor events of the socket: handshakes (a restarted server is greeted again), refusals. */
static dpfl_status on_event(client_link *l, const uint8_t config_digest[32], dpfl_error *err)
{
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    zmq_msg_init(&b);
    int ok = zmq_msg_recv(&a, l->mon, 0) >= 0 && zmq_msg_more(&a) && zmq_msg_recv(&b, l->mon, 0) >= 0;
    uint16_t ev = 0;
    if (ok && zmq_msg_size(&a) >= 2) memcpy(&ev, zmq_msg_data(&a), 2);
    zmq_msg_close(&a);
    zmq_msg_close(&b);
    switch (ev) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        l->handshake_failures = 0;
        INFO(l, "connected to %s", l->server);
        send_hello(l, config_digest);
        return DPFL_OK;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join: the server refused this client's key (%s): %s.pub is not in its "
                                           "allow-list", l->name, l->name);
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        if (++l->handshake_failures >= 5)
            return dpfl_fail(err, DPFL_EIO, "dpfl join: no secure handshake with %s after 5 tries (is server.pub the "
                                            "server's key?)", l->server);
        return DPFL_OK;
    case ZMQ_EVENT_DISCONNECTED:
        INFO(l, "lost the server; reconnecting");
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
        if (now - beat >= HEARTBEAT_S && cl->own.node) {
            net_client_send_simple(&cl->link, DPFL_WIRE_HEARTBEAT, 0,
                                   (uint32_t)(cl->own.last_round > 0 ? cl->own.last_round : 0), NULL);
            beat = now;
        }
        zmq_pollitem_t it[2] = {{cl->link.sock, 0, ZMQ_POLLIN, 0}, {cl->link.mon, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, (long)(HEARTBEAT_S * 1000)) < 0) {
            if (errno == EINTR) continue;
            return dpfl_fail(err, DPFL_EIO, "dpfl join: poll: %s", zmq_strerror(errno));
        }
        dpfl_status st;
        if ((it[1].revents & ZMQ_POLLIN) && (st = on_event(&cl->link, cl->own.config_digest, err))) return st;
        if (!(it[0].revents & ZMQ_POLLIN)) continue;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, cl->link.sock, 0) < 0) {
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
            LOG(&cl->link, "dropped a frame from the server: %s", bad);
            int more = zmq_msg_more(&msg);
            while (more) { /* the rest of a multipart message */
                zmq_msg_t x;
                zmq_msg_init(&x);
                more = zmq_msg_recv(&x, cl->link.sock, 0) >= 0 && zmq_msg_more(&x);
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
        case DPFL_WIRE_SECAGG: st = net_client_on_secagg(cl, &m, err); break;
        case DPFL_WIRE_SYNC: st = net_client_on_sync(cl, &m, err); break;
        case DPFL_WIRE_ERROR:
            LOG(&cl->link, "the server says (round %u): %s", m.round, m.text);
            if (m.code == 3 || m.code == 4) st = dpfl_fail(err, DPFL_EINVAL, "dpfl join: %s", m.text);
            break;
        case DPFL_WIRE_BYE:
            if (m.code == 2) { /* interrupted: its resumed run continues with this client (until --idle-timeout) */
                LOG(&cl->link, "the server says: %s; waiting for it to resume (dpfl serve --resume)", m.text);
                break;
            }
            zmq_msg_close(&msg);
            if (m.code) return dpfl_fail(err, DPFL_EIO, "dpfl join: %s", m.text);
            /* the rounds released after this client's last one still charged its records (rPDP-FL) */
            if (cl->own.node && (int32_t)m.round > cl->own.replayed && cl->own.node->acct.rpdp.on &&
                ((st = net_client_rpdp_catch_up(&cl->own, (int32_t)m.round, err)) ||
                 (st = net_client_state_save(&cl->own, err))))
                return st;
            INFO(&cl->link, "the server says bye: %s", m.text);
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
    if (cl->link.sock) zmq_socket_monitor(cl->link.sock, NULL, 0);
    if (cl->link.mon) zmq_close(cl->link.mon);
    if (cl->link.sock) zmq_close(cl->link.sock);
    if (cl->link.zctx) zmq_ctx_term(cl->link.zctx);
    if (cl->own.node) {
        fl_node_free(cl->own.node);
        free(cl->own.node);
    }
    dpfl_free(cl->update);
    dpfl_free(cl->dd.enc);
    dpfl_secagg_client_free(cl->dd.sa);
    free(cl->own.last_frame);
    sodium_memzero(cl->link.sk, sizeof cl->link.sk);
}

/* --data PATH: the config with entry k of its data.dataset list replaced by PATH (only a list of plain files whose
 * row counts data.source_rows gives: then entry k is source k, and the others need not be here). */
static dpfl_status own_file(const dpfl_config *cfg, int32_t k, const char *path, dpfl_config *out, dpfl_error *err)
{
    const dpfl_data_config *d = &cfg->data;
    const int files = d->kind == DPFL_DATASET_CSV || d->kind == DPFL_DATASET_IDX || d->kind == DPFL_DATASET_NPY;
    if (!files || !d->source_rows.n || d->files.patterns)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: needs data.dataset = csv:FILE, FILE, ... or idx:FOLDER, "
                                           "FOLDER, ... (one per site, no pattern) with data.source_rows; this config "
                                           "has '%s'", d->dataset);
    if (strchr(path, ',') || !*path)
        return dpfl_fail(err, DPFL_EINVAL, "dpfl join --data: '%s' is not one file path", path);
    *out = *cfg;
    return dpfl_config_replace_dataset_file(out, k, path, "dpfl join --data", err);
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
    cl->own.k = cl->link.k = o->client;
    cl->own.state_dir = o->state_dir;
    cl->link.server = o->server;
    cl->link.quiet = o->quiet;
    cl->ddp = cfg->client_dp.enabled && cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP;
    cl->dd.enc_round = -1;
    snprintf(cl->link.who, sizeof cl->link.who, "join %d", o->client);
    if (o->name) snprintf(cl->link.name, sizeof cl->link.name, "%s", o->name);
    else snprintf(cl->link.name, sizeof cl->link.name, "client%d", o->client);
    net_config_digest(cfg, cl->own.config_digest); /* the run's config, whatever path --data gives */
    if (o->data && (st = own_file(cfg, o->client, o->data, &cl->own_cfg, err))) {
        free(cl);
        return st;
    }
    if (o->data) cl->cfg = &cl->own_cfg;
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.key", o->keys_dir, cl->link.name);
    if (!dpfl_net_key_name_ok(cl->link.name))
        st = dpfl_fail(err, DPFL_EINVAL, "dpfl join: bad key name '%s'", cl->link.name);
    if (!st) st = dpfl_net_key_read(path, cl->link.sk, err);
    snprintf(path, sizeof path, "%s/server.pub", o->keys_dir);
    if (!st) st = dpfl_net_key_read(path, cl->link.server_pk, err);
    if (!st) st = dpfl_file_make_dirs(o->state_dir, 0700, err);
    if (!st) {
        crypto_scalarmult_base(cl->link.pk, cl->link.sk);
        const int linger = 2000, ivl = 200, ivl_max = 2000;
        const int64_t maxmsg = (int64_t)(DPFL_WIRE_MAX_PAYLOAD + DPFL_WIRE_HEADER + DPFL_WIRE_TRAILER);
        char mon[64];
        snprintf(mon, sizeof mon, "inproc://dpfl-join-monitor-%d", o->client);
        if (!(cl->link.zctx = zmq_ctx_new()) || !(cl->link.sock = zmq_socket(cl->link.zctx, ZMQ_DEALER)) ||
            zmq_setsockopt(cl->link.sock, ZMQ_CURVE_SERVERKEY, cl->link.server_pk, 32) ||
            zmq_setsockopt(cl->link.sock, ZMQ_CURVE_PUBLICKEY, cl->link.pk, 32) ||
            zmq_setsockopt(cl->link.sock, ZMQ_CURVE_SECRETKEY, cl->link.sk, 32) ||
            zmq_setsockopt(cl->link.sock, ZMQ_LINGER, &linger, sizeof linger) ||
            zmq_setsockopt(cl->link.sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl) ||
            zmq_setsockopt(cl->link.sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max) ||
            zmq_setsockopt(cl->link.sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
            zmq_socket_monitor(cl->link.sock, mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                                  ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_DISCONNECTED) ||
            !(cl->link.mon = zmq_socket(cl->link.zctx, ZMQ_PAIR)) || zmq_connect(cl->link.mon, mon) ||
            zmq_connect(cl->link.sock, o->server))
            st = dpfl_fail(err, DPFL_EIO, "dpfl join: cannot connect to %s: %s", o->server, zmq_strerror(errno));
    }
    if (!st) {
        INFO(&cl->link, "client %d (key %s) connecting to %s", cl->own.k, cl->link.name, o->server);
        st = join_loop(cl, err);
        if (st && cl->link.sock) { /* tell the server, so that it need not wait for the deadline (if it can hear) */
            const int linger = 500;
            net_client_send_simple(&cl->link, DPFL_WIRE_BYE, 1,
                                   (uint32_t)(cl->own.last_round > 0 ? cl->own.last_round : 0), err->msg);
            zmq_setsockopt(cl->link.sock, ZMQ_LINGER, &linger, sizeof linger);
        }
    }
    if (!st && cl->own.node) {
        double eps = NAN;
        if (!net_client_own_epsilon(&cl->own, &eps, err) && cl->own.node->in.rdp_on && !o->quiet)
            LOG(&cl->link, "done: %lld rounds trained; record-level epsilon %s (delta %g) for this client's records%s",
                (long long)cl->own.rounds_trained, dpfl_num_up(eps, 6).s, cfg->record_dp.delta,
                cl->own.node->in.root.seeded ? " -- not against the server or the other clients, which hold the "
                                               "config and its fixed seed (reproducible mode: leave run.seed unset "
                                               "with real data)" : "");
    }
    client_close(cl);
    free(cl);
    return st;
}
#endif
