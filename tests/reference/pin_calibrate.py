"""Known-answer value for record-level noise calibration with fl.local_epochs when a client's size is not a multiple
of the batch (dpfl_record_calibrate, tests/test_dp_train.c calibration_counts_the_last_partial_batch).

Independent of src/privacy: mpmath only, from REFERENCES.md sections 1 and 2.
    /usr/bin/python3 tests/reference/pin_calibrate.py

Each client k of n_k records takes local_epochs * ceil(n_k / B) DP-SGD steps per round (the last batch of an
epoch is a partial one, but it is a step), each Poisson-sampling its records at q_k = B / n_k with noise z times
the clip (add/remove).  One record lives in one client and takes part in every round (the worst case the
calibration plans for), so its RDP after R rounds is R * local_epochs * ceil(n_k / B) * eps_SGM(alpha; q_k, z),
    eps_SGM(a) = log( sum_{i=0..a} C(a,i) (1-q)^(a-i) q^i exp((i^2 - i) / (2 z^2)) ) / (a - 1)   (integer a;
Mironov, Talwar, Zhang 2019), converted with eps = min_a [r(a) + log((a-1)/a) - (log delta + log a)/(a-1)].
The calibrated z is the smallest z for which every client's epsilon is within the target: bisection to 1e-9.
dpfl may also use fractional orders, which can only lower epsilon, so its z is at most this one (and close).
"""
import math

import mpmath as mp

mp.mp.dps = 60
ORDERS = list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 256]


def sgm_rdp(q, z, a):
    q, z = mp.mpf(q), mp.mpf(z)
    s = mp.fsum(mp.binomial(a, i) * (1 - q) ** (a - i) * q ** i * mp.e ** (mp.mpf(i * i - i) / (2 * z * z))
                for i in range(a + 1))
    return mp.log(s) / (a - 1)


def epsilon(q, z, steps, delta):
    best = mp.inf
    for a in ORDERS:
        r = steps * sgm_rdp(q, z, a)
        e = r + mp.log(mp.mpf(a - 1) / a) - (mp.log(delta) + mp.log(a)) / (a - 1)
        best = min(best, e)
    return max(best, 0)


def worst_epsilon(sizes, B, epochs, rounds, z, delta):
    return max(epsilon(mp.mpf(B) / n, z, rounds * epochs * math.ceil(n / B), delta) for n in sizes)


def calibrate(sizes, B, epochs, rounds, target, delta):
    lo, hi = 0.3, 50.0
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2
        if worst_epsilon(sizes, B, epochs, rounds, mid, delta) <= target:
            hi = mid
        else:
            lo = mid
    return hi


if __name__ == "__main__":
    sizes, B, epochs, rounds, target, delta = (15, 101, 40), 10, 2, 5, 4.0, 1e-5
    print("sizes %s, B %d, local_epochs %d, rounds %d, target %g, delta %g: z = %.10f" %
          (sizes, B, epochs, rounds, target, delta, calibrate(sizes, B, epochs, rounds, target, delta)))
