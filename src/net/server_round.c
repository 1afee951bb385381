/* The deployment server's round in progress (a FedAvg round, McMahan et al. 2017, carried over the network): which
 * sampled clients take part and still owe it a message, the updates as they arrive (each handed to the server's
 * exact sum at once), the dropouts for the round's log line, and the rounds in a row that received nothing
 * (--max-empty-rounds).  Nothing here sends or receives but the ERROR that refuses an update. */
#include "net_internal.h"

#ifdef DPFL_HAVE_ZMQ
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpfl_status net_srv_round_init(srv_round *r, int32_t K, size_t P, dpfl_error *err)
{
    r->K = K;
    r->P = P;
    if (!(r->ubuf = dpfl_alloc(P * sizeof *r->ubuf, err))) return DPFL_ENOMEM;
    if (!(r->seats = calloc((size_t)K, sizeof *r->seats))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    for (int32_t k = 0; k < K; k++) r->seats[k].in_round = -1;
    return DPFL_OK;
}

void net_srv_round_free(srv_round *r)
{
    free(r->seats);
    dpfl_free(r->ubuf);
}

void net_srv_unseat_all(srv_round *r)
{
    for (int32_t k = 0; k < r->K; k++) r->seats[k].in_round = -1, r->seats[k].owes = 0;
}

int32_t net_srv_round_begin(srv_round *r, dpfl_round_job *job)
{
    r->job = job;
    r->round = job->round;
    r->updates = r->ngone = 0;
    r->gone[0] = 0;
    r->arrive_st = DPFL_OK;
    dpfl_wire_model_digest(job->global, r->P, r->model_digest);
    r->pending = 0;
    for (int32_t i = job->start; i < job->start + job->count; i++) {
        if (job->reports[i].dropped) continue; /* client_dp.dropout: the simulation's dropout, drawn by the server */
        r->seats[job->sampled[i]].in_round = i;
        r->pending++;
    }
    return r->pending;
}

void net_srv_round_msg(const srv_round *r, int32_t k, dpfl_wire_msg *m)
{
    const dpfl_round_job *job = r->job;
    memset(m, 0, sizeof *m);
    m->type = DPFL_WIRE_ROUND;
    m->sender = DPFL_WIRE_SERVER;
    m->round = (uint32_t)r->round;
    m->released = (uint32_t)job->released;
    m->lr = job->lr;
    m->update_clip = job->update_clip;
    m->record_z = job->record_z;
    dpfl_record_dp_rates_digest(dpfl_sim_record_dp(job->sim), k, m->rates_digest);
    memcpy(m->model_digest, r->model_digest, 32);
    if (job->ddp) { /* the round's public values of distributed DP */
        m->cohort = (uint32_t)job->nsampled;
        m->index = (uint32_t)r->seats[k].in_round;
        m->threshold = (uint32_t)job->ddp->threshold;
        m->client_z = job->ddp->client_z;
        memcpy(m->ddp_seed, job->ddp->seed, 32);
    }
    m->nparam = r->P;
    m->fvec = job->global;
    m->ncontrol = job->control ? r->P : 0; /* fl.scaffold: the server's c, which the client's steps use */
    m->fcvec = job->control;
}

/* The client sent its update of the round in progress: decoded into the one update buffer and handed to the
 * server's sum at once (job->arrive: exact and order-independent), so the server holds O(model), not a slot per
 * sampled client. */
int net_srv_take_update(srv_round *r, srv_link *l, int32_t k, const dpfl_wire_msg *m, const char *who)
{
    const peer *p = &l->peers[k];
    srv_seat *s = &r->seats[k];
    if (s->in_round < 0 || (int32_t)m->round != r->round) {
        LOG("dropped an update of round %u from client %d (%s): %s", m->round, k, who,
            r->round ? "it owes this round nothing (a late or repeated answer)" : "no round is in progress");
        if (r->round)
            net_srv_send_error_to(l, r->round, p->rid, p->rid_len, 2,
                                  "update of round %u not expected (round %d in progress)", m->round, r->round);
        else
            net_srv_send_error_to(l, r->round, p->rid, p->rid_len, 2,
                                  "update of round %u not expected (no round in progress)", m->round);
        return 0;
    }
    if (m->nparam != r->P || memcmp(m->model_digest, r->model_digest, 32)) {
        LOG("dropped an update of round %u from client %d (%s): %s", m->round, k, who,
            m->nparam != r->P ? "wrong number of parameters" : "trained from another model than this round's");
        net_srv_send_error_to(l, r->round, p->rid, p->rid_len, 2, "update does not match round %d (%s)", r->round,
                              m->nparam != r->P ? "parameters" : "model digest");
        return 0;
    }
    const int32_t i = s->in_round;
    dpfl_client_report *rep = &r->job->reports[i];
    float *slot = r->ubuf;
    dpfl_wire_floats(m, slot);
    rep->steps = m->steps;
    rep->examples = m->examples;
    rep->loss_sum = m->loss_sum;
    rep->clipped = m->clipped;
    if (r->job->client_level) rep->norm = dpfl_vec_norm2(slot, r->P); /* the server's own view, not the client's word */
    if (!r->arrive_st) r->arrive_st = r->job->arrive(r->job, i, slot, &r->arrive_err);
    s->in_round = -1;
    r->pending--;
    r->updates++;
    return 1;
}

/* A client leaves the round without an update (error, bye, the deadline).  With distributed DP one whose masked
 * input was added stays in the round's sum (the others' shares unmask it); it only stops being waited for. */
void net_srv_client_gone(srv_round *r, int32_t k)
{
    srv_seat *s = &r->seats[k];
    if (s->in_round < 0) return;
    if (r->job->ddp) {
        if (s->owes) s->owes = 0, r->pending--;
        if (r->ddp_step == DPFL_SECAGG_UNMASK) return;
    } else {
        r->pending--;
    }
    r->job->reports[s->in_round].dropped = 1;
    s->in_round = -1;
    const size_t len = strlen(r->gone);
    if (len + 16 < sizeof r->gone) snprintf(r->gone + len, sizeof r->gone - len, "%s%d", r->ngone ? ", " : " ", k);
    else if (len + 5 < sizeof r->gone && !strstr(r->gone, "...")) strcat(r->gone, ", ...");
    r->ngone++;
}

/* The round is over: arrived of expected updates (or masked inputs summed); counts the rounds in a row that
 * expected some and received none. */
void net_srv_round_over(srv_round *r, int32_t expected, int32_t arrived)
{
    if (expected <= 0) return; /* nobody was asked: neither empty nor not */
    if (arrived > 0) {
        r->empty_streak = 0;
    } else if (r->empty_streak++ == 0) {
        r->empty_first = r->round;
    }
}

/* "; dropped: clients 2, 5" (or nothing) for the round's line */
const char *net_srv_dropped_text(const srv_round *r, char *buf, size_t n)
{
    if (!r->ngone) return "";
    snprintf(buf, n, "; dropped (%d): client%s%s", r->ngone, r->ngone > 1 ? "s" : "", r->gone);
    return buf;
}

int32_t net_srv_in_round_count(const srv_round *r)
{
    int32_t n = 0;
    for (int32_t k = 0; k < r->K; k++) n += r->seats[k].in_round >= 0;
    return n;
}

void net_srv_owe_all(srv_round *r)
{
    r->pending = 0;
    for (int32_t k = 0; k < r->K; k++)
        if (r->seats[k].in_round >= 0) r->seats[k].owes = 1, r->pending++;
}
#endif
