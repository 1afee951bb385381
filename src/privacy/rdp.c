/* Renyi DP of the Gaussian mechanism under Poisson sampling (Mironov-Talwar-Zhang 2019), fixed-size sampling
 * without replacement (Wang-Balle-Kasiviswanathan 2019) and two-stage client x record sampling (rPDP-FL,
 * joint convexity: participation is visible), and of the exact discrete Gaussian on integer values (Canonne-Kamath-
 * Steinke 2020: the Gaussian's alpha / (2 z^2)).  Everything is computed in log space and rounded towards larger RDP.
 *
 * Why (A - 1) and not A: for small q, A_alpha = 1 + O(q^2) and log(A) computed from a sum that is ~1 loses all
 * relative precision (an RDP of 1e-14 would come out as 0, i.e. below the truth).  The binomial expansion of
 * A_alpha - 1 has only non-negative terms (the i = 0, 1 terms cancel exactly), so it is summed directly. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <float.h>
#include <gsl/gsl_sf_erf.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* log(i) for i < LOGTAB, filled once: the binomial sums below are dominated by log/exp calls otherwise. */
#define LOGTAB 4100
static double logtab[LOGTAB];
static pthread_once_t logtab_once = PTHREAD_ONCE_INIT;
static void logtab_init(void)
{
    logtab[0] = -INFINITY;
    for (int i = 1; i < LOGTAB; i++) logtab[i] = log((double)i);
}
static inline double logi(int i)
{
    return i < LOGTAB ? logtab[i] : log((double)i);
}

/* log of the sum of exp(t[i]), i < n, two passes (one exp per term). */
static double lse(const double *t, int n)
{
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (t[i] > m) m = t[i];
    if (m == -INFINITY || isinf(m)) return m;
    double s = 0;
    for (int i = 0; i < n; i++)
        if (t[i] > m - 745) s += exp(t[i] - m);
    return m + log(s);
}

/* RDP of SGM at an integer order alpha >= 2 (add/remove, the MTZ dominating direction). */
double dpfl_rdp_int_sgm(double q, double z, int alpha)
{
    if (q <= 0) return 0.0;
    if (z <= 0) return INFINITY;
    double inv2z2 = 1.0 / (2.0 * z * z);
    if (q >= 1) return alpha * inv2z2;
    pthread_once(&logtab_once, logtab_init);
    double lq = log(q), l1q = log1p(-q);
    double stackbuf[512];
    double *t = alpha + 1 <= 512 ? stackbuf : malloc((size_t)(alpha + 1) * sizeof *t);
    DPFL_ASSERT(t);
    double lbin = logi(alpha) + logi(alpha - 1) - logi(2); /* log C(alpha, 2) */
    for (int i = 2; i <= alpha; i++) {
        if (i > 2) lbin += logi(alpha - i + 1) - logi(i);
        double x = (double)i * (i - 1) * inv2z2;
        t[i - 2] = lbin + (alpha - i) * l1q + i * lq + (x > 40 ? x : dpfl_log_expm1(x));
    }
    double acc = lse(t, alpha - 1); /* log(A - 1) */
    if (t != stackbuf) free(t);
    /* log A = log1p(A - 1); pad by a few ulps of the result for the rounding in the sum */
    double logA = acc > 30 ? acc + log1p(exp(-acc)) : log1p(exp(acc));
    double r = logA / (alpha - 1);
    return r * (1 + 256 * DBL_EPSILON) + DBL_MIN;
}

/* log A_alpha for fractional alpha by the two-series formula of Mironov-Talwar-Zhang (section 3.3), summed in
 * linear scale after one max-shift.  *err_rel bounds the relative rounding error of the result. */
#define FRAC_MAX_TERMS 1200
static double frac_sgm_logA(double q, double z, double alpha, double *err_rel)
{
    double z2 = z * z;
    double lq = log(q), l1q = log1p(-q);
    double z0 = z2 * log(1.0 / q - 1.0) + 0.5;
    double s2z = sqrt(2.0) * z;
    double *ls = malloc(2 * FRAC_MAX_TERMS * sizeof *ls);
    signed char *sg = malloc(FRAC_MAX_TERMS);
    DPFL_ASSERT(ls && sg);
    double lcoef = 0.0, sgn = 1.0, mx = -INFINITY;
    int n = 0;
    for (int i = 0; i < FRAC_MAX_TERMS; i++) {
        if (i > 0) {
            double f = (alpha - i + 1) / (double)i;
            lcoef += log(fabs(f));
            if (f < 0) sgn = -sgn;
        }
        double j = alpha - i;
        double ls0 = lcoef + i * lq + j * l1q + (i * (double)i - i) / (2 * z2) + log(0.5) +
                     gsl_sf_log_erfc((i - z0) / s2z);
        double ls1 = lcoef + j * lq + i * l1q + (j * j - j) / (2 * z2) + log(0.5) + gsl_sf_log_erfc((z0 - j) / s2z);
        ls[2 * i] = ls0;
        ls[2 * i + 1] = ls1;
        sg[i] = (signed char)sgn;
        n = i + 1;
        if (ls0 > mx) mx = ls0;
        if (ls1 > mx) mx = ls1;
        /* Beyond alpha the terms alternate in sign and shrink like |binom(alpha, i)| ~ i^(-alpha-1) (the
         * exponential factors cancel exactly), so the omitted tail is at most about the last term. */
        if (i > alpha + 1 && ls0 < mx - 42 && ls1 < mx - 42) break;
    }
    double last = dpfl_logaddexp(ls[2 * (n - 1)], ls[2 * (n - 1) + 1]);
    double sum = 0, sabs = 0;
    for (int i = 0; i < n; i++) {
        double v = exp(ls[2 * i] - mx) + exp(ls[2 * i + 1] - mx);
        sum += sg[i] * v;
        sabs += v;
    }
    free(ls);
    free(sg);
    /* rounding: each addition errs by <= eps * partial sum <= eps * sum|terms|; the truncated alternating tail
     * is bounded by twice the last term kept */
    *err_rel = sum > 0 ? (4.0 * n * DBL_EPSILON * sabs + 2.0 * exp(last - mx)) / sum : INFINITY;
    if (sum <= 0) return INFINITY; /* cancellation ate the value: caller falls back to the integer bound */
    return mx + log(sum);
}

double dpfl_rdp_sgm(double q, double z, double alpha)
{
    if (!(alpha > 1)) return NAN;
    if (q <= 0) return 0.0;
    if (z <= 0) return INFINITY;
    if (q >= 1) return alpha / (2.0 * z * z);
    double fl = floor(alpha);
    if (alpha == fl) return dpfl_rdp_int_sgm(q, z, (int)alpha);
    /* Upper bound from the integer neighbours: (alpha - 1) eps(alpha) = log A_alpha is convex in alpha and
     * log A_1 = 0, so it lies below the chord between floor and ceil. */
    int k = (int)fl;
    double t = alpha - fl;
    double lo = k >= 2 ? (k - 1) * dpfl_rdp_int_sgm(q, z, k) : 0.0;
    double hi = k * dpfl_rdp_int_sgm(q, z, k + 1);
    double chord = ((1 - t) * lo + t * hi) / (alpha - 1);
    double err;
    double logA = frac_sgm_logA(q, z, alpha, &err);
    if (!isfinite(logA)) return chord;
    /* log(A (1 + err)) <= logA + err */
    double exact = (logA + err) / (alpha - 1);
    if (exact < 0) exact = 0;
    double r = exact < chord ? exact : chord;
    return r * (1 + 64 * DBL_EPSILON) + DBL_MIN;
}

/* Fixed-size sampling without replacement (replace-one): Wang-Balle-Kasiviswanathan 2019, Theorem 9 with the
 * Gaussian-specific moment bound of their appendix (the form dp_accounting, autodp and TF Privacy implement as
 * "Theorem 27").  gamma = batch / n, eps(j) = j / (2 z^2), f(k) = e^{(k-1) eps(k)} = e^{k (k-1) / (2 z^2)}:
 *
 *   (a-1) eps_WOR(a) <= log(1 + gamma^2 C(a,2) min(4 (f(2) - 1), 2 f(2))
 *                             + sum_{j=3..a} gamma^j C(a,j) min(4 B_j, 2 f(j)))          (integer a >= 2)
 *
 * B_j = Delta^j f(0) = sum_k C(j,k) (-1)^{j-k} f(k) = E_{N(0,z^2)}[(N(1,z^2)/N(0,z^2) - 1)^j] for even j, and
 * sqrt(B_{j-1} B_{j+1}) >= E|.|^j (Cauchy-Schwarz) for odd j.  2 f(j) is the generic Theorem 9 term; without the
 * 4 B_j alternative the j >= 3 terms do not shrink as z grows.  The result is also capped by the plain Gaussian
 * a / (2 z^2) (joint convexity of e^{(a-1) D_a}: every coupled pair of batches differs in one record), which is
 * exact at gamma = 1.
 *
 * The even forward differences are alternating sums that cancel badly when z is large (B_j ~ (j-1)!! / z^j
 * while the terms are ~ C(j,k)); they are summed in double with an explicit bound on the rounding error, and that
 * bound is added before the min with 2 f(j), so where cancellation eats the digits the generic term is used.
 * Beyond WOR_JMAX the generic term is used outright (there the certified B_j could only help if double had
 * hundreds of digits). */
#define WOR_JMAX 256

typedef struct {
    double z;
    int ok;
    /* lm[j] = log min(4 B_j, 2 f(j)) for 3 <= j <= WOR_JMAX (upper bound) */
    double lm[WOR_JMAX + 1];
} wor_terms;

static _Thread_local wor_terms wor_cache;

/* log of an upper bound on B_j = Delta^j f(0) for even j >= 2; x(k) = k (k-1) / (2 z^2). */
static double wor_log_even_moment(double inv2z2, int j)
{
    double xj = (double)j * (j - 1) * inv2z2;
    double pos = 0, neg = 0, c = 1; /* c = C(j, k), iterated */
    for (int k = 0; k <= j; k++) {
        if (k > 0) c = c * (double)(j - k + 1) / (double)k;
        double t = c * exp((double)k * (k - 1) * inv2z2 - xj);
        if ((j - k) % 2 == 0)
            pos += t;
        else
            neg += t;
    }
    /* Relative error of each term: the binomial recursion (<= 2j eps), exp of an argument carrying an absolute
     * error <= 7 eps xj (<= 7 eps xj + eps relative); the two sums add <= (j + 1) eps (pos + neg).  Constants
     * doubled for safety. */
    double abs_sum = pos + neg;
    double err = abs_sum * DBL_EPSILON * (4.0 * j + 16.0 * xj + 16.0);
    double s = (pos - neg) + err;
    s *= 1 + 4 * DBL_EPSILON;
    if (!(s > 0)) return INFINITY; /* cannot happen (B_j > 0 and |error| <= err); stay safe */
    return xj + log(s);
}

static const wor_terms *wor_terms_for(double z)
{
    wor_terms *w = &wor_cache;
    if (w->ok && w->z == z) return w;
    double inv2z2 = 1.0 / (2.0 * z * z);
    double le[WOR_JMAX + 2]; /* le[j] = log B_j (upper bound) for even j */
    for (int j = 2; j <= WOR_JMAX + 1; j += 2) le[j] = wor_log_even_moment(inv2z2, j);
    for (int j = 3; j <= WOR_JMAX; j++) {
        double lb = j % 2 == 0 ? le[j] : 0.5 * (le[j - 1] + le[j + 1]);
        double generic = log(2.0) + (double)j * (j - 1) * inv2z2;
        double specific = log(4.0) + lb;
        w->lm[j] = specific < generic ? specific : generic;
    }
    w->z = z;
    w->ok = 1;
    return w;
}

/* (a - 1) * eps_WOR(a) for an integer order a >= 2 and 0 < g < 1, rounded up. */
static double fixed_cgf_int(double g, double z, int alpha)
{
    pthread_once(&logtab_once, logtab_init);
    const wor_terms *w = wor_terms_for(z);
    double inv2z2 = 1.0 / (2.0 * z * z);
    double lg = log(g);
    double lbin = logi(alpha) + logi(alpha - 1) - logi(2); /* log C(alpha, 2) */
    double m2 = fmin(log(4.0) + dpfl_log_expm1(2 * inv2z2), log(2.0) + 2 * inv2z2);
    double acc = 2 * lg + lbin + m2;
    /* every log term is a sum of a few quantities of magnitude <= mag, each rounded, plus lbin's running sum of
     * alpha logs: its absolute error is at most about (alpha + 8) eps mag */
    double mag = fabs(lbin) + fabs(2 * lg) + fabs(m2);
    for (int j = 3; j <= alpha; j++) {
        lbin += logi(alpha - j + 1) - logi(j);
        double lm = j <= WOR_JMAX ? w->lm[j] : log(2.0) + (double)j * (j - 1) * inv2z2;
        double t = j * lg + lbin + lm;
        double tm = fabs(lbin) + fabs(j * lg) + fabs(lm);
        if (tm > mag) mag = tm;
        acc = dpfl_logaddexp(acc, t);
    }
    /* absolute error of log(S - 1): the terms' log errors plus alpha log-add-exp roundings */
    acc += 2.0 * (alpha + 8) * DBL_EPSILON * mag + 4.0 * alpha * DBL_EPSILON;
    double logS = acc > 30 ? acc + log1p(exp(-acc)) : log1p(exp(acc));
    double gauss = (alpha - 1.0) * alpha * inv2z2;
    logS = logS * (1 + 64 * DBL_EPSILON) + DBL_MIN;
    return logS < gauss ? logS : gauss;
}

double dpfl_rdp_fixed(int64_t n, int64_t batch, double z, double alpha)
{
    if (!(alpha > 1)) return NAN;
    if (z <= 0) return INFINITY;
    double gauss = alpha / (2.0 * z * z);
    if (batch >= n) return gauss; /* every record in every batch: the plain Gaussian, exactly */
    double g = (double)batch / (double)n;
    double fl = floor(alpha);
    double r;
    if (alpha == fl) {
        r = fixed_cgf_int(g, z, (int)alpha) / (alpha - 1);
    } else {
        /* The true (a - 1) eps(a) = log E[(P/Q)^a] is convex in a (Hoelder) and 0 at a = 1, so it lies below
         * the chord through the neighbouring integer orders, where the bound above holds (WBK Corollary 10). */
        int k = (int)fl;
        double t = alpha - fl;
        double lo = k >= 2 ? fixed_cgf_int(g, z, k) : 0.0;
        double hi = fixed_cgf_int(g, z, k + 1);
        r = ((1 - t) * lo + t * hi) / (alpha - 1);
    }
    r = r * (1 + 8 * DBL_EPSILON);
    return r < gauss ? r : gauss;
}

/* rPDP-FL Theorem 1: eps_round(alpha) = log(1 - lambda + lambda e^{(alpha-1) tau eps_sgm(alpha)}) / (alpha-1). */
static double two_stage_rpdp(double lambda, double base, double alpha)
{
    if (lambda <= 0) return 0.0;
    if (lambda >= 1) return base;
    double x = (alpha - 1) * base; /* log of e^{(alpha-1) base} */
    /* log(1 + lambda (e^x - 1)) */
    double lr = log(lambda) + dpfl_log_expm1(x > 0 ? x : DBL_MIN);
    double l = lr > 30 ? lr + log1p(exp(-lr)) : log1p(exp(lr));
    return l / (alpha - 1);
}

double dpfl_rdp_two_stage(double lambda, double q, double z, int64_t inner, dpfl_two_stage_bound bound,
                          double alpha)
{
    if (!(alpha > 1)) return NAN;
    if (bound != DPFL_BOUND_RPDP) return INFINITY; /* no other bound is valid for a visible participation */
    double base = (double)inner * dpfl_rdp_sgm(q, z, alpha);
    double r = two_stage_rpdp(lambda, base, alpha);
    return r * (1 + 64 * DBL_EPSILON) + DBL_MIN;
}

static double event_rdp(const dpfl_event *e, double alpha)
{
    switch (e->kind) {
    case DPFL_EV_GAUSSIAN: return e->z > 0 ? alpha / (2 * e->z * e->z) : INFINITY;
    case DPFL_EV_POISSON:
        if (e->adjacency == DPFL_ADJ_REPLACE_ONE && e->q < 1) {
            /* joint convexity: e^{(a-1)D} <= 1 - q + q e^{(a-1) a / (2 z^2)} (z relative to the replace-one
             * sensitivity) */
            return two_stage_rpdp(e->q, e->z > 0 ? alpha / (2 * e->z * e->z) : INFINITY, alpha);
        }
        return dpfl_rdp_sgm(e->q, e->z, alpha);
    case DPFL_EV_FIXED: return dpfl_rdp_fixed(e->n, e->batch, e->z, alpha);
    case DPFL_EV_TWO_STAGE: return dpfl_rdp_two_stage(e->lambda, e->q, e->z, e->inner, e->bound, alpha);
    case DPFL_EV_NOT_PRIVATE: return INFINITY;
    case DPFL_EV_SKELLAM: {
        /* the corollary holds at integer orders; RDP is nondecreasing in the order, so ceil(alpha) bounds alpha */
        if (!(e->z > 0)) return INFINITY;
        const double mu = (e->z * e->d2) * (e->z * e->d2);
        const double a = ceil(alpha);
        if (a > 1e6) return INFINITY;
        double base = dpfl_skellam_rdp((int)a, e->d1, e->d2, mu) * (1 + 8 * DBL_EPSILON);
        return e->q < 1 ? two_stage_rpdp(e->q, base, alpha) : base;
    }
    case DPFL_EV_RDP_FILTER: return alpha <= e->alpha ? e->cap : INFINITY; /* monotone in the order */
    case DPFL_EV_DISCRETE_GAUSSIAN: /* CKS 2020: exact at integer alpha Delta, below it elsewhere */
        return e->z > 0 ? alpha / (2 * e->z * e->z) : INFINITY;
    }
    return INFINITY;
}

dpfl_status dpfl_rdp_compose(const dpfl_event *ev, size_t nev, const double *orders, size_t norders, double *rdp,
                             dpfl_error *err)
{
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (!s) s = dpfl_events_supported(ev, nev, DPFL_ACC_RDP, 0, err);
    if (s) return s;
    for (size_t j = 0; j < norders; j++) {
        if (!(orders[j] > 1)) return dpfl_fail(err, DPFL_EINVAL, "RDP order %g must be > 1", orders[j]);
        rdp[j] = 0;
    }
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].count == 0) continue;
        /* events repeated with identical parameters are common (schedules): reuse the previous row */
        for (size_t j = 0; j < norders; j++) {
            double r = event_rdp(&ev[i], orders[j]);
            rdp[j] += (double)ev[i].count * r;
        }
    }
    return DPFL_OK;
}
