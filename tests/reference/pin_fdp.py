"""Known-answer values for PriFedSync's non-asymptotic bound (dpfl_fdp_prifedsync's eps_exact) at K, R > 1.

Independent of src/privacy: mpmath only, written from the definitions below (Wang, Balle, Kasiviswanathan,
"Subsampled Renyi differential privacy and analytical moments accountant", AISTATS 2019 (WBK), Theorem 9 with the
Gaussian's exact forward differences; REFERENCES.md sections 1, 2, 5 and 12).  tests/test_prifedsync.c holds the
numbers this prints (test fdp_exact_bound_pins_k_and_r_by_value); run it again if the construction changes:
    /usr/bin/python3 tests/reference/pin_fdp.py

Mechanism of one client j: K steps per round, each a batch of B of n records drawn without replacement, noise
multiplier z relative to the replace-one sensitivity; the client syncs (releases its round) with probability p per
round, independently of the data; R rounds.

1. One step, integer order a >= 2, gamma = B / n < 1 (WBK Theorem 9 for the Gaussian mechanism):
       e^{(a-1) eps_step(a)} <= 1 + gamma^2 C(a,2) min(4 D_2, 2 f(2)) + sum_{j=3..a} gamma^j C(a,j) min(4 D_j, 2 f(j))
   with f(j) = e^{(j-1) eps_G(j)} = e^{j (j-1) / (2 z^2)} the Gaussian's Renyi moment, and D_j = E_Q[(P/Q - 1)^j]
   for P = N(1, z^2), Q = N(0, z^2): D_j = sum_k C(j,k) (-1)^{j-k} E_Q[(P/Q)^k] = sum_k C(j,k) (-1)^{j-k} f(k)
   for even j (so D_2 = e^{1/z^2} - 1), and for odd j the Cauchy-Schwarz bound sqrt(D_{j-1} D_{j+1}) >= E|.|^j.
   Capped by the plain Gaussian a / (2 z^2) (batch B = n: the plain Gaussian exactly).
2. A round: with probability 1 - p nothing of j is released, else K steps: joint convexity of the Renyi moment,
       e^{(a-1) eps_round(a)} <= 1 - p + p e^{(a-1) K eps_step(a)}.
3. R rounds: R eps_round(a).
4. Conversion (Balle et al. 2020 Thm 21 / Canonne-Kamath-Steinke 2020):
       eps = min_a [ r(a) + log((a-1)/a) - (log delta + log a) / (a-1) ]  over integer orders 2..64.
   dpfl also tries larger orders; the cases below have their optimum well inside 2..64, so both minima coincide.
All arithmetic in mpmath at 1500 digits (the alternating sums D_j cancel badly in double).
"""
import mpmath as mp

mp.mp.dps = 1500


def f(j, z):
    return mp.e ** (mp.mpf(j) * (j - 1) / (2 * z * z))


def even_moment(j, z):
    return mp.fsum(mp.binomial(j, k) * (-1) ** (j - k) * f(k, z) for k in range(j + 1))


def step_cgf(a, gamma, z):
    """(a - 1) eps_step(a), WBK Theorem 9 with the Gaussian's D_j."""
    gauss = mp.mpf(a) * (a - 1) / (2 * z * z)
    if gamma >= 1:
        return gauss
    D = {}
    for j in range(2, a + 2, 2):
        D[j] = even_moment(j, z)
    s = 1 + gamma ** 2 * mp.binomial(a, 2) * min(4 * D[2], 2 * f(2, z))
    for j in range(3, a + 1):
        dj = D[j] if j % 2 == 0 else mp.sqrt(D[j - 1] * D[j + 1])
        s += gamma ** j * mp.binomial(a, j) * min(4 * dj, 2 * f(j, z))
    return min(mp.log(s), gauss)


def eps_exact(n, B, z, K, R, p, delta, orders=range(2, 65)):
    z, p, delta, gamma = mp.mpf(z), mp.mpf(p), mp.mpf(delta), mp.mpf(B) / n
    best, best_a = None, None
    for a in orders:
        x = K * step_cgf(a, gamma, z)  # (a - 1) K eps_step(a)
        rnd = mp.log(1 - p + p * mp.e ** x) / (a - 1)
        r = R * rnd
        e = r + mp.log(mp.mpf(a - 1) / a) - (mp.log(delta) + mp.log(a)) / (a - 1)
        if best is None or e < best:
            best, best_a = e, a
    return max(best, 0), best_a


CASES = [  # clients, p, z, B, n, K, R, delta
    (10, 0.3, 1.0, 16, 600, 38, 5, 1e-5),
    (5, 1.0, 2.0, 50, 500, 4, 10, 1e-5),
    (20, 0.5, 1.5, 10, 100, 3, 7, 1e-6),
    (8, 0.5, 1.1, 8, 1250, 4, 3, 1e-5),  # the run of tests/test_prifedsync.c's write_pfs_config(3 rounds)
]

if __name__ == "__main__":
    for m, p, z, B, n, K, R, delta in CASES:
        e, a = eps_exact(n, B, z, K, R, p, delta)
        print("{%d, %.17g, %.17g, %d, %d, %d, %d, %.17g, %s, %d}," % (m, p, z, B, n, K, R, delta, mp.nstr(e, 17), a))
