#!/usr/bin/env python3
"""Independent high-precision reference for dpfl_rdp_fixed (tests/test_rdp_fixed.c takes its check values from
the output of this script).

The bound evaluated here is the Gaussian-specific form of Wang-Balle-Kasiviswanathan (AISTATS 2019,
arXiv 1808.00087; Theorem 9 with the tighter moment bound of their appendix, "Theorem 27" in the numbering that
dp_accounting and autodp cite) for sampling a batch of B of n without replacement, replace-one adjacency, then
the Gaussian mechanism with noise multiplier z relative to the replace-one sensitivity (eps(j) = j / (2 z^2)).
With gamma = B / n and f(k) = E_{N(0,z^2)}[(N(1,z^2)/N(0,z^2))^k] = exp(k (k - 1) / (2 z^2)), for an integer
order a >= 2:

  (a - 1) eps(a) <= log( 1 + gamma^2 C(a,2) min(4 (f(2) - 1), 2 f(2))
                          + sum_{j=3..a} gamma^j C(a,j) min(4 B_j, 2 f(j)) )

where B_j = Delta^j f(0) = sum_k C(j,k) (-1)^(j-k) f(k) (the j-th forward difference at 0, which equals
E_{N(0,z^2)}[(N(1,z^2)/N(0,z^2) - 1)^j]) for even j and sqrt(B_{j-1} B_{j+1}) for odd j (Cauchy-Schwarz).  The
result is min'ed with the plain Gaussian a / (2 z^2) (joint convexity; exact at gamma = 1).  Fractional orders:
the chord of (a - 1) eps(a) between the neighbouring integers (the true cumulant is convex, eps(1) = 0).

Everything is evaluated with mpmath at 400 decimal digits, so the alternating sums are exact to far more digits
than printed.  The lower bound printed for each case is the Renyi divergence of a realizable worst pair: all
other records equal to x', x - x' = the sensitivity, so that one neighbour's output is N(0, z^2) and the other's is
(1 - gamma) N(0, z^2) + gamma N(1, z^2) (both directions; computed here by quadrature); any valid upper bound on the
WOR RDP must be at least this.

Usage: python3 scripts/rdp_fixed_reference.py   (prints the tables pasted into tests/test_rdp_fixed.c)
"""
import mpmath as mp

mp.mp.dps = 400


def f(k, z):
    return mp.exp(mp.mpf(k) * (k - 1) / (2 * mp.mpf(z) ** 2))


def moments(z, jmax):
    """B_j for j = 0..jmax (even: exact forward difference, odd: geometric mean of even neighbours)."""
    ev = {}
    for j in range(0, jmax + 2, 2):
        ev[j] = mp.fsum(mp.binomial(j, k) * (-1) ** (j - k) * f(k, z) for k in range(j + 1))
    return {j: (ev[j] if j % 2 == 0 else mp.sqrt(ev[j - 1] * ev[j + 1])) for j in range(2, jmax + 1)}


def cgf_int(g, z, a, B=None):
    """(a - 1) * eps(a) at an integer order a >= 2."""
    g, z = mp.mpf(g), mp.mpf(z)
    gauss = (a - 1) * mp.mpf(a) / (2 * z * z)
    if g >= 1:
        return gauss
    if B is None:
        B = moments(z, a)
    s = mp.mpf(1) + g ** 2 * mp.binomial(a, 2) * min(4 * (f(2, z) - 1), 2 * f(2, z))
    for j in range(3, a + 1):
        s += g ** j * mp.binomial(a, j) * min(4 * B[j], 2 * f(j, z))
    return min(mp.log(s), gauss)


def rdp(g, z, a, B=None):
    a = mp.mpf(a)
    if a == mp.floor(a):
        return cgf_int(g, z, int(a), B) / (a - 1)
    lo = int(mp.floor(a))
    t = a - lo
    x = cgf_int(g, z, lo, B) if lo >= 2 else mp.mpf(0)
    y = cgf_int(g, z, lo + 1, B)
    gauss = a / (2 * mp.mpf(z) ** 2)
    return min(((1 - t) * x + t * y) / (a - 1), gauss)


def eps_tight(a, r, delta):
    a = mp.mpf(a)
    return r + mp.log1p(-1 / a) - (mp.log(delta) + mp.log(a)) / (a - 1)


def epsilon(g, z, T, delta, amax=256):
    """min over integer orders 2..amax, then over a 0.01 grid around the best integer."""
    B = moments(z, amax + 1)
    best = None
    for a in range(2, amax + 1):
        e = eps_tight(a, T * rdp(g, z, a, B), delta)
        if best is None or e < best[0]:
            best = (e, a)
    a0 = best[1]
    for i in range(-99, 100):
        a = mp.mpf(a0) + mp.mpf(i) / 100
        if a <= 1.01:
            continue
        e = eps_tight(a, T * rdp(g, z, a, B), delta)
        if e < best[0]:
            best = (e, a)
    return best


def lower_bound(g, z, a):
    """D_a between (1-g) N(0,z^2) + g N(1,z^2) and N(0,z^2), max of both directions (quadrature, 30 digits)."""
    with mp.workdps(30):
        g, z = mp.mpf(g), mp.mpf(z)
        phi = lambda x, m: mp.exp(-(x - m) ** 2 / (2 * z * z)) / (z * mp.sqrt(2 * mp.pi))
        mix = lambda x: (1 - g) * phi(x, 0) + g * phi(x, 1)
        lim = [-mp.inf, -10 * z, 0, 1, 10 * z + a, mp.inf]
        d1 = mp.quad(lambda x: mix(x) ** a * phi(x, 0) ** (1 - a), lim)
        d2 = mp.quad(lambda x: phi(x, 0) ** a * mix(x) ** (1 - a), lim)
        return max(mp.log(d1), mp.log(d2)) / (a - 1)


def main():
    print("# forward-difference identity check: B_j vs quadrature of E[(e^L - 1)^j]")
    for z, j in [(1.0, 4), (2.0, 6), (0.8, 3)]:
        B = moments(z, j + 1)
        with mp.workdps(30):
            zz = mp.mpf(z)
            q = mp.quad(lambda x: mp.exp(-x * x / (2 * zz * zz)) / (zz * mp.sqrt(2 * mp.pi)) *
                        (mp.exp((2 * x - 1) / (2 * zz * zz)) - 1) ** j, [-mp.inf, 0, 0.5, mp.inf])
        print("  z=%g j=%d  B_j=%s  quad=%s" % (z, j, mp.nstr(B[j], 15), mp.nstr(q, 15)))

    print("# issue check values: (gamma, z, T, delta) -> epsilon, order")
    for g, z, T, d in [(0.1, 4, 500, 1e-6), (1.0, 2, 10, 1e-5)]:
        e, a = epsilon(g, z, T, mp.mpf(d))
        print("  {%g, %g, %d, %g, %s}, /* order %s */" % (g, z, T, d, mp.nstr(e, 12), mp.nstr(a, 6)))

    print("# per-step RDP grid: {gamma, z, alpha, rdp, lower bound}")
    grid = [(0.1, 4, 2), (0.1, 4, 8), (0.1, 4, 32), (0.01, 1, 16), (0.01, 2, 64), (0.05, 0.7, 6),
            (0.2, 1.5, 10), (0.5, 1, 5), (0.5, 3, 20), (0.001, 1.1, 128), (0.3, 0.5, 3), (0.9, 2, 12),
            (0.1, 4, 7.5), (0.02, 1, 2.25)]
    for g, z, a in grid:
        r = rdp(g, z, a)
        lb = lower_bound(g, z, a)
        print("  {%g, %g, %g, %s, %s}," % (g, z, a, mp.nstr(r, 15), mp.nstr(lb, 10)))

    print("# epsilon grid: {gamma, z, T, delta, epsilon}")
    egrid = [(0.1, 4, 500, 1e-6), (0.01, 1.0, 1000, 1e-5), (0.02, 1.5, 2000, 1e-5), (0.05, 2, 300, 1e-6),
             (0.2, 3, 100, 1e-5), (0.5, 5, 50, 1e-5), (0.004, 0.8, 10000, 1e-6), (0.1, 1.1, 100, 1e-5),
             (0.25, 8, 1000, 1e-7), (0.03, 0.9, 3000, 1e-5), (0.8, 2, 20, 1e-5), (1.0, 2, 10, 1e-5)]
    for g, z, T, d in egrid:
        e, a = epsilon(g, z, T, mp.mpf(d))
        print("  {%g, %g, %d, %g, %s}, /* order %s */" % (g, z, T, d, mp.nstr(e, 12), mp.nstr(a, 6)))


if __name__ == "__main__":
    main()
