/* Internal pieces of the PLD accountant: composition (pld.c), reading delta and epsilon off it (pld_query.c),
 * the optimistic discretization (pld_lower.c). */
#ifndef DPFL_PLD_INTERNAL_H
#define DPFL_PLD_INTERNAL_H
#include "dpfl/privacy.h"

#include <stddef.h>
#include <stdint.h>

#define NTHETA 12 /* Chernoff bounds on the tilted mass outside the window at theta = 2^-3 .. 2^8 */
/* theta_s = 2^(s - 3), exactly */
static const double dpfl_pld_theta[NTHETA] = {0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256};

typedef struct {
    double *g;   /* tilted composed pmf, index r <-> k = klo + r; the pmf itself is f_k = g_k exp(logm - lam k h) */
    double logm; /* log E[e^{lam L}] of the composed finite part */
    double crel; /* error allowance, relative to exp(logm - lam eps): tilted mass outside the window, mass lost
                  * to round-off, and the FFT's per-bin error summed over the bins above eps */
    double cabs; /* upper only: mass at +inf and the (untilted) mass above the window */
    double lost;       /* |1 - the tilted composition's mass|: a relative error of the sums */
    double up[NTHETA]; /* log E[e^{(lam + theta_s) L}] - log E[e^{lam L}] (-inf: the support is inside the window) */
} pld_side;

typedef struct {
    size_t N;
    double h, lam;      /* grid step, exponential tilt */
    int64_t klo;        /* window = [klo, klo + N) in units of h */
    int ndir, nside;    /* nside 1: upper only; 2: upper and lower */
    pld_side s[2][2];   /* [direction][0 upper (pessimistic), 1 lower (optimistic)] */
    char invalid[200];  /* non-empty: the discretization cannot be trusted here (why) */
} pld_composed;

/* Composes both directions (and, with want_lower, the optimistic discretization beside the pessimistic one), tilted
 * for the query: for delta_hint (eps_query = NaN) or for eps_query; span scales the window.  On return c->invalid is
 * empty, or says why the composed distribution cannot be trusted (the caller then answers with RDP). */
dpfl_status dpfl_pld_compose(const dpfl_event *ev, size_t nev, double delta_hint, double eps_query, size_t bins,
                             double span, int want_lower, pld_composed *c, dpfl_error *err);
void dpfl_pld_composed_free(pld_composed *c);
/* Tilted mass at losses >= x (a Chernoff bound; 0 when the support is inside the window) */
double dpfl_pld_tilted_above(const pld_side *sd, double x);
/* the error allowance at eps: crel plus what wrapped from above the window down to above eps */
double dpfl_pld_side_rel(const pld_composed *c, const pld_side *sd, double eps);


/* The optimistic discretization of one Poisson-subsampled Gaussian step (q = 1: the Gaussian) in direction dir
 * (0 remove, 1 add) on the grid k h, k = k0 .. k0 + m - 1: out[k - k0] gets P-mass whose loss is >= k h (losses
 * only moved down; mass below (k0 - 1/2) h dropped, mass above the top placed on it).  See pld_lower.c. */
void dpfl_pld_lower_pmf(double q, double z, int dir, double h, int64_t k0, size_t m, double *out);
#endif
