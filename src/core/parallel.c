/* The library's fork-join pool.  The simulation trains a round's clients on one (fl/transport_local.c), each nn
 * workspace splits its kernels over its own (nested levels need their own instance).  nn: every layer's work (GEMM blocks, direct convolution, im2col, pooling,
 * element-wise layers) is split over the workspace's threads; OpenBLAS itself runs single-threaded.  Work is split
 * into contiguous index ranges and every output element is written by exactly one thread with the same arithmetic
 * as the serial code, so results do not depend on the thread count.  A hand-off is a generation counter the
 * workers spin on for a short while before sleeping on a condition variable. */
#include "core/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct dpfl_par {
    int n;                  /* threads including the caller */
    pthread_t *tid;
    pthread_mutex_t mu;     /* only for sleeping: the hand-off itself is lock-free */
    pthread_cond_t go, done;
    atomic_uint_fast64_t gen; /* job generation */
    atomic_int pending;     /* workers still running the current job */
    atomic_int sleepers;    /* workers asleep (or about to sleep) on go */
    atomic_int waiting;     /* the caller is asleep (or about to sleep) on done */
    atomic_int quit;
    dpfl_par_fn fn;
    void *ctx;
    int64_t total;
};

/* Before sleeping, a waiter spins for about SPIN_NS.  Waking a sleeping thread costs about 14 us here (a futex
 * wake, and on a VM the halted virtual CPU must be rescheduled); a step of a small model hands off work a dozen
 * times.  Spinning is bounded, so oversubscribed cores lose at most this much per hand-off. */
#define SPIN_NS 50000

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until cond(p, arg) holds or SPIN_NS pass; returns whether it holds. */
static int spin_until(const dpfl_par *p, int (*cond)(const dpfl_par *, uint64_t), uint64_t arg)
{
    int64_t deadline = 0;
    for (int i = 0;; i++) {
        if (cond(p, arg)) return 1;
        cpu_relax();
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (!deadline) deadline = t + SPIN_NS;
            else if (t > deadline) return 0;
        }
    }
}

static int new_job(const dpfl_par *p, uint64_t seen)
{
    return atomic_load(&p->gen) != seen || atomic_load(&p->quit);
}

static int all_done(const dpfl_par *p, uint64_t unused)
{
    (void)unused;
    return atomic_load(&p->pending) == 0;
}

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
        if (!spin_until(p, new_job, seen)) {
            /* sleepers is raised before gen is read again under the mutex; dpfl_par_for raises gen before it
             * reads sleepers.  Both are sequentially consistent, so one of the two sees the other: no lost wake. */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!new_job(p, seen)) pthread_cond_wait(&p->go, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = atomic_load(&p->gen);
        int64_t lo, hi;
        range(p->total, p->n, idx, &lo, &hi);
        if (hi > lo) p->fn(p->ctx, lo, hi);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->waiting, 0);
    atomic_init(&p->quit, 0);
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
    atomic_store(&p->quit, 1);
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
    /* the previous job is over (pending reached 0), so no worker reads these until gen moves */
    p->fn = fn, p->ctx = ctx, p->total = total;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t lo, hi;
    range(total, p->n, 0, &lo, &hi);
    if (hi > lo) fn(ctx, lo, hi);
    if (!spin_until(p, all_done, 0)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->waiting, 1);
        while (!all_done(p, 0)) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->waiting, 0);
        pthread_mutex_unlock(&p->mu);
    }
}
