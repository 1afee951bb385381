"""Independent reference for delta(eps) and eps(delta) of T Poisson-subsampled Gaussian steps, at any delta.

Independent of src/privacy and python/dpfl: numpy/scipy only, and no discretization of the privacy loss.

Pair (add/remove neighbours, sensitivity 1, noise std z), sampling rate q:
    remove:  P = (1 - q) N(0, z^2) + q N(1, z^2)  against  Q = N(0, z^2),   L = log r(x)
    add:     P = N(0, z^2)  against  Q = (1 - q) N(0, z^2) + q N(1, z^2),   L = -log r(x)
with r(x) = 1 - q + q exp((2x - 1) / (2 z^2)).  The T-fold composition's hockey-stick divergence is
    delta(eps) = E[(1 - e^{eps - S})_+],  S = L_1 + ... + L_T  (i.i.d. under P)
(Meiser, Mohammadi 2018; Koskela, Jalko, Honkela 2020), and the true delta is the larger of the two directions.

Method: inversion of the two-sided Laplace transform.  g(u) = (1 - e^{-u})_+ has transform 1/(s (s + 1)) for
Re s > 0, so for any c > 0
    delta(eps) = (1 / 2 pi i) int_{c - i inf}^{c + i inf} M(s)^T e^{-s eps} / (s (s + 1)) ds,   M(s) = E_P[e^{s L}],
which is exact (no discretization, no truncation of the loss).  M(s) - 1 is computed without cancellation as
E_Q[r (r^s - 1)] (remove) or E_{N(0,z^2)}[r^{-s} - 1] (add) by composite Gauss-Legendre quadrature over x (the
integrand is entire and Gaussian-damped), log M by a complex log1p.  The line integral is taken with the
trapezoid rule in y = Im s (spectrally accurate: its error is the periodization delta(eps + 2 pi k / dy)
e^{2 pi k c / dy}, negligible for dy = 0.05), with c near the saddle point, where the integrand does not oscillate.
Self-check (`python3 tests/reference/sgm_delta_ref.py`): T = 1 against the closed form of one step (the same
hockey-stick written with normal CDFs), and the result must not depend on c.

Usage: python3 tests/reference/sgm_delta_ref.py Q Z T DELTA... prints eps(delta) per delta (max of the directions).
"""

import math
import sys

import numpy as np
from scipy import optimize, special

DY = 0.05   # trapezoid step in Im s
YMAX = 2000  # the line integral stops where the integrand is below 1e-18 of its value at Im s = 0


def _nodes(lo, hi, panels, order=24):
    t, w = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(lo, hi, panels + 1)
    a, b = edges[:-1, None], edges[1:, None]
    x = (0.5 * (b - a) * t + 0.5 * (b + a)).ravel()
    wx = (0.5 * (b - a) * w).ravel()
    return x, wx


class Sgm:
    def __init__(self, q, z, direction):
        self.q, self.z, self.dir = q, z, direction
        # the integrand is at most a Gaussian in x times r^{1+Re s}: cover far beyond its peak
        self.x, self.wx = _nodes(-12 * z - 2, 12 * z + 80 * z * z + 2, 1200, 16)
        self.logr = np.log1p(q * np.expm1((2 * self.x - 1) / (2 * z * z)))
        # log of (the Gaussian density times the quadrature weight)
        self.logw = -self.x ** 2 / (2 * z * z) - math.log(z * math.sqrt(2 * math.pi)) + np.log(self.wx)

    def m_minus_1(self, s):
        """M(s) - 1 for an array of complex s."""
        s = np.atleast_1d(np.asarray(s, dtype=complex))
        out = np.empty(s.shape, dtype=complex)
        for i in range(0, len(s), 64):
            blk = s[i:i + 64, None]
            if self.dir == "remove":  # r (r^s - 1) times the density
                u, base = blk * self.logr, self.logr + self.logw
            else:                     # (r^-s - 1) times the density
                u, base = -blk * self.logr, self.logw
            big = u.real > 30  # there the -1 is negligible: one exponential, no overflow against the density
            small = np.where(big, 0, u)
            v = np.where(big, np.exp(np.where(big, u, 0) + base), np.exp(base) * np.expm1(small))
            out[i:i + 64] = v.sum(axis=1)
        return out

    def log_m(self, s):
        w = self.m_minus_1(s)
        a, b = w.real, w.imag  # log(1 + w) without cancellation where w is small
        with np.errstate(over="ignore", invalid="ignore"):
            small = 0.5 * np.log1p(2 * a + a * a + b * b) + 1j * np.arctan2(b, 1 + a)
        return np.where(np.abs(w) < 1e-2, small, np.log(1 + w + 0j))


class Composed:
    """delta(eps) of T steps on the line Re s = c."""

    def __init__(self, sgm, T, c):
        self.T, self.c = T, c
        parts, y0 = [], 0.0
        while True:  # extend the line until the integrand has decayed
            y = np.arange(y0, y0 + 10 - DY / 2, DY)
            s = c + 1j * y
            b = T * sgm.log_m(s) - np.log(s) - np.log(s + 1)
            parts.append((y, s, b))
            ref = parts[0][2][0].real
            if (b.real - ref).max() < math.log(1e-18):
                break
            y0 += 10
            if y0 > YMAX:
                raise RuntimeError("integrand has not decayed at |Im s| = %g" % YMAX)
        self.y = np.concatenate([p[0] for p in parts])
        self.s = np.concatenate([p[1] for p in parts])
        self.base = np.concatenate([p[2] for p in parts])

    def log_delta(self, eps):
        e = self.base - self.s * eps
        ref = e[0].real
        wts = np.full(len(e), DY)
        wts[0] = DY / 2
        val = (np.exp(e - ref) * wts).real.sum() / math.pi
        if val <= 0:
            return -math.inf
        return ref + math.log(val)


def saddle(sgm, T, eps):
    """c > 0 minimising T log M(c) - c eps (the Chernoff exponent), on a grid then refined."""
    f = lambda c: T * sgm.log_m([c])[0].real - c * eps
    cs = np.linspace(0.25, 40, 160)
    lm = sgm.log_m(cs).real
    vals = T * lm - cs * eps
    i = int(np.argmin(vals))
    lo, hi = cs[max(i - 1, 0)], cs[min(i + 1, len(cs) - 1)]
    return optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded").x


def epsilon(q, z, T, delta, direction, c=None):
    sgm = Sgm(q, z, direction)
    guess = 1.0
    for _ in range(2):  # the saddle for a guess of eps, then for the answer
        cc = c if c is not None else saddle(sgm, T, guess)
        comp = Composed(sgm, T, cc)
        g = lambda e: comp.log_delta(e) - math.log(delta)
        if g(0.0) <= 0:
            return 0.0, cc
        hi = 1.0
        while g(hi) > 0:
            hi *= 2
        guess = optimize.brentq(g, 0.0, hi, xtol=1e-12, rtol=1e-12)
        if c is not None:
            break
    return guess, cc


def eps_max(q, z, T, delta):
    return max(epsilon(q, z, T, delta, d)[0] for d in ("remove", "add"))


def _one_step_delta(q, z, eps, direction):
    """Closed form of one step (the hockey-stick with normal CDFs), for the self-check."""
    Phi = special.ndtr
    if direction == "remove":
        a = math.expm1(eps) + q
        if a <= 0:
            return -math.expm1(eps)
        x = z * z * math.log(a / q) + 0.5
        return q * Phi(-(x - 1) / z) - a * Phi(-x / z)
    a = math.expm1(-eps) + q
    if a <= 0:
        return 0.0
    x = z * z * math.log(a / q) + 0.5
    return (1 - math.exp(eps) * (1 - q)) * Phi(x / z) - math.exp(eps) * q * Phi((x - 1) / z)


def self_check():
    for q, z, eps in ((0.01, 1.0, 0.5), (0.2, 0.8, 1.0), (0.001, 1.0, 0.2)):
        for d in ("remove", "add"):
            sgm = Sgm(q, z, d)
            c = saddle(sgm, 1, eps)
            got = math.exp(Composed(sgm, 1, c).log_delta(eps))
            want = _one_step_delta(q, z, eps, d)
            assert abs(got / want - 1) < 1e-8, (q, z, eps, d, got, want)
    e1, c1 = epsilon(1e-3, 1.0, 10000, 1e-10, "remove")
    e2, _ = epsilon(1e-3, 1.0, 10000, 1e-10, "remove", c=c1 * 0.7)
    assert abs(e1 - e2) < 1e-7 * e1, (e1, e2)
    print("self-check ok: one step matches the closed form; eps independent of c (%.9f, %.9f)" % (e1, e2))


if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_check()
        sys.exit(0)
    q, z, T = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    for d in sys.argv[4:]:
        delta = float(d)
        er, cr = epsilon(q, z, T, delta, "remove")
        ea, ca = epsilon(q, z, T, delta, "add")
        print("delta %g: eps %.9f (remove %.9f at c %.3f, add %.9f at c %.3f)" % (delta, max(er, ea), er, cr, ea, ca))
