"""Differential test: every epsilon (and delta) the binding reports, for every event kind, is never below an
independent brute-force lower bound on the truth (tests/reference/events_ref.py: numpy/scipy only, no code shared
with src/privacy or python/dpfl; it builds the output distributions of one concrete pair of neighbouring inputs
from the mechanism's definition and composes their rounded-down privacy loss, or uses the exact closed form / direct
sum where there is one).  So eps_ref <= eps_true, and a reported epsilon below eps_ref (1 - 1e-9) -- or a delta below
the reference's lower bound on delta(eps) -- is an under-report, the worst bug an accountant can have.

Kinds (cases drawn from a fixed seed; small counts):
  gaussian   Gaussian events, add-remove and replace-one; one event x T, T events x 1, or split counts.
  poisson    Poisson-subsampled Gaussian, add-remove / zero-out (accounted as add-remove) / replace-one.
  fixed      batches of B of n without replacement (replace-one).
  skellam    distributed DP: Skellam on the integer lattice, client rate q with visible participation.
  two-stage  rPDP-FL rounds; dpfl.e2e's record_epsilon (the same round) and client_epsilon (k Gaussian steps of
             multiplier z/B, or z/(2B) replace-one, per visible participation: exact binomial mixture), and
             gdp_visible_epsilon (record rate 1).
  e2e-server dpfl's client level with server noise (k local DP-SGD steps, then the server's clip to S and noise std
             server_z S; zero-out and replace-one): e2e_client_mu through gdp_visible_epsilon, dpfl.e2e's
             client_epsilon (every third case: it also computes the record level's PLD), and the accountants on the
             client event a run writes for it (two-stage, record rate 1, z = 1 / client_mu; PLD every third case): against the larger of two concrete
             instances (events_ref.e2e_server_reference: updates clipped to +-S, or a small step that stays unclipped
             but with probability ~1e-13), a lower bound that need not be tight.
  mixed      lists of 2-4 events of one adjacency family, some the same event repeated c times (a record held by c
             clients: its steps composed over every copy).
  calibrate  calibrate_noise (rdp; pld for some), calibrate_steps and calibrate_rate: the reference at the
             returned z / T / q is <= the target.
Every accountant the binding has is asked: account_epsilon rdp (tight, classic, integer orders), pld (default
bins, and 4096 bins), gdp (compared only where it does not say asymptotic=True; a CLT number is counted as flagged),
pld_epsilon, account_delta / pld_delta at eps_ref (against the reference's delta there); the slower PLD variants on a
rotating part of the cases.  Where dpfl rejects a variant for an event (EINVAL: PLD without Fixed/Skellam support,
GDP without two-stage) that is listed, not compared; a variant that answers some cases of a kind and rejects others
fails.
Tightness: where the reference is exact (closed form, direct sum) or its grid gap is below 0.5 %, PLD's answer
(account_epsilon pld when it answered as "pld") must be within 1 % of the reference's upper end.  Not expected, so not
checked: RDP (a conversion: 5-20 % above in epsilon here), PLD with 4096 bins (a coarse grid), PLD falling back to RDP (Fixed,
Skellam, Poisson replace-one: no PLD here), GDP's CLT values.
The summary (case counts, worst ratio reported / reference per kind and variant) prints under pytest -s and is part
of every failure message.
"""

import collections
import concurrent.futures
import math
import os
import random
import sys

import pytest

pytest.importorskip("numpy", reason="the reference needs numpy")
pytest.importorskip("scipy", reason="the reference needs scipy")

import dpfl  # noqa: E402
from scipy import stats  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import events_ref as R  # noqa: E402
import refcache  # noqa: E402

CACHE = refcache.Memo("events")
CACHE_CHECKS = 8        # cached references recomputed per run (a rotating sample) and compared
WORKERS = max(2, min(8, os.cpu_count() or 2))  # threads calling dpfl (ctypes and CLI calls release the GIL)

SEED = 20250612
EPS_MIN, EPS_MAX = 0.01, 50.0
TOL = 1e-9
TIGHT = 0.01            # PLD within 1 % above the truth where the reference pins it down
TIGHT_GAP = 0.005       # ... i.e. where the reference's gap is below 0.5 % of it
MIN_CASES = 300
TARGET = {"gaussian": 40, "poisson": 70, "fixed": 45, "skellam": 50, "two-stage": 25, "e2e-server": 30, "mixed": 50,
          "calibrate": 30}
MAX_DRAWS = 4
DELTAS = (1e-3, 1e-5, 1e-6)

Item = collections.namedtuple("Item", "specs events delta label extras meta", defaults=(None,))
Comparison = collections.namedtuple("Comparison", "kind variant label reported reference what")


# ---------------------------------------------------------------------------------------------- spec + event pairs
def gaussian(z, T, adj="add-remove"):
    return R.Gaussian(z, T), dpfl.event_gaussian(z, T).replace(adjacency=adj)


def poisson(q, z, T, adj="add-remove"):
    return R.Poisson(q, z, T, adj), dpfl.event_poisson(q, z, T).replace(adjacency=adj)


def fixed(n, batch, z, T):
    return R.Fixed(n, batch, z, T), dpfl.event_fixed(n, batch, z, T)


def two_stage(lam, q, z, K, T):
    return R.TwoStage(lam, q, z, K, T), dpfl.event_two_stage(lam, q, z, K, T)


def skellam(q, k, dims, z, T):
    d1, d2 = float(k * dims), k * math.sqrt(dims)
    mu = (z * d2) ** 2
    return R.Skellam(q, k, dims, mu, T), dpfl.event_skellam(q, d1, d2, mu, T)


def pairs_item(pairs, delta, label, extras=None):
    return Item([p[0] for p in pairs], [p[1] for p in pairs], delta, label, extras or {})


def _log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _rate(rng, lo=0.001):
    return 1.0 if rng.random() < 0.12 else _log_uniform(rng, lo, 1.0)


def _delta(rng):
    return 1e-8 if rng.random() < 0.08 else rng.choice(DELTAS)


def _split(rng, T):
    """T as 1 event, T events of 1 (small T) or 2-3 parts: self-composition in its three spellings."""
    u = rng.random()
    if u < 0.5 or T == 1:
        return [T], "x%d" % T
    if u < 0.7 and T <= 8:
        return [1] * T, "%d events x 1" % T
    cut = sorted(rng.sample(range(1, T), min(T - 1, rng.randint(1, 2))))
    parts = [b - a for a, b in zip([0] + cut, cut + [T])]
    return parts, "+".join(map(str, parts))


# ---------------------------------------------------------------------------------------------- the references
class CachedReference:
    """An events_ref.Reference as the cache holds it: its numbers and delta_at at its own epsilon (the one probe
    binding_answers uses); delta_at anywhere else computes the live reference."""

    def __init__(self, v, live):
        self.epsilon, self.upper, self.h, self.margin = v["epsilon"], v["upper"], v["h"], v["margin"]
        self.coarse, self.what, self.exact = v["coarse"], v["what"], v["exact"]
        self.gap = self.upper - self.epsilon
        self._delta_at_epsilon, self._live = v["delta_at_epsilon"], live

    def delta_at(self, eps):
        return self._delta_at_epsilon if eps == self.epsilon else self._live().delta_at(eps)


def _as_json(r):
    return {"epsilon": r.epsilon, "upper": r.upper, "h": r.h, "margin": r.margin, "coarse": r.coarse,
            "what": r.what, "exact": r.exact, "delta_at_epsilon": r.delta_at(r.epsilon)}


def reference(fn, arg, delta, stop_above=None):
    """fn (events_ref.reference or e2e_server_reference) of (arg, delta, stop_above=), through the cache."""
    def live():
        return fn(arg, delta, stop_above=stop_above)
    key = "%s %r %r %r" % (fn.__name__, arg, delta, stop_above)
    return CachedReference(CACHE.get(key, lambda: _as_json(live())), live)


# ---------------------------------------------------------------------------------------------- drawing cases
def draw_gaussian(rng):
    z, T, adj = rng.uniform(0.5, 6.0), rng.randint(1, 40), rng.choice(("add-remove", "replace-one"))
    parts, form = _split(rng, T)
    return pairs_item([gaussian(z, t, adj) for t in parts], _delta(rng),
                      "gaussian z=%.4g T=%s [%s]" % (z, form, adj))


def draw_poisson(rng):
    q, z, T = _rate(rng), rng.uniform(0.5, 4.0), rng.randint(1, 30)
    adj = rng.choice(("add-remove", "add-remove", "zero-out", "replace-one"))
    parts, form = _split(rng, T)
    return pairs_item([poisson(q, z, t, adj) for t in parts], _delta(rng),
                      "poisson q=%.4g z=%.4g T=%s [%s]" % (q, z, form, adj))


def draw_fixed(rng):
    n = int(_log_uniform(rng, 10, 3000))
    batch = min(n, max(1, round(_rate(rng, 0.002) * n)))
    z, T = rng.uniform(0.5, 4.0), rng.randint(1, 30)
    parts, form = _split(rng, T)
    return pairs_item([fixed(n, batch, z, t) for t in parts], _delta(rng),
                      "fixed B=%d n=%d z=%.4g T=%s" % (batch, n, z, form))


def draw_skellam(rng):
    k, dims = rng.choice((1, 1, 1, 2, 3)), rng.choice((1, 1, 2, 3, 4))
    q, z = _rate(rng, 0.01), rng.uniform(0.5, 4.0)
    T = 1 if rng.random() < 0.3 else rng.randint(1, 20)
    spec, ev = skellam(q, k, dims, z, T)
    d = _delta(rng)
    extras = {"skellam_epsilon": lambda: dpfl.skellam_epsilon(ev.d1, ev.d2, spec.mu, q, T, d)}
    return Item([spec], [ev], d, "skellam q=%.4g k=%d dims=%d mu=%.4g (z=%.3g) R=%d" % (q, k, dims, spec.mu, z, T),
                extras)


def draw_two_stage(rng):
    n = int(_log_uniform(rng, 20, 2000))
    batch = min(n, max(1, round(_rate(rng, 0.005) * n)))
    lam, z, K, T = _rate(rng, 0.01), rng.uniform(0.5, 4.0), rng.randint(1, 5), rng.randint(1, 10)
    d = _delta(rng)
    q = batch / n
    extras = {}
    if batch == n:
        extras["gdp_visible_epsilon"] = lambda: dpfl.gdp_visible_epsilon(math.sqrt(K) / z, lam, T, d)
    item = pairs_item([two_stage(lam, q, z, K, T)], d,
                      "two-stage lam=%.4g q=%d/%d z=%.4g K=%d R=%d" % (lam, batch, n, z, K, T), extras)
    return item._replace(meta=(batch, n))


def draw_e2e_server(rng):
    """dpfl.e2e's parameters with server noise; a third with batch = n (where the small-step instance applies)."""
    if rng.random() < 0.35:
        n = batch = rng.randint(1, 40)
    else:
        n = int(_log_uniform(rng, 20, 2000))
        batch = min(n, max(1, round(_rate(rng, 0.005) * n)))
    lam, z, K, T = _rate(rng, 0.01), rng.uniform(0.5, 4.0), rng.randint(1, 5), rng.randint(1, 10)
    z2, adj, d = _log_uniform(rng, 0.05, 8.0), rng.choice(("zero-out", "replace-one")), _delta(rng)
    spec = R.E2eServer(z, batch, n, K, lam, T, z2, adj)
    return Item([spec], None, d, "e2e-server z=%.4g B=%d n=%d K=%d lam=%.4g R=%d server_z=%.4g [%s]"
                % (z, batch, n, K, lam, T, z2, adj), {})


def draw_mixed(rng):
    d = _delta(rng)
    if rng.random() < 0.6:  # add-remove family
        makers = [lambda: gaussian(rng.uniform(2.0, 8.0), rng.randint(1, 5)),
                  lambda: poisson(_rate(rng, 0.01), rng.uniform(0.7, 4.0), rng.randint(1, 10),
                                  rng.choice(("add-remove", "zero-out"))),
                  lambda: two_stage(_rate(rng, 0.05), _rate(rng, 0.01), rng.uniform(0.7, 4.0), rng.randint(1, 3),
                                    rng.randint(1, 5)),
                  lambda: skellam(_rate(rng, 0.05), rng.choice((1, 2)), rng.choice((1, 2)), rng.uniform(1.0, 4.0),
                                  rng.randint(1, 5))]
    else:
        makers = [lambda: gaussian(rng.uniform(2.0, 8.0), rng.randint(1, 5), "replace-one"),
                  lambda: fixed(100, rng.randint(1, 100), rng.uniform(0.7, 4.0), rng.randint(1, 10)),
                  lambda: poisson(_rate(rng, 0.01), rng.uniform(0.7, 4.0), rng.randint(1, 10), "replace-one")]
    pairs = [rng.choice(makers)() for _ in range(rng.randint(1, 3))]
    c = rng.choice((1, 1, 2, 3))  # a record held by c clients: one of its events charged once per copy
    pairs += [pairs[0]] * (c - 1)
    rng.shuffle(pairs)
    label = "[%s]%s" % ("; ".join(e.describe() for _, e in pairs), " (one event x %d copies)" % c if c > 1 else "")
    return pairs_item(pairs, d, label)


def draw_calibrate(rng):
    """A single event or a short list, and the calibration to ask for."""
    kind = rng.choice(("gaussian", "poisson", "fixed", "skellam", "two-stage", "mixed"))
    item = DRAW[kind](rng)
    what = rng.choice(("noise", "noise", "steps", "rate"))
    if what == "rate" and not all(isinstance(s, (R.Poisson, R.TwoStage)) for s in item.specs):
        what = "noise"
    if what == "steps" and len(item.specs) > 3:
        what = "noise"
    target = _log_uniform(rng, 0.5, 8.0)
    acc = "pld" if what == "noise" and rng.random() < 0.12 else "rdp"
    return item._replace(label="%s %s (%s) target %.4g: %s" % ("calibrate", what, acc, target, item.label),
                         extras={"calibrate": (what, acc, target)})


DRAW = {"gaussian": draw_gaussian, "poisson": draw_poisson, "fixed": draw_fixed, "skellam": draw_skellam,
        "two-stage": draw_two_stage, "e2e-server": draw_e2e_server, "mixed": draw_mixed}


def accepted(kind, draw):
    rng = random.Random("%d/%s" % (SEED, kind))
    out, skipped = [], 0
    for _ in range(MAX_DRAWS * TARGET[kind]):
        if len(out) >= TARGET[kind]:
            break
        item = draw(rng)
        if kind == "calibrate":
            out.append((item, None))
            continue
        if kind == "e2e-server":
            ref = reference(R.e2e_server_reference, item.specs[0], item.delta, stop_above=EPS_MAX)
        else:
            ref = reference(R.reference, item.specs, item.delta, stop_above=EPS_MAX)
        if ref.coarse or not EPS_MIN <= ref.epsilon <= EPS_MAX:
            skipped += 1
            continue
        out.append((item, ref))
    return out, skipped


# ---------------------------------------------------------------------------------------------- dpfl, under test
INT_ORDERS = tuple(range(2, 257))


def _eps(acc, **kw):
    def f(events, delta):
        g = dpfl.account_epsilon(events, delta, acc, **kw)
        return g
    return f


def _delta_fn(acc, **kw):
    def f(events, eps):
        return dpfl.account_delta(events, eps, acc, **kw)
    return f


ALWAYS = [("account_epsilon rdp", _eps("rdp")), ("account_epsilon rdp classic", _eps("rdp", conversion="classic")),
          ("account_epsilon rdp integer orders", _eps("rdp", orders=INT_ORDERS)),
          ("account_epsilon pld", _eps("pld")), ("account_epsilon pld 4096 bins", _eps("pld", pld_bins=4096)),
          ("account_epsilon gdp", _eps("gdp"))]
ALWAYS_DELTA = [("account_delta rdp", _delta_fn("rdp")), ("account_delta gdp", _delta_fn("gdp"))]
# the slow ones (a full PLD each): one of them per case, in turn
ROTATE = [("pld_epsilon", lambda ev, d: dpfl.pld_epsilon(ev, d), "eps"),
          ("account_delta pld", _delta_fn("pld"), "delta"),
          ("pld_delta", lambda ev, e: dpfl.pld_delta(ev, e), "delta"),
          ("account_delta pld 4096 bins", _delta_fn("pld", pld_bins=4096), "delta")]


def _call(fn, *args):
    try:
        return fn(*args)
    except dpfl.DpflValueError as e:
        return e


def binding_answers(item, ref, index):
    """[(variant, 'eps' | 'delta', answer: Guarantee, float or DpflValueError, the reference's number)]."""
    out = []
    for name, fn in ALWAYS:
        out.append((name, "eps", _call(fn, item.events, item.delta), ref.epsilon))
    probe = ref.epsilon
    ref_delta = ref.delta_at(probe)
    for name, fn in ALWAYS_DELTA:
        out.append((name, "delta", _call(fn, item.events, probe), ref_delta))
    name, fn, what = ROTATE[index % len(ROTATE)]
    out.append((name, what, _call(fn, item.events, item.delta if what == "eps" else probe),
                ref.epsilon if what == "eps" else ref_delta))
    for name, fn in item.extras.items():
        out.append((name, "eps", _call(fn), ref.epsilon))
    return out


def e2e_answers(item, ref, index):
    """[(variant, reported, reference epsilon)] of dpfl.e2e for the two-stage case's parameters: its record level
    (the case's own reference) and its client level (zero-out; replace-one on every other case)."""
    s = item.specs[0]
    batch, n = item.meta
    out = []
    for adj, scale in (("zero-out", 1.0), ("replace-one", 2.0))[:1 + index % 2]:
        r = dpfl.e2e(s.z, batch, n, s.inner, s.lam, s.count, item.delta, client_adjacency=adj)
        if adj == "zero-out":
            out.append(("e2e record_epsilon", r.record_epsilon, ref.epsilon))
        mu_step = scale * batch / s.z  # the averaged clipped update moves by C (2C) against noise std z C / B
        w = stats.binom.pmf(range(s.count + 1), s.count, s.lam)
        cref = R.gaussian_mixture_reference(w, [math.sqrt(m * s.inner) * mu_step for m in range(s.count + 1)],
                                            item.delta)
        out.append(("e2e client_epsilon %s" % adj, r.client_epsilon, cref.epsilon))
    return out


def e2e_server_answers(item, ref, index):
    """[(variant, reported, reference epsilon)]: dpfl's client level with server noise -- e2e_client_mu's per-round mu
    through gdp_visible_epsilon (what dpfl.e2e answers), every accountant on the client event a run writes for it
    (summary.json events: two-stage, record rate 1, z = 1 / mu) -- and on every third case the slow ones, dpfl.e2e
    itself (it also computes the record level's PLD) and the PLD of the client event."""
    s = item.specs[0]
    mu = dpfl.e2e_client_mu(s.z, s.batch, s.k, s.adjacency, s.server_z)
    out = [("gdp_visible_epsilon of e2e_client_mu %s" % s.adjacency,
            dpfl.gdp_visible_epsilon(mu, s.lam, s.rounds, item.delta), ref.epsilon)]
    ev = dpfl.event_two_stage(s.lam, 1.0, 1.0 / mu, 1, s.rounds)
    for acc in ("gdp", "rdp") + (("pld",) if index % 3 == 0 else ()):
        out.append(("client event account_epsilon %s" % acc, dpfl.account_epsilon(ev, item.delta, acc).epsilon,
                    ref.epsilon))
    if index % 3 == 0:
        r = dpfl.e2e(s.z, s.batch, s.n, s.k, s.lam, s.rounds, item.delta, server_z=s.server_z,
                     client_adjacency=s.adjacency)
        out.append(("e2e client_epsilon %s" % s.adjacency, r.client_epsilon, ref.epsilon))
    return out


def calibration(item):
    """(variant, reference epsilon at the calibrated value, target) of a calibrate case."""
    what, acc, target = item.extras["calibrate"]
    fn = {"noise": dpfl.calibrate_noise, "steps": dpfl.calibrate_steps, "rate": dpfl.calibrate_rate}[what]
    v = fn(item.events, target, item.delta, acc)
    if what == "noise":
        specs = [s._replace(mu=(v * s.k) ** 2 * s.dims) if isinstance(s, R.Skellam) else s._replace(z=v)
                 for s in item.specs]
    elif what == "steps":
        if v == 0:
            return "calibrate_steps %s" % acc, 0.0, target, "T = 0"
        specs = [s._replace(count=v) for s in item.specs]
    else:
        specs = [s._replace(q=v) for s in item.specs]
    ref = reference(R.reference, specs, item.delta)
    return "calibrate_%s %s" % (what, acc), ref.epsilon, target, "at %s = %.6g" % (what, v)


# ---------------------------------------------------------------------------------------------- the comparison
class Outcome:
    def __init__(self):
        self.comparisons, self.rejected, self.flagged, self.tight = [], {}, collections.Counter(), []
        self.cases, self.skipped, self.exact = {}, {}, collections.Counter()

    def add(self, kind, variant, label, reported, reference, what="eps"):
        self.comparisons.append(Comparison(kind, variant, label, reported, reference, what))

    def below(self, c):
        if c.what == "delta":
            return not c.reported >= c.reference * (1 - TOL) - 1e-15
        return not c.reported >= c.reference * (1 - TOL)

    def failures(self, kind):
        return [c for c in self.comparisons if c.kind == kind and self.below(c)]

    def unexpected(self, kind):
        """Rejections of a variant for events it covers (see covered())."""
        return {v: [x for x in r if x[2]] for (k, v), r in self.rejected.items() if k == kind and any(x[2] for x in r)}

    def loose(self, kind):
        return [t for t in self.tight if t[0] == kind and not t[2] <= t[3] * (1 + TIGHT)]

    def summary(self):
        lines = ["event reference: %d cases (%s); %d draws skipped (eps_ref outside [%g, %g]); %d exact references"
                 % (sum(self.cases.values()), ", ".join("%s %d" % kv for kv in self.cases.items()),
                    sum(self.skipped.values()), EPS_MIN, EPS_MAX, sum(self.exact.values()))]
        by = collections.defaultdict(list)
        for c in self.comparisons:
            by[(c.kind, c.variant)].append(c)
        for (kind, variant), cs in sorted(by.items()):
            ratio = [(c.reported / c.reference if c.reference > 0 else math.inf, c) for c in cs]
            r, worst = min(ratio, key=lambda t: t[0])
            lines.append("  %-9s %-36s %4d compared  worst reported/reference %.6f  below: %d  (%s)"
                         % (kind, variant, len(cs), r, sum(1 for c in cs if self.below(c)), worst.label))
        kinds = sorted({t[0] for t in self.tight})
        for kind in kinds:
            ts = [t for t in self.tight if t[0] == kind]
            worst = max(ts, key=lambda t: t[2] / t[3])
            lines.append("  %-9s %-36s %4d compared  worst PLD / reference upper end %.6f (limit %.2f)  (%s)"
                         % (kind, "pld tightness", len(ts), worst[2] / worst[3], 1 + TIGHT, worst[1]))
        for (kind, variant), n in sorted(self.flagged.items()):
            lines.append("  %-9s %-36s %4d asymptotic=True (CLT, not compared)" % (kind, variant, n))
        for (kind, variant), r in sorted(self.rejected.items()):
            lines.append("  %-9s %-36s rejected in %d cases: %s" % (kind, variant, len(r), r[0][1]))
        return "\n".join(lines)


def _no_replace_one_poisson(s):
    return not (isinstance(s, R.Poisson) and s.adjacency == "replace-one" and s.q < 1)


def covered(variant, specs):
    """Whether dpfl's documentation says the variant answers for these events (a rejection there fails): PLD
    without RDP fallback for Gaussian, Poisson (not replace-one) and two-stage events; GDP for Gaussian, Poisson (not
    replace-one) and fixed-size events; everything else for every event."""
    if variant in ("pld_epsilon", "pld_delta"):
        return all(isinstance(s, (R.Gaussian, R.TwoStage, R.Poisson)) and _no_replace_one_poisson(s) for s in specs)
    if variant in ("account_epsilon gdp", "account_delta gdp"):
        return all(isinstance(s, (R.Gaussian, R.Fixed, R.Poisson)) and _no_replace_one_poisson(s) for s in specs)
    return True


def collect_answers(out, kind, item, ref, answers):
    for variant, what, a, reference in answers:
        if isinstance(a, Exception):
            out.rejected.setdefault((kind, variant), []).append((item.label, str(a), covered(variant, item.specs)))
            continue
        if isinstance(a, dpfl.Guarantee):
            if a.asymptotic:
                out.flagged[(kind, variant)] += 1
                continue
            value = a.epsilon if what == "eps" else a.delta
            if variant == "account_epsilon pld" and a.answered == "pld" and ref.gap <= TIGHT_GAP * ref.epsilon:
                out.tight.append((kind, item.label, value, ref.upper))
            a = value
        out.add(kind, variant, item.label, a, reference, what)


def _self_check():
    """The reference's own check against exact values and quadrature (events_ref.self_check), or None without
    mpmath.  Pure Python: it runs in a thread of its own beside the dpfl calls, which release the GIL."""
    try:
        import mpmath  # noqa: F401
    except ImportError:
        return None
    return R.self_check(verbose=False)


@pytest.fixture(scope="module")
def outcome():
    out = Outcome()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as checker, \
            concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        self_check = checker.submit(_self_check)
        pending = []
        for kind in TARGET:
            draw = draw_calibrate if kind == "calibrate" else DRAW[kind]
            items, out.skipped[kind] = accepted(kind, draw)
            out.cases[kind] = len(items)
            for i, (item, ref) in enumerate(items):
                if kind == "calibrate":
                    pending.append((kind, item, ref, pool.submit(calibration, item)))
                    continue
                if kind == "e2e-server":
                    pending.append((kind, item, None, pool.submit(e2e_server_answers, item, ref, i)))
                    continue
                out.exact[kind] += ref.exact
                pending.append((kind, item, ref, pool.submit(binding_answers, item, ref, i)))
                if kind == "two-stage":
                    pending.append((kind, item, None, pool.submit(e2e_answers, item, ref, i)))
        for kind, item, ref, fut in pending:
            res = fut.result()
            if kind == "calibrate":
                variant, ref_eps, target, at = res
                # the target must not be below the truth, which is >= ref_eps
                out.add(kind, variant, "%s (%s)" % (item.label, at), target * (1 + TOL), ref_eps)
            elif ref is None:
                for variant, reported, ref_eps in res:
                    out.add(kind, variant, item.label, reported, ref_eps)
            else:
                collect_answers(out, kind, item, ref, res)
        out.self_check = self_check.result()
    CACHE.save_if_asked()
    out.cache_seed = random.SystemRandom().randrange(1 << 30)
    out.cache_bad = CACHE.check_sample(CACHE_CHECKS, out.cache_seed)
    print("\n" + out.summary() + "\n" + CACHE.describe())
    return out


def _check(out, kind):
    fails = out.failures(kind)
    odd = out.unexpected(kind)
    loose = out.loose(kind)
    msg = ["%d %s comparisons below the reference:" % (len(fails), kind)]
    msg += ["  %s: %s: reported %.8g < reference %.8g (%s)" % (c.variant, c.label, c.reported, c.reference, c.what)
            for c in fails[:40]]
    for variant, r in odd.items():
        msg.append("  %s rejected %d cases it covers, e.g. %s: %s" % (variant, len(r), r[0][0], r[0][1]))
    for _, label, pld, upper in loose:
        msg.append("  PLD not within %g %% of the truth: %s: PLD %.8g > %g x reference upper end %.8g"
                   % (100 * TIGHT, label, pld, 1 + TIGHT, upper))
    assert not fails and not odd and not loose, "\n".join(msg) + "\n" + out.summary()
    assert any(c.kind == kind for c in out.comparisons), "no %s comparison ran\n%s" % (kind, out.summary())


def test_reference_self_check(outcome):
    if outcome.self_check is None:
        pytest.skip("the quadrature check needs mpmath")
    assert outcome.self_check == []


def test_enough_cases(outcome):
    assert sum(outcome.cases.values()) >= MIN_CASES, outcome.summary()


def test_cached_references_are_the_reference(outcome):
    """A rotating sample of the references served from tests/reference/cache.json, recomputed: the same numbers."""
    assert not outcome.cache_bad, "cached != recomputed (seed %d): %s" % (outcome.cache_seed, outcome.cache_bad)


@pytest.mark.parametrize("kind", list(TARGET))
def test_never_below_reference(outcome, kind):
    _check(outcome, kind)


def test_pld_tightness_ran(outcome):
    """The 'pld tightness' comparisons (1.01 x the reference's upper end >= PLD's answer, checked per kind above)
    ran on enough cases to mean something."""
    assert len(outcome.tight) >= 50, outcome.summary()


@pytest.mark.parametrize("accountant", ["rdp", "pld", "gdp"])
def test_not_private_refused(accountant):
    """A not-private event, alone or in a list with private ones, is refused with NotPrivateError by every accountant
    (epsilon and delta) and by calibration; so is a Gaussian without noise by PLD (RDP / GDP say inf)."""
    lists = [[dpfl.event_not_private()], [dpfl.event_poisson(0.01, 1.0, 100), dpfl.event_not_private(3)],
             [dpfl.event_gaussian(2.0, 4), dpfl.event_not_private(), dpfl.event_skellam(0.5, 2, 1.5, 9.0, 2)]]
    for events in lists:
        with pytest.raises(dpfl.NotPrivateError):
            dpfl.account_epsilon(events, 1e-5, accountant)
        with pytest.raises(dpfl.NotPrivateError):
            dpfl.account_delta(events, 1.0, accountant)
        if accountant != "gdp":
            with pytest.raises(dpfl.NotPrivateError):
                dpfl.calibrate_steps(events, 1.0, 1e-5, accountant)
    for events in lists[:2]:
        with pytest.raises(dpfl.NotPrivateError):
            dpfl.pld_epsilon(events, 1e-5)
    noiseless = [dpfl.event_gaussian(0.0, 1)]
    try:
        eps = dpfl.account_epsilon(noiseless, 1e-5, accountant).epsilon
    except dpfl.NotPrivateError:
        eps = math.inf
    assert eps == math.inf
