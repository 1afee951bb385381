/* The in-process transport: the round's clients are trained by the simulation's pool of worker threads, which
 * take them from an atomic counter, each writing its update into the client's slot.  Which thread trains which client does not change any
 * bit: the server adds the slots to its exact, order-independent sum (round.c). */
#include "sim_internal.h"

#include "core/parallel.h"

/* One call per thread index on the simulation's persistent pool (core/parallel.c); the index is the worker. */
typedef struct {
    void (*fn)(void *ctx, int32_t id);
    void *ctx;
} par_job;

static void run_worker(void *ctx, int64_t lo, int64_t hi)
{
    par_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) j->fn(j->ctx, (int32_t)i);
}

void fl_run_parallel(fl_workers *wk, void (*fn)(void *ctx, int32_t id), void *ctx, int32_t count)
{
    atomic_store(&wk->next, 0);
    wk->count = count;
    int32_t nt = wk->nthreads < count ? wk->nthreads : count;
    par_job j = {fn, ctx};
    if (nt <= 1 || !wk->pool) run_worker(&j, 0, 1);
    else dpfl_par_for(wk->pool, dpfl_par_size(wk->pool), run_worker, &j); /* every worker takes jobs from wk->next */
}

static void client_worker(void *ctx, int32_t id)
{
    dpfl_sim *s = ctx;
    for (;;) {
        int j = atomic_fetch_add(&s->wk.next, 1);
        if (j >= s->wk.count) break;
        int32_t i = s->chunk_start + j;
        if (s->sv.cohort.results[i].dropped) continue; /* drops out before sending: its work is lost, not its charge */
        /* fewer clients than threads (one client per round, say): the idle threads join each client's own
         * forward/backward pool; nn results do not depend on its thread count */
        worker *w = &s->wk.workers[id];
        int want = s->chunk_len < s->wk.nthreads ? s->wk.nthreads / s->chunk_len : 1;
        if (want != w->ws_threads) w->ws_threads = dpfl_nn_ws_set_threads(w->ws, want, NULL) ? 0 : want;
        fl_client_train(&s->tctx, &s->cl.layout, &s->cl.store, w, s->sv.cohort.sampled[i], s->wk.slots[j],
                        &s->sv.cohort.results[i]);
        /* what the client does before sending (distributed DP: its own clipping, noise and masking) */
        if (s->sv.agg->client_send)
            s->sv.agg->client_send(s->sv.aggself, w, i, j, &s->sv.cohort.results[i], s->wk.slots[j]);
    }
}

static dpfl_status run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    (void)t, (void)err;
    fl_run_parallel(&job->sim->wk, client_worker, job->sim, job->count);
    return DPFL_OK;
}

const fl_transport fl_transport_local = {.run_clients = run_clients};
