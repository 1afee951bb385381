/* Sampled distributed DP with visible participation: the binomial mixture over participations.
 *
 * References: Agarwal, Kairouz, Liu, "The Skellam Mechanism for Differentially Private Federated Learning",
 * NeurIPS 2021, Corollary 3.6 (RDP r(alpha) of one Skellam release at integer orders, both directions of the
 * pair); Mironov 2017 (adaptive composition of RDP); Canonne, Kamath, Steinke 2020 / Asoodeh et al. 2021 (the
 * conversion delta <= e^{(alpha-1)(R - eps)} (1 - 1/alpha)^{alpha-1} / alpha of an RDP value R); the hockey-stick
 * divergence of a mixture with a visible, data-independent selector (the argument of dpfl_gdp_visible_delta,
 * gdp.c, for the Gaussian).
 *
 * The pair.  T rounds; in round t the client is included independently of the data and of the other rounds with
 * probability q_t; included, it adds its own share of the Skellam noise, and in the neighbouring world its update
 * is replaced by zero (zero-out adjacency).  The observer sees S, the set of rounds it took part in (the server
 * does; treating S as seen is valid for every observer: forgetting S is post-processing), and the outputs
 * Y_1..Y_T.  S has the same law pi in both worlds, so with P_S, Q_S the laws of Y given S,
 *     P = sum_S pi(S) [S] x P_S,   Q = sum_S pi(S) [S] x Q_S,
 * and, the [S] having disjoint supports, for gamma = e^eps exactly
 *     H_gamma(P || Q) = sum_S pi(S) H_gamma(P_S || Q_S).
 * Given S, a round outside S has the same conditional law in both worlds (the client sends nothing, the rest is a
 * function of the past view), a round in S is a Skellam release with D_alpha <= r(alpha); adaptive composition
 * gives D_alpha(P_S || Q_S) <= |S| r(alpha), hence H_gamma(P_S || Q_S) <= delta_|S|(eps) with
 *     delta_j(eps) = min(1, min_alpha e^{(alpha-1)(j r(alpha) - eps)} (1 - 1/alpha)^{alpha-1} / alpha),   delta_0 = 0.
 * delta_j is nondecreasing in j; |S| is a sum of independent Bernoulli(q_t), stochastically at most
 * c1 + Bin(n, qmax) (c1 rounds with q_t = 1, n rounds with 0 < q_t < 1, qmax their largest rate), so
 *     delta(eps) <= sum_j P(c1 + Bin(n, qmax) = j) delta_j(eps).
 * The same holds for H_gamma(Q || P) (the corollary bounds both directions).  Events with different
 * sensitivities or noise use r(alpha) = their largest RDP at alpha.
 *
 * Against per-round joint convexity (dpfl_skellam_epsilon before, rdp.c): that composed RDP is exactly
 * (1/(alpha-1)) log E[e^{(alpha-1) J r(alpha)}] for J ~ Bin(T, q), and the conversion is g_alpha e^{(alpha-1)(R-eps)},
 * so its delta is min_alpha E[g_alpha e^{(alpha-1)(J r - eps)}] >= E[min_alpha g_alpha e^{(alpha-1)(J r - eps)}], the
 * mixture's: never larger at the same orders, smaller wherever the best order depends on J.
 *
 * Computation.  Terms with log pmf below -745 are skipped and (T + 1) e^-745 added (delta_j <= 1); the sum is padded
 * by a relative 1e-9 for the rounding of lgamma.  Orders: the integers 2..256, then every 8th to 1024, every 64th
 * to 4096.  Search: with b(alpha) = (alpha - 1) r(alpha) nondecreasing in alpha, the minimising order of
 * h_j(alpha) = const(alpha) + j b(alpha) is nonincreasing in j (h_{j+1} - h_j = b grows with alpha), so walking j up
 * from the mode scans only orders up to the last minimiser and walking down only orders from it: the exact minimum
 * over the grid at a fraction of the cost.  epsilon: bisection of delta(eps) (decreasing in eps). */
#include "dpfl/privacy.h"
#include "privacy_internal.h"
#include "bisect.h"

#include <float.h>
#include <math.h>

#define SV_NORD (255 + 96 + 48)
#define SV_LTAU (-745.0)

typedef struct {
    int n;
    double a[SV_NORD]; /* orders */
    double b[SV_NORD]; /* (a - 1) r(a): one participation's log moment */
    double c[SV_NORD]; /* the conversion's constant: (a - 1) log(1 - 1/a) - log a (tight), 0 (classic) */
    int64_t c1, nb;    /* participations: c1 + Bin(nb, q) */
    double q;
} sv_mix;

int dpfl_skellam_mixture_applies(const dpfl_event *ev, size_t nev)
{
    int sampled = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].count == 0) continue;
        if (ev[i].kind != DPFL_EV_SKELLAM) return 0;
        if (ev[i].q > 0 && ev[i].q < 1) sampled = 1;
    }
    return sampled;
}

static dpfl_status sv_build(const dpfl_event *ev, size_t nev, dpfl_conversion conv, sv_mix *m, dpfl_error *err)
{
    dpfl_status s = dpfl_events_check(ev, nev, err);
    if (s) return s;
    m->n = 0;
    for (int a = 2; a <= 256; a++) m->a[m->n++] = a;
    for (int a = 264; a <= 1024; a += 8) m->a[m->n++] = a;
    for (int a = 1088; a <= 4096; a += 64) m->a[m->n++] = a;
    m->c1 = m->nb = 0;
    m->q = 0;
    for (int k = 0; k < m->n; k++) {
        const double a = m->a[k];
        m->b[k] = 0;
        m->c[k] = conv == DPFL_CONV_CLASSIC ? 0.0 : (a - 1) * log1p(-1.0 / a) - log(a);
    }
    for (size_t i = 0; i < nev; i++) {
        const dpfl_event *e = &ev[i];
        if (e->count == 0 || e->q == 0) continue;
        if (e->kind != DPFL_EV_SKELLAM)
            return dpfl_fail(err, DPFL_EINVAL, "Skellam mixture: event %zu is not a Skellam event", i);
        if (e->q >= 1) {
            m->c1 += e->count;
        } else {
            m->nb += e->count;
            if (e->q > m->q) m->q = e->q;
        }
        const double mu = (e->z * e->d2) * (e->z * e->d2);
        for (int k = 0; k < m->n; k++) {
            double r = e->z > 0 ? dpfl_skellam_rdp((int)m->a[k], e->d1, e->d2, mu) * (1 + 8 * DBL_EPSILON) : INFINITY;
            double b = (m->a[k] - 1) * r;
            if (b > m->b[k]) m->b[k] = b;
        }
    }
    return DPFL_OK;
}

/* log delta_j(eps) minimised over orders klo..khi; *kb gets a minimiser */
static double sv_log_delta_j(const sv_mix *m, double j, double eps, int klo, int khi, int *kb)
{
    double best = INFINITY;
    int bk = klo;
    for (int k = klo; k <= khi; k++) {
        double v = m->c[k] + j * m->b[k] - (m->a[k] - 1) * eps;
        if (v < best) {
            best = v;
            bk = k;
        }
    }
    *kb = bk;
    return best;
}

static double sv_delta(const sv_mix *m, double eps)
{
    const int64_t T = m->nb;
    const double lq = log(m->q), l1q = log1p(-m->q), lgT = lgamma((double)T + 1);
    int64_t mode = (int64_t)floor(m->q * (double)(T + 1));
    if (mode > T) mode = T;
    double d = 0;
    int skipped = 0, kmode = m->n - 1;
    for (int dir = 0; dir < 2; dir++) {
        int klo = 0, khi = m->n - 1, saturated = 0; /* saturated: delta_j = 1 from here up */
        if (dir) klo = kmode;
        for (int64_t i = dir ? mode - 1 : mode; i >= 0 && i <= T; i += dir ? -1 : 1) {
            double lp = T == 0 ? 0.0
                               : lgT - lgamma((double)i + 1) - lgamma((double)(T - i) + 1) + (double)i * lq +
                                     (double)(T - i) * l1q;
            if (lp < SV_LTAU) {
                skipped = 1;
                break;
            }
            const int64_t j = m->c1 + i;
            if (j == 0) continue; /* not in any round: the two worlds' views have the same law */
            double ld = 0.0;
            if (!saturated) {
                int kb;
                ld = sv_log_delta_j(m, (double)j, eps, klo, khi, &kb);
                if (i == mode) kmode = kb;
                if (dir) klo = kb;
                else khi = kb;
                if (!(ld < 0)) {
                    ld = 0.0;
                    if (!dir) saturated = 1;
                }
            }
            d += exp(lp + ld);
        }
    }
    if (skipped) d += (double)(T + 1) * exp(SV_LTAU);
    d *= 1 + 1e-9;
    return d > 1 ? 1.0 : d;
}

dpfl_status dpfl_skellam_mixture_delta(const dpfl_event *ev, size_t nev, double epsilon, dpfl_conversion conv,
                                       double *delta, dpfl_error *err)
{
    if (!(epsilon >= 0) || isinf(epsilon))
        return dpfl_fail(err, DPFL_EINVAL, "Skellam mixture: epsilon (%g) must be finite and >= 0", epsilon);
    sv_mix m;
    dpfl_status s = sv_build(ev, nev, conv, &m, err);
    if (s) return s;
    *delta = sv_delta(&m, epsilon);
    return DPFL_OK;
}

/* epsilon's test for dpfl_bisect: delta(eps) within the target (a NaN is not) */
typedef struct {
    const sv_mix *m;
    double delta;
} sv_target;

static dpfl_status sv_within(const void *ctx, double eps, int *ok, dpfl_error *err)
{
    (void)err;
    const sv_target *t = ctx;
    *ok = sv_delta(t->m, eps) <= t->delta;
    return DPFL_OK;
}

dpfl_status dpfl_skellam_mixture_epsilon(const dpfl_event *ev, size_t nev, double delta, dpfl_conversion conv,
                                         double *eps, dpfl_error *err)
{
    if (!(delta > 0 && delta < 1))
        return dpfl_fail(err, DPFL_EINVAL, "Skellam mixture: delta (%g) must be in (0, 1)", delta);
    sv_mix m;
    dpfl_status s = sv_build(ev, nev, conv, &m, err);
    if (s) return s;
    if (sv_delta(&m, 0) <= delta) {
        *eps = 0;
        return DPFL_OK;
    }
    double lo = 0, hi = 1;
    while (sv_delta(&m, hi) > delta) {
        lo = hi;
        hi *= 2;
        if (hi > 1e9) {
            *eps = INFINITY;
            return DPFL_OK;
        }
    }
    const sv_target t = {&m, delta};
    const dpfl_bisect_opts o = {.good_hi = 1, .rel_tol = 1e-12, .max_halvings = 200};
    if ((s = dpfl_bisect(sv_within, &t, &lo, &hi, &o, err))) return s;
    *eps = hi; /* delta(hi) <= delta: the safe end */
    return DPFL_OK;
}

void dpfl_skellam_mixture_tighten(const dpfl_event *ev, size_t nev, double x, int want_delta, dpfl_conversion conv,
                                  double *value, double *order)
{
    if (!dpfl_skellam_mixture_applies(ev, nev)) return;
    double v;
    dpfl_status s = want_delta ? dpfl_skellam_mixture_delta(ev, nev, x, conv, &v, NULL)
                               : dpfl_skellam_mixture_epsilon(ev, nev, x, conv, &v, NULL);
    if (s == DPFL_OK && v < *value) {
        *value = v;
        *order = 0;
    }
}
