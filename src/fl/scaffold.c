/* SCAFFOLD's control variates (Karimireddy et al. 2020), as DP-SCAFFOLD runs them under record-level DP (Noble,
 * Bellet, Dieuleveut 2022, Algorithm 1 with option II).  Client i keeps c_i, the server c; every local step of the
 * client, plain or DP-SGD, is followed by y <- y - lr (c - c_i) (SCAFFOLD's corrected step y - lr (g - c_i + c) with
 * g the step's gradient, noised under DP-SGD); after its K steps the client sends u = y - x, as every client does, and
 * sets
 *     c_i+ = c_i - c + (x - y) / (K lr) = c_i - c - u / (K lr)                      (option II)
 * while the server's c += (1/N) sum_{i in S} (c_i+ - c_i), which keeps c equal to the mean of all N clients' c_i
 * (every c_i starts at 0); dpfl computes c as that mean at the start of each round, in client order, so that a
 * resumed run recomputes it bit for bit from the c_i its checkpoint holds (they are client state).
 *
 * Privacy (record level): what the client releases is u, the output of its DP-SGD steps.  The corrections it adds
 * are functions of c (public: computed from earlier releases) and c_i (its own earlier releases and c), i.e. of
 * outputs of earlier DP-SGD steps, which the adaptive composition of the steps' Gaussian releases allows; c_i+ is a
 * function of u, c and K lr alone, so the server can form it (and c) from what it already received: by
 * post-processing nothing more is released and the ledger's per-step charge covers the variates.  A variate
 * computed from raw gradients (option I) would be a release of its own; dpfl has none.  Client-level DP is refused
 * (config_validate.c): there the server would form c from unclipped, un-noised updates. */
#include "sim_internal.h"

#include <string.h>

dpfl_status fl_scaffold_begin(fl_clients *c, const dpfl_transport *t, dpfl_error *err)
{
    if (!c->scaffold) return DPFL_OK;
    if (t->clients_hold_data)
        return dpfl_fail(err, DPFL_EINVAL, "fl.scaffold: not available deployed (serve/join, mpirun): the server's "
                                           "control variate is not sent to client processes");
    const size_t P = c->nparam;
    float *cbar = c->cbar;
    dpfl_vec_zero(cbar, P);
    for (int32_t k = 0; k < c->count; k++) { /* every client's c_i, paged out or not (a resume reads files) */
        const float *ci;
        dpfl_status st = fl_client_variate_read(c, k, &ci, err);
        if (st) return st;
        if (ci) dpfl_vec_axpy(cbar, 1.0f, ci, P);
    }
    dpfl_vec_scale(cbar, (float)(1.0 / c->count), P);
    return DPFL_OK;
}

void fl_scaffold_correct(const fl_clients *c, const float *ci, float *local, double lr)
{
    const size_t P = c->nparam;
    const float a = (float)lr;
    for (size_t j = 0; j < P; j++) local[j] -= a * (c->cbar[j] - ci[j]);
}

void fl_scaffold_update(const fl_clients *c, float *ci, const float *u, int64_t steps, double lr)
{
    const size_t P = c->nparam;
    if (!(steps > 0 && lr > 0)) return; /* no step, or none that moved: no new variate */
    const float inv = (float)(1.0 / ((double)steps * lr));
    for (size_t j = 0; j < P; j++) ci[j] = ci[j] - c->cbar[j] - u[j] * inv;
}
