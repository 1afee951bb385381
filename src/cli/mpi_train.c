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
 * broadcast, as rank 0's run does (fl_rpdp_before_round, fl_rpdp_charge); the filter's per-record spend lives
 * with the records, on their worker (refused: it would need the same trip).  After each round the workers send
 * rank 0 the state of the clients they trained, so that its checkpoint holds every client's state as one process's
 * does; a resume sends each worker its clients' states back.  Distributed DP (secure aggregation over MPI messages) is not built: refused.
 * Every rank loads the whole dataset (each trains only its own clients).  Built when pkg-config finds ompi-c
 * (MPI=0 without). */
#include "cli.h"

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

typedef struct {
    int32_t round, n, stop;
    int32_t released; /* rounds released before this one (rPDP-FL: what the workers replay) */
    int32_t sync;     /* 1: no round: round `round` was released (the model follows with helper models); the workers
                         sync their helpers and send rank 0 the state of the clients they trained in it */
    double S;
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
    int64_t floats;       /* floats of one client's state (dpfl_sim_client_state_floats) */
    int32_t keeps, nstates;
} start_msg;

enum { TAG_STATE_T = 30000, TAG_STATE = 30001 };

static int nranks, rank, started;
static start_msg sm;

static int owner(int32_t k) { return 1 + (int)(k % (nranks - 1)); }

static dpfl_status mpi_start(const dpfl_transport *t, const dpfl_transport_setup *setup, dpfl_error *err)
{
    (void)t, (void)err;
    uint8_t key[32];
    memcpy(key, setup->partition_key, 32);
    MPI_Bcast(key, 32, MPI_BYTE, 0, MPI_COMM_WORLD);
    sm.helper_p = setup->initial_model ? (int64_t)setup->nparam : 0;
    sm.keeps = dpfl_sim_keeps_client_state(setup->sim);
    sm.floats = (int64_t)dpfl_sim_client_state_floats(setup->sim);
    int32_t *ids = malloc((size_t)(setup->clients > 0 ? setup->clients : 1) * sizeof *ids);
    if (!ids) MPI_Abort(MPI_COMM_WORLD, 1); /* the workers wait for this message */
    sm.nstates = 0;
    for (int32_t k = 0; sm.keeps && k < setup->clients; k++) /* a resume: the states its checkpoint holds */
        if (dpfl_sim_client_state(setup->sim, k, NULL) > 0) ids[sm.nstates++] = k;
    MPI_Bcast(&sm, sizeof sm, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (sm.helper_p) MPI_Bcast((void *)setup->initial_model, (int)sm.helper_p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(ids, sm.nstates, MPI_INT32_T, 0, MPI_COMM_WORLD);
    for (int32_t i = 0; i < sm.nstates; i++) { /* each to the worker that holds the client */
        const float *state;
        int64_t st = dpfl_sim_client_state(setup->sim, ids[i], &state);
        MPI_Send(&st, 1, MPI_INT64_T, owner(ids[i]), TAG_STATE_T, MPI_COMM_WORLD);
        if (sm.floats) MPI_Send((void *)state, (int)sm.floats, MPI_FLOAT, owner(ids[i]), TAG_STATE, MPI_COMM_WORLD);
    }
    free(ids);
    started = 1;
    return DPFL_OK;
}

/* After the release, with per-client state: the released model to every worker (helper models), which syncs the
 * clients it trained this round; then each of those clients' state back to rank 0, in client order, so that its
 * checkpoint holds every client's state as one process's does (a resume sends them back, mpi_start). */
static void mpi_after_round(const dpfl_transport *t, const dpfl_round_job *job)
{
    dpfl_sim *s = job->sim;
    (void)t;
    if (!sm.keeps) return;
    round_head h = {.round = job->round, .sync = 1};
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (sm.helper_p) MPI_Bcast((void *)job->global, (int)sm.helper_p, MPI_FLOAT, 0, MPI_COMM_WORLD);
    float *buf = sm.floats ? malloc((size_t)sm.floats * sizeof *buf) : NULL;
    if (sm.floats && !buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int32_t i = 0; i < job->nsampled; i++) {
        if (job->reports[i].dropped) continue;
        const int32_t k = job->sampled[i];
        int64_t st;
        MPI_Recv(&st, 1, MPI_INT64_T, owner(k), TAG_STATE_T, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st <= 0) continue; /* no state (a client without records) */
        if (sm.floats) MPI_Recv(buf, (int)sm.floats, MPI_FLOAT, owner(k), TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        dpfl_error e;
        if (dpfl_sim_set_client_state(s, k, st, buf, &e)) MPI_Abort(MPI_COMM_WORLD, 1); /* out of memory */
    }
    free(buf);
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

static dpfl_status mpi_run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    (void)t;
    const size_t P = job->nparam;
    const int32_t start = job->start, n = job->count;
    round_head h = {.round = job->round, .n = n, .released = job->released, .S = job->update_clip};
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
    dpfl_status st = DPFL_OK;
    for (int32_t j = 0; j < n; j++) {
        if (drop[j]) continue;
        client_answer a;
        MPI_Recv(&a, sizeof a, MPI_BYTE, owner(ids[j]), 2 * j, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(job->slots[j], (int)P, MPI_FLOAT, owner(ids[j]), 2 * j + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        dpfl_client_report *r = &job->reports[start + j];
        r->loss_sum = a.loss_sum, r->norm = a.norm, r->examples = a.examples, r->steps = a.steps;
        r->clipped = a.clipped;
        if (a.status && !st) st = dpfl_fail(err, (dpfl_status)a.status, "rank %d, client %d: %s", owner(ids[j]), ids[j], a.msg);
    }
    free(ids), free(drop);
    return st;
}

/* rank 0 trains no client: files listed with data.source_rows may be absent there (each worker checks its own) */
static dpfl_transport mpi_transport = {.run_clients = mpi_run_clients, .whole_round = 1, .start = mpi_start,
                                       .finish = mpi_finish, .clients_hold_data = 1, .after_round = mpi_after_round};

/* rPDP-FL on a worker: the levels' opt-outs and charges of the rounds released before `round`, then the opt-outs
 * of `round` itself, as rank 0's run makes them (run_round.c): the same per-record rates for its clients. */
static dpfl_status rpdp_replay(fl_node *n, int32_t *replayed, int32_t released, dpfl_error *err)
{
    int changed;
    dpfl_status st = DPFL_OK;
    for (; !st && *replayed < released; ++*replayed)
        if (!(st = fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, err))) fl_rpdp_charge(&n->acct.rpdp);
    return st ? st : fl_rpdp_before_round(&n->acct.rpdp, n->in.cfg, &changed, err);
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
    /* files of other ranks' clients need not be here; its own clients' must (below) */
    dpfl_status st = fl_node_setup(n, cfg, key, &err);
    char who[32];
    snprintf(who, sizeof who, "MPI rank %d", rank);
    for (int32_t k = 0; !st && k < n->in.part.clients; k++)
        if (owner(k) == rank) st = fl_node_data_here(n, k, who, &err);
    const size_t P = st ? 0 : n->in.model.nparam;
    if (!st && hp && (size_t)hp != P) st = dpfl_fail(&err, DPFL_EINVAL, "rank 0's model has %lld parameters, "
                                                     "this rank's %zu", (long long)hp, P);
    if (!st && hp) dpfl_sim_set_initial_model(n->in.sim, w0); /* every helper until its first sync */
    if (!st && sm.keeps && (int64_t)dpfl_sim_client_state_floats(n->in.sim) != sm.floats)
        st = dpfl_fail(&err, DPFL_EINVAL, "rank 0 keeps %lld floats per client, this rank %zu", (long long)sm.floats,
                       dpfl_sim_client_state_floats(n->in.sim));
    for (int32_t i = 0; i < sm.nstates; i++) { /* a resume: the states of this rank's clients, from the checkpoint */
        if (owner(sids[i]) != rank) continue;
        int64_t t;
        MPI_Recv(&t, 1, MPI_INT64_T, 0, TAG_STATE_T, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (sm.floats) MPI_Recv(sbuf, (int)sm.floats, MPI_FLOAT, 0, TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!st) st = dpfl_sim_set_client_state(n->in.sim, sids[i], t, sbuf, &err);
    }
    float *u = st ? NULL : malloc(P * sizeof *u);
    int32_t *ids = NULL, *mine = NULL, nmine = 0, replayed = 0;
    uint8_t *drop = NULL;
    for (;;) {
        round_head h;
        MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (h.stop) break;
        if (h.sync) { /* round h.round released: the helpers of the clients this rank trained in it synced with the
                       * model it released, then their states to rank 0 (its checkpoint) */
            if (hp) MPI_Bcast(w0, (int)hp, MPI_FLOAT, 0, MPI_COMM_WORLD);
            for (int32_t j = 0; j < nmine; j++) {
                const float *state = NULL;
                if (hp) dpfl_sim_client_sync(n->in.sim, mine[j], w0);
                const int64_t t = dpfl_sim_client_state(n->in.sim, mine[j], &state);
                MPI_Send(&t, 1, MPI_INT64_T, 0, TAG_STATE_T, MPI_COMM_WORLD);
                if (t > 0 && sm.floats) MPI_Send((void *)state, (int)sm.floats, MPI_FLOAT, 0, TAG_STATE, MPI_COMM_WORLD);
            }
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
        nmine = 0;
        dpfl_error re = {{0}};
        dpfl_status rst = n->acct.rpdp.on ? rpdp_replay(n, &replayed, h.released, &re) : DPFL_OK;
        for (int32_t j = 0; j < h.n; j++) {
            if (drop[j] || owner(ids[j]) != rank) continue;
            dpfl_client_report res;
            memset(&res, 0, sizeof res);
            res.client = ids[j];
            client_answer a;
            memset(&a, 0, sizeof a);
            dpfl_error e = {{0}};
            a.status = rst ? rst : dpfl_sim_client_round(n->in.sim, h.round, h.S, ids[j], u, &res, &e);
            if (a.status) memcpy(a.msg, rst ? re.msg : e.msg, sizeof a.msg);
            else mine[nmine++] = ids[j];
            a.loss_sum = res.loss_sum, a.norm = res.norm, a.examples = res.examples, a.steps = res.steps;
            a.clipped = res.clipped;
            MPI_Send(&a, sizeof a, MPI_BYTE, 0, 2 * j, MPI_COMM_WORLD);
            MPI_Send(u, (int)P, MPI_FLOAT, 0, 2 * j + 1, MPI_COMM_WORLD);
        }
    }
    if (st) cli_error("rank %d: %s", rank, err.msg);
    free(u), free(ids), free(drop), free(mine), free(w0), free(sbuf), free(sids);
    fl_node_free(n);
    free(n);
    return st ? 1 : 0;
}

/* What a run with worker ranks cannot do, on one line (NULL: nothing). */
static const char *unsupported(const dpfl_config *cfg)
{
    if (cfg->client_dp.enabled && cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP)
        return "mpirun: client_dp.mechanism = ddp is not supported across ranks yet (secure aggregation over MPI "
               "messages is not built); run it in one process or deployed (dpfl serve / join)";
    if (cfg->record_dp.enabled && cfg->record_dp.budgets != DPFL_BUDGETS_NONE &&
        cfg->record_dp.budget_policy == DPFL_POLICY_FILTER)
        return "mpirun: record_dp.budget_policy = filter is not supported across ranks (each record's spent budget "
               "would live on its worker, out of rank 0's checkpoint: a resume would spend it again); run it in one "
               "process";
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
        /* how many took part: in the log and in summary.json (the transport's about) */
        static char about[160];
        snprintf(about, sizeof about, "mpirun, %d ranks: rank 0 the server, %d worker rank%s training the clients",
                 nranks, nranks - 1, nranks == 2 ? "" : "s");
        mpi_transport.about = about;
        if (!opt->quiet) fprintf(stderr, "dpfl: %s\n", about);
        rc = dpfl_run_with_transport(cfg, opt, nranks > 1 ? &mpi_transport : NULL, &err) ? cli_error("%s", err.msg) : 0;
    } else {
        rc = worker_rank(cfg);
    }
    MPI_Finalize();
    return rc;
}
#endif
