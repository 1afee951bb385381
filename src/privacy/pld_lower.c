/* The optimistic (lower) discretization of one Poisson-subsampled Gaussian step's privacy loss.
 *
 * Post-processing can only make a pair of distributions less distinguishable (data processing inequality for the
 * hockey-stick divergence; Balle, Barthe, Gaboardi 2018): cutting the output line into cells and releasing only
 * the cell gives a pair (P', Q') dominated by (P, Q), whose privacy loss takes the value kappa = log(P(C) / Q(C))
 * on cell C, with P-mass P(C).  It is the "tangent envelope" of the true delta curve (the lower counterpart of
 * connect-the-dots, Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022).  Its losses are then moved DOWN onto the
 * grid: delta(eps) = E_P[(1 - e^{eps - L})_+] is non-decreasing in L pointwise, so moving loss down (or dropping
 * mass to -inf) lowers delta at every eps, for every composition too (Meiser, Mohammadi 2018).  So the composed
 * result's delta curve is below the true one: its epsilon is a lower bound.
 *
 * Tightness: rounding down loses up to one grid step per step and would drift by T h.  The cells are therefore not
 * fixed: each one is grown until its loss kappa just reaches the next grid point l_j (by a margin far above the
 * rounding error of kappa), so the downward move is about 1e-3 h (the solver's tolerance), not h.  Where a cell
 * must reach past the next grid point (the loss's density falls steeply, e.g. at the edge log(1 - q)), the grid
 * points it passes stay empty. */
#include "pld_internal.h"
#include "privacy_internal.h"

#include <math.h>
#include <string.h>

/* The output coordinate v in which the loss is increasing: remove v = x, add v = -x. */
typedef struct {
    double q, z;
    int dir;
} step;

/* loss at v */
static double loss_v(const step *s, double v)
{
    double z2 = s->z * s->z;
    if (s->dir == 0) {
        double t = (2 * v - 1) / (2 * z2);
        return s->q >= 1 ? t : dpfl_logaddexp(log1p(-s->q), log(s->q) + t);
    }
    double t = (-2 * v - 1) / (2 * z2);
    return -(s->q >= 1 ? t : dpfl_logaddexp(log1p(-s->q), log(s->q) + t));
}

/* v where the loss is l (inverse of loss_v); +-inf beyond the loss's range */
static double v_of(const step *s, double l)
{
    double q = s->q, z2 = s->z * s->z;
    double r = s->dir == 0 ? l : -l; /* log(1 - q + q e^t) = r */
    double t;
    if (q >= 1) {
        t = r;
    } else {
        if (r <= log1p(-q)) return s->dir == 0 ? -INFINITY : INFINITY;
        t = r > 30 ? r + log1p((q - 1) * exp(-r)) - log(q) : log((expm1(r) + q) / q);
    }
    double x = z2 * t + 0.5;
    return s->dir == 0 ? x : -x;
}

/* P(V > v), P(V <= v) and the same under Q (remove: P = (1-q) N(0,z^2) + q N(1,z^2), Q = N(0,z^2); add: V = -X,
 * P = N(0,z^2), Q = (1-q) N(0,z^2) + q N(-1,z^2)) */
typedef struct {
    double pt, ph, qt, qh;
} tails;

static tails tails_at(const step *s, double v)
{
    tails t;
    double z = s->z, q = s->q;
    if (v == -INFINITY) return (tails){1, 0, 1, 0};
    if (v == INFINITY) return (tails){0, 1, 0, 1};
    double g_t = dpfl_normal_sf(v / z), g_h = dpfl_normal_cdf(v / z);
    double sh = s->dir == 0 ? (v - 1) / z : (v + 1) / z; /* the shifted component */
    double m_t = (q < 1 ? (1 - q) * g_t : 0) + q * dpfl_normal_sf(sh);
    double m_h = (q < 1 ? (1 - q) * g_h : 0) + q * dpfl_normal_cdf(sh);
    if (s->dir == 0) {
        t.pt = m_t, t.ph = m_h, t.qt = g_t, t.qh = g_h;
    } else {
        t.pt = g_t, t.ph = g_h, t.qt = m_t, t.qh = m_h;
    }
    return t;
}

/* mass of (a, b] from the side where it is accurate */
static double cell_mass(double ta, double ha, double tb, double hb)
{
    double m = ta <= hb ? ta - tb : hb - ha;
    return m > 0 ? m : 0;
}

/* loss of the cell (va, vb]: log(P / Q); sets *pm to its P-mass */
static double cell_loss(const tails *a, const tails *b, double *pm)
{
    double p = cell_mass(a->pt, a->ph, b->pt, b->ph), qm = cell_mass(a->qt, a->qh, b->qt, b->qh);
    *pm = p;
    if (!(p > 0)) return -INFINITY;
    if (!(qm > 0)) return INFINITY;
    return log(p / qm);
}

/* Grow the cell from va until its loss reaches target (kappa is increasing in the right end).  Returns vb. */
static double grow_cell(const step *s, double va, const tails *ta, double target, double tol)
{
    double lo = v_of(s, target); /* a cell ending there has loss < target */
    if (lo == INFINITY) return INFINITY; /* target above every loss: the rest is one cell */
    if (!(lo > va)) lo = va;
    double la = loss_v(s, va);
    double hi = v_of(s, 2 * target - (la > -1e300 ? la : target) + tol);
    double pm, fhi = -1;
    for (int i = 0; i < 60; i++) {
        if (!(hi > lo)) hi = lo + (fabs(lo) + 1) * 1e-9;
        tails tb = tails_at(s, hi);
        fhi = cell_loss(ta, &tb, &pm) - target;
        if (fhi >= 0 || isnan(fhi)) break;
        double step_v = hi - lo;
        lo = hi;
        hi = hi + 2 * step_v;
    }
    if (!(fhi >= 0)) return hi;
    /* Illinois regula falsi on [lo, hi]: f(lo) < 0 <= f(hi) */
    double flo;
    {
        tails tl = tails_at(s, lo);
        flo = lo > va ? cell_loss(ta, &tl, &pm) - target : -INFINITY;
    }
    int side = 0;
    for (int it = 0; it < 40 && fhi > tol; it++) {
        double m;
        if (isfinite(flo) && isfinite(fhi) && fhi - flo > 0)
            m = hi - fhi * (hi - lo) / (fhi - flo);
        else
            m = 0.5 * (lo + hi);
        if (!(m > lo && m < hi)) m = 0.5 * (lo + hi);
        tails tm = tails_at(s, m);
        double fm = cell_loss(ta, &tm, &pm) - target;
        if (fm >= 0) {
            hi = m;
            fhi = fm;
            if (side == 1) flo *= 0.5;
            side = 1;
        } else {
            lo = m;
            flo = fm;
            if (side == -1) fhi *= 0.5;
            side = -1;
        }
        if (hi - lo <= 1e-15 * (fabs(hi) + 1)) break;
    }
    return hi;
}

void dpfl_pld_lower_pmf(double q, double z, int dir, double h, int64_t k0, size_t m, double *out)
{
    step s = {q, z, dir};
    memset(out, 0, m * sizeof *out);
    double tol = 1e-3 * h;
    double va = v_of(&s, ((double)k0 - 0.5) * h); /* mass below is dropped (moved to -inf) */
    tails ta = tails_at(&s, va);
    for (size_t j = 0; j < m; j++) {
        double lj = (double)(k0 + (int64_t)j) * h;
        double margin = 1e-9 * (1 + fabs(lj));
        double vb;
        if (j + 1 == m) {
            vb = INFINITY; /* the last cell takes the rest (its loss is moved down onto the top point) */
        } else if (loss_v(&s, va) >= lj + margin) {
            continue; /* the cell starts above l_j: it goes to a later grid point, l_j stays empty */
        } else {
            vb = grow_cell(&s, va, &ta, lj + margin, tol);
        }
        tails tb = tails_at(&s, vb);
        double pm, kap = cell_loss(&ta, &tb, &pm);
        va = vb;
        ta = tb;
        if (!(pm > 0)) continue;
        /* move down by more than kappa's rounding error (~1e-13 relative); beyond the top: onto the top */
        double place = kap - 1e-10 * (1 + fabs(kap));
        int64_t k = place >= (double)(k0 + (int64_t)m - 1) * h ? k0 + (int64_t)m - 1 : (int64_t)floor(place / h);
        if (k < k0) continue;
        out[k - k0] += pm;
        if (vb == INFINITY) break;
    }
}
