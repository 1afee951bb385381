/* A small fork-join pool for the nn module's non-GEMM work (im2col, col2im, pooling, element-wise layers).
 *
 * OpenBLAS parallelizes each GEMM over its own threads; between GEMMs those threads spin (sched_yield), so
 * single-threaded im2col or pooling leaves a core idle.  Each workspace owns one pool with as many threads as
 * OpenBLAS uses.  Work is split into contiguous index ranges and every output element is written by exactly one
 * thread with the same arithmetic as the serial code, so results do not depend on the thread count. */
#include "parallel.h"

#include <pthread.h>
#include <stdlib.h>

struct dpfl_par {
    int n;                 /* threads including the caller */
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;          /* job generation */
    int pending, quit;
    dpfl_par_fn fn;
    void *ctx;
    int64_t total;
};

static void range(int64_t total, int parts, int i, int64_t *lo, int64_t *hi)
{
    *lo = total * i / parts;
    *hi = total * (i + 1) / parts;
}

typedef struct {
    dpfl_par *p;
    int idx;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    dpfl_par *p = wa->p;
    int idx = wa->idx;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        dpfl_par_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t total = p->total;
        pthread_mutex_unlock(&p->mu);
        int64_t lo, hi;
        range(total, p->n, idx, &lo, &hi);
        if (hi > lo) fn(ctx, lo, hi);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

dpfl_par *dpfl_par_create(int nthreads)
{
    if (nthreads < 2) return NULL; /* NULL = run serially */
    dpfl_par *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->tid = calloc((size_t)nthreads, sizeof *p->tid);
    if (!p->tid) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = 1;
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->p = p, wa->idx = i;
        if (pthread_create(&p->tid[i], NULL, worker, wa)) {
            free(wa);
            break;
        }
        p->n++;
    }
    if (p->n < 2) {
        dpfl_par_free(p);
        return NULL;
    }
    return p;
}

int dpfl_par_size(const dpfl_par *p) { return p ? p->n : 1; }

void dpfl_par_free(dpfl_par *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

void dpfl_par_for(dpfl_par *p, int64_t total, dpfl_par_fn fn, void *ctx)
{
    if (total <= 0) return;
    if (!p || total == 1) {
        fn(ctx, 0, total);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->ctx = ctx, p->total = total;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    int64_t lo, hi;
    range(total, p->n, 0, &lo, &hi);
    if (hi > lo) fn(ctx, lo, hi);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
