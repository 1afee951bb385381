/* Privacy loss distributions of (Poisson-subsampled) Gaussian events, composed by FFT.
 *
 * Discretization: the "connect-the-dots" dominating pair (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022).
 * On a grid eps_j = j h the exact hockey-stick curve delta(eps_j) of one step is evaluated in closed form; the
 * discrete pair whose curve linearly interpolates those points (in e^eps) dominates the true pair, because the
 * true curve is convex in e^eps.  Its masses come from second differences of delta:
 *     p_j = ((d_{j-1} - d_j) e^h - (d_j - d_{j+1})) / (e^h - 1),   mass at +inf = d_last.
 * Being a true dominating pair, its composition bounds the composition of the real mechanism, with no rounding
 * drift that grows like T h (plain pessimistic rounding has that).
 *
 * Composition: all events share one grid and one window of N bins; each event's pmf is transformed once (FFTW
 * real-to-complex), raised to its count in polar form, multiplied, and transformed back: the window is cyclic,
 * so mass below the window aliases to its top (only raising delta) and mass above it is bounded by a Chernoff
 * bound from the discrete pair's exact moment generating function and added to delta.  Round-off of the FFT is
 * estimated from the negative values it produces and also added.  Remove and add directions are composed
 * separately and the larger delta (epsilon) is reported.
 *
 * Two-stage events (rPDP-FL: a round takes part with probability lambda, then K Poisson-subsampled steps): with
 * participation treated as visible (a view that only adds information, so its bound is valid for the real
 * mechanism) the round's pair is (1 - lambda) [no output] + lambda [K steps] on both sides, whose loss is 0 on the
 * shared "no output" branch.  The mixture of dominating pairs dominates the mixture for every alpha, so the round's
 * PLD is (1 - lambda) delta_0 + lambda (step PLD)^{*K}: in the Fourier domain R = (1 - lambda) + lambda S^K (a point
 * mass at loss 0 is the constant 1), composed over the rounds as R^T. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"
#include "pld_internal.h"

#include <complex.h>
#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define PLD_DEFAULT_BINS ((size_t)1 << 17)

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

/* Exact one-step hockey-stick divergence, P = (1-q) N(1, z^2) + q..., see Koskela, Jälkö, Honkela 2020; Doroshenko et al. 2022.
 * dir 0 = remove: P = (1-q) N(0,z^2) + q N(1,z^2), Q = N(0,z^2); dir 1 = add: the pair swapped. */
static double sgm_delta(double q, double z, int dir, double eps)
{
    if (q >= 1) {
        /* Gaussian: 1/z-GDP, symmetric */
        double mu = 1.0 / z;
        return dpfl_gdp_delta(mu, eps);
    }
    if (q <= 0) return eps >= 0 ? 0.0 : -expm1(eps);
    double z2 = z * z;
    if (dir == 0) {
        double a = expm1(eps) + q; /* e^eps - (1 - q) */
        if (a <= 0) return -expm1(eps);
        double x = z2 * log(a / q) + 0.5;
        double d = q * dpfl_normal_sf((x - 1) / z) - a * dpfl_normal_sf(x / z);
        return d > 0 ? d : 0;
    }
    double a = expm1(-eps) + q; /* e^-eps - (1 - q) */
    if (a <= 0) return 0.0;
    double x = z2 * log(a / q) + 0.5;
    double d = (1 - exp(eps) * (1 - q)) * dpfl_normal_cdf(x / z) - exp(eps) * q * dpfl_normal_cdf((x - 1) / z);
    if (eps < 0) {
        /* same value, written to avoid 1 - e^eps(1-q) losing precision: (-expm1(eps) + e^eps q) */
        d = (-expm1(eps) + exp(eps) * q) * dpfl_normal_cdf(x / z) - exp(eps) * q * dpfl_normal_cdf((x - 1) / z);
    }
    return d > 0 ? d : 0;
}

/* The other side of the curve: lam(eps) = delta(eps) - (1 - e^eps) = e^eps Q(L <= eps) - P(L <= eps) >= 0.
 * Where eps < 0, delta is close to 1 - e^eps and its second differences would drown in round-off; lam is
 * small there and carries the same information (1 - e^eps contributes exactly nothing to the masses). */
static double sgm_lambda(double q, double z, int dir, double eps)
{
    if (q >= 1) return exp(eps) * dpfl_gdp_delta(1.0 / z, -eps);
    if (q <= 0) return eps <= 0 ? 0.0 : expm1(eps);
    double z2 = z * z;
    if (dir == 0) {
        double a = expm1(eps) + q;
        if (a <= 0) return 0.0;
        double x = z2 * log(a / q) + 0.5;
        double l = a * dpfl_normal_cdf(x / z) - q * dpfl_normal_cdf((x - 1) / z);
        return l > 0 ? l : 0;
    }
    double a = expm1(-eps) + q;
    if (a <= 0) return expm1(eps);
    double x = z2 * log(a / q) + 0.5;
    double ee = exp(eps);
    /* (e^eps (1-q) - 1) = -(a e^eps) */
    double l = -a * ee * dpfl_normal_sf(x / z) + ee * q * dpfl_normal_sf((x - 1) / z);
    return l > 0 ? l : 0;
}

double dpfl_pld_sgm_delta_exact(double q, double z, double epsilon)
{
    double a = sgm_delta(q, z, 0, epsilon), b = sgm_delta(q, z, 1, epsilon);
    return a > b ? a : b;
}

/* Privacy loss at x for the direction (for picking the grid range). */
static double loss_at(double q, double z, int dir, double x)
{
    double t = (2 * x - 1) / (2 * z * z);
    double l;
    if (q >= 1)
        l = t;
    else
        l = dpfl_logaddexp(log1p(-q), log(q) + t);
    return dir == 0 ? l : -l;
}

typedef struct {
    double q, z;
    int64_t count;
    double lambda;  /* two-stage: participation probability per round (1: plain steps) */
    int64_t inner;  /* two-stage: steps per round (1: plain) */
} sgm_ev;

static int mixed(const sgm_ev *e) { return e->lambda < 1 || e->inner > 1; }


void dpfl_pld_composed_free(pld_composed *c)
{
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) fftw_free(c->s[d][k].g);
}

static void event_range(const sgm_ev *e, int dir, double eta_inf, double *llo, double *hi)
{
    double q = e->q, z = e->z;
    double lhi;
    if (dir == 0) {
        *llo = loss_at(q, z, 0, -10 * z);
        lhi = loss_at(q, z, 0, 1 + 10 * z);
    } else {
        *llo = loss_at(q, z, 1, 10 * z);
        lhi = loss_at(q, z, 1, -10 * z);
    }
    double h = lhi;
    if (sgm_delta(q, z, dir, h) > eta_inf) {
        double step = fabs(h) + 1;
        while (sgm_delta(q, z, dir, h + step) > eta_inf && h + step < 1e7) step *= 2;
        h += step;
    }
    *hi = h;
}

/* The grid points [k0, k0 + m) one event's discretization uses (inside the window). */
static void event_support(const sgm_ev *e, int dir, double h, int64_t klo, size_t N, double eta_inf, int64_t *k0p,
                          size_t *mp)
{
    double llo, hi;
    event_range(e, dir, eta_inf, &llo, &hi);
    int64_t k0 = (int64_t)floor(llo / h) - 1, k1 = (int64_t)ceil(hi / h) + 1;
    if (k0 < klo) k0 = klo;
    if (k1 > klo + (int64_t)N - 1) k1 = klo + (int64_t)N - 1;
    if (k1 <= k0 + 1) k1 = k0 + 2;
    *k0p = k0;
    *mp = (size_t)(k1 - k0 + 1);
}

/* The pessimistic (connect-the-dots) discretization of one step on [k0, k0 + m): pm[j] = mass at (k0 + j) h;
 * returns the mass at +inf. */
static double discretize_upper(const sgm_ev *e, int dir, double h, int64_t k0, size_t m, double *pm)
{
    double q = e->q, z = e->z;
    double *d = malloc(2 * (m + 1) * sizeof *d);
    DPFL_ASSERT(d);
    double *lm = d + m + 1;
    for (size_t j = 0; j < m; j++) {
        double x = (double)(k0 + (int64_t)j) * h;
        d[j] = sgm_delta(q, z, dir, x);
        lm[j] = x < h ? sgm_lambda(q, z, dir, x) : 0.0;
    }
    /* delta is non-increasing and lam non-decreasing; floating noise in the far tails could break that */
    for (size_t j = m - 1; j-- > 0;)
        if (d[j] < d[j + 1]) d[j] = d[j + 1];
    for (size_t j = 1; j < m; j++)
        if ((double)(k0 + (int64_t)j) * h < h && lm[j] < lm[j - 1]) lm[j] = lm[j - 1];
    double eh = exp(h), em1 = expm1(h);
    double pinf = d[m - 1];
    for (size_t j = 0; j < m; j++) {
        double p;
        int64_t k = k0 + (int64_t)j;
        /* the lam form needs lam at j-1, j, j+1: all have eps < h when eps_j < 0 */
        if (k < 0 && j + 1 < m) {
            if (j == 0)
                p = -lm[0] + (lm[1] - lm[0]) / em1;
            else
                p = ((lm[j + 1] - lm[j]) - (lm[j] - lm[j - 1]) * eh) / em1;
        } else if (j == 0) {
            p = 1 - d[0] - (d[0] - d[1]) / em1;
        } else if (j == m - 1) {
            p = (d[j - 1] - d[j]) * eh / em1;
        } else {
            p = ((d[j - 1] - d[j]) * eh - (d[j] - d[j + 1])) / em1;
        }
        pm[j] = p > 0 ? p : 0;
    }
    free(d);
    return pinf;
}

/* log sum_j p_j e^{x (k0 + j) h}, from logp[j] = log p_j */
static double lmgf(const double *logp, int64_t k0, size_t m, double h, double x)
{
    double mx = -INFINITY;
    for (size_t j = 0; j < m; j++) {
        double t = logp[j] + x * (double)(k0 + (int64_t)j) * h;
        if (t > mx) mx = t;
    }
    if (mx == -INFINITY) return -INFINITY;
    double s = 0;
    for (size_t j = 0; j < m; j++) {
        double t = logp[j] + x * (double)(k0 + (int64_t)j) * h - mx;
        if (t > -745) s += exp(t);
    }
    return mx + log(s);
}

/* log-MGF of one event's round (two-stage: (1 - lambda) + lambda M^K) from one step's */
static double round_lm(const sgm_ev *e, double lm)
{
    double K = (double)e->inner;
    if (e->lambda < 1) return dpfl_logaddexp(log1p(-e->lambda), log(e->lambda) + K * lm);
    return K * lm;
}

static dpfl_status collect(const dpfl_event *ev, size_t nev, sgm_ev **out, size_t *nout, int *need_add,
                           dpfl_error *err)
{
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (!s) s = dpfl_events_supported(ev, nev, DPFL_ACC_PLD, 1, err);
    if (s) return s;
    sgm_ev *v = malloc((nev ? nev : 1) * sizeof *v);
    if (!v) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD events)");
    size_t n = 0;
    *need_add = 0;
    for (size_t i = 0; i < nev; i++) {
        const dpfl_event *e = &ev[i];
        if (e->count == 0) continue;
        double q, lambda = 1;
        int64_t inner = 1;
        if (e->kind == DPFL_EV_GAUSSIAN) {
            q = 1;
        } else if (e->kind == DPFL_EV_TWO_STAGE) {
            q = e->q;
            lambda = e->lambda;
            inner = e->inner;
            if (lambda <= 0 || inner <= 0) continue;
        } else if (e->kind == DPFL_EV_POISSON) {
            q = e->q;
            if (q < 1 && e->adjacency == DPFL_ADJ_REPLACE_ONE) {
                free(v);
                return dpfl_fail(err, DPFL_EINVAL, "pld accountant does not support poisson events under replace-one "
                                                   "adjacency (event %zu); use rdp", i);
            }
        } else { /* the table gave PLD a kind this function does not compute */
            free(v);
            return dpfl_fail(err, DPFL_EINVAL, "pld accountant: no PLD of %s events is implemented (event %zu)",
                             dpfl_event_kind_name(e->kind), i);
        }
        if (q <= 0) continue;
        if (e->z <= 0) {
            free(v);
            return dpfl_fail(err, DPFL_ENOTPRIVATE, "no guarantee: noise multiplier 0");
        }
        if (q < 1 || lambda < 1) *need_add = 1;
        v[n].q = q;
        v[n].z = e->z;
        v[n].count = e->count;
        v[n].lambda = lambda < 1 ? lambda : 1;
        v[n].inner = inner;
        n++;
    }
    *out = v;
    *nout = n;
    return DPFL_OK;
}

/* per (direction, side): what the events contribute */
typedef struct {
    double logm;              /* sum T log M(lam) */
    double up[NTHETA];        /* sum T log M(lam + theta) */
    double dn[NTHETA];        /* sum T log M(lam - theta) */
    double *e2;               /* per spectral value: estimated variance of its accumulated round-off */
} side_acc;

/* One event, one side: tilt its pmf by e^{lam l} (normalized), transform, raise to its count into acc. */
static void add_event(const sgm_ev *v, const double *pm, int64_t k0, size_t m, double h, double lam, size_t N,
                      int need_up, int need_dn, double *buf, fftw_complex *spec, fftw_plan fwd, fftw_complex *acc,
                      side_acc *sa)
{
    double *logp = malloc(m * sizeof *logp);
    DPFL_ASSERT(logp);
    for (size_t j = 0; j < m; j++) logp[j] = pm[j] > 0 ? log(pm[j]) : -INFINITY;
    const double T = (double)v->count, K = (double)v->inner;
    const int mix = mixed(v);
    double lm0 = lmgf(logp, k0, m, h, lam);
    sa->logm += T * round_lm(v, lm0);
    for (int s = 0; s < NTHETA; s++) {
        double th = dpfl_pld_theta[s];
        if (need_up) sa->up[s] += T * round_lm(v, lmgf(logp, k0, m, h, lam + th));
        if (need_dn) sa->dn[s] += T * round_lm(v, lmgf(logp, k0, m, h, lam - th));
    }
    memset(buf, 0, N * sizeof *buf);
    double g2 = 0;
    for (size_t j = 0; j < m; j++) {
        if (logp[j] == -INFINITY) continue;
        int64_t k = k0 + (int64_t)j;
        double g = exp(logp[j] + lam * (double)k * h - lm0);
        int64_t r = k % (int64_t)N;
        if (r < 0) r += (int64_t)N;
        buf[r] += g;
        g2 += g * g;
    }
    free(logp);
    fftw_execute(fwd);
    size_t nc = N / 2 + 1;
    /* round-off, estimated as independent errors: the forward transform puts an error of rms 2 u log2(N) |g|_2 on
     * each spectral value (Higham, Accuracy and Stability of Numerical Algorithms, sec. 24.1), the powers
     * multiply it by their derivative, and each power adds a relative error of about 4 T u (log and phase) */
    const double ef = 2 * DBL_EPSILON * log2((double)N) * sqrt(g2);
    double w = mix ? exp(log(v->lambda) + K * lm0 - round_lm(v, lm0)) : 1;
    for (size_t j = 0; j < nc; j++) {
        double re = creal(spec[j]), im = cimag(spec[j]);
        double dr = ef; /* error of the round's spectral value */
        if (mix) { /* the round's spectrum (1 - w) + w S^K, w = lambda M^K / M_round */
            double lr = 0.5 * K * log(re * re + im * im), sr = 0, si = 0, mag = exp(lr);
            if (lr > -745) {
                double ph = fmod(K * atan2(im, re), 2 * M_PI);
                sr = mag * cos(ph);
                si = mag * sin(ph);
            }
            dr = w * K * exp(lr * (K - 1) / K) * ef + 4 * K * DBL_EPSILON * w * mag;
            re = (1 - w) + w * sr;
            im = w * si;
        }
        double ar = creal(acc[j]), ai = cimag(acc[j]);
        double l2 = log(re * re + im * im);
        double lr = 0.5 * T * l2;
        double mx = exp(lr), ma2 = ar * ar + ai * ai;
        double dx = T * exp(0.5 * (T - 1) * l2) * dr + 4 * T * DBL_EPSILON * mx; /* error of R^T */
        sa->e2[j] = mx * mx * sa->e2[j] + ma2 * dx * dx;
        if (acc[j] == 0) continue;
        if (!(lr > -745)) {
            acc[j] = 0;
            continue;
        }
        double ph = fmod(T * atan2(im, re), 2 * M_PI);
        double cr = mx * cos(ph), ci = mx * sin(ph);
        acc[j] = (ar * cr - ai * ci) + I * (ar * ci + ai * cr); /* without __muldc3's inf/nan recovery */
    }
}

/* Tilted mass at losses >= x (a Chernoff bound; 0 when the support is inside the window) */
double dpfl_pld_tilted_above(const pld_side *sd, double x)
{
    double a = 0; /* the smallest exponent, then one exp (exp is monotone): min(1, min_s e^{up_s - theta_s x}) */
    for (int s = 0; s < NTHETA; s++)
        if (sd->up[s] > -INFINITY) a = fmin(a, sd->up[s] - dpfl_pld_theta[s] * x);
        else return 0;
    return exp(a);
}

/* the error allowance at eps: crel plus what wrapped from above the window down to above eps */
double dpfl_pld_side_rel(const pld_composed *c, const pld_side *sd, double eps)
{
    return sd->crel + dpfl_pld_tilted_above(sd, eps + (double)c->N * c->h);
}

/* Back from the spectrum: g (rotated so g[i] is k = klo + i) and the side's error allowances. */
static int finish_side(pld_composed *c, double *buf, fftw_plan inv, const side_acc *sa,
                       int need_up, int need_dn, double total, pld_side *out)
{
    size_t N = c->N, nc = N / 2 + 1;
    double h = c->h, lam = c->lam;
    double var = 0; /* sum of the spectral error variances over the full spectrum */
    for (size_t j = 0; j < nc; j++) var += (j == 0 || j == nc - 1 ? 1.0 : 2.0) * sa->e2[j];
    fftw_execute(inv);
    double *g = fftw_alloc_real(N);
    if (!g) return -1;
    out->g = g;
    double negmax = 0, mass = 0, g2 = 0;
    int finite = 1;
    for (size_t r = 0; r < N; r++) {
        int64_t k = c->klo + (int64_t)r;
        int64_t src = k % (int64_t)N;
        if (src < 0) src += (int64_t)N;
        double val = buf[src] / (double)N;
        if (!isfinite(val)) finite = 0;
        if (val < 0) {
            if (-val > negmax) negmax = -val;
            val = 0;
        }
        g[r] = val;
        mass += val;
        g2 += val * val;
    }
    out->logm = sa->logm;
    if (!finite || !isfinite(sa->logm)) {
        snprintf(c->invalid, sizeof c->invalid, "the composed distribution is not finite (grid step %.3g)", h);
        return 0;
    }
    /* the tilted composition is a probability distribution: what is missing was lost to round-off */
    double lost = 1 - mass;
    if (fabs(lost) > 1e-6) {
        snprintf(c->invalid, sizeof c->invalid,
                 "the composed distribution's mass is off by %.3g (FFT round-off over %.3g steps)", lost, total);
        return 0;
    }
    /* tilted mass beyond the window (it wrapped around): Chernoff bounds with the tilted MGF.  Mass above the
     * window lands N bins lower, so only what lies above eps + N h can land above eps (see tilted_above); mass
     * below the window lands at its top. */
    double top = (double)(c->klo + (int64_t)N) * h, bot = (double)c->klo * h;
    double w_dn = 0;
    for (int s = 0; s < NTHETA; s++) out->up[s] = need_up ? sa->up[s] - sa->logm : -INFINITY;
    if (need_dn) {
        w_dn = INFINITY;
        for (int s = 0; s < NTHETA; s++) w_dn = fmin(w_dn, exp(sa->dn[s] - sa->logm + dpfl_pld_theta[s] * bot));
        w_dn = fmin(w_dn, 1);
    }
    /* per-bin error: rms of the spectral errors through the inverse transform, plus the inverse transform's own
     * (2 u log2(N) |g|_2 in l2); the largest of N such errors is ~sqrt(2 ln N) rms: taken 10 times over, and never
     * below 4x the largest negative value the transform produced (a direct witness of the error's size) */
    double rms = sqrt(var) / (double)N + 2 * DBL_EPSILON * log2((double)N) * sqrt(g2 / (double)N);
    double r = fmax(4.0 * negmax, 10 * sqrt(2 * log((double)N)) * rms);
    double nb = lam * h > 0 ? fmin((double)N, 1 / -expm1(-lam * h)) : (double)N;
    out->crel = w_dn + r * nb;
    out->lost = fabs(lost);
    out->cabs = need_up ? exp(sa->logm - lam * top) * dpfl_pld_tilted_above(out, top) : 0;
    return 0;
}

/* The tilt: the saddle point of the Chernoff bound of the loss's tail, from the composed RDP curve (log E[e^{lam L}]
 * = lam RDP(lam + 1)): for a delta query the lam of the classic conversion at delta, for an epsilon query the lam
 * minimising lam (RDP(lam + 1) - eps).  The tilted composition is then centred near the epsilon asked for (or given),
 * where relative accuracy matters.  Golden-section search in log lam over [1e-3, 2e3]. */
static double tilt_objective(const dpfl_event *tmp, size_t n, double lam, double delta, double eps)
{
    double a = lam + 1, r;
    if (dpfl_rdp_compose(tmp, n, &a, 1, &r, NULL) || !isfinite(r)) return INFINITY;
    return isnan(eps) ? r + log(1 / delta) / lam : lam * (r - eps);
}

static double pick_tilt(const dpfl_event *tmp, size_t n, double delta, double eps)
{
    const double g = 0.3819660112501051;
    double a = log(1e-3), b = log(2e3);
    double x1 = a + g * (b - a), x2 = b - g * (b - a);
    double f1 = tilt_objective(tmp, n, exp(x1), delta, eps), f2 = tilt_objective(tmp, n, exp(x2), delta, eps);
    for (int i = 0; i < 40; i++) {
        if (f1 <= f2) {
            b = x2, x2 = x1, f2 = f1;
            x1 = a + g * (b - a);
            f1 = tilt_objective(tmp, n, exp(x1), delta, eps);
        } else {
            a = x1, x1 = x2, f1 = f2;
            x2 = b - g * (b - a);
            f2 = tilt_objective(tmp, n, exp(x2), delta, eps);
        }
    }
    double lam = exp(0.5 * (a + b));
    return isfinite(lam) ? lam : 0;
}

/* The loss window's upper end from RDP (P(L > U) <= eta by the classic conversion) and the tilt for the query. */
static dpfl_status rdp_window(const sgm_ev *v, size_t n, double delta_hint, double eps_query, double eta, double *U,
                              double *lam, dpfl_error *err)
{
    dpfl_event *tmp = malloc(n * sizeof *tmp);
    size_t no;
    const double *ord = dpfl_rdp_default_orders(&no);
    double *r = malloc(no * sizeof *r);
    if (!tmp || !r) {
        free(tmp);
        free(r);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD window)");
    }
    for (size_t i = 0; i < n; i++)
        tmp[i] = mixed(&v[i]) ? dpfl_event_two_stage(v[i].lambda, v[i].q, v[i].z, v[i].inner, v[i].count,
                                                     DPFL_BOUND_RPDP)
                              : dpfl_event_poisson(v[i].q, v[i].z, v[i].count);
    dpfl_rdp_compose(tmp, n, ord, no, r, NULL);
    *U = dpfl_rdp_to_epsilon(ord, r, no, eta, DPFL_CONV_CLASSIC, NULL);
    *lam = pick_tilt(tmp, n, delta_hint, eps_query);
    free(tmp);
    free(r);
    return DPFL_OK;
}

/* The composed finite losses lie in [sum T llo, sum T hi] (+ 2 grid steps per step for the rounding): where that
 * is narrower than [*Lo, *U], use it; nothing can then leave the window. */
static void narrow_to_support(const sgm_ev *v, size_t n, int ndir, double eta_inf, double *Lo, double *U)
{
    double lo_all = 0, hi_all = 0;
    for (int dir = 0; dir < ndir; dir++) {
        double slo = 0, shi = 0;
        for (size_t i = 0; i < n; i++) {
            double llo, hi;
            event_range(&v[i], dir, eta_inf, &llo, &hi);
            double K = (double)v[i].inner; /* a two-stage round: 0 (sat out) or K steps */
            slo += (double)v[i].count * (v[i].lambda < 1 ? fmin(0, K * llo) : K * llo);
            shi += (double)v[i].count * (v[i].lambda < 1 ? fmax(0, K * hi) : K * hi);
        }
        if (slo < lo_all) lo_all = slo;
        if (shi > hi_all) hi_all = shi;
    }
    if (hi_all < *U) *U = hi_all;
    if (lo_all > *Lo) *Lo = lo_all;
    if (!(*U > *Lo)) *U = *Lo + 1e-6;
}

/* The loss grid: c->h and c->klo over [Lo, U], or c->invalid when the grid or the FFT's round-off cannot be
 * trusted.  Where the window holds the whole support, each step's grid rounds its ends out by up to 2 bins, so 2
 * bins per step stay free at both ends. */
static void loss_grid(pld_composed *c, double Lo, double U, double total)
{
    const size_t N = c->N;
    int whole = total <= (double)(N / 8);
    double reserve = whole ? 4 * total + 8 : 4;
    double h = (U - Lo) / ((double)N - reserve);
    c->h = h;
    c->klo = (int64_t)floor(Lo / h) - (whole ? (int64_t)(2 * total) + 4 : 2);
    if (!(h > 0) || !isfinite(h) || h > 20) {
        snprintf(c->invalid, sizeof c->invalid,
                 "loss grid too coarse (step %.3g over the window [%.3g, %.3g] with %zu bins)", h, Lo, U, N);
        return;
    }
    /* the T-th power of a spectrum carries a relative round-off of about T * eps * log2(N) */
    double roundoff = 8.0 * total * DBL_EPSILON * log2((double)N);
    if (roundoff > 1e-3)
        snprintf(c->invalid, sizeof c->invalid,
                 "%.3g composed steps: the FFT's round-off in the %.3g-th power is beyond control", total, total);
}

/* The window and grid of a composition: c->N, ndir, nside, lam, h, klo (or c->invalid); *total: the steps. */
static dpfl_status plan_window(const sgm_ev *v, size_t n, int need_add, double delta_hint, double eps_query,
                               double span, double *total, double *eta_inf, pld_composed *c, dpfl_error *err)
{
    *total = 0;
    for (size_t i = 0; i < n; i++) *total += (double)v[i].count * (double)v[i].inner;
    c->ndir = need_add ? 2 : 1;
    /* window: upper end from RDP, lower end symmetric but never below log(eta) (P(L < x) <= e^x under P) */
    double eta = delta_hint * 1e-7;
    if (eta < 1e-300) eta = 1e-300;
    double U = 0;
    if (n) {
        dpfl_status s = rdp_window(v, n, delta_hint, eps_query, eta, &U, &c->lam, err);
        if (s) return s;
    }
    if (!(U > 0)) U = 1e-3;
    double Lo = -fmin(U, -log(eta));
    U *= span; /* a wider window: less tilted mass wraps around from above (see again) */
    *eta_inf = delta_hint * 1e-8 / (*total > 1 ? *total : 1);
    if (n && *total <= (double)(c->N / 8)) narrow_to_support(v, n, c->ndir, *eta_inf, &Lo, &U);
    loss_grid(c, Lo, U, *total);
    return DPFL_OK;
}

/* FFTW's buffers and plans of one composition: the forward transform of an event, and per side its accumulated
 * spectrum, round-off bound and inverse transform. */
typedef struct {
    size_t nc;
    double *buf;
    fftw_complex *spec, *acc[2];
    double *e2[2];
    fftw_plan fwd, inv[2];
} pld_fft;

static void fft_free(pld_fft *f)
{
    pthread_mutex_lock(&plan_lock);
    if (f->fwd) fftw_destroy_plan(f->fwd);
    for (int k = 0; k < 2; k++)
        if (f->inv[k]) fftw_destroy_plan(f->inv[k]);
    pthread_mutex_unlock(&plan_lock);
    fftw_free(f->buf);
    fftw_free(f->spec);
    for (int k = 0; k < 2; k++) {
        fftw_free(f->acc[k]);
        fftw_free(f->e2[k]);
    }
}

static dpfl_status fft_alloc(pld_fft *f, size_t N, dpfl_error *err)
{
    memset(f, 0, sizeof *f);
    f->nc = N / 2 + 1;
    f->buf = fftw_alloc_real(N);
    f->spec = fftw_alloc_complex(f->nc);
    for (int k = 0; k < 2; k++) {
        f->acc[k] = fftw_alloc_complex(f->nc);
        f->e2[k] = fftw_alloc_real(f->nc);
    }
    if (!f->buf || !f->spec || !f->acc[0] || !f->acc[1] || !f->e2[0] || !f->e2[1]) {
        fft_free(f);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD with %zu bins)", N);
    }
    pthread_mutex_lock(&plan_lock);
    f->fwd = fftw_plan_dft_r2c_1d((int)N, f->buf, f->spec, FFTW_ESTIMATE);
    f->inv[0] = fftw_plan_dft_c2r_1d((int)N, f->acc[0], f->buf, FFTW_ESTIMATE);
    f->inv[1] = fftw_plan_dft_c2r_1d((int)N, f->acc[1], f->buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    return DPFL_OK;
}

/* One direction's composition: every event discretized (both sides with want_lower) into its side's spectrum, the
 * sides finished into c->s[dir], the mass at infinity added to the upper side. */
static dpfl_status compose_direction(pld_composed *c, const sgm_ev *v, size_t n, int dir, double eta_inf,
                                     double total, pld_fft *f, dpfl_error *err)
{
    const size_t N = c->N;
    const double h = c->h;
    /* the composed support in grid steps: does it leave the window? */
    double kbot = 0, ktop = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t k0;
        size_t m;
        event_support(&v[i], dir, h, c->klo, N, eta_inf, &k0, &m);
        double T = (double)v[i].count, K = (double)v[i].inner, k1 = (double)(k0 + (int64_t)m - 1);
        kbot += T * (v[i].lambda < 1 ? fmin(0, K * (double)k0) : K * (double)k0);
        ktop += T * (v[i].lambda < 1 ? fmax(0, K * k1) : K * k1);
    }
    int need_up = ktop >= (double)(c->klo + (int64_t)N), need_dn = kbot < (double)c->klo;
    double log_keep = 0; /* log prob. that no step has infinite loss */
    side_acc sa[2];
    memset(sa, 0, sizeof sa);
    for (int k = 0; k < c->nside; k++) {
        sa[k].e2 = f->e2[k];
        for (size_t j = 0; j < f->nc; j++) f->acc[k][j] = 1.0, f->e2[k][j] = 0;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t k0;
        size_t m;
        event_support(&v[i], dir, h, c->klo, N, eta_inf, &k0, &m);
        double *pm = malloc(m * sizeof *pm);
        if (!pm) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD event)");
        double pinf = discretize_upper(&v[i], dir, h, k0, m, pm);
        double T = (double)v[i].count, lam1 = v[i].lambda, K = (double)v[i].inner;
        if (!mixed(&v[i])) /* a round: no finite loss only if it took part and some step had an infinite one */
            log_keep += T * log1p(-pinf);
        else
            log_keep += T * log1p(-lam1 * -expm1(K * log1p(-pinf)));
        add_event(&v[i], pm, k0, m, h, c->lam, N, need_up, need_dn, f->buf, f->spec, f->fwd, f->acc[0], &sa[0]);
        if (c->nside > 1) {
            dpfl_pld_lower_pmf(v[i].q, v[i].z, dir, h, k0, m, pm);
            add_event(&v[i], pm, k0, m, h, c->lam, N, need_up, need_dn, f->buf, f->spec, f->fwd, f->acc[1], &sa[1]);
        }
        free(pm);
    }
    for (int k = 0; k < c->nside && !c->invalid[0]; k++) {
        if (finish_side(c, f->buf, f->inv[k], &sa[k], need_up, need_dn, total, &c->s[dir][k]))
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD result)");
    }
    if (!c->invalid[0]) {
        double pinf = -expm1(log_keep);
        if (!isfinite(pinf)) {
            snprintf(c->invalid, sizeof c->invalid, "the mass at infinity is not finite");
            return DPFL_OK;
        }
        c->s[dir][0].cabs += pinf; /* the lower side drops the mass at +inf (a move down) */
    }
    return DPFL_OK;
}

/* Composes both directions (and, with want_lower, the optimistic discretization beside the pessimistic one), tilted
 * for the query: for delta_hint (eps_query = NaN) or for eps_query.  On return c->invalid is empty, or says why the composed distribution
 * cannot be trusted (the caller then answers with RDP). */
dpfl_status dpfl_pld_compose(const dpfl_event *ev, size_t nev, double delta_hint, double eps_query, size_t bins,
                           double span, int want_lower, pld_composed *c, dpfl_error *err)
{
    memset(c, 0, sizeof *c);
    sgm_ev *v = NULL;
    size_t n = 0;
    int need_add = 0;
    dpfl_status s = collect(ev, nev, &v, &n, &need_add, err);
    if (s) return s;
    size_t N = bins ? bins : PLD_DEFAULT_BINS;
    if (N < 1024 || (N & 1)) {
        free(v);
        return dpfl_fail(err, DPFL_EINVAL, "PLD bins (%zu) must be even and >= 1024", N);
    }
    c->N = N;
    c->nside = want_lower ? 2 : 1;
    double total, eta_inf;
    s = plan_window(v, n, need_add, delta_hint, eps_query, span, &total, &eta_inf, c, err);
    if (s || c->invalid[0]) {
        free(v);
        return s;
    }
    pld_fft f;
    s = fft_alloc(&f, N, err);
    if (!s) {
        for (int dir = 0; dir < c->ndir && !s && !c->invalid[0]; dir++)
            s = compose_direction(c, v, n, dir, eta_inf, total, &f, err);
        fft_free(&f);
    }
    free(v);
    if (s) dpfl_pld_composed_free(c);
    return s;
}
