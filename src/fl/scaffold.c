/* SCAFFOLD's control variates (Karimireddy et al. 2020), as DP-SCAFFOLD runs them under record-level DP (Noble,
 * Bellet, Dieuleveut 2022, Algorithm 1 with option II).  Client i keeps c_i, the server c; every local step of the
 * client, plain or DP-SGD, is followed by y <- y - lr (c - c_i) (SCAFFOLD's corrected step y - lr (g - c_i + c) with
 * g the step's gradient, noised under DP-SGD); after its K steps the client sends u = y - x, as every client does, and
 * sets
 *     c_i+ = c_i - c + (x - y) / (K lr) = c_i - c - u / (K lr)                      (option II)
 * while the server's c += (1/N) sum_{i in S} (c_i+ - c_i) with c_i+ - c_i = -c - u_i / (K_i lr): c is the server's
 * own state, formed from the updates it receives (K_i the steps the client reports, lr the round's, both public),
 * so a server whose clients are other processes (dpfl serve, mpirun) keeps it as the simulation does and sends it
 * with the model.  The round's sum of u_i / (K_i lr) is exact and order-independent (core/exact_sum.c), so c's
 * bits do not depend on the order the updates arrive in; c moves once, after the release, and the checkpoint holds
 * it (server state; the c_i are client state).  With every c_i starting at 0 and every update arriving, c stays
 * the mean of all N clients' c_i (to float rounding: each side rounds its own sums).  A client whose update does
 * not arrive (a deployed client past the round's deadline) has moved its c_i while the server added no dc_i:
 * from then on c differs from the mean of the c_i by that unmatched dc_i / N -- c is still a function of what was
 * released, so the privacy argument below is unchanged; the simulation has no such client (dropouts are client-level DP's,
 * which DP-SCAFFOLD refuses).
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

dpfl_status fl_scaffold_init(fl_scaffold *sc, int on, size_t nparam, int32_t clients, dpfl_error *err)
{
    memset(sc, 0, sizeof *sc);
    sc->on = on;
    sc->nparam = nparam;
    sc->count = clients;
    if (!on) return DPFL_OK;
    if (!(sc->c = dpfl_calloc(nparam, sizeof(float), err)) || !(sc->dcmean = dpfl_alloc(nparam * sizeof(float), err)))
        return DPFL_ENOMEM;
    return dpfl_xsum_init(&sc->dc, nparam, err);
}

void fl_scaffold_free(fl_scaffold *sc)
{
    dpfl_free(sc->c);
    dpfl_free(sc->dcmean);
    dpfl_xsum_free(&sc->dc);
    sc->c = sc->dcmean = NULL;
}

void fl_scaffold_begin(fl_scaffold *sc)
{
    if (!sc->on) return;
    dpfl_xsum_zero(&sc->dc);
    sc->dcn = 0;
}

/* The server, as client i's update u arrives: dc_i = -c - u inv with inv = 1 / (K_i lr) as the client rounds it;
 * the sum keeps the u inv part (exactly: a float times a float is a double) and the count for the -c part. */
dpfl_status fl_scaffold_take(fl_scaffold *sc, const float *u, int64_t steps, double lr, dpfl_error *err)
{
    if (!sc->on || !(steps > 0 && lr > 0)) return DPFL_OK; /* the client kept its c_i: no dc_i */
    const float inv = (float)(1.0 / (lr * (double)steps)); /* the client's inv (a product commutes exactly) */
    sc->dcn++;
    return dpfl_xsum_add(&sc->dc, u, (double)inv, err);
}

/* c <- c + (1/N) sum_i dc_i = c (1 - m / N) - (sum_i u_i inv_i) / N, m the updates taken */
void fl_scaffold_end(fl_scaffold *sc)
{
    if (!sc->on || sc->dcn == 0) return;
    const size_t P = sc->nparam;
    dpfl_xsum_result(&sc->dc, (double)sc->count, sc->dcmean);
    const double keep = 1.0 - (double)sc->dcn / (double)sc->count;
    for (size_t j = 0; j < P; j++) sc->c[j] = (float)((double)sc->c[j] * keep - (double)sc->dcmean[j]);
}

void fl_scaffold_correct(const float *c, const float *ci, float *local, size_t P, double lr)
{
    const float a = (float)lr;
    for (size_t j = 0; j < P; j++) local[j] -= a * (c[j] - ci[j]);
}

void fl_scaffold_update(const float *c, float *ci, const float *u, size_t P, int64_t steps, double lr)
{
    if (!(steps > 0 && lr > 0)) return; /* no step, or none that moved: no new variate */
    const float inv = (float)(1.0 / ((double)steps * lr));
    for (size_t j = 0; j < P; j++) ci[j] = ci[j] - c[j] - u[j] * inv;
}
