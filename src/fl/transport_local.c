/* The in-process transport: the round's clients are trained by the simulation's pool of worker threads, which
 * take them from an atomic counter, each writing its update into the client's slot.  Which thread trains which client does not change any
 * bit: the server adds the slots to its exact, order-independent sum (round.c). */
#include "sim_internal.h"

#include "core/parallel.h"

/* One call per thread index on the simulation's persistent pool (core/parallel.c); the index is the worker. */
typedef struct {
    dpfl_sim *s;
    void *(*fn)(void *);
} par_job;

static void run_worker(void *ctx, int64_t lo, int64_t hi)
{
    par_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) {
        thread_arg a = {j->s, (int32_t)i};
        j->fn(&a);
    }
}

void fl_run_parallel(dpfl_sim *s, void *(*fn)(void *), int32_t count)
{
    atomic_store(&s->next, 0);
    int32_t nt = s->nthreads < count ? s->nthreads : count;
    par_job j = {s, fn};
    if (nt <= 1 || !s->pool) run_worker(&j, 0, 1);
    else dpfl_par_for(s->pool, dpfl_par_size(s->pool), run_worker, &j); /* every worker takes jobs from s->next */
}

static void *client_worker(void *p)
{
    thread_arg *a = p;
    dpfl_sim *s = a->s;
    for (;;) {
        int j = atomic_fetch_add(&s->next, 1);
        if (j >= s->chunk_len) break;
        int32_t i = s->chunk_start + j;
        if (s->results[i].dropped) continue; /* drops out before sending: its work is lost, not its charge */
        /* fewer clients than threads (one client per round, say): the idle threads join each client's own
         * forward/backward pool; nn results do not depend on its thread count */
        worker *w = &s->workers[a->id];
        int want = s->chunk_len < s->nthreads ? s->nthreads / s->chunk_len : 1;
        if (want != w->ws_threads) w->ws_threads = dpfl_nn_ws_set_threads(w->ws, want, NULL) ? 0 : want;
        fl_client_train(&s->tctx, &s->clients, w, s->sampled[i], s->slots[j], &s->results[i]);
        /* what the client does before sending (distributed DP: its own clipping, noise and masking) */
        if (s->agg->client_send) s->agg->client_send(s->aggself, w, i, j, &s->results[i], s->slots[j]);
    }
    return NULL;
}

static dpfl_status run_clients(const dpfl_transport *t, dpfl_round_job *job, dpfl_error *err)
{
    (void)t, (void)err;
    fl_run_parallel(job->sim, client_worker, job->count);
    return DPFL_OK;
}

const fl_transport fl_transport_local = {.run_clients = run_clients};
