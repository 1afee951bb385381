"""Shared pieces of the brute-force privacy references (tests/reference/*_ref.py): a privacy loss PMF on the grid
h Z, its composition by linear convolution with truncation that only LOWERS losses, and delta / epsilon read from
it.  numpy/scipy only; no code shared with src/privacy or python/dpfl.

Why each step keeps a LOWER bound on delta(eps) (and so on epsilon): f_eps(l) = (1 - e^{eps - l})_+ is
non-decreasing in l with values in [0, 1], and delta(eps) = E[f_eps(L)] for the privacy loss L (Balle-Barthe-
Gaboardi 2018; PLD composition: Meiser-Mohammadi 2018, Koskela-Jalko-Honkela 2020).  Moving mass of L downwards or
dropping it (to -inf) can only lower delta at every eps.  trim() does both; convolve() is a linear (never circular)
convolution whose floating-point error it adds to err[0] (Higham, Accuracy and Stability of Numerical Algorithms,
2nd ed., sec. 24.1, with about 3x to spare), to be subtracted from delta by the caller.
"""

import collections
import math

import numpy as np
from scipy import fft as sfft
from scipy import special

U = np.finfo(float).eps / 2  # unit roundoff
TAU = 1e-14                  # mass dropped / clamped per truncation: costs tightness only, never validity
CDF_ERR = 1e-15              # bound on the absolute error of one value of scipy.special.ndtr
DIRECT_MAX = 1 << 16         # below this many products a convolution is done directly (np.convolve)

Pmf = collections.namedtuple("Pmf", "k0 p")  # mass p[i] at loss (k0 + i) h; total <= 1 (dropped mass is at -inf)


# ---------------------------------------------------------------------------------------------- composition
def trim(pmf, tau=TAU):
    """Drop the lowest entries holding <= tau of mass, clamp the highest ones holding <= tau onto the highest kept
    entry: both only lower losses."""
    p = pmf.p
    lo = int(np.searchsorted(np.cumsum(p), tau, side="right"))
    top = np.cumsum(p[::-1])
    n_hi = int(np.searchsorted(top, tau, side="right"))
    hi = len(p) - n_hi
    if hi <= lo:  # (only for a PMF of total mass <= 2 tau) keep one point
        lo, hi, n_hi = len(p) - 1, len(p), 0
    out = p[lo:hi].copy()
    if n_hi:
        out[-1] += top[n_hi - 1]
    return Pmf(pmf.k0 + lo, out)


def _l2(p):
    """|p|_2 without BLAS (np.linalg.norm's threaded dot can stall on a busy machine)."""
    return math.sqrt(float(np.sum(p * p)))


def convolve(a, b, err):
    """The PMF of the sum (linear convolution, then trim); err[0] += a bound on the l1 rounding error."""
    n = len(a.p) + len(b.p) - 1
    if len(a.p) * len(b.p) <= DIRECT_MAX:
        p = np.convolve(a.p, b.p)  # sums of non-negative products: relative error <= (terms + 1) u
        err[0] += (min(len(a.p), len(b.p)) + 1) * U * a.p.sum() * b.p.sum()
    else:
        size = sfft.next_fast_len(n, real=True)
        fa = sfft.rfft(a.p, size)
        fb = fa if b is a else sfft.rfft(b.p, size)
        p = sfft.irfft(fa * fb, size)[:n]
        err[0] += 30 * U * math.log2(size) * math.sqrt(size) * (_l2(a.p) + _l2(b.p))
    return trim(Pmf(a.k0 + b.k0, np.maximum(p, 0.0)))


def power(pmf, n, err):
    """The n-fold sum (n >= 1), by repeated squaring."""
    result, base = None, pmf
    while True:
        if n & 1:
            result = base if result is None else convolve(result, base, err)
        n >>= 1
        if not n:
            return result
        base = convolve(base, base, err)


def with_idle(pmf, lam):
    """(1 - lam) delta_0 + lam pmf: a round the client skips has loss exactly 0."""
    if lam >= 1:
        return pmf
    lo, hi = min(pmf.k0, 0), max(pmf.k0 + len(pmf.p) - 1, 0)
    p = np.zeros(hi - lo + 1)
    p[pmf.k0 - lo:pmf.k0 - lo + len(pmf.p)] = lam * pmf.p
    p[-lo] += 1 - lam
    return Pmf(lo, p)


# ---------------------------------------------------------------------------------------------- delta, epsilon
def delta_of(pmf, h, eps):
    """sum_j p_j (1 - e^{eps - l_j})_+ : the hockey-stick value of the discrete loss distribution."""
    l = (pmf.k0 + np.arange(len(pmf.p))) * h
    above = l > eps
    return float(np.sum(pmf.p[above] * -np.expm1(eps - l[above])))


def epsilon_of(pmf, h, target):
    """The smallest eps >= 0 with delta_of(pmf, h, eps) <= target (delta_of is continuous and non-increasing)."""
    top = pmf.k0 + len(pmf.p) - 1
    if top <= 0 or delta_of(pmf, h, 0.0) <= target:
        return 0.0
    lo, hi = 0, top  # delta(lo h) > target >= delta(hi h) = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if delta_of(pmf, h, mid * h) > target:
            lo = mid
        else:
            hi = mid
    # on ((hi - 1) h, hi h] the losses above eps are those of index >= hi: delta = A - e^{eps - hi h} B
    start = max(hi - pmf.k0, 0)
    tail = pmf.p[start:]
    a = tail.sum()
    b = np.sum(tail * np.exp(-(pmf.k0 + start - hi + np.arange(len(tail))) * h))
    eps = hi * h + math.log((a - target) / b)
    return min(max(eps, (hi - 1) * h), hi * h)


# ---------------------------------------------------------------------------------------------- closed forms
def gaussian_delta(eps, mu):
    """delta(eps) of mu-GDP, closed form: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu == 0:
        return 0.0
    return float(special.ndtr(-eps / mu + mu / 2) - math.exp(eps + special.log_ndtr(-eps / mu - mu / 2)))
