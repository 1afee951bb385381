"""Differential test: dpfl's record-level epsilons for two-stage sampling with VISIBLE participation (rPDP-FL, dpfl
e2e) are never below an independent brute-force lower bound on the true epsilon.

The reference, tests/reference/twostage_ref.py, shares no code with src/privacy or python/dpfl's accountants: it
composes a rounded-down privacy loss distribution of the exact binomial mixture
    delta(eps) = sum_m Bin(m; n, lam) H_{e^eps}(SGM^{m K})      (per direction, max over add / remove),
so eps_ref <= eps_true and any reported epsilon below eps_ref (1 - 1e-9) is an under-report, the worst bug an
accountant can have.  Kinds compared (each case drawn from a fixed seed):
  scf        `dpfl scf --p ... --bound B --json` for every bound the CLI accepts (c = 1 client holds the record);
  e2e        `dpfl e2e ... --json`'s record_epsilon, record rate q = batch / n;
  replicate  the binding: a record held by c clients is c R rounds -- one two-stage event of count c R and c events
             of count R -- through every accountant of account_epsilon, pld_epsilon and every two-stage bound.
The summary (case counts, worst reported / reference ratio per variant) prints under pytest -s and is part of every
failure message.  DPFL_CLI names the dpfl binary (tests/python.sh sets it), default build/dpfl.
"""

import collections
import concurrent.futures
import json
import math
import os
import random
import re
import subprocess
import sys

import pytest

pytest.importorskip("numpy", reason="the two-stage reference needs numpy")
pytest.importorskip("scipy", reason="the two-stage reference needs scipy")

import dpfl  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLI = os.environ.get("DPFL_CLI") or os.path.join(ROOT, "build", "dpfl")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import refcache  # noqa: E402
import twostage_ref  # noqa: E402

CACHE = refcache.Memo("twostage")
CACHE_CHECKS = 6        # cached references recomputed per run (a rotating sample) and compared
WORKERS = max(2, min(8, os.cpu_count() or 2))  # threads calling dpfl (ctypes and CLI calls release the GIL)

SEED = 20250611
EPS_MIN, EPS_MAX = 0.01, 50.0   # outside, the comparison says little (discretisation / huge numbers): skipped
TOL = 1e-9
MIN_CASES = 200                 # distinct reference cases compared, over the three kinds
TARGET = {"scf": 100, "e2e": 50, "replicate": 60}
MAX_DRAWS = 4                   # per kind, at most MAX_DRAWS * TARGET candidate cases are drawn
KNOWN_SCF_BOUNDS = ("rpdp", "zhu-wang", "pld")

Case = collections.namedtuple("Case", "z lam q K R c delta batch n")
Comparison = collections.namedtuple("Comparison", "kind variant case reported reference")


# ---------------------------------------------------------------------------------------------- drawing cases
def _log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _rate(rng):
    """A rate in [0.01, 1], log-uniform, exactly 1 in about one draw of seven."""
    return 1.0 if rng.random() < 0.15 else _log_uniform(rng, 0.01, 1.0)


def _common(rng):
    return dict(z=rng.uniform(0.5, 4.0), lam=_rate(rng), K=rng.randint(1, 10), R=rng.randint(1, 20),
                delta=rng.choice((1e-3, 1e-5, 1e-6)))


def draw_scf(rng):
    """A group of cases sharing everything but q (one dpfl scf call answers all its --p values)."""
    base = _common(rng)
    qs = sorted({_rate(rng) for _ in range(3)})
    return [Case(q=q, c=1, batch=None, n=None, **base) for q in qs]


def draw_e2e(rng):
    n = rng.randint(20, 2000)
    batch = min(n, max(1, round(_rate(rng) * n)))
    return [Case(q=batch / n, c=1, batch=batch, n=n, **_common(rng))]


def draw_replicate(rng):
    return [Case(q=_rate(rng), c=rng.randint(1, 5), batch=None, n=None, **_common(rng))]


def describe(case):
    s = "z=%.4g lam=%.4g q=%.4g K=%d R=%d" % (case.z, case.lam, case.q, case.K, case.R)
    if case.c > 1:
        s += " c=%d" % case.c
    if case.batch is not None:
        s += " (batch %d of n %d)" % (case.batch, case.n)
    return s + " delta=%g" % case.delta


def reference(case):
    """eps_ref of the case (rounds -> c R), or None when it lies outside [EPS_MIN, EPS_MAX]."""
    args = (case.z, case.lam, case.q, case.K, case.c * case.R, case.delta)

    def compute():
        r = twostage_ref.two_stage_epsilon(*args, stop_above=EPS_MAX)
        return {"epsilon": r.epsilon, "coarse": r.coarse}
    r = CACHE.get("two_stage_epsilon %r stop_above=%r" % (args, EPS_MAX), compute)
    return r["epsilon"] if not r["coarse"] and EPS_MIN <= r["epsilon"] <= EPS_MAX else None


def accepted_cases(kind, draw):
    """(groups of (case, eps_ref), number of draws skipped): drawn from a fixed seed until TARGET[kind] cases
    have a reference inside [EPS_MIN, EPS_MAX]."""
    rng = random.Random("%d/%s" % (SEED, kind))
    groups, count, skipped = [], 0, 0
    for _ in range(MAX_DRAWS * TARGET[kind]):
        if count >= TARGET[kind]:
            break
        group = [(case, reference(case)) for case in draw(rng)]
        kept = [(case, eps) for case, eps in group if eps is not None]
        skipped += len(group) - len(kept)
        if kept:
            groups.append(kept)
            count += len(kept)
    return groups, skipped


# ---------------------------------------------------------------------------------------------- dpfl, under test
def _num(x):
    return repr(float(x))


def run_cli(args):
    assert os.access(CLI, os.X_OK), "no dpfl binary at %s (build it with make, or set DPFL_CLI)" % CLI
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)


def scf_bounds():
    """The --bound choices: those `dpfl scf --help` lists, and the ones this test has known (each tried)."""
    r = run_cli(["scf", "--help"])
    m = re.search(r"--bound\s+([A-Za-z0-9|_-]+)", r.stdout + r.stderr)
    listed = m.group(1).split("|") if m else []
    return listed + [b for b in KNOWN_SCF_BOUNDS if b not in listed]


def scf_call(group, bound):
    """epsilons of a group's --p values, or the CLI's message when it rejects the bound itself."""
    c = group[0][0]
    args = ["scf", "--noise", _num(c.z), "--client-rate", _num(c.lam), "--local-steps", c.K, "--rounds", c.R,
            "--delta", _num(c.delta), "--bound", bound, "--json", "--p"] + [_num(case.q) for case, _ in group]
    r = run_cli(args)
    if r.returncode != 0 and re.search(r"--bound", r.stderr):
        return r.stderr.strip()
    assert r.returncode == 0, "dpfl %s failed: %s" % (" ".join(map(str, args)), r.stderr)
    eps = json.loads(r.stdout)["epsilons"]
    assert len(eps) == len(group)
    return eps


def e2e_call(case):
    args = ["e2e", "--noise", _num(case.z), "--batch", case.batch, "--n", case.n, "--local-steps", case.K,
            "--client-rate", _num(case.lam), "--rounds", case.R, "--delta", _num(case.delta), "--json"]
    r = run_cli(args)
    assert r.returncode == 0, "dpfl %s failed: %s" % (" ".join(map(str, args)), r.stderr)
    return json.loads(r.stdout)["record_epsilon"]


def binding_variants(with_pld_epsilon=True):
    """(name, function of (events, delta) -> epsilon) for every epsilon accountant the binding has; pld_epsilon
    (account_epsilon pld without its RDP floor, and as slow) can be left out."""
    out = [("account_epsilon %s" % a.name.lower(), lambda ev, d, a=a: _guarantee_epsilon(ev, d, a))
           for a in dpfl.AccountantKind]
    if with_pld_epsilon:
        out.append(("pld_epsilon", lambda ev, d: dpfl.pld_epsilon(ev, d)))
    return out


def _guarantee_epsilon(events, delta, accountant):
    g = dpfl.account_epsilon(events, delta, accountant)
    if g.asymptotic:
        raise dpfl.DpflValueError(dpfl.EINVAL, "asymptotic (CLT) value: not a bound")
    return g.epsilon


def replicate_calls(case):
    """{variant: epsilon or DpflValueError} of the binding for c clients holding the record."""
    out = {}
    for bound in dpfl.TwoStageBound:
        forms = [("1 event x cR", lambda b=bound: dpfl.event_two_stage(case.lam, case.q, case.z, case.K,
                                                                       case.c * case.R, bound=b))]
        if case.c > 1:
            forms.append(("c events x R", lambda b=bound: [dpfl.event_two_stage(case.lam, case.q, case.z, case.K,
                                                                                case.R, bound=b)] * case.c))
        for form, make in forms:
            for name, fn in binding_variants(form == "1 event x cR"):
                if name == "account_epsilon gdp" and case.q < 1:
                    continue  # GDP answers a two-stage event only at record rate 1 (Gaussian participations)
                variant = "%s, bound %s, %s" % (name, bound.name.lower().replace("_", "-"), form)
                try:
                    out[variant] = fn(make(), case.delta)
                except dpfl.DpflValueError as e:
                    out[variant] = e
    return out


# ---------------------------------------------------------------------------------------------- the comparison
class Outcome:
    """Every comparison of one run, with what was rejected (variants dpfl does not offer) and the draw counts."""

    def __init__(self):
        self.comparisons, self.rejected, self.cases, self.skipped = [], {}, {}, {}

    def add(self, kind, variant, case, reported, ref):
        self.comparisons.append(Comparison(kind, variant, case, reported, ref))

    def reject(self, kind, variant, case, why):
        self.rejected.setdefault((kind, variant), []).append((case, why))

    def failures(self, kind):
        return [c for c in self.comparisons if c.kind == kind and not c.reported >= c.reference * (1 - TOL)]

    def inconsistent(self, kind):
        """Variants that answered some cases and rejected others: a rejection there is a failure, not a skip."""
        answered = {c.variant for c in self.comparisons if c.kind == kind}
        return {v: r for (k, v), r in self.rejected.items() if k == kind and v in answered}

    def summary(self):
        lines = ["two-stage reference: %d cases compared (%s); %d draws skipped outside eps_ref in [%g, %g]"
                 % (sum(self.cases.values()), ", ".join("%s %d" % kv for kv in self.cases.items()),
                    sum(self.skipped.values()), EPS_MIN, EPS_MAX)]
        by = collections.defaultdict(list)
        for c in self.comparisons:
            by[(c.kind, "(all)")].append(c)
            by[(c.kind, c.variant)].append(c)
        for (kind, variant), cs in sorted(by.items()):
            worst = min(cs, key=lambda c: c.reported / c.reference)
            bad = sum(1 for c in cs if not c.reported >= c.reference * (1 - TOL))
            lines.append("  %-9s %-48s %4d compared  worst reported/reference %.6f  (%s)  below: %d"
                         % (kind, variant, len(cs), worst.reported / worst.reference, describe(worst.case), bad))
        for (kind, variant), r in sorted(self.rejected.items()):
            lines.append("  %-9s %-48s rejected by dpfl in %d %s: %s"
                         % (kind, variant, len(r), "calls" if kind == "scf" else "cases", r[0][1]))
        return "\n".join(lines)


def _submit_scf(groups, pool):
    """[(future, collect)] of every group under every --bound choice."""
    def collect(group, bound):
        def add(out, eps):
            variant = "dpfl scf --bound %s" % bound
            if isinstance(eps, str):
                out.reject("scf", variant, group[0][0], eps)
                return
            for (case, ref), e in zip(group, eps):
                out.add("scf", variant, case, e, ref)
        return add
    return [(pool.submit(scf_call, g, b), collect(g, b)) for g in groups for b in scf_bounds()]


def _submit_e2e(groups, pool):
    def collect(case, ref):
        return lambda out, eps: out.add("e2e", "dpfl e2e record_epsilon", case, eps, ref)
    return [(pool.submit(e2e_call, case), collect(case, ref)) for g in groups for case, ref in g]


def _submit_replicate(groups, pool):
    def collect(case, ref):
        def add(out, answers):
            for variant, e in answers.items():
                if isinstance(e, Exception):
                    out.reject("replicate", variant, case, str(e))
                else:
                    out.add("replicate", variant, case, e, ref)
        return add
    return [(pool.submit(replicate_calls, case), collect(case, ref)) for g in groups for case, ref in g]


# the binding's PLD is the slowest: its cases go to the pool first, while the references of the others are computed
KINDS = (("replicate", draw_replicate, _submit_replicate), ("scf", draw_scf, _submit_scf),
         ("e2e", draw_e2e, _submit_e2e))


@pytest.fixture(scope="module")
def outcome():
    out = Outcome()
    # WORKERS threads run dpfl (CLI processes; ctypes calls, which release the GIL) while the references are computed
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        pending = []
        for kind, draw, submit in KINDS:
            groups, out.skipped[kind] = accepted_cases(kind, draw)
            out.cases[kind] = sum(len(g) for g in groups)
            pending += submit(groups, pool)
        for fut, collect in pending:
            collect(out, fut.result())
    CACHE.save_if_asked()
    out.cache_seed = random.SystemRandom().randrange(1 << 30)
    out.cache_bad = CACHE.check_sample(CACHE_CHECKS, out.cache_seed)
    print("\n" + out.summary() + "\n" + CACHE.describe())
    return out


def _check(out, kind):
    fails = out.failures(kind)
    odd = out.inconsistent(kind)
    msg = ["%d %s comparisons below the reference (reported < eps_ref (1 - %g)):" % (len(fails), kind, TOL)]
    msg += ["  %s: %s: reported %.6g < reference %.6g (ratio %.4f)"
            % (c.variant, describe(c.case), c.reported, c.reference, c.reported / c.reference) for c in fails]
    for variant, r in odd.items():
        msg.append("  %s answered some cases but rejected %d, e.g. %s: %s" % (variant, len(r), describe(r[0][0]),
                                                                            r[0][1]))
    assert not fails and not odd, "\n".join(msg) + "\n" + out.summary()
    assert any(c.kind == kind for c in out.comparisons), "no %s comparison ran\n%s" % (kind, out.summary())


def test_reference_self_check():
    """The reference against the Gaussian closed form (q = 1) and mpmath quadrature (T = 1): below, and close."""
    pytest.importorskip("mpmath", reason="the quadrature check needs mpmath")
    assert twostage_ref.self_check(verbose=False) == []


def test_auditor_example():
    """lam = 0.01, q = 1, K = R = 1, z = 1, delta = 1e-5: exact eps = 3.1387 (0.01 delta_Gauss(eps; mu = 1) = 1e-5)."""
    r = twostage_ref.two_stage_epsilon(1.0, 0.01, 1.0, 1, 1, 1e-5)
    assert 3.1380 <= r.epsilon <= 3.13868


def test_enough_cases(outcome):
    assert sum(outcome.cases.values()) >= MIN_CASES, outcome.summary()


def test_cached_references_are_the_reference(outcome):
    """A rotating sample of the references served from tests/reference/cache.json, recomputed: the same numbers."""
    assert not outcome.cache_bad, "cached != recomputed (seed %d): %s" % (outcome.cache_seed, outcome.cache_bad)


def test_scf_never_below_reference(outcome):
    _check(outcome, "scf")


def test_e2e_never_below_reference(outcome):
    _check(outcome, "e2e")


def test_replicated_record_never_below_reference(outcome):
    _check(outcome, "replicate")
