/* The deployment server's side of distributed DP (Bonawitz et al. 2017 on the wire; docs/secagg.md "On the wire"):
 * after ROUND, each step of secure aggregation -- keys, shares, masked inputs, then the unmasking -- sent to the
 * round's clients still in it and waited for round_timeout at most; a client that misses a step is out (a dropout,
 * unless its masked input is in).  The server learns only the sum. */
#include "net_internal.h"

#ifdef DPFL_HAVE_ZMQ
#include "core/bytes.h"
#include "server_internal.h"

#include <string.h>

static void send_secagg(srv_link *l, int32_t round, int32_t k, const uint8_t *data, size_t len)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_SECAGG;
    m.sender = DPFL_WIRE_SERVER;
    m.round = (uint32_t)round;
    m.data = data;
    m.data_len = len;
    if (net_srv_send_frame(l, &l->peers[k], &m))
        LOG("round %d: could not reach client %d with a secure-aggregation message", round, k);
}

static const char *step_name(int type)
{
    switch (type) {
    case DPFL_SECAGG_ADVERT: return "its keys";
    case DPFL_SECAGG_SHARES: return "its shares";
    case DPFL_SECAGG_MASKED: return "its masked input";
    case DPFL_SECAGG_UNMASK: return "its unmasking shares";
    default: return "?";
    }
}

/* A secure-aggregation message from client k: the step in progress's, from the id the client has in the round. */
void net_srv_take_secagg(srv_round *r, srv_link *l, int32_t k, const dpfl_wire_msg *m, const char *who)
{
    const peer *p = &l->peers[k];
    srv_seat *s = &r->seats[k];
    dpfl_secagg_server *sa = r->job->ddp->secagg;
    if (!r->ddp_step || (int32_t)m->round != r->round || s->in_round < 0 || !s->owes) {
        LOG("dropped a secure-aggregation message of round %u from client %d (%s): not expected now", m->round, k, who);
        net_srv_send_error_to(l, r->round, p->rid, p->rid_len, 2, "secure-aggregation message of round %u not expected",
                              m->round);
        return;
    }
    const uint32_t id = dpfl_bytes_load_u32(m->data + 8); /* the wire checked data_len >= 12 */
    dpfl_error e;
    dpfl_status st = DPFL_OK;
    if (m->data[5] != r->ddp_step || id != (uint32_t)s->in_round) {
        st = dpfl_fail(&e, DPFL_EFORMAT, "message type %u from id %u, the step waits for %s from id %d", m->data[5],
                       id, step_name(r->ddp_step), s->in_round);
    } else {
        switch (r->ddp_step) {
        case DPFL_SECAGG_ADVERT: st = dpfl_secagg_server_add_advert(sa, m->data, m->data_len, &e); break;
        case DPFL_SECAGG_SHARES: st = dpfl_secagg_server_add_shares(sa, m->data, m->data_len, &e); break;
        case DPFL_SECAGG_MASKED: st = dpfl_secagg_server_add_masked(sa, m->data, m->data_len, &e); break;
        default: st = dpfl_secagg_server_add_unmask(sa, m->data, m->data_len, &e); break;
        }
    }
    if (st) {
        LOG("round %d: client %d (%s): %s refused: %s", r->round, k, who, step_name(r->ddp_step), e.msg);
        net_srv_send_error_to(l, r->round, p->rid, p->rid_len, 2, "secure aggregation, round %d: %s", r->round, e.msg);
        net_srv_client_gone(r, k);
        return;
    }
    s->owes = 0;
    r->pending--;
    if (r->ddp_step == DPFL_SECAGG_UNMASK) r->answered++;
}


/* One step of secure aggregation: every client still in the round owes a message of type `step`; those that have
 * not sent it by the deadline are out (dropped, unless their masked input is in). */
static dpfl_status ddp_step(server *sv, int step, dpfl_error *err)
{
    srv_round *r = &sv->rd;
    r->ddp_step = step;
    dpfl_status st = net_srv_serve_until(sv, dpfl_now() + sv->o.round_timeout, net_srv_round_done, err);
    for (int32_t k = 0; k < r->K; k++)
        if (r->seats[k].in_round >= 0 && r->seats[k].owes) {
            DETAIL(sv, "round %d: client %d did not send %s within %g s: %s", r->round, k, step_name(step),
                sv->o.round_timeout, step == DPFL_SECAGG_UNMASK ? "not needed if enough others answer" : "a dropout");
            net_srv_client_gone(r, k);
        }
    return st;
}

/* The rest of the round's clients out: too few are left for secure aggregation to release anything. */
static void ddp_abandon(srv_round *r, const char *why)
{
    for (int32_t k = 0; k < r->K; k++) net_srv_client_gone(r, k);
    char d[200];
    LOG("round %d: %s (threshold %d): nothing is released this round%s", r->round, why, r->job->ddp->threshold,
        net_srv_dropped_text(r, d, sizeof d));
    net_srv_round_over(r, r->job->nsampled, 0);
    r->ddp_step = 0;
}

/* Distributed DP: ROUND, then secure aggregation's rounds 0-2 (keys, shares, masked inputs), each step waiting
 * round_timeout at most; masked inputs are added to the server's sum as they arrive.  The unmasking is
 * net_srv_secagg_finish, after the run's own bookkeeping (the aggregation mode's release). */
dpfl_status net_srv_run_ddp(server *sv, const dpfl_round_job *job, int32_t n, dpfl_error *err)
{
    srv_round *r = &sv->rd;
    srv_link *l = &sv->link;
    const int32_t t = job->ddp->threshold;
    if (!t) { /* fewer than two clients: nothing can be released, and nobody is asked to train */
        INFO(sv, "round %d: %d client(s) sampled, too few for secure aggregation: nothing is released", r->round, n);
        net_srv_unseat_all(r);
        return DPFL_OK;
    }
    net_srv_owe_all(r);
    r->ddp_step = DPFL_SECAGG_ADVERT;
    for (int32_t k = 0; k < r->K; k++) {
        if (r->seats[k].in_round < 0) continue;
        if (l->peers[k].hello && l->peers[k].rid_len) net_srv_send_round(sv, k);
        else DETAIL(sv, "round %d: client %d is not connected (it gets the round if it says hello in time)", r->round, k);
    }
    dpfl_status st = ddp_step(sv, DPFL_SECAGG_ADVERT, err);
    if (st) return st;
    if (net_srv_in_round_count(r) < t) {
        ddp_abandon(r, "too few clients advertised their keys");
        return DPFL_OK;
    }
    dpfl_secagg_msg msg = {0};
    dpfl_error e;
    if (dpfl_secagg_server_keys(job->ddp->secagg, &msg, &e)) {
        ddp_abandon(r, e.msg);
        return DPFL_OK;
    }
    net_srv_owe_all(r);
    for (int32_t k = 0; k < r->K; k++)
        if (r->seats[k].in_round >= 0) send_secagg(l, r->round, k, msg.data, msg.len);
    dpfl_secagg_msg_free(&msg);
    if ((st = ddp_step(sv, DPFL_SECAGG_SHARES, err))) return st;
    if (net_srv_in_round_count(r) < t) {
        ddp_abandon(r, "too few clients shared their keys");
        return DPFL_OK;
    }
    net_srv_owe_all(r);
    for (int32_t k = 0; k < r->K; k++) {
        if (r->seats[k].in_round < 0) continue;
        if (dpfl_secagg_server_shares_for(job->ddp->secagg, (uint32_t)r->seats[k].in_round, &msg, &e)) {
            ddp_abandon(r, e.msg);
            return DPFL_OK;
        }
        send_secagg(l, r->round, k, msg.data, msg.len);
        dpfl_secagg_msg_free(&msg);
    }
    if ((st = ddp_step(sv, DPFL_SECAGG_MASKED, err))) return st;
    r->ddp_step = 0;
    if (net_srv_in_round_count(r) < t) { /* no unmasking follows (net_srv_secagg_finish is not called): the round ends here */
        char d[200];
        LOG("round %d: %d masked inputs of %d clients sampled (threshold %d): nothing is released this round%s",
            r->round, net_srv_in_round_count(r), n, t, net_srv_dropped_text(r, d, sizeof d));
        net_srv_round_over(r, job->nsampled, 0);
    } else {
        DETAIL(sv, "round %d: %d masked inputs of %d clients sampled", r->round, net_srv_in_round_count(r), n);
    }
    return DPFL_OK;
}

dpfl_status net_srv_secagg_finish(const dpfl_transport *t, const dpfl_round_job *job, const uint8_t *req, size_t len,
                                 int32_t arrived, uint32_t *sum, int *released, dpfl_error *err)
{
    server *sv = t->ctx;
    srv_round *r = &sv->rd;
    const int32_t threshold = job->ddp->threshold;
    *released = 0;
    const int32_t survivors = net_srv_in_round_count(r);
    net_srv_owe_all(r);
    r->answered = 0;
    for (int32_t k = 0; k < r->K; k++)
        if (r->seats[k].in_round >= 0) send_secagg(&sv->link, r->round, k, req, len);
    dpfl_status st = ddp_step(sv, DPFL_SECAGG_UNMASK, err);
    r->ddp_step = 0;
    if (!st) {
        uint32_t summed = 0;
        dpfl_error e;
        char d[200];
        if (r->answered < threshold)
            LOG("round %d: %d of %d clients answered the unmasking (threshold %d): nothing is released this round%s",
                r->round, r->answered, survivors, threshold, net_srv_dropped_text(r, d, sizeof d));
        else if (dpfl_secagg_server_finish(job->ddp->secagg, sum, &summed, &e))
            LOG("round %d: the unmasking failed (%s): nothing is released this round%s", r->round, e.msg,
                net_srv_dropped_text(r, d, sizeof d));
        else if ((int32_t)summed != arrived)
            LOG("round %d: %u inputs summed, %d arrived: nothing is released this round%s", r->round, summed, arrived,
                net_srv_dropped_text(r, d, sizeof d));
        else {
            *released = 1;
            INFO(sv, "round %d: %d clients sampled, the sum of %u masked inputs unmasked (%d answers)%s", r->round,
                 job->nsampled, summed, r->answered, net_srv_dropped_text(r, d, sizeof d));
        }
        net_srv_round_over(r, job->nsampled, *released ? (int32_t)summed : 0);
    }
    net_srv_unseat_all(r);
    r->round = 0;
    return st;
}
#endif
