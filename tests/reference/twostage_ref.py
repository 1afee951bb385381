"""Brute-force LOWER bound on the record-level epsilon of rPDP-FL two-stage sampling with visible participation.

Independent of src/privacy and python/dpfl: numpy/scipy only, written from the definitions below.

Mechanism (add/remove neighbours, in units of the clipping norm, so the sensitivity is 1 and the noise std is z).
One step is the Poisson-subsampled Gaussian (SGM) with record rate q, i.e. the pair
    remove:  P = (1 - q) N(0, z^2) + q N(1, z^2)  against  Q = N(0, z^2)
    add:     P = N(0, z^2)  against  Q = (1 - q) N(0, z^2) + q N(1, z^2),
with privacy loss L = log dP/dQ (remove: L(x) = log(1 - q + q exp((2x - 1) / (2 z^2))), add: minus that).
A round: the client takes part with probability lam, independently of the data and visibly; if it does it runs K
steps.  Over n rounds (n = c R when c clients hold the record, each taking part independently) the number of
participations m ~ Bin(n, lam) is public, so in each direction
    delta(eps) = sum_m Bin(m; n, lam) H_{e^eps}(P^{mK} || Q^{mK}),     H_a(P || Q) = E_P[(1 - a e^{-L})_+]
(hockey-stick divergence: Balle-Barthe-Gaboardi 2018; its PLD composition: Meiser-Mohammadi 2018,
Koskela-Jalko-Honkela 2020), and the true curve is the max over the two directions.  That mixture is the law of the
n-fold sum of the ROUND loss  (1 - lam) delta_0 + lam (step loss)^{*K},  which is what is computed.

Why the result is a LOWER bound, eps_ref <= eps_true:
 1. f_eps(l) = (1 - e^{eps - l})_+ is non-decreasing in l with values in [0, 1], and delta(eps) = E[f_eps(sum of the
    independent step losses)].  So replacing a step loss by a smaller one on the same sample point, dropping mass
    (sending it to -inf), or moving mass of a partial sum downwards can only LOWER delta, at every eps.
 2. One step: with X ~ P and the loss g(X) increasing in X (the add direction uses X -> -X), the X axis is cut into
    cells [e_i, e_{i+1}); a cell's exact P-mass (normal CDF differences: lower tails from ndtr(x), upper from
    ndtr(-x)) is put at floor((g(e_i) - slack) / h) * h, where g(e_i) is the smallest loss in the cell, evaluated
    by the forward formula and lowered by a slack far above its rounding error.  The edges come from an inverse of
    g but the rounding does not trust it.  Mass below the first edge (< tau) is dropped; the last cell runs to +inf.
 3. Composition = linear convolution (never circular: no mass wraps from the bottom to the top).  After each one
    the low tail (mass < tau) is dropped and the high tail (< tau) is clamped down onto the highest kept point.
 4. Floating point: normal CDF values are off by <= CDF_ERR (a sup-norm error of the loss CDF, which adds up over
    the T steps: <= 2 T CDF_ERR); an FFT convolution of probability vectors a, b is off in l1 by at most
    30 u log2(L) sqrt(L) (|a|_2 + |b|_2) (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 24.1,
    with about 3x to spare; measured errors are ~500x below it); both survive later convolutions with probability
    vectors, and delta reads them with a weight in [0, 1].  Their sum plus 1e-12 (the pairwise sums of delta, the
    idle-round mixture: < 1e-14) is `margin`, and
        eps_ref = min{eps : delta_computed(eps) - margin <= target}  <=  min{eps : delta_true(eps) <= target}.
Gap: each step's loss is rounded down by less than h (1 + 1e-4), so eps_true - eps_ref < K n h (1 + 1e-4) (typically
about half of it; with q = 1 the worst seen in the test's range is 1.6 % of eps).  h is chosen per case from a
coarse first pass, so that the final loss array has about FINE_POINTS points.

Self-check: python3 tests/reference/twostage_ref.py -- q = 1 against the closed form of the Gaussian mechanism
(m participations: mu-GDP with mu = sqrt(m K) / z, delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)), and
lam = 1, T = 1 against mpmath quadrature of the hockey-stick integral of the two densities.
"""

import collections
import math
import os
import sys

import numpy as np
from scipy import special

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the PMF, its composition and delta / epsilon of it live in common.py (shared with events_ref.py)
from common import (CDF_ERR, TAU, U, Pmf, convolve, delta_of, epsilon_of, gaussian_delta,  # noqa: E402,F401
                    power, trim, with_idle)

FINE_POINTS = 1 << 15        # about this many points in the final loss array (fine pass)
COARSE_BINS = 128            # bins across one step's loss range (coarse pass)
REMOVE, ADD = "remove", "add"

Result = collections.namedtuple("Result", "epsilon by_direction h gap margin coarse")


# ---------------------------------------------------------------------------------------------- one step
def loss_remove(x, q, z):
    """log dP/dQ of the remove direction at x: log(1 - q + q exp((2x - 1) / (2 z^2))), increasing in x."""
    x = np.asarray(x, dtype=float)
    floor = math.log1p(-q) if q < 1 else -np.inf
    return np.logaddexp(floor, math.log(q) + (2 * x - 1) / (2 * z * z))


def loss_slack(x, q, z):
    """A bound, with a wide margin, on the rounding error of loss_remove(x)."""
    x = np.asarray(x, dtype=float)
    fixed = 1 + abs(math.log(q)) + (abs(math.log1p(-q)) if q < 1 else 0.0)
    return 1e-12 * (fixed + np.abs(2 * x - 1) / (2 * z * z))


def x_of_loss(l, q, z):
    """Approximate inverse of loss_remove (it only places cell edges); -inf where l <= log(1 - q)."""
    l = np.asarray(l, dtype=float)
    if q >= 1:
        return 0.5 + z * z * l
    out = np.full(l.shape, -np.inf)
    ok = l > math.log1p(-q)
    lk = l[ok]
    out[ok] = 0.5 + z * z * (lk + np.log(-np.expm1(math.log1p(-q) - lk)) - math.log(q))
    return out


def _mixture_tails(q, z):
    """(P(X < x), P(X >= x)) of (1 - q) N(0, z^2) + q N(1, z^2), each accurate in its own tail."""
    def tails(x):
        cdf = (1 - q) * special.ndtr(x / z) + q * special.ndtr((x - 1) / z)
        sf = (1 - q) * special.ndtr(-x / z) + q * special.ndtr((1 - x) / z)
        return cdf, sf
    return tails


def _normal_tails(z):
    return lambda x: (special.ndtr(x / z), special.ndtr(-x / z))


def step_view(q, z, direction):
    """The step as an increasing loss g(X) of X ~ P: (g, g_inverse, slack, tails of P, tail split, x_lo, x_hi)."""
    t = float(-special.ndtri(TAU))  # beyond t standard deviations: < TAU of a normal's mass
    if direction == REMOVE:
        return (lambda x: loss_remove(x, q, z), lambda l: x_of_loss(l, q, z), lambda x: loss_slack(x, q, z),
                _mixture_tails(q, z), 0.5, -t * z, 1 + t * z)
    # add: P = N(0, z^2), loss -loss_remove(X) = g(Y) with Y = -X ~ N(0, z^2), g(y) = -loss_remove(-y) increasing
    return (lambda y: -loss_remove(-np.asarray(y), q, z), lambda l: -x_of_loss(-np.asarray(l), q, z),
            lambda y: loss_slack(-np.asarray(y), q, z), _normal_tails(z), 0.0, -t * z, t * z)


def _cell_masses(edges, tails, split):
    """P-masses of the cells [edges[i], edges[i+1]) and [edges[-1], inf), all differences of one cumulative function
    (the CDF below `split`, 1 - survival above) so that the errors do not add up along the axis."""
    a, b = edges, np.append(edges[1:], np.inf)
    ca, sa = tails(a)
    cb, sb = tails(b)
    m = np.where(b <= split, cb - ca, np.where(a >= split, sa - sb, (1 - sb) - ca))
    return np.maximum(m, 0.0)


def step_pmf(q, z, h, direction):
    """Optimistic (rounded-down) loss PMF of one SGM step on the grid h Z."""
    g, g_inv, slack, tails, split, x_lo, x_hi = step_view(q, z, direction)
    k_lo, k_hi = math.floor(float(g(x_lo)) / h), math.floor(float(g(x_hi)) / h)
    # cell edges a hair above the loss grid points, so that a cell's lowest loss rounds to its own grid point
    inner = g_inv((np.arange(k_lo + 1, k_hi + 1) + 1e-4) * h)
    edges = np.maximum.accumulate(np.concatenate(([x_lo], np.clip(inner, x_lo, x_hi))))
    masses = _cell_masses(edges, tails, split)
    index = np.floor((g(edges) - slack(edges)) / h).astype(np.int64)
    keep = masses > 0
    index, masses = index[keep], masses[keep]
    k0 = int(index.min())
    return Pmf(k0, np.bincount(index - k0, weights=masses))


def composed_pmf(z, lam, q, K, rounds, h, direction, err):
    """Rounded-down loss PMF of `rounds` two-stage rounds (client rate lam, K steps at record rate q)."""
    return power(with_idle(power(step_pmf(q, z, h, direction), K, err), lam), rounds, err)


# ---------------------------------------------------------------------------------------------- delta, epsilon
def _direction_epsilon(z, lam, q, K, rounds, delta, h, direction):
    err = [0.0]
    pmf = composed_pmf(z, lam, q, K, rounds, h, direction, err)
    margin = 1e-12 + err[0] + 2 * K * rounds * CDF_ERR
    return epsilon_of(pmf, h, delta + margin), pmf, margin


def two_stage_epsilon(z, lam, q, K, rounds, delta, points=FINE_POINTS, stop_above=None):
    """A lower bound on the epsilon at `delta` of `rounds` visible two-stage rounds (client rate lam, K SGM steps
    at record rate q, noise multiplier z); the max over the add and remove directions.  With stop_above, a coarse
    lower bound above it is returned as it is (Result.coarse = True) without the fine pass."""
    if not (z > 0 and 0 < lam <= 1 and 0 < q <= 1 and K >= 1 and rounds >= 1 and 0 < delta < 1):
        raise ValueError("bad parameters")
    directions = (REMOVE,) if q >= 1 else (REMOVE, ADD)  # q = 1: both are the same Gaussian loss
    g, _, _, _, _, x_lo, x_hi = step_view(q, z, REMOVE)
    h1 = (float(g(x_hi)) - float(g(x_lo))) / COARSE_BINS  # the coarse pass: a grid of the step's loss range
    coarse = {d: _direction_epsilon(z, lam, q, K, rounds, delta, h1, d) for d in directions}
    eps1 = max(v[0] for v in coarse.values())
    if stop_above is not None and eps1 > stop_above:
        return Result(eps1, {d: v[0] for d, v in coarse.items()}, h1, K * rounds * h1,
                      max(v[2] for v in coarse.values()), True)
    width = max(len(v[1].p) for v in coarse.values()) * h1
    h = min(h1, width / points)
    fine = {d: _direction_epsilon(z, lam, q, K, rounds, delta, h, d) for d in directions}
    return Result(max(v[0] for v in fine.values()), {d: v[0] for d, v in fine.items()}, h, K * rounds * h,
                  max(v[2] for v in fine.values()), False)


# ---------------------------------------------------------------------------------------------- independent checks
def gaussian_two_stage_epsilon(z, lam, K, rounds, delta):
    """Exact epsilon for q = 1: the binomial mixture of Gaussian curves, solved by brentq."""
    from scipy import optimize, stats
    w = stats.binom.pmf(np.arange(rounds + 1), rounds, lam)

    def excess(eps):
        return sum(w[m] * gaussian_delta(eps, math.sqrt(m * K) / z) for m in range(1, rounds + 1)) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return optimize.brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-13)


def quadrature_delta(q, z, eps, dps=30):
    """max over directions of the hockey-stick integral of one SGM step, by mpmath quadrature of the densities."""
    import mpmath as mp
    with mp.workdps(dps):
        q, z, eps = mp.mpf(q), mp.mpf(z), mp.mpf(eps)

        def n0(x):
            return mp.npdf(x, 0, z)

        def mix(x):
            return (1 - q) * mp.npdf(x, 0, z) + q * mp.npdf(x, 1, z)

        def crossing(p, r, side):
            """The x where log p/r = eps, by bisection (log p/r is monotone: increasing when side = +1)."""
            def above(x):
                return side * (mp.log(p(x)) - mp.log(r(x)) - eps) > 0
            lo, hi = -60 * z - 10, 60 * z + 10
            if above(lo) == above(hi):
                return None
            for _ in range(200):
                mid = (lo + hi) / 2
                if above(mid) == above(hi):
                    hi = mid
                else:
                    lo = mid
            return (lo + hi) / 2

        out = []
        for p, r, side in ((mix, n0, +1), (n0, mix, -1)):
            x0 = crossing(p, r, side)
            if x0 is None:  # the loss never crosses eps in this direction
                out.append(mp.mpf(0))
                continue
            f = lambda x, p=p, r=r: max(p(x) - mp.e ** eps * r(x), 0)  # noqa: E731
            span = [x0, x0 + side * z, x0 + side * 4 * z, x0 + side * 12 * z, side * mp.inf]
            out.append(abs(mp.quad(f, span)))
        return float(max(out))


def self_check(verbose=True):
    """q = 1 closed-form and T = 1 quadrature checks; returns a list of failure messages (empty = pass)."""
    bad = []
    gauss = [(1.0, 0.01, 1, 1, 1e-5), (1.0, 1.0, 1, 1, 1e-5), (0.7, 0.3, 4, 12, 1e-6), (2.5, 1.0, 10, 20, 1e-3),
             (3.9, 0.05, 7, 100, 1e-5), (0.5, 0.02, 2, 5, 1e-6)]
    for z, lam, K, n, d in gauss:
        exact = gaussian_two_stage_epsilon(z, lam, K, n, d)
        r = two_stage_epsilon(z, lam, 1.0, K, n, d)
        ok = r.epsilon <= exact and exact - r.epsilon <= r.gap + 1e-9
        if verbose:
            print("q=1 z=%g lam=%g K=%d n=%d delta=%g: exact %.6f ref %.6f (gap bound %.2g) %s"
                  % (z, lam, K, n, d, exact, r.epsilon, r.gap, "ok" if ok else "FAIL"))
        if not ok:
            bad.append("closed form z=%g lam=%g K=%d n=%d delta=%g: exact %r ref %r"
                       % (z, lam, K, n, d, exact, r.epsilon))
    for z, q, d in [(1.0, 0.1, 1e-5), (0.6, 0.5, 1e-6), (2.0, 0.03, 1e-3), (0.8, 0.9, 1e-5)]:
        r = two_stage_epsilon(z, 1.0, q, 1, 1, d)
        at = quadrature_delta(q, z, r.epsilon)
        above = quadrature_delta(q, z, r.epsilon + r.h + 1e-9)
        ok = at >= d and above <= d  # eps_true in [eps_ref, eps_ref + h]
        if verbose:
            print("T=1 z=%g q=%g delta=%g: ref %.6f, quadrature delta(ref) %.4g, delta(ref + h) %.4g %s"
                  % (z, q, d, r.epsilon, at, above, "ok" if ok else "FAIL"))
        if not ok:
            bad.append("quadrature z=%g q=%g delta=%g: ref %r delta(ref)=%r delta(ref+h)=%r"
                       % (z, q, d, r.epsilon, at, above))
    return bad


if __name__ == "__main__":
    import sys
    failures = self_check()
    print("\n".join(failures) if failures else "self-check passed")
    sys.exit(1 if failures else 0)
