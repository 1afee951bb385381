/* A deployed client's distributed-DP rounds (dpfl join with client_dp.mechanism = ddp): it trains and encodes its
 * update as the simulation does (clip, rotate, round, Skellam noise, wrap: fl_ddp_client), then runs the secure
 * aggregation conversation the server leads (Bell et al. 2020: keys, shares, masked input, unmasking shares); the
 * round is charged and client.bin saved before the masked input leaves, and a round's masked input goes at most
 * once. */
#ifdef DPFL_HAVE_ZMQ
#include "client_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void send_secagg(client_link *l, uint32_t round, const dpfl_secagg_msg *sm)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_SECAGG;
    m.sender = (uint32_t)l->k;
    m.round = round;
    m.data = sm->data;
    m.data_len = sm->len;
    net_client_send(l, &m);
}

/* Distributed DP: train and encode (clip, rotate, round, Skellam noise, wrap: the simulation's fl_ddp_client) and
 * advertise this round's secure-aggregation keys; the rest of the protocol follows the server's messages
 * (on_secagg).  The encoded update is kept for the round and model: a protocol the server restarts before this
 * client sent its masked input reuses it (nothing of it has left). */
dpfl_status net_client_ddp_round(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    fl_node *n = cl->own.node;
    dpfl_sim *s = n->in.sim;
    char why[600];
    if (m->cohort == 0) {
        net_client_refuse(&cl->link, m->round,
                          "the round carries no distributed-DP values (this client runs client_dp.mechanism = ddp)");
        return DPFL_OK;
    }
    if ((int32_t)m->round == cl->own.last_round) { /* a resumed server, or a replay */
        net_client_refuse(&cl->link, m->round, "this client has sent its masked input of this round already: a second "
                                               "secure aggregation of it could reveal it by difference");
        return DPFL_OK;
    }
    dpfl_error e;
    if (m->update_clip != n->in.cfg->client_dp.clip) {
        snprintf(why, sizeof why, "update clip %.17g, this client's is %.17g", m->update_clip, n->in.cfg->client_dp.clip);
        net_client_refuse(&cl->link, m->round, why);
        return DPFL_OK;
    }
    dpfl_server_set_update_clip(n->in.server, m->update_clip);
    if (dpfl_server_set_noise(n->in.server, (int32_t)m->round, dpfl_round_client_noise(n->in.cfg, (int32_t)m->round,
                                                                                         n->acct.rs.client_z), &e) ||
        dpfl_sim_ddp_client_setup(s, (int32_t)m->round, (int32_t)m->cohort, (int32_t)m->threshold, m->ddp_seed, &e)) {
        net_client_refuse(&cl->link, m->round, e.msg);
        return DPFL_OK;
    }
    const dpfl_ddp_plan *plan = dpfl_server_ddp_plan(n->in.server); /* set: the set-up above checked it */
    if (plan->z != m->client_z) {
        snprintf(why, sizeof why, "client-level noise multiplier %.17g, this client's is %.17g", m->client_z,
                 plan->z);
        net_client_refuse(&cl->link, m->round, why);
        return DPFL_OK;
    }
    if (!cl->dd.enc && !(cl->dd.enc = dpfl_alloc(plan->d * sizeof(uint32_t), err))) return DPFL_ENOMEM;
    if (cl->dd.enc_round != (int32_t)m->round || memcmp(cl->dd.enc_digest, m->model_digest, 32)) {
        dpfl_client_report res;
        double norm;
        dpfl_status st = dpfl_sim_client_round(s, (int32_t)m->round, m->update_clip, cl->own.k, cl->update, &res, err);
        if (st) return st;
        if (dpfl_sim_ddp_client_encode(s, cl->own.k, cl->update, cl->dd.enc, &norm, &e)) {
            net_client_refuse(&cl->link, m->round, e.msg);
            return DPFL_OK;
        }
        cl->dd.enc_round = (int32_t)m->round;
        memcpy(cl->dd.enc_digest, m->model_digest, 32);
    }
    dpfl_secagg_client_free(cl->dd.sa);
    cl->dd.sa = NULL;
    const dpfl_secagg_params sp = {m->cohort, m->threshold, (uint32_t)plan->bits, plan->d};
    uint8_t seed[32];
    if (n->in.root.seeded) dpfl_sim_secagg_seed(&n->in.root, (int32_t)m->round, cl->own.k, seed);
    dpfl_secagg_msg adv = {0};
    if (dpfl_secagg_client_create(&sp, m->index, n->in.root.seeded ? seed : NULL, &cl->dd.sa, &e) ||
        dpfl_secagg_client_advertise(cl->dd.sa, &adv, &e)) {
        net_client_refuse(&cl->link, m->round, e.msg);
        dpfl_secagg_client_free(cl->dd.sa);
        cl->dd.sa = NULL;
        return DPFL_OK;
    }
    cl->dd.sa_round = (int32_t)m->round;
    send_secagg(&cl->link, m->round, &adv);
    dpfl_secagg_msg_free(&adv);
    INFO(&cl->link, "round %u: trained, encoded; keys advertised (secure-aggregation id %u of %u, threshold %u)", m->round,
         m->index, m->cohort, m->threshold);
    return DPFL_OK;
}

/* The server's secure-aggregation messages of the round in progress: keys -> shares, shares for this client ->
 * masked input (charged and saved first), unmasking request -> unmasking shares. */
dpfl_status net_client_on_secagg(client *cl, const dpfl_wire_msg *m, dpfl_error *err)
{
    if (!cl->dd.sa || (int32_t)m->round != cl->dd.sa_round) {
        LOG(&cl->link, "dropped a secure-aggregation message of round %u: no protocol of that round here", m->round);
        return DPFL_OK;
    }
    dpfl_secagg_msg out = {0};
    dpfl_error e;
    dpfl_status st = DPFL_OK;
    const int type = m->data[5];
    switch (type) {
    case DPFL_SECAGG_KEYS: st = dpfl_secagg_client_share_keys(cl->dd.sa, m->data, m->data_len, &out, &e); break;
    case DPFL_SECAGG_SHARES_FOR:
        st = dpfl_secagg_client_masked_input(cl->dd.sa, m->data, m->data_len, cl->dd.enc, &out, &e);
        if (!st) {
            net_client_charge_own(&cl->own, (int32_t)m->round);
            cl->own.last_round = (int32_t)m->round; /* this round's input is out: never again */
            memcpy(cl->own.last_digest, cl->dd.enc_digest, 32);
            free(cl->own.last_frame);
            cl->own.last_frame = NULL;
            cl->own.last_len = 0;
            dpfl_status sst = net_client_state_save(&cl->own, err);
            if (sst) {
                dpfl_secagg_msg_free(&out);
                return sst;
            }
            net_client_pause(cl->o.delay);
        }
        break;
    case DPFL_SECAGG_UNMASK_REQ: st = dpfl_secagg_client_unmask(cl->dd.sa, m->data, m->data_len, &out, &e); break;
    default: st = dpfl_fail(&e, DPFL_EFORMAT, "unexpected secure-aggregation message type %d", type); break;
    }
    if (st) {
        net_client_refuse(&cl->link, m->round, e.msg);
        dpfl_secagg_client_free(cl->dd.sa);
        cl->dd.sa = NULL;
        return DPFL_OK;
    }
    send_secagg(&cl->link, m->round, &out);
    dpfl_secagg_msg_free(&out);
    if (type == DPFL_SECAGG_SHARES_FOR) {
        double eps = NAN;
        net_client_own_epsilon(&cl->own, &eps, NULL);
        if (cl->own.node->in.rdp_on) INFO(&cl->link, "round %u: masked input sent (%lld rounds trained, epsilon %.4g for its records)",
                                m->round, (long long)cl->own.rounds_trained, eps);
        else INFO(&cl->link, "round %u: masked input sent", m->round);
    }
    if (type == DPFL_SECAGG_UNMASK_REQ) { /* done: its secrets are wiped */
        dpfl_secagg_client_free(cl->dd.sa);
        cl->dd.sa = NULL;
    }
    return DPFL_OK;
}

#endif
