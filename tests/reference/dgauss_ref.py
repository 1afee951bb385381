"""The exact privacy of the discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020) on an integer-valued query,
by summation from its definition, never from an accountant's formula: numpy only, no code shared with src/privacy
or python/dpfl.

The mechanism adds N_Z(0, s^2) (mass proportional to exp(-x^2 / (2 s^2)) on the integers) to a query whose
neighbouring values differ by the integer k.  The pair P = k + N_Z, Q = N_Z is a concrete pair of neighbouring
outputs, so its divergences are LOWER bounds on the mechanism's (a supremum over pairs); T releases compose to the
T-fold sums, P_T = T k + N_Z^{*T}, Q_T = N_Z^{*T} (exact convolutions of the pmf).

  renyi(alpha, k, s)          D_alpha(P || Q) = log(sum_x P(x)^alpha Q(x)^(1 - alpha)) / (alpha - 1)
  hockey_stick(eps, k, s, T)  delta(eps) = sum_x (P_T(x) - e^eps Q_T(x))_+, minus an allowance for the float error
                              of the sums (so it stays a lower bound on the pair's, hence on the mechanism's)
"""

import math

import numpy as np

CUT = 40.0  # the pmf is kept on |x| <= CUT s + 10: the mass left out is below exp(-CUT^2 / 2) ~ 1e-347


def _support(s):
    return int(math.ceil(CUT * s)) + 10


def pmf(s):
    """N_Z(0, s^2) on -L..L (index i is x = i - L), normalized."""
    L = _support(s)
    x = np.arange(-L, L + 1, dtype=float)
    logp = -x * x / (2 * s * s)
    p = np.exp(logp - logp.max())
    return p / math.fsum(p), L


def _logsumexp(v):
    m = max(v)
    return m + math.log(math.fsum(math.exp(t - m) for t in v))


def renyi(alpha, k, s):
    """D_alpha(k + N_Z(0, s^2) || N_Z(0, s^2)) by direct summation in log space."""
    L = _support(s) + int(math.ceil(alpha * abs(k)))
    xs = range(-L, L + 1)
    two_s2 = 2 * s * s
    mixed = [(-alpha * (x - k) ** 2 - (1 - alpha) * x * x) / two_s2 for x in xs]
    plain = [-x * x / two_s2 for x in xs]
    return (_logsumexp(mixed) - _logsumexp(plain)) / (alpha - 1)


def hockey_stick(eps, k, s, T=1):
    """delta(eps) of T releases of the pair (k + N_Z, N_Z), lowered by the float error allowance."""
    p, L = pmf(s)
    q = p
    for _ in range(T - 1):
        q = np.convolve(q, p)
    shift = T * int(k)  # P_T is Q_T moved right by T k
    n = len(q)
    P = np.concatenate([np.zeros(shift), q]) if shift >= 0 else q
    Q = np.concatenate([q, np.zeros(shift)]) if shift >= 0 else q
    d = P - math.exp(eps) * Q
    pos = d[d > 0]
    allowance = 4 * n * T * np.finfo(float).eps  # the convolutions' and the difference's rounding, generously
    return max(0.0, math.fsum(pos) - allowance)
