"""Brute-force LOWER bounds on delta(eps) and epsilon for every event kind dpfl accounts, and for lists of them.

Independent of src/privacy and python/dpfl: numpy/scipy only, written from the mechanisms' definitions below, never
from an accountant's formula.  A bound is only checked against something here when a concrete pair of neighbouring
inputs produces exactly the distributions below: the true epsilon of the mechanism (a supremum over all pairs) is at
least that pair's, which is at least what is computed here.  Units: the sensitivity under the event's adjacency is 1
(so a step's noise std is z), epsilon in nats.

Specs (what happened, named as plain tuples; the test builds them next to the dpfl events):
  Gaussian(z, count)            N(1, z^2) against N(0, z^2) (add/remove or replace-one: z is relative to that
                                adjacency's sensitivity, so the shift is 1 either way), count times.
  Poisson(q, z, count, adj)     each record in the batch w.p. q.  add-remove and zero-out (the record's gradient,
                                norm 1, present or zeroed; the other records' contributions are independent of it and
                                taken as 0): P = (1-q) N(0) + q N(1) against Q = N(0), both directions.  replace-one
                                (the record's gradient x or x', |x|, |x'| <= 1/2 as the sensitivity 1 is 2C):
                                "antipodal" x = 1/2, x' = -1/2 and "shift" x = 1/2, x' = 0.
  Fixed(n, batch, z, count)     a batch of exactly `batch` of n without replacement, replace-one.  The record is in
                                the batch w.p. g = batch/n.  With every other record's gradient equal to g0 the output
                                is exactly (1-g) N(B g0) + g N((B-1) g0 + x) (against x'), so with |x|, |x'|, |g0| <=
                                1/2: "shift" x = 1/2, x' = g0 = -1/2: P = (1-g) N(0) + g N(1) vs Q = N(0) (and its
                                reverse), "antipodal" g0 = 0, x = -x' = 1/2.
  TwoStage(lam, q, z, inner, count)  per round, visibly, w.p. lam: `inner` Poisson(q) steps (add-remove), else
                                nothing: loss (1 - lam) delta_0 + lam (step loss)^{*inner} (as twostage_ref.py).
  Skellam(q, k, dims, mu, count) distributed DP round: the client's integer vector moves `dims` coordinates by k
                                each (L1 = dims k, L2 = k sqrt(dims)); every coordinate carries independent Skellam
                                noise Sk(mu/2, mu/2) (difference of two Poisson(mu/2): pmf e^{-mu} I_j(mu), variance
                                mu); zero-out: P = k + Sk, Q = Sk per coordinate; the client is in the round w.p. q,
                                visibly (so a round it sits out has loss exactly 0).
  E2eServer(z, batch, n, k, lam, rounds, server_z, adjacency)  dpfl_e2e's client level with server noise (a client
                                runs k DP-SGD steps -- Poisson(batch/n) records, the clipped sum projected onto the ball
                                of radius batch C, noise std z C, divided by batch -- takes part in a round w.p. lam,
                                visibly; the server clips its update to S and adds std server_z S to the sum).  Not an
                                event list: e2e_server_reference builds two concrete instances (below) and takes the
                                larger of their lower bounds.
A list is composed with one ordered pair (D, D') for all its events: per direction the losses add up.  Where a
replace-one event offers two configurations the list is computed in each (the same one for all events) and both
directions; every one of them is a valid pair, so the max is a lower bound.

Lower bound, as in twostage_ref.py (common.py has the composition): a step's loss PMF is rounded DOWN onto the grid
h Z.  Gaussian mixtures: the x axis is cut into cells whose edges are found by bisection on the loss (which is
increasing in x for every pair above: checked numerically, and by the form of each pair), a cell's exact P-mass (ndtr
differences) goes to floor((loss(left edge) - slack) / h).  Skellam: the lattice point x has P-mass s(x - k) and
loss log s(x - k) - log s(x) exactly, rounded down with a slack; points where s underflows (< 1e-290) are dropped.
Rounding errors of the masses (CDF_ERR per normal CDF value, SK_REL_ERR relative per Skellam value, measured by
self_check) and of the convolutions are summed into `margin`, and
    eps_ref = min{eps : delta_computed(eps) - margin <= delta} <= eps_true.
Gap: every step's loss is rounded down by less than h (1 + 1e-4) + its slack, so eps_true - eps_ref <= `gap` =
(steps) x that (mass truncated at TAU costs a little more; the self-check bounds it).  Exact references (no grid):
Gaussian lists (mu-GDP, mu^2 = sum count / z^2) and mixtures of them (visible participation) by the closed form,
and a single Skellam release by the direct sum delta(eps) = q sum_x (s(x - k) - e^eps s(x))_+.

Self-check: python3 tests/reference/events_ref.py
"""

import collections
import math
import os
import sys

import numpy as np
from scipy import special

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (CDF_ERR, TAU, Pmf, convolve, delta_of, epsilon_of, gaussian_delta, power,  # noqa: E402
                    with_idle)

FINE_POINTS = 1 << 14        # about this many points in the final loss array (fine pass)
COARSE_BINS = 128            # bins across the widest step's loss range (coarse pass)
SK_REL_ERR = 1e-11           # bound on the relative error of scipy.special.ive (self_check measures ~1e-14)
SK_TINY = 1e-290             # Skellam values below are dropped (their logs would be inaccurate)
EXACT_MARGIN = 1e-13         # bound on the absolute error of a closed-form delta (ndtr, exp): see gaussian_delta
T_SIGMA = float(-special.ndtri(TAU))  # beyond T_SIGMA standard deviations: < TAU of a normal's mass
FWD, REV = "fwd", "rev"     # H(P || Q) and H(Q || P) of the pair (D, D')

Gaussian = collections.namedtuple("Gaussian", "z count")
Poisson = collections.namedtuple("Poisson", "q z count adjacency", defaults=("add-remove",))
Fixed = collections.namedtuple("Fixed", "n batch z count")
TwoStage = collections.namedtuple("TwoStage", "lam q z inner count")
Skellam = collections.namedtuple("Skellam", "q k dims mu count")
E2eServer = collections.namedtuple("E2eServer", "z batch n k lam rounds server_z adjacency")

Block = collections.namedtuple("Block", "pair inner lam count")  # count rounds of: w.p. lam, `inner` steps of pair


# ---------------------------------------------------------------------------------------------- mechanism pairs
class MixturePair:
    """P = sum a_i N(m_i, z^2) against Q = sum b_j N(n_j, z^2), log dP/dQ increasing in x (the caller's pairs)."""

    def __init__(self, p, q, z):
        self.p = tuple((float(w), float(m)) for w, m in p if w > 0)
        self.q = tuple((float(w), float(m)) for w, m in q if w > 0)
        self.z = float(z)
        self.err = 4 * CDF_ERR  # l1 error of one step's masses (differences of one cumulative function)
        means = [m for _, m in self.p]
        self.lo, self.hi = min(means) - T_SIGMA * self.z, max(means) + T_SIGMA * self.z

    def reversed(self):
        """H(Q || P) as an increasing loss: X ~ Q, Y = -X."""
        return MixturePair([(w, -m) for w, m in self.q], [(w, -m) for w, m in self.p], self.z)

    def _lse(self, comps, x):
        # log sum w exp(-(x - m)^2 / 2z^2) + x^2 / 2z^2: the common -x^2/2z^2 cancels in the loss
        terms = [math.log(w) + (2 * m * x - m * m) / (2 * self.z * self.z) for w, m in comps]
        return np.logaddexp.reduce(terms, axis=0) if len(terms) > 1 else terms[0]

    def loss(self, x):
        x = np.asarray(x, dtype=float)
        return self._lse(self.p, x) - self._lse(self.q, x)

    def slack(self, x):
        """A bound, with a wide margin, on the rounding error of loss(x)."""
        x = np.abs(np.asarray(x, dtype=float))
        s = 1.0
        for w, m in self.p + self.q:
            s = s + abs(math.log(w)) + (2 * abs(m) * x + m * m) / (2 * self.z * self.z)
        return 1e-12 * s

    def tails(self, x):
        """(P(X < x), P(X >= x)), each accurate in its own tail."""
        cdf = sum(w * special.ndtr((x - m) / self.z) for w, m in self.p)
        sf = sum(w * special.ndtr((m - x) / self.z) for w, m in self.p)
        return cdf, sf

    def span(self):
        return float(self.loss(self.hi) - self.loss(self.lo))

    def _inverse(self, levels, xs, gs):
        """(x, loss(x)) with loss(x) >= level, close to it: safeguarded false position inside the bracket that the
        dense grid gives.  It only places cell edges (a misplaced one costs tightness): the loss returned is the
        forward formula at that x, which is all the rounding trusts."""
        j = np.clip(np.searchsorted(gs, levels), 1, len(xs) - 1)
        a, b, ga, gb = xs[j - 1], xs[j], gs[j - 1], gs[j]
        for _ in range(6):
            t = np.clip(np.divide(levels - ga, gb - ga, out=np.full(len(levels), 0.5), where=gb > ga), 0.02, 0.98)
            m = a + t * (b - a)
            gm = self.loss(m)
            up = gm >= levels
            a, ga = np.where(up, a, m), np.where(up, ga, gm)
            b, gb = np.where(up, m, b), np.where(up, gm, gb)
        return b, gb

    def step_pmf(self, h):
        xs = np.linspace(self.lo, self.hi, 8193)
        gs = self.loss(xs)
        if np.any(np.diff(gs) < -self.slack(xs[1:]) - self.slack(xs[:-1])):
            raise ValueError("the pair's loss is not increasing: this reference does not apply")
        k_lo, k_hi = math.floor(gs[0] / h), math.floor(gs[-1] / h)
        levels = (np.arange(k_lo + 1, k_hi + 1) + 1e-4) * h
        inner, g_inner = self._inverse(levels, xs, np.maximum.accumulate(gs))
        # cells [edges[i], edges[i+1]); the last runs to +inf; the loss is increasing, so a cell's smallest loss is
        # at its left edge (where it is evaluated by the forward formula, not taken from the search)
        edges = np.concatenate(([self.lo], inner))
        if np.any(np.diff(edges) < 0) or edges[-1] > self.hi:
            order = np.maximum.accumulate(np.minimum(edges, self.hi))
            edges = order
        g_edges = self.loss(edges)
        a, b = edges, np.append(edges[1:], np.inf)
        ca, sa = self.tails(a)
        cb, sb = self.tails(b)
        split = sum(w * m for w, m in self.p)
        masses = np.maximum(np.where(b <= split, cb - ca, np.where(a >= split, sa - sb, (1 - sb) - ca)), 0.0)
        index = np.floor((g_edges - self.slack(edges)) / h).astype(np.int64)
        keep = masses > 0
        index, masses = index[keep], masses[keep]
        k0 = int(index.min())
        return Pmf(k0, np.bincount(index - k0, weights=masses))

    def max_slack(self):
        return float(max(self.slack(self.lo), self.slack(self.hi)))


def skellam_pmf(j, mu):
    """P(Sk = j) for Sk = Poisson(mu/2) - Poisson(mu/2): e^{-mu} I_|j|(mu) (scipy's exponentially scaled ive)."""
    return special.ive(np.abs(np.asarray(j, dtype=float)), mu)


class SkellamPair:
    """One coordinate of a Skellam release: P = k + Sk(mu) against Q = Sk(mu) (rev: the reverse direction)."""

    def __init__(self, mu, k, rev=False):
        self.mu, self.k, self.rev = float(mu), int(k), rev
        self.err = SK_REL_ERR  # l1 error of one step's masses
        half = int(math.ceil(self.mu + 40 * math.sqrt(self.mu) + 60))
        x = np.arange(-half, half + self.k + 1)
        sp, sq = skellam_pmf(x - self.k, self.mu), skellam_pmf(x, self.mu)
        ok = (sp > SK_TINY) & (sq > SK_TINY)
        sp, sq = sp[ok], sq[ok]
        lp, lq = np.log(sp), np.log(sq)
        self.mass, self.values = (sq, lq - lp) if rev else (sp, lp - lq)

    def reversed(self):
        return SkellamPair(self.mu, self.k, not self.rev)

    def slack_of(self, loss):
        return 8 * SK_REL_ERR + 1e-14 * np.abs(loss)

    def max_slack(self):
        return float(np.max(self.slack_of(self.values)))

    def span(self):
        v = self.values[self.mass > TAU]
        return float(v.max() - v.min())

    def step_pmf(self, h):
        index = np.floor((self.values - self.slack_of(self.values)) / h).astype(np.int64)
        k0 = int(index.min())
        return Pmf(k0, np.bincount(index - k0, weights=self.mass))


def sgm_pair(q, z, shift=1.0):
    return MixturePair([(1 - q, 0.0), (q, shift)], [(1.0, 0.0)], z)


def antipodal_pair(q, z):
    return MixturePair([(1 - q, 0.0), (q, 0.5)], [(1 - q, 0.0), (q, -0.5)], z)


# ---------------------------------------------------------------------------------------------- specs -> blocks
def is_replace_one(spec):
    return isinstance(spec, Fixed) or (isinstance(spec, Poisson) and spec.adjacency == "replace-one")


def configurations(specs):
    return ("shift", "antipodal") if any(is_replace_one(s) for s in specs) else ("shift",)


def spec_block(spec, config):
    """The block of one spec in one configuration (see the module comment); None when it releases nothing."""
    if spec.count == 0:
        return None
    if isinstance(spec, Gaussian):
        return Block(MixturePair([(1.0, 1.0)], [(1.0, 0.0)], spec.z), 1, 1.0, spec.count)
    if isinstance(spec, Poisson):
        if spec.q <= 0:
            return None
        if spec.adjacency != "replace-one":
            return Block(sgm_pair(spec.q, spec.z), 1, 1.0, spec.count)
        pair = antipodal_pair(spec.q, spec.z) if config == "antipodal" else sgm_pair(spec.q, spec.z, 0.5)
        return Block(pair, 1, 1.0, spec.count)
    if isinstance(spec, Fixed):
        g = spec.batch / spec.n
        pair = antipodal_pair(g, spec.z) if config == "antipodal" else sgm_pair(g, spec.z)
        return Block(pair, 1, 1.0, spec.count)
    if isinstance(spec, TwoStage):
        if spec.lam <= 0 or spec.q <= 0:
            return None
        return Block(sgm_pair(spec.q, spec.z), spec.inner, spec.lam, spec.count)
    if isinstance(spec, Skellam):
        if spec.q <= 0:
            return None
        return Block(SkellamPair(spec.mu, spec.k), spec.dims, spec.q, spec.count)
    raise TypeError("unknown spec %r" % (spec,))


# ---------------------------------------------------------------------------------------------- composition
def _block_pmf(block, h, direction, err):
    pair = block.pair if direction == FWD else block.pair.reversed()
    pmf = power(pair.step_pmf(h), block.inner, err)
    return power(with_idle(pmf, block.lam), block.count, err)


def _composed(blocks, h, direction):
    """(PMF of the list's loss, margin) in one direction."""
    err, total, steps_err = [0.0], None, 0.0
    for b in blocks:
        pmf = _block_pmf(b, h, direction, err)
        total = pmf if total is None else convolve(total, pmf, err)
        steps_err += b.count * b.inner * b.pair.err
    return total, 1e-12 + err[0] + steps_err


class Reference:
    """A lower bound on a list's privacy curve: `epsilon` at the delta asked, delta_at(eps) anywhere; `upper` bounds
    the true epsilon from above (epsilon + gap), `exact` when that is within 1e-6 relative."""

    def __init__(self, epsilon, upper, delta_fn, h=0.0, margin=0.0, coarse=False, what=""):
        self.epsilon, self.upper, self._delta_fn = epsilon, upper, delta_fn
        self.h, self.margin, self.coarse, self.what = h, margin, coarse, what
        self.gap = upper - epsilon
        self.exact = self.gap <= 1e-6 * max(epsilon, 1e-3)

    def delta_at(self, eps):
        """A lower bound on delta(eps) (>= 0)."""
        return max(self._delta_fn(eps), 0.0)


def _grid_reference(lists, delta, h, coarse):
    """lists: [blocks] of every configuration; the max over them and both directions."""
    outs = [_composed(blocks, h, d) for blocks in lists for d in (FWD, REV)]
    eps = max(epsilon_of(pmf, h, delta + m) for pmf, m in outs)
    gap = max(sum(b.count * b.inner * (h * (1 + 1e-4) + b.pair.max_slack()) for b in blocks) for blocks in lists)

    def delta_fn(e):
        return max(delta_of(pmf, h, e) - m for pmf, m in outs)
    return Reference(eps, eps + gap, delta_fn, h, max(m for _, m in outs), coarse, "grid"), outs


def grid_reference(specs, delta, points=FINE_POINTS, stop_above=None):
    """The PMF reference of a list of specs at delta; with stop_above, a coarse lower bound above it is returned
    as it is (Reference.coarse = True) without the fine pass."""
    lists = []
    for c in configurations(specs):
        blocks = [b for b in (spec_block(s, c) for s in specs) if b is not None]
        if blocks:
            lists.append(blocks)
    return blocks_reference(lists, delta, points, stop_above)


def blocks_reference(lists, delta, points=FINE_POINTS, stop_above=None):
    """The PMF reference of lists of blocks (each list one configuration; the max over them and both directions)."""
    if not lists:
        return Reference(0.0, 0.0, lambda e: 0.0, what="nothing released")
    h1 = max(b.pair.span() for blocks in lists for b in blocks) / COARSE_BINS
    r1, outs = _grid_reference(lists, delta, h1, True)
    if stop_above is not None and r1.epsilon > stop_above:
        return r1
    width = max(len(pmf.p) for pmf, _ in outs) * h1
    return _grid_reference(lists, delta, min(h1, width / points), False)[0]


# ---------------------------------------------------------------------------------------------- exact references
def _bisect_lower(excess, hi_start=1.0):
    """The largest eps found with excess(eps) > 0, to 1e-12 relative, where excess is non-increasing: a lower bound
    on min{eps : excess(eps) <= 0}; 0 if excess(0) <= 0."""
    if excess(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, hi_start
    while excess(hi) > 0:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            return lo
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo


def gaussian_mixture_reference(weights, mus, delta):
    """Exact: delta(eps) = sum w_i delta_{mu_i-GDP}(eps) (weights summing to <= 1, mu = 0 terms give 0)."""
    def delta_fn(e):
        return sum(w * gaussian_delta(e, mu) for w, mu in zip(weights, mus) if w > 0) - EXACT_MARGIN
    eps = _bisect_lower(lambda e: delta_fn(e) - delta)
    return Reference(eps, eps * (1 + 1e-9) + 1e-12, delta_fn, what="closed form")


def gaussian_reference(specs, delta):
    """Exact reference of a list of Gaussian specs: mu-GDP with mu^2 = sum count / z^2."""
    mu = math.sqrt(sum(s.count / (s.z * s.z) for s in specs))
    return gaussian_mixture_reference([1.0], [mu], delta)


def skellam_single_reference(q, k, mu, delta):
    """Exact reference of one Skellam release in one coordinate (count 1, dims 1): the direct sum."""
    half = int(math.ceil(mu + 40 * math.sqrt(mu) + 60))
    x = np.arange(-half, half + k + 1)
    sp, sq = skellam_pmf(x - k, mu), skellam_pmf(x, mu)
    margin = q * 3 * SK_REL_ERR + 1e-15

    def delta_fn(e):  # both directions are the same by the symmetry of Sk; both are summed anyway
        a = np.sum(np.maximum(sp - math.exp(e) * sq, 0.0))
        b = np.sum(np.maximum(sq - math.exp(e) * sp, 0.0))
        return q * float(max(a, b)) - margin
    eps = _bisect_lower(lambda e: delta_fn(e) - delta)
    return Reference(eps, eps * (1 + 1e-9) + 1e-12, delta_fn, what="direct sum")


def reference(specs, delta, stop_above=None):
    """The best reference of a list: exact where one is known, else the PMF one."""
    specs = [s for s in specs if s.count > 0]
    if specs and all(isinstance(s, Gaussian) for s in specs):
        return gaussian_reference(specs, delta)
    if len(specs) == 1 and isinstance(specs[0], Skellam) and specs[0].count == 1 and specs[0].dims == 1:
        s = specs[0]
        return skellam_single_reference(s.q, s.k, s.mu, delta)
    return grid_reference(specs, delta, stop_above=stop_above)


# ---------------------------------------------------------------------------------------------- e2e with server noise
# dpfl_e2e's client level when the server also clips each update to S and adds std server_z S.  The instances: a
# one-dimensional model and a loss whose clipped gradient is C (or -C) for every record, whatever the model, so
# every round's update has the same law; the other clients contribute nothing.  A step's averaged gradient is
# (C m_t + N(0, (z C)^2)) / B, m_t = min(c_t, B) the sampled records (c_t ~ Bin(n, B/n); the sum projected onto the
# ball of radius B C), so k steps move the model by -lr (C / B) (sum_t m_t + N(0, k z^2)).  The zero-out neighbour
# (the special client: no data, its noise only) has m_t = 0; the replace-one neighbour a client whose gradient is -C.
# Units of S below; the server's noise is N(0, server_z^2).
#   "sign": the learning rate -> infinity, so the update is clipped to +-S: +S w.p. p = E Phi(sum m_t / (sqrt(k) z)),
#     the neighbour's w.p. 1/2 (zero-out) or 1 - p (replace-one).  A round is P = p N(1) + (1 - p) N(-1) against
#     Q = 1/2 N(1) + 1/2 N(-1) (or (1 - p) N(1) + p N(-1)), a mixture pair for the grid engine.  The limit of valid
#     instances in total variation, so the true delta(eps) is at least the pair's; delta grows with p (p >= 1/2:
#     the hockey-stick is convex in p and 0 at 1/2), so p is rounded down.
#   "small step" (only batch = n: m_t = B, no sampling): lr = a S / C with a = 1 / (k + T tau), tau = sqrt(k) z / B,
#     so that the update leaves [-S, S] with probability P_clip (~1e-13, computed); unclipped, a round is N(a k s, .)
#     against N(0, .) (s = 1 zero-out, 2 replace-one) with std sqrt(a^2 tau^2 + server_z^2): mu-GDP.  The clipped
#     outputs differ from those in total variation by at most P_clip per round and world, so
#     delta_true(eps) >= sum_j Bin(j; R, lam) delta_G(sqrt(j) mu, eps) - R (P_clip + e^eps P_clip').
E2E_SIGMAS = 7.5            # tau multiples between the small step's mean update and the clip


def sign_probability(z, batch, n, k):
    """P(sum_t m_t + N(0, k z^2) > 0), m_t = min(Bin(n, batch/n), batch) i.i.d. over k steps, rounded down by 1e-12."""
    c = stats_binom_pmf(n, batch / n)
    m = np.zeros(batch + 1)
    m[:batch] = c[:batch]
    m[batch] = c[batch:].sum()
    total = np.ones(1)
    for _ in range(k):
        total = np.convolve(total, m)
    s = np.arange(len(total))
    p = float(np.sum(total * special.ndtr(s / (math.sqrt(k) * z))))
    return max(0.5, min(p, 1.0) - 1e-12)


def stats_binom_pmf(n, q):
    """Bin(n, q) pmf on 0..n (log-space, so that no term underflows before it is tiny)."""
    j = np.arange(n + 1)
    if q >= 1:
        out = np.zeros(n + 1)
        out[n] = 1.0
        return out
    logp = (special.gammaln(n + 1) - special.gammaln(j + 1) - special.gammaln(n - j + 1) + j * math.log(q)
            + (n - j) * math.log1p(-q))
    return np.exp(logp)


def e2e_sign_pair(spec):
    p = sign_probability(spec.z, spec.batch, spec.n, spec.k)
    q = 0.5 if spec.adjacency == "zero-out" else 1 - p
    return MixturePair([(p, 1.0), (1 - p, -1.0)], [(q, 1.0), (1 - q, -1.0)], spec.server_z)


def e2e_small_step_reference(spec, delta):
    """The "small step" instance (batch = n): None otherwise."""
    if spec.batch != spec.n:
        return None
    tau = math.sqrt(spec.k) * spec.z / spec.batch
    a = 1.0 / (spec.k + E2E_SIGMAS * tau)
    shift = (1.0 if spec.adjacency == "zero-out" else 2.0) * a * spec.k
    mu = shift / math.hypot(a * tau, spec.server_z)
    # the update's (unclipped) mean is a k (the neighbour's 0 or -a k), its std a tau: outside [-1, 1] w.p.
    clip = float(special.ndtr(-(1 / a - spec.k) / tau) + special.ndtr(-(1 / a + spec.k) / tau))
    clip_q = clip if spec.adjacency != "zero-out" else float(2 * special.ndtr(-1 / (a * tau)))
    w = stats_binom_pmf(spec.rounds, spec.lam)

    def delta_fn(e):
        d = sum(wj * gaussian_delta(e, math.sqrt(j) * mu) for j, wj in enumerate(w) if wj > 0)
        return d - spec.rounds * (clip + math.exp(e) * clip_q) - EXACT_MARGIN
    eps = _bisect_lower(lambda e: delta_fn(e) - delta)
    return Reference(eps, math.inf, delta_fn, what="e2e small step (mu %.6g, clip %.2g)" % (mu, clip))


def e2e_server_reference(spec, delta, stop_above=None):
    """A lower bound on the true epsilon of dpfl_e2e's client level with server noise: the larger of the instances'
    (its `upper` is inf: these instances need not be the worst)."""
    block = Block(e2e_sign_pair(spec), 1, spec.lam, spec.rounds)
    sign = blocks_reference([[block]], delta, stop_above=stop_above)
    sign = Reference(sign.epsilon, math.inf, sign.delta_at, sign.h, sign.margin, sign.coarse, "e2e sign")
    small = e2e_small_step_reference(spec, delta)
    if small is None or small.epsilon <= sign.epsilon:
        return sign
    return small


# ---------------------------------------------------------------------------------------------- independent checks
def quadrature_delta(pair, eps, dps=30):
    """H_{e^eps}(P || Q) of a MixturePair by mpmath quadrature of the densities (one step, one direction)."""
    import mpmath as mp
    with mp.workdps(dps):
        z = mp.mpf(pair.z)

        def dens(comps):
            return lambda x: sum(mp.mpf(w) * mp.npdf(x, m, z) for w, m in comps)
        p, q, a = dens(pair.p), dens(pair.q), mp.e ** mp.mpf(eps)
        f = lambda x: max(p(x) - a * q(x), 0)  # noqa: E731
        return float(mp.quad(f, [-mp.inf, -10 * z, -3 * z, 0, 3 * z + 1, 10 * z + 1, mp.inf]))


def skellam_series(j, mu, dps=40):
    """P(Poisson(mu/2) - Poisson(mu/2) = j) by the defining sum over the second Poisson, in mpmath."""
    import mpmath as mp
    with mp.workdps(dps):
        lam, j = mp.mpf(mu) / 2, abs(int(j))
        total, i = mp.mpf(0), 0
        while True:
            t = mp.exp(-2 * lam) * lam ** (2 * i + j) / (mp.factorial(i) * mp.factorial(i + j))
            total += t
            if i > lam + j + 20 and t < total * mp.mpf(10) ** (-dps):
                return total
            i += 1


def self_check(verbose=True):
    """The grid engine against exact values; returns a list of failure messages (empty = pass)."""
    bad = []

    def report(ok, msg):
        if verbose:
            print(msg, "ok" if ok else "FAIL")
        if not ok:
            bad.append(msg)

    # Gaussian lists through the grid engine against the closed form
    for specs, d in [([Gaussian(1.0, 1)], 1e-5), ([Gaussian(2.0, 7), Gaussian(0.9, 2)], 1e-6),
                     ([Gaussian(4.0, 30)], 1e-3)]:
        exact = gaussian_reference(specs, d)
        g = grid_reference(specs, d)
        report(g.epsilon <= exact.upper and exact.epsilon <= g.upper,
               "gaussian %s delta=%g: grid [%.6f, %.6f] exact %.6f" % (specs, d, g.epsilon, g.upper, exact.epsilon))
    # mixture pairs, one step, against quadrature: delta(eps_ref) >= delta >= delta(eps_upper)
    for pair, d in [(sgm_pair(0.1, 1.0), 1e-5), (sgm_pair(0.5, 0.6).reversed(), 1e-6), (antipodal_pair(0.3, 0.8), 1e-5),
                    (antipodal_pair(0.02, 0.5), 1e-6), (sgm_pair(0.7, 1.3, 0.5), 1e-3)]:
        g = _grid_reference([[Block(pair, 1, 1.0, 1)]], d, pair.span() / FINE_POINTS, False)[0]
        both = (pair, pair.reversed())  # the grid takes the max over both directions
        at = max(quadrature_delta(p, g.epsilon) for p in both)
        above = max(quadrature_delta(p, g.upper + 1e-9) for p in both)
        report(at >= d * (1 - 1e-6) and above <= d,
               "quadrature %s z=%g delta=%g: ref %.6f upper %.6f, delta there %.4g %.4g"
               % (pair.p, pair.z, d, g.epsilon, g.upper, at, above))
    # e2e with server noise: the sign probability against a direct sum over the sampled counts, and the sign pair
    # (zero-out, replace-one) against quadrature like the pairs above
    p = sign_probability(1.3, 3, 7, 2)
    direct = 0.0
    for c1 in range(8):
        for c2 in range(8):
            w = special.comb(7, c1) * special.comb(7, c2) * (3 / 7) ** (c1 + c2) * (4 / 7) ** (14 - c1 - c2)
            direct += w * special.ndtr((min(c1, 3) + min(c2, 3)) / (math.sqrt(2) * 1.3))
    report(abs(p - direct) <= 2e-12, "e2e sign probability %.15f direct %.15f" % (p, direct))
    for adj in ("zero-out", "replace-one"):
        pair, d = e2e_sign_pair(E2eServer(1.1, 20, 200, 3, 1.0, 1, 0.7, adj)), 1e-5
        g = _grid_reference([[Block(pair, 1, 1.0, 1)]], d, pair.span() / FINE_POINTS, False)[0]
        both = (pair, pair.reversed())
        at = max(quadrature_delta(q, g.epsilon) for q in both)
        above = max(quadrature_delta(q, g.upper + 1e-9) for q in both)
        report(at >= d * (1 - 1e-6) and above <= d, "e2e sign pair [%s]: ref %.6f upper %.6f, delta there %.4g %.4g"
               % (adj, g.epsilon, g.upper, at, above))
    # two-stage rounds against twostage_ref.py (its own SGM-specific cells): the two brackets overlap
    import twostage_ref
    for z, lam, q, K, n, d in [(1.2, 0.3, 0.05, 3, 10, 1e-5), (0.8, 1.0, 0.5, 2, 4, 1e-6)]:
        t = twostage_ref.two_stage_epsilon(z, lam, q, K, n, d)
        g = grid_reference([TwoStage(lam, q, z, K, n)], d)
        report(g.epsilon <= t.epsilon + t.gap and t.epsilon <= g.upper,
               "two-stage z=%g lam=%g q=%g K=%d n=%d delta=%g: grid [%.6f, %.6f] twostage_ref [%.6f, %.6f]"
               % (z, lam, q, K, n, d, g.epsilon, g.upper, t.epsilon, t.epsilon + t.gap))
    # Skellam: scipy's ive against the defining series, and the grid engine against the direct sum
    worst = 0.0
    for mu in (0.3, 2.0, 17.0, 150.0):
        for j in (0, 1, 3, int(mu) + 2, int(mu + 8 * math.sqrt(mu)) + 5, int(3 * mu) + 40):
            exact = skellam_series(j, mu)
            if exact > SK_TINY:
                worst = max(worst, abs(float(skellam_pmf(j, mu)) / float(exact) - 1))
    report(worst <= SK_REL_ERR / 10, "Skellam ive vs series: worst relative error %.3g (assumed %g)"
           % (worst, SK_REL_ERR))
    for q, k, mu, d in [(1.0, 1, 4.0, 1e-5), (0.3, 2, 30.0, 1e-6), (1.0, 1, 0.8, 1e-3)]:
        exact = skellam_single_reference(q, k, mu, d)
        g = grid_reference([Skellam(q, k, 1, mu, 1)], d)
        report(g.epsilon <= exact.upper and exact.epsilon <= g.upper,
               "Skellam q=%g k=%d mu=%g delta=%g: grid [%.6f, %.6f] direct sum %.6f"
               % (q, k, mu, d, g.epsilon, g.upper, exact.epsilon))
    return bad


if __name__ == "__main__":
    failures = self_check()
    print("\n".join(failures) if failures else "self-check passed")
    sys.exit(1 if failures else 0)
