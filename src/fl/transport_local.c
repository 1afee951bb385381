/* The in-process transport: the round's clients are trained by worker threads that take them from an atomic
 * counter, each writing its update into the client's slot.  Which thread trains which client does not change any
 * bit: the server adds the slots in client order (round.c). */
#include "sim_internal.h"

#include <pthread.h>

void fl_run_parallel(dpfl_sim *s, void *(*fn)(void *), int32_t count)
{
    atomic_store(&s->next, 0);
    int32_t nt = s->nthreads < count ? s->nthreads : count;
    pthread_t th[256];
    thread_arg args[256];
    for (int32_t i = 0; i < nt; i++) {
        args[i] = (thread_arg){s, i};
        if (i > 0 && pthread_create(&th[i], NULL, fn, &args[i]) != 0) nt = i; /* run with what we have */
    }
    if (nt > 0) fn(&args[0]);
    for (int32_t i = 1; i < nt; i++) pthread_join(th[i], NULL);
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
        fl_client_train(s, w, s->sampled[i], s->slots[j], &s->results[i]);
        if (s->cdp) s->results[i].norm = dpfl_vec_norm2(s->slots[j], s->model->nparam);
    }
    return NULL;
}

static void run_clients(dpfl_sim *s, int32_t start, int32_t n)
{
    s->chunk_start = start;
    s->chunk_len = n;
    fl_run_parallel(s, client_worker, n);
}

const fl_transport fl_transport_local = {run_clients};
