/* The library's fork-join pool (see parallel.c): nn workspaces split kernels over one, the simulation its clients
 * over another (fl/transport_local.c). */
#ifndef DPFL_CORE_PARALLEL_H
#define DPFL_CORE_PARALLEL_H

#include <stdint.h>

typedef struct dpfl_par dpfl_par;
/* fn(ctx, lo, hi) processes indices [lo, hi). */
typedef void (*dpfl_par_fn)(void *ctx, int64_t lo, int64_t hi);

/* nthreads including the caller; returns NULL (serial) for nthreads < 2 or if no thread could be started. */
dpfl_par *dpfl_par_create(int nthreads);
void dpfl_par_free(dpfl_par *p);
/* Threads including the caller (1 for NULL).  dpfl_par_for(p, dpfl_par_size(p), fn, ctx) calls fn once per
 * thread with lo = the thread's index. */
int dpfl_par_size(const dpfl_par *p);
/* Runs fn over [0, total) split into one contiguous range per thread; p == NULL runs it in the caller. */
void dpfl_par_for(dpfl_par *p, int64_t total, dpfl_par_fn fn, void *ctx);

#endif
