"""Known-answer value for the end-to-end client-level epsilon of a run with fl.local_epochs on uneven client sizes
and a client-rate schedule (fl_e2e_client_epsilon; tests/test_dp_train.c e2e_client_level_pins_epochs_and_schedule).

Independent of src/privacy: mpmath only, from REFERENCES.md sections 3 and 8 and docs/privacy.md (e2e).
    /usr/bin/python3 tests/reference/pin_e2e.py

Client level, Poisson records (sensitivity f = 1) and Poisson clients (zero-out): one local step adds noise of std
z C to a clipped sum projected to norm <= B C, so one step is a Gaussian mechanism of multiplier z / B on one
client's contribution, and s steps compose to mu_local = sqrt(s) B / z (GDP).  The worst client is the one with the
most steps: s = local_epochs * ceil(n_k / B) for the largest n_k (the partial last batch is a step).
Participation is visible: with the largest rate r any round used, J ~ Bin(R, r) rounds in which the client took
part, mu_local sqrt(J)-GDP given J, so
    delta(eps) = sum_J Bin(J; R, r) [ Phi(-eps/m + m/2) - e^eps Phi(-eps/m - m/2) ],  m = mu_local sqrt(J)
(Dong, Roth, Su 2019: mu-GDP's delta(eps)), and the reported epsilon solves delta(eps) = delta (bisection).
"""
import math

import mpmath as mp

mp.mp.dps = 40


def gdp_delta(mu, eps):
    if mu == 0:
        return mp.mpf(0)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2)


def visible_delta(mu, rate, rounds, eps):
    return mp.fsum(mp.binomial(rounds, j) * mp.mpf(rate) ** j * (1 - mp.mpf(rate)) ** (rounds - j) *
                   gdp_delta(mu * mp.sqrt(j), eps) for j in range(1, rounds + 1))


def visible_epsilon(mu, rate, rounds, delta):
    lo, hi = mp.mpf(0), mp.mpf(1)
    while visible_delta(mu, rate, rounds, hi) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if visible_delta(mu, rate, rounds, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def schedule_max(schedule, rounds):
    """largest rate of 'ROUND:RATE, ...' (piecewise constant from each listed round) over rounds 1..R"""
    pts = [(int(a), float(b)) for a, b in (x.split(':') for x in schedule.split(','))]
    return max(max(v for r0, v in pts if r0 <= r) for r in range(1, rounds + 1))


if __name__ == "__main__":
    sizes, B, epochs, z, R, delta = (7, 30, 101), 10, 2, 100.0, 6, 1e-5
    schedule = "1:0.2, 3:0.6, 5:0.1"
    s = max(epochs * math.ceil(n / B) for n in sizes)
    mu = mp.sqrt(s) * B / z
    rate = schedule_max(schedule, R)
    print("sizes %s, B %d, local_epochs %d, z %g, rounds %d, schedule '%s', delta %g: steps %d, mu %s, rate %g, "
          "epsilon = %s" % (sizes, B, epochs, z, R, schedule, delta, s, mp.nstr(mu, 17), rate,
                            mp.nstr(visible_epsilon(mu, rate, R, delta), 17)))
