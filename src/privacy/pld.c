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

typedef struct {
    size_t N;
    double h;
    int64_t klo;        /* window = [klo, klo + N) in units of h */
    double *f[2];       /* composed finite pmf per direction (index r <-> k = klo + r) */
    double pinf[2];     /* probability of an infinite loss */
    double slack[2];    /* Chernoff bound on mass above the window + FFT round-off allowance + lost mass */
    int ndir;
    char invalid[200];  /* non-empty: the discretization cannot be trusted here (why) */
} pld_composed;

static void pld_free(pld_composed *c)
{
    for (int d = 0; d < 2; d++) fftw_free(c->f[d]);
}

/* Range of one step's losses that the discretization keeps: [llo, hi].  Below llo the mass (x beyond 10 z) is
 * rounded up onto the grid's first point; above hi one step's delta is below eta_inf and becomes mass at +inf. */
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

/* One event, one direction: discretize on the grid into buf (length N, cyclic), return mass at +inf; also
 * accumulate log-MGF values at the given lambdas into lmgf, and the grid index of its largest finite loss. */
static double discretize(const sgm_ev *e, int dir, double h, int64_t klo, size_t N, double eta_inf, double *buf,
                         const double *lam, size_t nlam, double *lmgf, int64_t *ktop)
{
    double q = e->q, z = e->z;
    double llo, hi;
    event_range(e, dir, eta_inf, &llo, &hi);
    int64_t k0 = (int64_t)floor(llo / h) - 1, k1 = (int64_t)ceil(hi / h) + 1;
    if (k0 < klo) k0 = klo;
    if (k1 > klo + (int64_t)N - 1) k1 = klo + (int64_t)N - 1;
    if (k1 <= k0 + 1) k1 = k0 + 2;
    *ktop = k1;
    size_t m = (size_t)(k1 - k0 + 1);
    double *d = malloc(3 * (m + 1) * sizeof *d);
    DPFL_ASSERT(d);
    double *lm = d + m + 1, *pm = d + 2 * (m + 1);
    double pinf;
    for (size_t j = 0; j < m; j++) {
        double e = (double)(k0 + (int64_t)j) * h;
        d[j] = sgm_delta(q, z, dir, e);
        lm[j] = e < h ? sgm_lambda(q, z, dir, e) : 0.0;
    }
    /* delta is non-increasing and lam non-decreasing; floating noise in the far tails could break that */
    for (size_t j = m - 1; j-- > 0;)
        if (d[j] < d[j + 1]) d[j] = d[j + 1];
    for (size_t j = 1; j < m; j++)
        if ((double)(k0 + (int64_t)j) * h < h && lm[j] < lm[j - 1]) lm[j] = lm[j - 1];
    double eh = exp(h), em1 = expm1(h);
    pinf = d[m - 1];
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
        if (p < 0) p = 0;
        int64_t r = k % (int64_t)N;
        if (r < 0) r += (int64_t)N;
        buf[r] += p;
        pm[j] = p;
    }
    /* log sum_j p_j e^{lam l_j}, shifted by its largest term (a bound on the terms: lam l_j is increasing in j) */
    for (size_t j = 0; j < m; j++) pm[j] = pm[j] > 0 ? log(pm[j]) : -INFINITY;
    for (size_t i = 0; i < nlam; i++) {
        double mx = -INFINITY;
        for (size_t j = 0; j < m; j++) {
            double t = pm[j] + lam[i] * (double)(k0 + (int64_t)j) * h;
            if (t > mx) mx = t;
        }
        double sum = 0;
        for (size_t j = 0; j < m; j++) {
            double t = pm[j] + lam[i] * (double)(k0 + (int64_t)j) * h - mx;
            if (t > -745) sum += exp(t);
        }
        lmgf[i] = mx + log(sum);
    }
    free(d);
    return pinf;
}

static dpfl_status collect(const dpfl_event *ev, size_t nev, sgm_ev **out, size_t *nout, int *need_add,
                           dpfl_error *err)
{
    dpfl_status s = dpfl_events_check(ev, nev, err);
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
                return dpfl_fail(err, DPFL_EINVAL, "PLD accountant: Poisson sampling under replace-one adjacency "
                                                   "is not supported; use the rdp accountant");
            }
        } else {
            free(v);
            char d[160];
            dpfl_event_describe(e, d, sizeof d);
            return dpfl_fail(err, DPFL_EINVAL, "PLD accountant supports Gaussian, Poisson-sampled Gaussian and "
                                               "two-stage events only (got %s); use the rdp accountant", d);
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

#define NLAM_GEOM 22 /* lambda = 2^-1 .. 2^20 */
#define NLAM (NLAM_GEOM + 1) /* + the RDP conversion's optimal order - 1 */

/* win = NULL: window from RDP; else [win[0], win[1]].  On return c->invalid is empty, or says why the composed
 * distribution cannot be trusted (the caller then answers with RDP). */
static dpfl_status compose(const dpfl_event *ev, size_t nev, double delta_hint, size_t bins, const double *win,
                           pld_composed *c, dpfl_error *err)
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
    c->ndir = need_add ? 2 : 1;
    double total = 0; /* steps */
    for (size_t i = 0; i < n; i++) total += (double)v[i].count * (double)v[i].inner;
    /* window: upper end from RDP (P(L > U) <= eta by the classic conversion), lower end symmetric but never
     * below log(eta) (P(L < x) <= e^x under P) */
    double eta = delta_hint * 1e-7;
    if (eta < 1e-300) eta = 1e-300;
    double U = 0, rdp_order = 0;
    if (n) {
        dpfl_event *tmp = malloc(n * sizeof *tmp);
        size_t no;
        const double *ord = dpfl_rdp_default_orders(&no);
        double *r = malloc(no * sizeof *r);
        if (!tmp || !r) {
            free(tmp);
            free(r);
            free(v);
            return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD window)");
        }
        for (size_t i = 0; i < n; i++)
            tmp[i] = mixed(&v[i]) ? dpfl_event_two_stage(v[i].lambda, v[i].q, v[i].z, v[i].inner, v[i].count,
                                                         DPFL_BOUND_RPDP)
                                  : dpfl_event_poisson(v[i].q, v[i].z, v[i].count);
        dpfl_rdp_compose(tmp, n, ord, no, r, NULL);
        U = dpfl_rdp_to_epsilon(ord, r, no, eta, DPFL_CONV_CLASSIC, &rdp_order);
        free(tmp);
        free(r);
    }
    if (!(U > 0)) U = 1e-3;
    double Lo = -fmin(U, -log(eta));
    double eta_inf = delta_hint * 1e-8 / (total > 1 ? total : 1);
    if (win) {
        Lo = win[0];
        U = win[1];
    } else if (n && total <= (double)(N / 8)) {
        /* the composed finite losses lie in [sum T llo, sum T hi] (+ 2 grid steps per step for the rounding):
         * where that is narrower than the RDP window, use it; nothing can then leave the window */
        double lo_all = 0, hi_all = 0;
        for (int dir = 0; dir < c->ndir; dir++) {
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
        if (hi_all < U) U = hi_all;
        if (lo_all > Lo) Lo = lo_all;
        if (!(U > Lo)) U = Lo + 1e-6;
    }
    double reserve = !win && total <= (double)(N / 8) ? 2 * total + 4 : 4;
    double h = (U - Lo) / ((double)N - reserve);
    c->h = h;
    c->klo = (int64_t)floor(Lo / h) - 2;
    if (!(h > 0) || !isfinite(h) || h > 20) {
        snprintf(c->invalid, sizeof c->invalid,
                 "loss grid too coarse (step %.3g over the window [%.3g, %.3g] with %zu bins)", h, Lo, U, N);
        free(v);
        return DPFL_OK;
    }
    /* the T-th power of a spectrum carries a relative round-off of about T * eps * log2(N) */
    double roundoff = 8.0 * total * DBL_EPSILON * log2((double)N);
    if (roundoff > 1e-3) {
        snprintf(c->invalid, sizeof c->invalid,
                 "%.3g composed steps: the FFT's round-off in the %.3g-th power is beyond control", total, total);
        free(v);
        return DPFL_OK;
    }
    double lam[NLAM];
    for (int l = 0; l < NLAM_GEOM; l++) lam[l] = ldexp(1.0, l - 1);
    lam[NLAM_GEOM] = rdp_order > 1 ? rdp_order - 1 : 1;
    size_t nc = N / 2 + 1;
    double *buf = fftw_alloc_real(N);
    fftw_complex *spec = fftw_alloc_complex(nc), *acc = fftw_alloc_complex(nc);
    if (!buf || !spec || !acc) {
        fftw_free(buf);
        fftw_free(spec);
        fftw_free(acc);
        free(v);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD with %zu bins)", N);
    }
    pthread_mutex_lock(&plan_lock);
    fftw_plan fwd = fftw_plan_dft_r2c_1d((int)N, buf, spec, FFTW_ESTIMATE);
    fftw_plan inv = fftw_plan_dft_c2r_1d((int)N, acc, buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    s = DPFL_OK;
    for (int dir = 0; dir < c->ndir; dir++) {
        double log_keep = 0; /* log prob. that no step has infinite loss */
        double lmgf_tot[NLAM] = {0};
        double ktop_tot = 0; /* largest composed finite loss, in grid steps */
        for (size_t j = 0; j < nc; j++) acc[j] = 1.0;
        for (size_t i = 0; i < n; i++) {
            memset(buf, 0, N * sizeof *buf);
            double lm[NLAM];
            int64_t ktop;
            double pinf = discretize(&v[i], dir, h, c->klo, N, eta_inf, buf, lam, NLAM, lm, &ktop);
            double T = (double)v[i].count;
            const int mix = mixed(&v[i]);
            const double lam1 = v[i].lambda, K = (double)v[i].inner;
            if (!mix) {
                log_keep += T * log1p(-pinf);
                ktop_tot += T * (double)ktop;
                for (int l = 0; l < NLAM; l++) lmgf_tot[l] += T * lm[l];
            } else { /* a round: no finite loss only if it took part and some step had an infinite one */
                log_keep += T * log1p(-lam1 * -expm1(K * log1p(-pinf)));
                ktop_tot += T * (lam1 < 1 ? fmax(0, K * (double)ktop) : K * (double)ktop);
                for (int l = 0; l < NLAM; l++)
                    lmgf_tot[l] += T * (lam1 < 1 ? dpfl_logaddexp(log1p(-lam1), log(lam1) + K * lm[l]) : K * lm[l]);
            }
            fftw_execute(fwd);
            if (mix) /* the round's spectrum (1 - lambda) + lambda S^K, in place */
                for (size_t j = 0; j < nc; j++) {
                    double re = creal(spec[j]), im = cimag(spec[j]);
                    double lr = 0.5 * K * log(re * re + im * im), sr = 0, si = 0;
                    if (lr > -745) {
                        double ph = fmod(K * atan2(im, re), 2 * M_PI), mag = exp(lr);
                        sr = mag * cos(ph);
                        si = mag * sin(ph);
                    }
                    spec[j] = ((1 - lam1) + lam1 * sr) + I * (lam1 * si);
                }
            for (size_t j = 0; j < nc; j++) {
                if (acc[j] == 0) continue;
                double re = creal(spec[j]), im = cimag(spec[j]);
                double r2 = re * re + im * im;
                double lr = 0.5 * T * log(r2);
                if (!(lr > -745)) {
                    acc[j] = 0;
                    continue;
                }
                double ph = fmod(T * atan2(im, re), 2 * M_PI);
                double mag = exp(lr), cr = mag * cos(ph), ci = mag * sin(ph);
                double ar = creal(acc[j]), ai = cimag(acc[j]);
                acc[j] = (ar * cr - ai * ci) + I * (ar * ci + ai * cr); /* without __muldc3's inf/nan recovery */
            }
        }
        fftw_execute(inv);
        double *f = fftw_alloc_real(N);
        if (!f) {
            s = dpfl_fail(err, DPFL_ENOMEM, "out of memory (PLD result)");
            break;
        }
        /* cyclic index r holds k = klo + ((r - klo) mod N); rotate so f[i] is k = klo + i */
        double negmax = 0, mass = 0, fmx = 0;
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
            f[r] = val;
            mass += val;
            if (val > fmx) fmx = val;
        }
        c->f[dir] = f;
        c->pinf[dir] = -expm1(log_keep);
        if (!finite || !isfinite(c->pinf[dir])) {
            snprintf(c->invalid, sizeof c->invalid, "the composed distribution is not finite (grid step %.3g)", h);
            break;
        }
        /* the cyclic window keeps all finite mass: what is missing was lost to round-off and is counted as
         * infinite loss; a large discrepancy either way means the arithmetic cannot be trusted */
        double expect = exp(log_keep), lost = expect - mass;
        if (fabs(lost) > 1e-6) {
            snprintf(c->invalid, sizeof c->invalid,
                     "the composed distribution's mass is off by %.3g (FFT round-off over %.3g steps)", lost, total);
            break;
        }
        /* mass above the window: none if the largest composed finite loss is inside it; else min over lambda
         * of exp(sum T log M(lambda) - lambda * top) */
        double top = (double)(c->klo + (int64_t)N) * h;
        double tail = INFINITY;
        if (ktop_tot < (double)(c->klo + (int64_t)N)) {
            tail = 0;
        } else {
            for (int l = 0; l < NLAM; l++) {
                double b = lmgf_tot[l] - lam[l] * top;
                if (b < tail) tail = b;
            }
            tail = exp(tail);
        }
        c->slack[dir] = (tail < 1 ? tail : 1) + fmax(4.0 * negmax, roundoff * fmx) * sqrt((double)N) +
                        (lost > 0 ? lost : 0);
    }
    pthread_mutex_lock(&plan_lock);
    fftw_destroy_plan(fwd);
    fftw_destroy_plan(inv);
    pthread_mutex_unlock(&plan_lock);
    fftw_free(buf);
    fftw_free(spec);
    fftw_free(acc);
    free(v);
    if (s) pld_free(c);
    return s;
}

static double dir_delta(const pld_composed *c, int dir, double eps)
{
    double s = 0;
    const double *f = c->f[dir];
    for (size_t i = c->N; i-- > 0;) {
        double l = (double)(c->klo + (int64_t)i) * c->h;
        if (l <= eps) break;
        s += f[i] * -expm1(eps - l);
    }
    double d = s * (1 + 1e-12) + c->pinf[dir] + c->slack[dir];
    return d > 1 ? 1 : d;
}

/* smallest eps >= 0 with this direction's delta(eps) <= delta, or +inf */
static double dir_epsilon(const pld_composed *c, int dir, double delta)
{
    double target = delta - c->pinf[dir] - c->slack[dir];
    if (target <= 0) return INFINITY;
    target /= (1 + 1e-12);
    const double *f = c->f[dir];
    double h = c->h, emh = exp(-h);
    double A = 0, B = 0; /* A_j = sum_{k>=j} f_k; B_j = sum_{k>=j} f_k e^{-(k-j)h} */
    for (size_t i = c->N; i-- > 0;) {
        A += f[i];
        B = f[i] + emh * B;
        if (!isfinite(A) || !isfinite(B)) return INFINITY; /* never 0 by falling through on NaN */
        double kj = (double)(c->klo + (int64_t)i) * h; /* j h */
        /* delta at eps = (j-1) h: A - e^{-h} B */
        double dlow = A - emh * B;
        if (dlow > target) {
            /* solve A - e^{eps - jh} B = target on [(j-1)h, jh) */
            double e = kj + log((A - target) / B);
            if (e < kj - h) e = kj - h;
            e += 4 * DBL_EPSILON * fabs(e) + 1e-15;
            return e > 0 ? e : 0;
        }
    }
    return 0.0;
}

dpfl_status dpfl_pld_epsilon(const dpfl_event *ev, size_t nev, double delta, size_t bins, double *eps,
                             dpfl_error *err)
{
    if (!(delta > 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", delta);
    pld_composed c;
    dpfl_status s = compose(ev, nev, delta, bins, NULL, &c, err);
    if (s) return s;
    if (c.invalid[0]) {
        pld_free(&c);
        return dpfl_fail(err, DPFL_ENUM, "PLD discretization not valid here: %s", c.invalid);
    }
    double e = 0;
    for (int d = 0; d < c.ndir; d++) {
        double x = dir_epsilon(&c, d, delta);
        if (x > e) e = x;
    }
    if (getenv("DPFL_PLD_DEBUG"))
        for (int d = 0; d < c.ndir; d++)
            fprintf(stderr, "pld dir %d: h=%g klo=%lld N=%zu pinf=%g slack=%g eps=%g\n", d, c.h, (long long)c.klo,
                    c.N, c.pinf[d], c.slack[d], dir_epsilon(&c, d, delta));
    pld_free(&c);
    if (isinf(e))
        return dpfl_fail(err, DPFL_ENUM, "PLD: delta %g is below the discretization's own error allowance",
                         delta);
    *eps = e;
    return DPFL_OK;
}

dpfl_status dpfl_pld_delta(const dpfl_event *ev, size_t nev, double epsilon, size_t bins, double *delta,
                           dpfl_error *err)
{
    if (!(epsilon >= 0) || isinf(epsilon))
        return dpfl_fail(err, DPFL_EINVAL, "epsilon (%g) must be finite and >= 0", epsilon);
    /* the window is sized for deltas around 1e-5 .. 1e-12: size it for a small hint */
    pld_composed c;
    dpfl_status s = compose(ev, nev, 1e-12, bins, NULL, &c, err);
    if (s) return s;
    if (c.invalid[0]) {
        pld_free(&c);
        return dpfl_fail(err, DPFL_ENUM, "PLD discretization not valid here: %s", c.invalid);
    }
    double d = 0;
    for (int k = 0; k < c.ndir; k++) {
        double x = dir_delta(&c, k, epsilon);
        if (x > d) d = x;
    }
    pld_free(&c);
    *delta = d;
    return DPFL_OK;
}
