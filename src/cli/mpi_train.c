/* `mpirun -np R dpfl train CONFIG.ini`: the simulation's clients spread over R - 1 worker ranks, rank 0 the server.
 *
 * Rank 0 runs dpfl train's own run (dpfl_run_with_transport: sampling, dropouts, client-level DP, ledger,
 * checkpoints, outputs) with this file's transport: each round it broadcasts the round (number, update clip, the
 * sampled clients and who drops out) and the global model, and receives every surviving client's update and report
 * from the rank that holds it (client k on rank 1 + k mod (R - 1)), in client order.  A worker sets up the same
 * run's node without its files (fl_node_setup, run/node.h: the same data, model, noise and partition -- drawn from
 * the key rank 0 broadcasts) and trains its clients with the simulation's own local training
 * (dpfl_sim_client_round).  With a seed the model bytes and epsilons equal the single-process run's: every stream is
 * derived from the root key by (round, client, purpose) and the
 * server adds the updates in client order whatever the transport.
 *
 * Per-client state (fl.client_state = keep, PriFedSync's helper models, PrivateFL's input transforms) lives on the
 * worker that holds the client: the client -> rank assignment is static, so a client's state stays on one rank,
 * as a deployed client keeps its own (dpfl join).  Rank 0 keeps none and does not evaluate the clients' own models
 * (personal and local accuracy are absent from its metrics).  Helper models: rank 0 broadcasts w0 with the key
 * and, after each round's release, the released model, with which each worker syncs the clients it trained in it
 * (the simulation syncs exactly those; every update of a round reaches rank 0).  rPDP-FL budgets: each worker
 * replays the per-record levels' opt-outs and charges round by round from the `released` count in the round's
 * broadcast, as rank 0's run does (fl_rpdp_before_round, fl_rpdp_charge).  After each round the workers send
 * rank 0 the state of the clients they trained, so that its checkpoint holds every client's state as one process's
 * does; a resume sends each worker its clients' states back.  The rPDP-FL filter's per-record spend (Feldman and
 * Zrnic 2021) is charged where the records are trained, on their worker, and travels the same way: after each
 * round the spend of the records of each client trained in it, to rank 0 before its checkpoint; at the start (a
 * resume) each worker the spend of its own clients' records from that checkpoint, never another's.  A crash
 * between a worker's round and rank 0's checkpoint loses no charge: the round's updates reached rank 0's memory
 * only, which died with the job unwritten (the round's outputs -- checkpoint, metrics, model -- are written after
 * its spend is in), and the resume redoes the round from the checkpoint's spend, as one process redoes a round it
 * died in, charging it once for the one release; with a seed the redone round is the same bits.  (As for every
 * record-level charge under mpirun, rank 0 is the job's own server: the guarantee covers what the run writes.)  Distributed DP: secure aggregation over MPI messages,
 * rank 0 leading it with the run's own secure-aggregation server (ddp_rounds, mpi_secagg_finish; Bell et al. 2020):
 * rank 0 sees masked inputs only.  Every rank loads the whole dataset (each trains only its own clients).  Built when pkg-config finds ompi-c
 * (MPI=0 without). */
#include "dpfl/run.h"
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#ifndef DPFL_HAVE_MPI
int cli_mpi_train(const dpfl_config *cfg, const dpfl_run_options *opt)
{
    (void)cfg, (void)opt;
    return cli_error("mpirun: this dpfl was built without MPI: install openmpi-bin and libopenmpi-dev "
                     "(scripts/setup.sh does) and rebuild with make");
}
#else
#include "run/node.h"
#include "dpfl/transport.h"

#include <mpi.h>
#include <sodium.h>

typedef struct {
    int32_t round, n, stop;
    int32_t released; /* rounds released before this one (rPDP-FL: what the workers replay) */
    int32_t sync;     /* 1: no round: round `round` was released (the model follows with helper models); the workers
                         sync their helpers and send rank 0 the state of the clients they trained in it */
    int32_t unmask;   /* 1: no round: distributed DP's unmasking request of round `round` follows */
    int32_t ddp;      /* distributed DP: the round's public values below (threshold 0: nothing can be released) */
    int32_t threshold;
    double S, client_z;
    uint8_t seed[32]; /* the round's rotation seed */
} round_head;

typedef struct { /* a worker's answer for one client, besides its update */
    int32_t status;
    double loss_sum, norm;
    int64_t examples, steps, clipped;
    char msg[512];
} client_answer;

/* What the workers learn once, after the key: per-client state and, on a resume, the states rank 0's checkpoint
 * holds (nstates client ids follow, then each state goes to its worker). */
typedef struct {
    int64_t helper_p;     /* personalization = helper: the model's parameters (w0, then each released model, follow) */
    int64_t floats;       /* floats of one client's state (dpfl_clients_state_floats) */
    int32_t keeps, nstates;
    int32_t filter;       /* record_dp.budget_policy = filter: each worker's records' spend follows (TAG_SPENT) */
    /* the mechanism rank 0 runs and accounts: on a resume its checkpoint's, which a worker's own set-up (never a
     * resume) may not give -- a calibrated noise or an rPDP-FL plan follows fl.rounds, which a resume may change */
    double record_z;      /* the workers take it */
    uint8_t rates[32];    /* rPDP-FL: every client's rates and divisor (all_rates); a worker's must be the same (but
                             under the filter) */
    uint8_t config[32];   /* fl_config_digest: the same settings on every rank */
} start_msg;

static int nranks, rank, started;

enum { TAG_STATE_T = 30000, TAG_STATE = 30001, TAG_SPENT = 30002, TAG_ADVERT = 30010, TAG_SHARES = 30011, TAG_SHARES_FOR = 30012,
       TAG_MASKED = 30013, TAG_UNMASK = 30014 };

/* Variable-length messages (secure aggregation's): a send, a receive of whatever length came (malloc'd; NULL and
 * MPI_Abort when out of memory: the protocol cannot go on), a broadcast from rank 0. */
static void send_bytes(const void *p, size_t len, int dest, int tag)
{
    MPI_Send((void *)p, (int)len, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

static uint8_t *recv_bytes(int src, int tag, size_t *len)
{
    MPI_Status ms;
    int n;
    MPI_Probe(src, tag, MPI_COMM_WORLD, &ms);
    MPI_Get_count(&ms, MPI_BYTE, &n);
    uint8_t *b = malloc((size_t)n + 1);
    if (!b) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Recv(b, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *len = (size_t)n;
    return b;
}

static uint8_t *bcast_bytes(const uint8_t *data, size_t *len)
{
    uint64_t n = rank == 0 ? (uint64_t)*len : 0;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    uint8_t *b = malloc((size_t)n + 1);
    if (!b) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) memcpy(b, data, (size_t)n);
    MPI_Bcast(b, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    *len = (size_t)n;
    return b;
}

static start_msg sm;
static uint8_t run_config[32]; /* rank 0's fl_config_digest */

/* rPDP-FL: one digest of every client's records' rates and divisor (zeros without budgets). */
static void all_rates(const dpfl_record_dp *rd, int32_t clients, uint8_t out[32])
{
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, 32);
    for (int32_t k = 0; k < clients; k++) {
        uint8_t d[32];
        dpfl_record_dp_rates_digest(rd, k, d);
        crypto_generichash_update(&h, d, 32);
    }
    crypto_generichash_final(&h, out, 32);
}

static int owner(int32_t k) { return 1 + (int)(k % (nranks - 1)); }

/* The rPDP-FL filter: each worker gets the spend of its own clients' records (theirs alone: a record's spend is a
 * function of its data), from rank 0's checkpoint on a resume (zeros in a new run), in one message, client after
 * client in client order, in partition order within each. */
static void send_spent(const dpfl_record_dp *rd, int32_t clients)
{
    size_t cap = 0;
    for (int32_t k = 0; k < clients; k++) cap += (size_t)dpfl_record_dp_filter_spent(rd, k, NULL);
    double *buf = malloc((cap > 0 ? cap : 1) * sizeof *buf);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1); /* the workers wait for it */
    for (int r = 1; r < nranks; r++) {
        size_t len = 0;
        for (int32_t k = r - 1; k < clients; k += nranks - 1)
            len += (size_t)dpfl_record_dp_filter_spent(rd, k, buf + len);
        MPI_Send(buf, (int)len, MPI_DOUBLE, r, TAG_SPENT, MPI_COMM_WORLD);
    }
    free(buf);
}

/* A worker's side of send_spent: its clients' spend into its simulation (the first error kept in *st). */
static void recv_spent(dpfl_record_dp *rd, int32_t clients, dpfl_status *st, dpfl_error *err)
{
    MPI_Status ms;
    int n;
    MPI_Probe(0, TAG_SPENT, MPI_COMM_WORLD, &ms);
    MPI_Get_count(&ms, MPI_DOUBLE, &n);
    double *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Recv(buf, n, MPI_DOUBLE, 0, TAG_SPENT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    size_t off = 0;
    for (int32_t k = rank - 1; !*st && k < clients; k += nranks - 1) {
        const size_t m = (size_t)dpfl_record_dp_filter_spent(rd, k, NULL);
        if (off + m > (size_t)n) *st = dpfl_fail(err, DPFL_EINVAL, "rank 0 sent the filter's spend of %d records, "
                                                                     "this rank's clients hold more", n);
        else *st = dpfl_record_dp_set_filter_spent(rd, k, buf + off, err);
        off += m;
    }
    if (!*st && off != (size_t)n)
        *st = dpfl_fail(err, DPFL_EINVAL, "rank 0 sent the filter's spend of %d records, this rank's clients hold %zu",
                        n, off);
    free(buf);
}

static dpfl_status mpi_start(const dpfl_transport *t, const dpfl_transport_setup *setup, dpfl_error *err)
{
    (void)t, (void)err;
    uint8_t key[32];
    memcpy(key, setup->partition_key, 32);
    MPI_Bcast(key, 32, MPI_BYTE, 0, MPI_COMM_WORLD);
    sm.helper_p = setup->initial_model ? (int64_t)setup->nparam : 0;
    dpfl_clients *cl = dpfl_sim_clients(setup->sim);
    const dpfl_record_dp *rd = dpfl_sim_record_dp(setup->sim);
    sm.keeps = dpfl_clients_keep_state(cl);
    sm.floats = (int64_t)dpfl_clients_state_floats(cl);
    int32_t *ids = malloc((size_t)(setup->clients > 0 ? setup->clients : 1) * sizeof *ids);
    if (!ids) MPI_Abort(MPI_COMM_WORLD, 1); /* the workers wait for this message */
    sm.nstates = 0;
    sm.filter = 0;
    sm.record_z = dpfl_record_dp_accounting(rd).z;
    all_rates(rd, setup->clients, sm.rates);
    memcpy(sm.config, run_config, 32);
    for (int32_t k = 0; k < setup->clients; k++) sm.filter |= dpfl_record_dp_filter_spent(rd, k, NULL) > 0;
    for (int32_t k = 0; sm.keeps && k < setup->clients; k++) /* a resume: the states its checkpoint holds */
        if (dpfl_clients_state(cl, k, NULL) > 0) ids[sm.nstates++] = k;
    MPI_Bcast(&sm, sizeof sm, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (sm.helper_p) MPI_Bcast((void *)setup->initial_model, (int)sm.helper_p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(ids, sm.nstates, MPI_INT32_T, 0, MPI_COMM_WORLD);
    for (int32_t i = 0; i < sm.nstates; i++) { /* each to the worker that holds the client */
        const float *state;
        int64_t st = dpfl_clients_state(cl, ids[i], &state);
        MPI_Send(&st, 1, MPI_INT64_T, owner(ids[i]), TAG_STATE_T, MPI_COMM_WORLD);
        if (sm.floats) MPI_Send((void *)state, (int)sm.floats, MPI_FLOAT, owner(ids[i]), TAG_STATE, MPI_COMM_WORLD);
    }
    free(ids);
    if (sm.filter) send_spent(rd, setup->clients);
    started = 1;
    return DPFL_OK;
}

/* After the release, with per-client state: the released model to every worker (helper models), which syncs the
 * clients it trained this round; then each of those clients' state back to rank 0, in client order, so that its
 * checkpoint holds every client's state as one process's does (a resume sends them back, mpi_start). */
static void mpi_after_round(const dpfl_transport *t, const dpfl_round_job *job)
{
    dpfl_clients *cl = dpfl_sim_clients(job->sim);
    dpfl_record_dp *rd = dpfl_sim_record_dp(job->sim);
    (void)t;
    if (!sm.keeps && !sm.filter) return;
    round_head h = {.round = job->round, .sync = 1};
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (sm.helper_p) MPI_Bcast((void *)job->global, (int)sm.helper_p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    float *buf = sm.floats ? malloc((size_t)sm.floats * sizeof *buf) : NULL;
    if (sm.floats && !buf) MPI_Abort(MPI_COMM_WORLD, 1);
    int32_t most = 0; /* the filter: the largest record count of a client of the round */
    for (int32_t i = 0; sm.filter && i < job->nsampled; i++) {
        const int32_t m = dpfl_record_dp_filter_spent(rd, job->sampled[i], NULL);
        most = m > most ? m : most;
    }
    double *spent = sm.filter ? malloc((size_t)(most > 0 ? most : 1) * sizeof *spent) : NULL;
    if (sm.filter && !spent) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int32_t i = 0; i < job->nsampled; i++) {
        if (job->reports[i].dropped) continue;
        const int32_t k = job->sampled[i];
        dpfl_error e;
        /* the filter's spend of the client's records in this round, charged on its worker: rank 0's checkpoint
         * holds it, as one process's does (a resume sends it back, mpi_start) */
        const int32_t m = sm.filter ? dpfl_record_dp_filter_spent(rd, k, NULL) : 0;
        if (m > 0) {
            MPI_Recv(spent, m, MPI_DOUBLE, owner(k), TAG_SPENT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (dpfl_record_dp_set_filter_spent(rd, k, spent, &e)) {
                cli_error("rank %d: %s", owner(k), e.msg);
                MPI_Abort(MPI_COMM_WORLD, 1); /* the round is out on the workers: it cannot be unwound */
            }
        }
        if (!sm.keeps) continue;
        int64_t st;
        MPI_Recv(&st, 1, MPI_INT64_T, owner(k), TAG_STATE_T, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st <= 0) continue; /* no state (a client without records) */
        if (sm.floats) MPI_Recv(buf, (int)sm.floats, MPI_FLOAT, owner(k), TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (dpfl_clients_set_state(cl, k, st, buf, &e)) MPI_Abort(MPI_COMM_WORLD, 1); /* out of memory */
    }
    free(buf), free(spent);
}

static void mpi_finish(const dpfl_transport *t, int32_t released, dpfl_status st, const char *why)
{
    (void)t, (void)released, (void)st, (void)why;
    if (!started) { /* the run failed before the workers got their key: they are waiting for it */
        uint8_t key[32] = {0};
        MPI_Bcast(key, 32, MPI_BYTE, 0, MPI_COMM_WORLD);
        memset(&sm, 0, sizeof sm);
        MPI_Bcast(&sm, sizeof sm, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    round_head h = {.stop = 1};
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* Rank 0's side of a distributed-DP round (Bell et al. 2020, as dpfl serve leads it): each surviving client's
 * worker trains and encodes it and advertises its keys; rank 0's secure-aggregation server (job->ddp->secagg)
 * takes the adverts in client order, broadcasts the keys, takes the shares, then sends each client the shares
 * addressed to it and adds its masked input.  Rank 0 never sees an update, only masked inputs; the unmasking is
 * mpi_secagg_finish.  A worker's failure to train or encode stops the round before any key goes out. */
static dpfl_status ddp_rounds(dpfl_round_job *job, const int32_t *ids, const uint8_t *drop, dpfl_error *err)
{
    dpfl_secagg_server *sa = job->ddp->secagg;
    const int32_t n = job->count;
    if (!job->ddp->threshold) return DPFL_OK; /* too few clients sampled: nobody trains (as dpfl serve) */
    dpfl_status st = DPFL_OK;
    for (int32_t j = 0; j < n; j++) { /* trained, encoded, keys advertised (a dropout advertises too: as in one
                                        * process, client_dp.dropout drops a client after the keys, before its input) */
        client_answer a;
        MPI_Recv(&a, sizeof a, MPI_BYTE, owner(ids[j]), 2 * j, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        size_t len;
        uint8_t *m = recv_bytes(owner(ids[j]), TAG_ADVERT, &len);
        dpfl_client_report *r = &job->reports[j];
        if (!drop[j]) r->loss_sum = a.loss_sum, r->examples = a.examples, r->steps = a.steps, r->clipped = a.clipped;
        if (a.status && !st) st = dpfl_fail(err, (dpfl_status)a.status, "rank %d, client %d: %s", owner(ids[j]), ids[j], a.msg);
        if (!a.status && !st) st = dpfl_secagg_server_add_advert(sa, m, len, err);
        free(m);
    }
    dpfl_secagg_msg keys = {0};
    if (!st) st = dpfl_secagg_server_keys(sa, &keys, err);
    size_t klen = st ? 0 : keys.len; /* an empty message: the round stops here */
    free(bcast_bytes(keys.data, &klen));
    dpfl_secagg_msg_free(&keys);
    if (st) return st;
    for (int32_t j = 0; j < n && !st; j++) { /* the shares */
        size_t len;
        uint8_t *m = recv_bytes(owner(ids[j]), TAG_SHARES, &len);
        st = dpfl_secagg_server_add_shares(sa, m, len, err);
        free(m);
    }
    for (int32_t j = 0; j < n; j++) { /* shares for each client, its masked input back (one client at a time) */
        dpfl_secagg_msg sf = {0};
        if (!st) st = dpfl_secagg_server_shares_for(sa, (uint32_t)j, &sf, err);
        if (drop[j]) { /* the dropout sends no input */
            dpfl_secagg_msg_free(&sf);
            continue;
        }
        send_bytes(sf.data, st ? 0 : sf.len, owner(ids[j]), TAG_SHARES_FOR);
        dpfl_secagg_msg_free(&sf);
        size_t len;
        uint8_t *m = recv_bytes(owner(ids[j]), TAG_MASKED, &len);
        if (!st && len == 0) st = dpfl_fail(err, DPFL_EINVAL, "rank %d, client %d: no masked input", owner(ids[j]), ids[j]);
        if (!st) st = dpfl_secagg_server_add_masked(sa, m, len, err);
        free(m);
    }
    if (st) MPI_Abort(MPI_COMM_WORLD, 1); /* the workers' protocol state cannot be unwound past the keys */
    return DPFL_OK;
}

/* The unmasking of a distributed-DP round: the request to every worker, whose clients answer in client order. */
static dpfl_status mpi_secagg_finish(const dpfl_transport *t, const dpfl_round_job *job, const uint8_t *req,
                                     size_t len, int32_t arrived, uint32_t *sum, int *released, dpfl_error *err)
{
    (void)t;
    round_head h = {.round = job->round, .unmask = 1};
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    size_t rl = len;
    free(bcast_bytes(req, &rl));
    dpfl_status st = DPFL_OK;
    for (int32_t j = 0; j < job->nsampled; j++) {
        if (job->reports[j].dropped) continue;
        size_t ml;
        uint8_t *m = recv_bytes(owner(job->sampled[j]), TAG_UNMASK, &ml);
        if (!st) st = dpfl_secagg_server_add_unmask(job->ddp->secagg, m, ml, err);
        free(m);
    }
    uint32_t summed = 0;
    if (!st) st = dpfl_secagg_server_finish(job->ddp->secagg, sum, &summed, err);
    *released = !st && (int32_t)summed == arrived;
    return st;
}

static dpfl_status mpi_run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    (void)t;
    const size_t P = job->nparam;
    const int32_t start = job->start, n = job->count;
    round_head h = {.round = job->round, .n = n, .released = job->released, .S = job->update_clip};
    if (job->ddp) {
        h.ddp = 1;
        h.threshold = job->ddp->threshold;
        h.client_z = job->ddp->client_z;
        memcpy(h.seed, job->ddp->seed, 32);
    }
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    uint8_t *drop = malloc((size_t)(n > 0 ? n : 1));
    if (!ids || !drop) {
        free(ids), free(drop);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (MPI round of %d clients)", n);
    }
    for (int32_t j = 0; j < n; j++) ids[j] = job->sampled[start + j], drop[j] = (uint8_t)job->reports[start + j].dropped;
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(ids, n, MPI_INT32_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(drop, n, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast((void *)job->global, (int)P, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (job->control) MPI_Bcast((void *)job->control, (int)P, MPI_FLOAT, 0, MPI_COMM_WORLD); /* fl.scaffold's c */
    dpfl_status st = job->ddp ? ddp_rounds(job, ids, drop, err) : DPFL_OK;
    /* each update into one buffer and on to the server's exact, order-independent sum (job->arrive): rank 0 holds
     * O(model) for the round's updates, not one per sampled client */
    float *u = job->ddp ? NULL : dpfl_alloc(P * sizeof *u, err);
    if (!job->ddp && !u) MPI_Abort(MPI_COMM_WORLD, 1); /* the workers are sending: the round cannot be unwound */
    for (int32_t j = 0; !job->ddp && j < n; j++) {
        if (drop[j]) continue;
        client_answer a;
        MPI_Recv(&a, sizeof a, MPI_BYTE, owner(ids[j]), 2 * j, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(u, (int)P, MPI_FLOAT, owner(ids[j]), 2 * j + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        dpfl_client_report *r = &job->reports[start + j];
        r->loss_sum = a.loss_sum, r->norm = a.norm, r->examples = a.examples, r->steps = a.steps;
        r->clipped = a.clipped;
        if (a.status && !st) st = dpfl_fail(err, (dpfl_status)a.status, "rank %d, client %d: %s", owner(ids[j]), ids[j], a.msg);
        if (!st) st = job->arrive(job, start + j, u, err);
    }
    dpfl_free(u);
    free(ids), free(drop);
    return st;
}

/* rank 0 trains no client: files listed with data.source_rows may be absent there (each worker checks its own) */
static dpfl_transport mpi_transport = {.run_clients = mpi_run_clients, .whole_round = 1, .start = mpi_start,
                                       .finish = mpi_finish, .clients_hold_data = 1, .after_round = mpi_after_round,
                                       .secagg_finish = mpi_secagg_finish};

/* rPDP-FL on a worker: the levels' opt-outs and charges of the rounds released before `round`, then the opt-outs
 * of `round` itself, as rank 0's run makes them (run_round.c): the same per-record rates for its clients. */
static dpfl_status rpdp_replay(fl_node *n, int32_t *replayed, int32_t released, dpfl_error *err)
{
    int changed;
    dpfl_status st = DPFL_OK;
    for (; !st && *replayed < released; ++*replayed)
        if (!(st = fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, err))) fl_rpdp_charge(&n->acct.rpdp.levels);
    return st ? st : fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, err);
}

/* A worker's distributed-DP round: its clients' secure-aggregation clients and encoded updates, per sampled index. */
typedef struct {
    dpfl_secagg_client **sa;
    uint32_t **enc;    /* NULL for a dropout: it sends no input */
    int32_t n, cap;
} worker_ddp;

static void worker_ddp_reset(worker_ddp *w)
{
    for (int32_t j = 0; j < w->n; j++) {
        dpfl_secagg_client_free(w->sa[j]);
        free(w->enc[j]);
        w->sa[j] = NULL, w->enc[j] = NULL;
    }
    w->n = 0;
}

/* Distributed DP after the advertisements: rank 0's keys -> the shares of this rank's clients; then the shares
 * addressed to each client that did not drop out -> its masked input, to rank 0. */
static void ddp_share_and_mask(const round_head *h, const int32_t *ids, const uint8_t *drop, worker_ddp *w)
{
    size_t klen = 0;
    uint8_t *keys = bcast_bytes(NULL, &klen);
    for (int32_t j = 0; klen && j < h->n; j++) { /* the shares of this rank's clients */
        if (owner(ids[j]) != rank) continue;
        dpfl_secagg_msg out = {0};
        dpfl_error ce;
        if (dpfl_secagg_client_share_keys(w->sa[j], keys, klen, &out, &ce)) {
            cli_error("rank %d, client %d: %s", rank, ids[j], ce.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        send_bytes(out.data, out.len, 0, TAG_SHARES);
        dpfl_secagg_msg_free(&out);
    }
    free(keys);
    for (int32_t j = 0; klen && j < h->n; j++) { /* the shares addressed to each, its masked input back */
        if (drop[j] || owner(ids[j]) != rank) continue;
        size_t len;
        uint8_t *sf = recv_bytes(0, TAG_SHARES_FOR, &len);
        dpfl_secagg_msg out = {0};
        dpfl_error ce;
        if (len && dpfl_secagg_client_masked_input(w->sa[j], sf, len, w->enc[j], &out, &ce))
            cli_error("rank %d, client %d: %s", rank, ids[j], ce.msg), out.len = 0; /* rank 0 stops the job */
        send_bytes(out.data, out.len, 0, TAG_MASKED);
        dpfl_secagg_msg_free(&out);
        free(sf);
    }
}

/* This rank's clients of a distributed-DP round, as a deployed client runs it (src/net/client_secagg.c): train,
 * encode (clip, rotate, round, Skellam noise, wrap) and advertise keys; then rank 0's keys -> shares, the shares
 * addressed to each client -> its masked input.  The unmasking follows in the round loop (round_head.unmask). */
static void worker_ddp_round(fl_node *n, const round_head *h, const int32_t *ids, const uint8_t *drop, float *u,
                             int32_t *mine, int32_t *nmine, dpfl_status rst, const dpfl_error *re, worker_ddp *w)
{
    dpfl_sim *s = n->in.sim;
    worker_ddp_reset(w);
    if (!h->threshold) return; /* fewer than 2 clients sampled: nothing can be released, and nobody trains (rank 0's
                                * round marked every client of it dropped out, as in one process and dpfl serve) */
    if (h->n > w->cap) {
        dpfl_secagg_client **ns = realloc(w->sa, (size_t)h->n * sizeof *ns);
        if (ns) w->sa = ns;
        uint32_t **ne = ns ? realloc(w->enc, (size_t)h->n * sizeof *ne) : NULL;
        if (!ne) MPI_Abort(MPI_COMM_WORLD, 1);
        w->enc = ne;
        w->cap = h->n;
    }
    w->n = h->n;
    for (int32_t j = 0; j < h->n; j++) w->sa[j] = NULL, w->enc[j] = NULL;
    dpfl_error e = rst ? *re : (dpfl_error){{0}};
    dpfl_status st = rst;
    int any = 0;
    for (int32_t j = 0; j < h->n; j++) any |= owner(ids[j]) == rank;
    const dpfl_ddp_plan *plan = NULL;
    if (any && !st) { /* the round's public values, checked against this rank's own plan */
        dpfl_server_set_update_clip(n->in.server, h->S);
        st = dpfl_server_set_noise(n->in.server, h->round, dpfl_round_client_noise(n->in.cfg, h->round,
                                                                                    n->acct.rs.client_z), &e);
        if (!st) st = dpfl_sim_ddp_client_setup(s, h->round, h->n, h->threshold, h->seed, &e);
        if (!st && (plan = dpfl_server_ddp_plan(n->in.server))->z != h->client_z)
            st = dpfl_fail(&e, DPFL_EINVAL, "client-level noise multiplier %.17g, rank %d's plan has %.17g", h->client_z,
                           rank, plan->z);
    }
    for (int32_t j = 0; j < h->n; j++) { /* a dropout only advertises its keys (and shares them, below) */
        if (owner(ids[j]) != rank) continue;
        dpfl_client_report res;
        memset(&res, 0, sizeof res);
        client_answer a;
        memset(&a, 0, sizeof a);
        dpfl_error ce = e;
        dpfl_secagg_msg adv = {0};
        dpfl_status cst = st;
        if (!cst && !drop[j]) cst = dpfl_sim_client_round(s, h->round, h->S, ids[j], u, &res, &ce);
        if (!cst && !drop[j] && !(w->enc[j] = malloc(plan->d * sizeof **w->enc)))
            cst = dpfl_fail(&ce, DPFL_ENOMEM, "out of memory (an encoded update)");
        double norm;
        if (!cst && !drop[j]) cst = dpfl_sim_ddp_client_encode(s, ids[j], u, w->enc[j], &norm, &ce);
        if (!cst) {
            const dpfl_secagg_params sp = {(uint32_t)h->n, (uint32_t)h->threshold, (uint32_t)plan->bits, plan->d};
            uint8_t seed[32];
            if (n->in.root.seeded) dpfl_sim_secagg_seed(&n->in.root, h->round, ids[j], seed);
            cst = dpfl_secagg_client_create(&sp, (uint32_t)j, n->in.root.seeded ? seed : NULL, &w->sa[j], &ce);
        }
        if (!cst) cst = dpfl_secagg_client_advertise(w->sa[j], &adv, &ce);
        a.status = cst;
        if (cst) memcpy(a.msg, ce.msg, sizeof a.msg);
        else if (!drop[j]) mine[(*nmine)++] = ids[j];
        /* the server of distributed DP never sees an update's norm, nor, with record-level DP, the statistics no
         * epsilon covers (as a deployed client sends them) */
        a.steps = res.steps;
        if (!n->in.rdp_on) a.loss_sum = res.loss_sum, a.examples = res.examples, a.clipped = res.clipped;
        MPI_Send(&a, sizeof a, MPI_BYTE, 0, 2 * j, MPI_COMM_WORLD);
        send_bytes(adv.data, cst ? 0 : adv.len, 0, TAG_ADVERT);
        dpfl_secagg_msg_free(&adv);
    }
    ddp_share_and_mask(h, ids, drop, w);
}

/* The filter's spend of client k's records after a round it trained on this worker, to rank 0 (mpi_after_round). */
static void send_client_spent(const dpfl_record_dp *rd, int32_t k)
{
    const int32_t m = dpfl_record_dp_filter_spent(rd, k, NULL);
    if (m <= 0) return;
    double *buf = malloc((size_t)m * sizeof *buf);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1); /* rank 0 waits for it */
    dpfl_record_dp_filter_spent(rd, k, buf);
    MPI_Send(buf, m, MPI_DOUBLE, 0, TAG_SPENT, MPI_COMM_WORLD);
    free(buf);
}

/* The mechanism rank 0 runs, checked and taken: the same settings (config digest) and rank 0's record-level noise (a
 * resume keeps its checkpoint's, where this rank's set-up would calibrate for the resumed fl.rounds); then
 * same_rates: the rPDP-FL rates (a plan that follows fl.rounds cannot be taken over: refused). */
static dpfl_status take_mechanism(fl_node *n, const char *who, dpfl_error *err)
{
    if (memcmp(n->acct.rs.config_digest, sm.config, 32))
        return dpfl_fail(err, DPFL_EINVAL, "%s: its config differs from rank 0's in a key other than fl.rounds, "
                                           "run.threads, run.eval_every, fl.client_state_max_mb and data.data_dir "
                                           "(every rank must read the same config)", who);
    if (n->in.rdp_on) {
        n->acct.rs.record_z = sm.record_z;
        dpfl_record_dp_set_noise(n->in.record_dp, sm.record_z);
    }
    return DPFL_OK;
}

/* The same rPDP-FL rates as rank 0's.  Not under the filter: a record's rate drops to 0 where its spend reaches its
 * cap (on the worker that trains it), and what the filter reports is each record's cap, whatever the rates were
 * (as a deployed client's check skips them). */
static dpfl_status same_rates(const fl_node *n, const char *who, dpfl_error *err)
{
    if (sm.filter || (n->acct.rpdp.on && n->acct.rpdp.filter.on)) return DPFL_OK;
    uint8_t rates[32];
    all_rates(n->in.record_dp, n->in.part.clients, rates);
    if (memcmp(rates, sm.rates, 32))
        return dpfl_fail(err, DPFL_EINVAL, "%s: its rPDP-FL plan differs from rank 0's (a resume that changes "
                                           "fl.rounds plans again unless record_dp.budget_rounds is set: set it, or "
                                           "resume in one process)", who);
    return DPFL_OK;
}

/* A worker rank's set-up: the same run as rank 0's without files (its own clients' data must be here, other ranks'
 * need not), its mechanism checked against rank 0's; on a resume, its clients' states and the filter's spend from
 * rank 0 (received whatever failed here, so that the ranks' messages stay in step). */
static dpfl_status worker_setup(fl_node *n, const dpfl_config *cfg, const uint8_t key[32], const float *w0,
                                float *sbuf, const int32_t *sids, dpfl_error *err)
{
    const int64_t hp = sm.helper_p;
    dpfl_status st = fl_node_setup(n, cfg, key, err);
    char who[32];
    snprintf(who, sizeof who, "MPI rank %d", rank);
    if (!st) st = take_mechanism(n, who, err);
    for (int32_t k = 0; !st && k < n->in.part.clients; k++)
        if (owner(k) == rank) st = fl_node_data_here(n, k, who, err);
    const size_t P = st ? 0 : n->in.model.nparam;
    if (!st && hp && (size_t)hp != P) st = dpfl_fail(err, DPFL_EINVAL, "rank 0's model has %lld parameters, "
                                                     "this rank's %zu", (long long)hp, P);
    if (!st && hp) dpfl_clients_set_initial_model(n->in.clients, w0); /* every helper until its first sync */
    if (!st && sm.keeps && (int64_t)dpfl_clients_state_floats(n->in.clients) != sm.floats)
        st = dpfl_fail(err, DPFL_EINVAL, "rank 0 keeps %lld floats per client, this rank %zu", (long long)sm.floats,
                       dpfl_clients_state_floats(n->in.clients));
    for (int32_t i = 0; i < sm.nstates; i++) { /* a resume: the states of this rank's clients, from the checkpoint */
        if (owner(sids[i]) != rank) continue;
        int64_t t;
        MPI_Recv(&t, 1, MPI_INT64_T, 0, TAG_STATE_T, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (sm.floats) MPI_Recv(sbuf, (int)sm.floats, MPI_FLOAT, 0, TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!st) st = dpfl_clients_set_state(n->in.clients, sids[i], t, sbuf, err);
    }
    if (!st && sm.filter != (n->acct.rpdp.on && n->acct.rpdp.filter.on))
        st = dpfl_fail(err, DPFL_EINVAL, "rank 0 %s record_dp.budget_policy = filter, this rank %s",
                       sm.filter ? "runs" : "does not run", sm.filter ? "does not" : "does");
    if (sm.filter) /* a resume: the spend */
        recv_spent(st ? NULL : n->in.record_dp, st ? 0 : n->in.part.clients, &st, err);
    if (!st) st = same_rates(n, who, err);
    return st;
}

/* Distributed DP: this rank's clients answer the unmasking request, in client order; then their secrets are wiped. */
static void worker_unmask(worker_ddp *wd)
{
    size_t rl = 0;
    uint8_t *req = bcast_bytes(NULL, &rl);
    for (int32_t j = 0; j < wd->n; j++) {
        if (!wd->enc[j]) continue; /* not this rank's, or a dropout */
        dpfl_secagg_msg out = {0};
        dpfl_error ce;
        if (dpfl_secagg_client_unmask(wd->sa[j], req, rl, &out, &ce)) {
            cli_error("rank %d: unmasking: %s", rank, ce.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        send_bytes(out.data, out.len, 0, TAG_UNMASK);
        dpfl_secagg_msg_free(&out);
    }
    free(req);
    worker_ddp_reset(wd);
}

/* A round released: the helpers of the clients this rank trained in it (mine) sync with the model it released (w0,
 * from rank 0), then their states go to rank 0 (its checkpoint), after the filter's spend. */
static void worker_sync(fl_node *n, float *w0, const int32_t *mine, int32_t nmine)
{
    const int64_t hp = sm.helper_p;
    if (hp) MPI_Bcast(w0, (int)hp, MPI_FLOAT, 0, MPI_COMM_WORLD);
    for (int32_t j = 0; j < nmine; j++) {
        const float *state = NULL;
        if (sm.filter) send_client_spent(n->in.record_dp, mine[j]);
        if (!sm.keeps) continue;
        if (hp) dpfl_clients_sync(n->in.clients, mine[j], w0);
        const int64_t t = dpfl_clients_state(n->in.clients, mine[j], &state);
        MPI_Send(&t, 1, MPI_INT64_T, 0, TAG_STATE_T, MPI_COMM_WORLD);
        if (t > 0 && sm.floats) MPI_Send((void *)state, (int)sm.floats, MPI_FLOAT, 0, TAG_STATE, MPI_COMM_WORLD);
    }
}

/* A round without distributed DP: each of this rank's sampled clients that did not drop out trains (unless rPDP-FL's
 * replay failed: rst, re) and sends its answer and update (u, P floats) to rank 0; mine gets those that trained. */
static void worker_plain_round(fl_node *n, const round_head *h, const int32_t *ids, const uint8_t *drop, float *u,
                               size_t P, int32_t *mine, int32_t *nmine, dpfl_status rst, const dpfl_error *re)
{
    for (int32_t j = 0; j < h->n; j++) {
        if (drop[j] || owner(ids[j]) != rank) continue;
        dpfl_client_report res;
        memset(&res, 0, sizeof res);
        res.client = ids[j];
        client_answer a;
        memset(&a, 0, sizeof a);
        dpfl_error e = {{0}};
        a.status = rst ? rst : dpfl_sim_client_round(n->in.sim, h->round, h->S, ids[j], u, &res, &e);
        if (a.status) memcpy(a.msg, rst ? re->msg : e.msg, sizeof a.msg);
        else mine[(*nmine)++] = ids[j];
        a.loss_sum = res.loss_sum, a.norm = res.norm, a.examples = res.examples, a.steps = res.steps;
        a.clipped = res.clipped;
        MPI_Send(&a, sizeof a, MPI_BYTE, 0, 2 * j, MPI_COMM_WORLD);
        MPI_Send(u, (int)P, MPI_FLOAT, 0, 2 * j + 1, MPI_COMM_WORLD);
    }
}

/* A worker rank: the same run without files, then rounds until rank 0 says stop. */
static int worker_rank(const dpfl_config *cfg)
{
    dpfl_error err = {{0}};
    uint8_t key[32];
    MPI_Bcast(key, 32, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&sm, sizeof sm, MPI_BYTE, 0, MPI_COMM_WORLD);
    const int64_t hp = sm.helper_p;
    float *w0 = hp ? malloc((size_t)hp * sizeof *w0) : NULL;
    float *sbuf = sm.floats ? malloc((size_t)sm.floats * sizeof *sbuf) : NULL;
    int32_t *sids = malloc((size_t)(sm.nstates > 0 ? sm.nstates : 1) * sizeof *sids);
    fl_node *n = calloc(1, sizeof *n);
    if ((hp && !w0) || (sm.floats && !sbuf) || !sids || !n) MPI_Abort(MPI_COMM_WORLD, 1); /* cannot go on */
    if (hp) MPI_Bcast(w0, (int)hp, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(sids, sm.nstates, MPI_INT32_T, 0, MPI_COMM_WORLD);
    dpfl_status st = worker_setup(n, cfg, key, w0, sbuf, sids, &err);
    const size_t P = st ? 0 : n->in.model.nparam;
    float *u = st ? NULL : malloc(P * sizeof *u);
    int32_t *ids = NULL, *mine = NULL, nmine = 0, replayed = 0;
    uint8_t *drop = NULL;
    worker_ddp wd = {0};
    for (;;) {
        round_head h;
        MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (h.stop) break;
        if (h.unmask) { /* distributed DP: the round's unmasking */
            worker_unmask(&wd);
            continue;
        }
        if (h.sync) { /* round h.round released */
            worker_sync(n, w0, mine, nmine);
            nmine = 0;
            continue;
        }
        int32_t *ni = realloc(ids, (size_t)(h.n > 0 ? h.n : 1) * sizeof *ids);
        uint8_t *nd = realloc(drop, (size_t)(h.n > 0 ? h.n : 1));
        if (ni) ids = ni;
        if (nd) drop = nd;
        int32_t *nm = ni && nd ? realloc(mine, (size_t)(h.n > 0 ? h.n : 1) * sizeof *mine) : NULL;
        if (nm) mine = nm;
        if (!nm) MPI_Abort(MPI_COMM_WORLD, 1); /* cannot even receive the round: the job cannot go on */
        MPI_Bcast(ids, h.n, MPI_INT32_T, 0, MPI_COMM_WORLD);
        MPI_Bcast(drop, h.n, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (st || !u) { /* set-up failed here but not on rank 0 */
            cli_error("rank %d: %s", rank, st ? err.msg : "out of memory");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Bcast(n->in.global, (int)P, MPI_FLOAT, 0, MPI_COMM_WORLD);
        float *control = dpfl_server_control(n->in.server); /* fl.scaffold: the server's c (rank 0's config) */
        if (control) MPI_Bcast(control, (int)P, MPI_FLOAT, 0, MPI_COMM_WORLD);
        nmine = 0;
        dpfl_error re = {{0}};
        dpfl_status rst = n->acct.rpdp.on ? rpdp_replay(n, &replayed, h.released, &re) : DPFL_OK;
        if (h.ddp) worker_ddp_round(n, &h, ids, drop, u, mine, &nmine, rst, &re, &wd);
        else worker_plain_round(n, &h, ids, drop, u, P, mine, &nmine, rst, &re);
    }
    if (st) cli_error("rank %d: %s", rank, err.msg);
    worker_ddp_reset(&wd);
    free(wd.sa), free(wd.enc);
    free(u), free(ids), free(drop), free(mine), free(w0), free(sbuf), free(sids);
    fl_node_free(n);
    free(n);
    return st ? 1 : 0;
}

/* What a run with worker ranks cannot do, on one line (NULL: nothing). */
static const char *unsupported(const dpfl_config *cfg)
{
    if (cfg->client_dp.enabled && cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP && !cfg->client_dp.ddp_secagg)
        return "mpirun: client_dp.ddp_secagg = no would send each client's noisy update to rank 0 in the clear: across "
               "ranks distributed DP runs secure aggregation (ddp_secagg = yes)";
    return NULL;
}

int cli_mpi_train(const dpfl_config *cfg, const dpfl_run_options *opt)
{
    MPI_Init(NULL, NULL);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    dpfl_error verr = {{0}};
    const char *why = dpfl_config_validate(cfg, &verr) ? verr.msg : unsupported(cfg);
    int rc;
    if (why) {
        rc = rank == 0 ? cli_error("%s", why) : 1;
    } else if (rank == 0) {
        dpfl_error err = {{0}};
        fl_config_digest(cfg, run_config);
        /* how many took part: in the log and in summary.json (the transport's about) */
        static char about[160];
        snprintf(about, sizeof about, "mpirun, %d ranks: rank 0 the server, %d worker rank%s training the clients",
                 nranks, nranks - 1, nranks == 2 ? "" : "s");
        mpi_transport.about = about;
        if (!opt->quiet) fprintf(stderr, "dpfl: %s\n", about);
        /* Ctrl-C: mpirun sends every rank SIGTERM (and SIGKILL a moment later): rank 0 stops after the round in
         * progress if it can, the workers carry on until it says stop */
        dpfl_run_options o0 = *opt;
        char how[1100];
        snprintf(how, sizeof how, "mpirun -n %d dpfl train --resume %s", nranks, opt->out_dir);
        o0.stop = cli_stop_catch(how);
        rc = dpfl_run_with_transport(cfg, &o0, nranks > 1 ? &mpi_transport : NULL, &err) ? cli_error("%s", err.msg)
                                                                                         : cli_stop_status();
    } else {
        signal(SIGINT, SIG_IGN), signal(SIGTERM, SIG_IGN); /* rank 0 decides when the run stops */
        rc = worker_rank(cfg);
    }
    MPI_Finalize();
    return rc;
}
#endif
