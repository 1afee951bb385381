"""Tests of the Python binding (python/dpfl) against the dpfl CLI run now, on the same build, and against the
reference values of the C tests (tests/test_privacy.c).

The CLI and the binding run the same library code on the same inputs, so they compute the same doubles; the CLI's
--json prints them with cJSON, whose 15 significant digits read back to within 2 ulp (cJSON prints 17 digits only
when 15 do not come back within DBL_EPSILON).  same() allows exactly that: far tighter than the 1e-9 asked for.
DPFL_CLI names the dpfl binary (tests/python.sh sets it, with DPFL_LIB, from make's BUILD); default build/dpfl.
"""

import ctypes
import json
import math
import os
import subprocess
import sys

import pytest

import dpfl
from dpfl import _lib

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLI = os.environ.get("DPFL_CLI") or os.path.join(ROOT, "build", "dpfl")


def cli(*args, json_out=True):
    """Run `dpfl ARGS [--json]`; its parsed JSON (or stdout text)."""
    assert os.access(CLI, os.X_OK), "no dpfl binary at %s (build it with make, or set DPFL_CLI)" % CLI
    argv = [CLI] + [str(a) for a in args] + (["--json"] if json_out else [])
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, "%s failed: %s" % (" ".join(argv), r.stderr)
    return json.loads(r.stdout) if json_out else r.stdout


def cli_fails(*args):
    """stderr of a `dpfl ARGS` that must fail."""
    r = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)
    assert r.returncode != 0
    return r.stderr


def same(a, b):
    """a and b are the same double up to cJSON's printing (the docstring above)."""
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b or abs(a - b) <= 2 * sys.float_info.epsilon * max(abs(a), abs(b))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


# ---------------------------------------------------------------------------------------------- the library
def test_loads_the_build_under_test():
    if os.environ.get("DPFL_LIB"):
        assert os.path.samefile(dpfl.library_path(), os.environ["DPFL_LIB"])
    assert dpfl.version() == cli("--version", json_out=False).split()[1]


def test_struct_layouts_match_the_library():
    assert _lib.layout_mismatches(_lib.lib) == []
    # every declared struct and field is known to the library (a -1 would be a mismatch above)
    assert _lib.lib.dpfl_abi_layout(b"dpfl_event", None) == ctypes.sizeof(dpfl.Event)
    assert _lib.lib.dpfl_abi_layout(b"dpfl_event", b"lambda") == dpfl.Event.lambda_.offset
    assert _lib.lib.dpfl_abi_layout(b"no_such_type", None) == -1
    assert _lib.lib.dpfl_abi_layout(b"dpfl_event", b"no_such_field") == -1


def test_layout_check_catches_a_wrong_declaration():
    class Shifted(ctypes.Structure):  # dpfl_event without `kind`: `adjacency` moves to offset 0
        _fields_ = [f for f in dpfl.Event._fields_ if f[0] != "kind"]

    class Longer(ctypes.Structure):  # dpfl_guarantee with a field the library does not have
        _fields_ = list(_lib.Guarantee._fields_) + [("extra", ctypes.c_double)]

    class Short(ctypes.Structure):  # dpfl_error too small
        _fields_ = [("msg", ctypes.c_char * 256)]

    bad = _lib.layout_mismatches(_lib.lib, [(Shifted, "dpfl_event"), (Longer, "dpfl_guarantee"),
                                            (Short, "dpfl_error")], [])
    assert bad == ["dpfl_event.adjacency: offset 4 in the library, 0 declared",
                   "dpfl_guarantee: %d bytes in the library, %d declared" % (ctypes.sizeof(_lib.Guarantee),
                                                                              ctypes.sizeof(Longer)),
                   "dpfl_guarantee.extra: offset -1 in the library, %d declared" % Longer.extra.offset,
                   "dpfl_error: 512 bytes in the library, 256 declared"]
    assert _lib.layout_mismatches(_lib.lib, [], ["dpfl_status"]) == []
    assert _lib.layout_mismatches(_lib.lib, [], ["no_such_enum"]) == ["no_such_enum: -1 bytes in the library, 4 declared"]


def test_import_fails_clearly_without_the_library(tmp_path):
    env = dict(os.environ, DPFL_LIB=str(tmp_path / "missing" / "libdpfl.so"))
    r = subprocess.run([sys.executable, "-c", "import dpfl"], capture_output=True, text=True, env=env,
                       cwd=os.path.join(ROOT, "python"))
    assert r.returncode != 0
    assert "ImportError: dpfl: cannot load %s (from DPFL_LIB)" % env["DPFL_LIB"] in r.stderr


# ---------------------------------------------------------------------------------------------- account
ACCOUNT_CASES = [
    # (CLI arguments, events)
    (["--noise", 1.1, "--q", 0.01, "--steps", 100000, "--delta", 1e-5], lambda: dpfl.event_poisson(0.01, 1.1, 100000)),
    (["--noise", 2.0, "--q", 0.1, "--steps", 100, "--delta", 1e-6], lambda: dpfl.event_poisson(0.1, 2.0, 100)),
    (["--noise", 0.8, "--q", 0.5, "--steps", 10, "--delta", 1e-5], lambda: dpfl.event_poisson(0.5, 0.8, 10)),
    (["--noise", 1.5, "--q", 0.05, "--steps", 200, "--delta", 1e-5, "--adjacency", "replace-one"],
     lambda: dpfl.event_poisson(0.05, 1.5, 200).replace(adjacency="replace-one")),
    (["--noise", 1.0, "--q", 0.01, "--steps", 500, "--delta", 1e-5, "--sampler", "fixed", "--batch", 10, "--n", 1000],
     lambda: dpfl.event_fixed(1000, 10, 1.0, 500)),
]


@pytest.mark.parametrize("args,make", ACCOUNT_CASES, ids=lambda a: " ".join(map(str, a)) if isinstance(a, list) else "")
def test_account_epsilon_equals_cli(args, make):
    ev = make()
    delta = float(args[args.index("--delta") + 1])
    j = cli("account", *args, "--accountant", "all")
    results = {r["accountant"]: r for r in j["results"]}
    for acc in ("rdp", "pld", "gdp"):
        try:
            g = dpfl.account_epsilon(ev, delta, acc)
        except dpfl.DpflError:  # the CLI leaves out what the library refuses (GDP under replace-one)
            assert acc == "gdp" and acc not in results
            continue
        r = results[acc]
        assert same(g.epsilon, r["epsilon"]), acc
        assert g.delta == r["delta"] == delta
        assert g.asymptotic == r["asymptotic"]
        if acc == "rdp":
            assert same(g.order, r["order"])
        if acc == "gdp":
            assert same(g.mu, r["mu"])
        assert g.answered == r.get("answered_by", acc)
        assert g.fallback == r.get("fallback", "")
    best = min((r for r in results.values() if not r["asymptotic"]), key=lambda r: r["epsilon"])
    assert j["epsilon"] == best["epsilon"]


def test_pld_falls_back_to_rdp_as_the_cli_says():
    # fixed-size sampling is not a PLD event: the number is RDP's, and both say why
    ev = dpfl.event_fixed(1000, 10, 1.0, 500)
    g = dpfl.account_epsilon(ev, 1e-5, "pld")
    j = cli("account", "--noise", 1.0, "--steps", 500, "--delta", 1e-5, "--sampler", "fixed", "--batch", 10,
            "--n", 1000, "--accountant", "pld")
    assert g.answered == j["answered_by"] == "rdp"
    assert g.fallback == j["fallback"] and g.fallback
    assert same(g.epsilon, j["epsilon"]) and g.epsilon == dpfl.account_epsilon(ev, 1e-5, "rdp").epsilon


@pytest.mark.parametrize("acc,q", [("rdp", 0.02), ("pld", 0.02), ("gdp", 1.0), ("gdp", 0.02)])
def test_account_delta_equals_cli(acc, q):
    # gdp at q = 1 is exact; at q < 1 its CLT value is flagged asymptotic, in the binding and in the CLI's JSON
    ev = dpfl.event_poisson(q, 1.3, 3000)
    j = cli("account", "--noise", 1.3, "--q", q, "--steps", 3000, "--epsilon", 2.5, "--accountant", acc)
    g = dpfl.account_delta(ev, 2.5, acc)
    assert same(g.delta, j["delta"]) and g.epsilon == j["epsilon"] == 2.5
    if acc == "rdp":
        assert same(g.order, j["order"])
    if acc == "gdp":
        assert same(g.mu, j["mu"]) and g.asymptotic == j["asymptotic"] == (q < 1)


def test_classic_conversion_equals_cli():
    j = cli("account", "--noise", 1.1, "--q", 0.01, "--steps", 10000, "--delta", 1e-5, "--conversion", "classic")
    g = dpfl.account_epsilon(dpfl.event_poisson(0.01, 1.1, 10000), 1e-5, "rdp", conversion="classic")
    assert same((g.epsilon, g.order), (j["epsilon"], j["order"]))
    tight = dpfl.account_epsilon(dpfl.event_poisson(0.01, 1.1, 10000), 1e-5, "rdp")
    assert tight.epsilon < g.epsilon


def printed(x, digits, direction):
    """x as the CLI prints a privacy number: %g with `digits` digits, moved to the safe side (direction +1: never
    below x, -1: never above) by units of x's last digit."""
    text = "%.*g" % (digits, x)
    unit = 10.0 ** (math.floor(math.log10(abs(x))) - (digits - 1)) if x else 0.0
    while (float(text) < x) if direction > 0 else (float(text) > x):
        text = "%.*g" % (digits, float(text) + direction * unit)
    return text


def test_printed_values_match_cli_text():
    out = cli("account", "--noise", 1.1, "--q", 0.01, "--steps", 20000, "--delta", 1e-5, "--accountant", "all",
              json_out=False).splitlines()
    ev = dpfl.event_poisson(0.01, 1.1, 20000)
    r, p, g = (dpfl.account_epsilon(ev, 1e-5, a) for a in ("rdp", "pld", "gdp"))
    assert out[0] == "%-4s  epsilon = %s  delta = %s  (order %.4g, tight conversion)" % (
        "rdp", printed(r.epsilon, 6, 1), printed(r.delta, 6, 1), r.order)
    assert out[1] == "%-4s  epsilon = %s  delta = %s  (lower estimate %s: the true epsilon lies in [%s, %s])" % (
        "pld", printed(p.epsilon, 6, 1), printed(p.delta, 6, 1), printed(p.epsilon_lower, 6, -1),
        printed(p.epsilon_lower, 6, -1), printed(p.epsilon, 6, 1))
    assert 0 < p.epsilon_lower <= p.epsilon and r.epsilon_lower == 0
    assert out[2] == "%-4s  epsilon = %s  delta = %s  (mu = %s)  ASYMPTOTIC (CLT), not a bound" % (
        "gdp", printed(g.epsilon, 6, 1), printed(g.delta, 6, 1), printed(g.mu, 6, 1))
    z = dpfl.calibrate_noise(dpfl.event_poisson(0.1, 1.0, 1500), 8, 1e-3)
    e = dpfl.account_epsilon(dpfl.event_poisson(0.1, z, 1500), 1e-3).epsilon
    text = cli("calibrate", "--target-epsilon", 8, "--delta", 1e-3, "--q", 0.1, "--steps", 1500, json_out=False)
    assert text.splitlines()[0] == ("noise = %s  (epsilon = %s <= 8 at delta = 0.001, rdp, Poisson q = 0.1, "
                                    "1500 steps, add-remove)" % (printed(z, 6, 1), printed(e, 6, 1)))


# ---------------------------------------------------------------------------------------------- calibrate
@pytest.mark.parametrize("acc,q,T,target,delta", [
    ("rdp", 0.1, 1500, 8, 1e-3), ("rdp", 0.01, 100000, 1, 1e-5), ("pld", 0.01, 10000, 3, 1e-5),
    ("pld", 0.004, 5000, 0.5, 1e-6)])
def test_calibrate_equals_cli(acc, q, T, target, delta):
    j = cli("calibrate", "--target-epsilon", target, "--delta", delta, "--q", q, "--steps", T, "--accountant", acc)
    z = dpfl.calibrate_noise(dpfl.event_poisson(q, 1.0, T), target, delta, acc)
    assert same(z, j["noise"])
    g = dpfl.account_epsilon(dpfl.event_poisson(q, z, T), delta, acc)
    assert same(g.epsilon, j["epsilon"]) and g.epsilon <= target


def test_calibrate_steps_and_rate_are_tight():
    ev = dpfl.event_poisson(0.01, 1.0, 1)
    T = dpfl.calibrate_steps(ev, 3.0, 1e-5)
    assert dpfl.account_epsilon(ev.replace(count=T), 1e-5).epsilon <= 3.0
    assert dpfl.account_epsilon(ev.replace(count=T + 1), 1e-5).epsilon > 3.0
    q = dpfl.calibrate_rate(dpfl.event_poisson(0.5, 1.0, 1000), 3.0, 1e-5)
    assert dpfl.account_epsilon(dpfl.event_poisson(q, 1.0, 1000), 1e-5).epsilon <= 3.0
    assert dpfl.account_epsilon(dpfl.event_poisson(q * 1.001, 1.0, 1000), 1e-5).epsilon > 3.0


# ---------------------------------------------------------------------------------------------- f-DP, SCF, e2e
def test_fdp_equals_cli():
    args = dict(clients=100, p=0.5, z=1.0, batch=16, n=600, local_steps=38, rounds=93, delta=1e-5)
    j = cli("fdp", "--clients", 100, "--p", 0.5, "--noise", 1.0, "--batch", 16, "--n", 600, "--local-steps", 38,
            "--rounds", 93, "--delta", 1e-5)
    r = dpfl.fdp_prifedsync(**args)
    assert same((r.mu_weak, r.mu_strong, r.eps_weak_clt, r.eps_strong_clt, r.eps_exact, r.order_exact),
                (j["mu"], j["mu_strong"], j["epsilon_clt"], j["epsilon_strong_clt"], j["epsilon"], j["order"]))


@pytest.mark.parametrize("bound", ["rpdp", "pld"])
def test_scf_forward_equals_cli(bound):
    ps = [0.001, 0.05, 0.3, 1.0]
    j = cli("scf", "--noise", 1.0, "--client-rate", 0.5, "--local-steps", 5, "--rounds", 20, "--delta", 1e-3,
            "--bound", bound, "--p", *ps)
    pp = dpfl.RpdpParams(z=1.0, lambda_=0.5, inner=5, rounds=20, delta=1e-3, use_pld=bound == "pld")
    assert same([dpfl.rpdp_epsilon(pp, p) for p in ps], j["epsilons"])


def test_scf_inverse_equals_cli():
    budgets = [0.5, 2.0, 40.0]
    j = cli("scf", "--noise", 3.508, "--client-rate", 0.5, "--local-steps", 5, "--rounds", 20, "--delta", 1e-3,
            "--epsilon", *budgets)
    pp = dpfl.RpdpParams(3.508, 0.5, 5, 20, 1e-3)
    fit = dpfl.scf_fit_curve(pp)
    assert same((fit.a, fit.b, fit.c, fit.r2), (j["a"], j["b"], j["c"], j["r2"]))
    eps1 = dpfl.rpdp_epsilon(pp, 1.0)
    safe = [dpfl.rpdp_safe_rate(pp, fit, e, eps1) for e in budgets]
    p_fit = [dpfl.scf_rate(fit, e) for e in budgets]
    assert same(safe, j["p_safe"]) and same(p_fit, j["p_fit"])
    assert same([dpfl.rpdp_epsilon(pp, p) for p in p_fit], j["p_fit_epsilon"])
    for e, p in zip(budgets, safe):  # the guarantee: p_safe's exact epsilon is within the budget
        assert dpfl.rpdp_epsilon(pp, p) <= e
    assert safe[2] == 1.0 and eps1 <= 40.0


def test_e2e_equals_cli():
    j = cli("e2e", "--noise", 1.0, "--batch", 64, "--n", 600, "--local-steps", 10, "--client-rate", 0.1,
            "--rounds", 100, "--delta", 1e-5, "--server-noise", 0.5, "--adjacency", "replace-one")
    r = dpfl.e2e(1.0, 64, 600, 10, 0.1, 100, 1e-5, server_z=0.5, client_adjacency="replace-one")
    assert same((r.record_epsilon, r.record_order, r.client_epsilon, r.client_noise, r.client_mu),
                (j["record_epsilon"], j["record_order"], j["client_epsilon"], j["client_noise"], j["client_mu_round"]))
    assert r.client_mu == dpfl.e2e_client_mu(1.0, 64, 10, "replace-one", 0.5)


# ---------------------------------------------------------------------------------------------- reference values
def test_sgm_rdp_reference_values():  # tests/test_privacy.c sgm_rdp_check_values
    assert rel(dpfl.rdp_sgm(0.1, 1, 2), 0.0170369) <= 1e-5
    assert rel(dpfl.rdp_sgm(0.1, 1, 3), 0.0317123) <= 1e-5
    assert rel(dpfl.rdp_sgm(0.1, 1, 10), 2.442816) <= 1e-6
    assert dpfl.rdp_sgm(0, 1, 5) == 0
    assert rel(dpfl.rdp_sgm(1, 2, 5), 5 / 8) <= 1e-12
    assert math.isinf(dpfl.rdp_sgm(0.1, 0, 5))
    assert rel(dpfl.rdp_sgm(1e-6, 0.7, 2), math.log1p(1e-12 * math.expm1(1 / 0.49))) <= 1e-9


def test_geyer_moments_accountant():  # orders 2..32, classic conversion: 1.2586
    g = dpfl.account_epsilon(dpfl.event_poisson(0.01, 4, 10000), 1e-5, "rdp", conversion="classic",
                             orders=range(2, 33))
    assert rel(g.epsilon, 1.2586) <= 1e-4
    curve = dpfl.rdp_compose(dpfl.event_poisson(0.01, 4, 10000), range(2, 33))
    assert dpfl.rdp_to_epsilon(range(2, 33), curve, 1e-5, "classic") == (g.epsilon, g.order)


def test_rpdp_reference_values():  # rPDP-FL eps*(p) table and calibrated noise
    pp = dpfl.RpdpParams(1.0, 0.5, 5, 20, 1e-3)
    for p, want in zip([0.001, 0.01, 0.1, 0.5, 1.0], [0.268093, 0.561703, 4.209907, 30.49293, 91.79282]):
        assert rel(dpfl.rpdp_epsilon(pp, p), want) <= 2e-6
    assert abs(dpfl.rpdp_calibrate_noise(pp, 10, 0.01) - 3.508) <= 0.01
    assert abs(dpfl.rpdp_calibrate_noise(dpfl.RpdpParams(1.0, 1.0, 50, 15, 1e-3), 10, 0.01) - 12.25) <= 0.01
    assert abs(dpfl.rpdp_rate_for_budget(pp, 4.209907) - 0.1) < 1e-4
    with pytest.raises(ValueError, match="zhu-wang"):  # removed: not a bound when participation is visible
        dpfl.RpdpParams(1.0, 0.5, 5, 20, 1e-3, bound="zhu-wang")._c()
    with pytest.raises(ValueError):
        dpfl.event_two_stage(0.5, 0.1, 1.0, 5, 20, bound="zhu-wang")
    fit = dpfl.scf_fit_curve(dpfl.RpdpParams(3.508, 0.5, 5, 20, 1e-3))
    assert fit.r2 > 0.99 and fit.npoints == 190
    assert dpfl.scf_rate(fit, 0.1) < dpfl.scf_rate(fit, 1) < dpfl.scf_rate(fit, 5)
    assert dpfl.scf_rate(fit, 100) == 1.0 and dpfl.scf_rate(fit, 0.0) == 0.0


@pytest.mark.parametrize("z,n,K,R,mu", [(1.0, 600, 38, 93, 2.71), (0.9, 600, 38, 83, 3.10), (0.75, 600, 38, 64, 3.96),
                                        (1.0, 600, 38, 194, 3.92), (1.0, 600, 38, 386, 5.52),
                                        (1.0, 500, 32, 468, 6.70)])
def test_prifedsync_mu_table(z, n, K, R, mu):
    r = dpfl.fdp_prifedsync(10, 0.5, z, 16, n, K, R, 1e-5)
    assert abs(r.mu_weak - mu) <= 0.005
    assert rel(r.mu_strong, 3 * r.mu_weak) <= 1e-12
    assert r.eps_exact < dpfl.fdp_prifedsync(10, 1.0, z, 16, n, K, R, 1e-5).eps_exact


@pytest.mark.parametrize("q,T,eps,z_pub", [(1.0, 60, 2, 12.5), (1.0, 150, 8, 6.372), (0.1, 1500, 8, 2.147),
                                           (0.1, 600, 2, 4.0625)])
def test_privatefl_calibration(q, T, eps, z_pub):  # Opacus's orders; the paper stops within 0.01 in epsilon
    orders = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
    ev = dpfl.event_gaussian(1, T) if q >= 1 else dpfl.event_poisson(q, 1, T)
    z = dpfl.calibrate_noise(ev, eps, 1e-3, "rdp", orders=orders, tol=1e-6)
    assert 0.99 * z_pub <= z <= z_pub + 1e-9
    e = dpfl.account_epsilon(ev.replace(z=z_pub), 1e-3, "rdp", orders=orders).epsilon
    assert eps - 0.01 <= e <= eps


def test_gdp_reference_values():
    for mu in [0.1, 0.5, 1, 2.71, 6]:
        e = dpfl.gdp_epsilon(mu, 1e-5)
        assert dpfl.gdp_delta(mu, e) <= 1e-5 * (1 + 1e-9)
        if e > 0:
            assert rel(dpfl.gdp_mu(e, 1e-5), mu) <= 1e-8
    assert rel(dpfl.gdp_tradeoff(1.0, 0.5), 0.5 * math.erfc(1 / math.sqrt(2))) <= 1e-12
    assert rel(dpfl.gdp_clt_poisson(0.01, 1.1, 1e5), 0.01 * math.sqrt(1e5 * math.expm1(1 / 1.21))) <= 1e-12
    # plain Gaussians are exact in GDP; PLD sits above by < 1%
    exact = dpfl.gdp_epsilon(math.sqrt(10) / 2, 1e-5)
    g = dpfl.event_gaussian(2.0, 10)
    assert rel(dpfl.account_epsilon(g, 1e-5, "gdp").epsilon, exact) <= 1e-9
    assert exact * (1 - 1e-9) <= dpfl.account_epsilon(g, 1e-5, "pld").epsilon <= exact * 1.01
    # the f-DP curve of a GDP profile is G_mu
    grid = [i / 20 for i in range(0, 201)]
    f = dpfl.tradeoff_from_profile(grid, [dpfl.gdp_delta(1.0, e) for e in grid], 0.3)
    assert abs(f - dpfl.gdp_tradeoff(1.0, 0.3)) < 1e-3 and f <= dpfl.gdp_tradeoff(1.0, 0.3) + 1e-12
    # visible participation at q = 1 is plain composition
    assert rel(dpfl.gdp_visible_epsilon(0.5, 1.0, 16, 1e-5), dpfl.gdp_epsilon(2.0, 1e-5)) <= 1e-6


def test_single_step_pld_against_closed_form():
    lo, hi = 0.0, 60.0
    for _ in range(200):
        m = 0.5 * (lo + hi)
        if dpfl.pld_sgm_delta_exact(0.3, 0.9, m) > 1e-5:
            lo = m
        else:
            hi = m
    ps = dpfl.account_epsilon(dpfl.event_poisson(0.3, 0.9, 1), 1e-5, "pld").epsilon
    assert hi * (1 - 1e-9) <= ps <= hi * 1.01
    assert dpfl.pld_epsilon(dpfl.event_poisson(0.3, 0.9, 1), 1e-5) >= hi * (1 - 1e-9)


def test_q_one_is_gaussian():
    for acc, kw in (("rdp", {}), ("pld", {"pld_bins": 1 << 15})):
        a = dpfl.account_epsilon(dpfl.event_poisson(1.0, 1.5, 20), 1e-5, acc, **kw).epsilon
        b = dpfl.account_epsilon(dpfl.event_gaussian(1.5, 20), 1e-5, acc, **kw).epsilon
        assert rel(a, b) <= 1e-12


def test_skellam_event_composes_like_the_skellam_accountant():
    # the distributed-DP round as an event: at most dpfl_skellam_epsilon (the accountant uses more orders) and close
    d2, mu = 3700.0, (1.1 * 3700.0) ** 2
    d1 = dpfl.skellam_l1_bound(d2, 2 ** 17)
    ev = dpfl.event_skellam(0.03, d1, d2, mu, count=200)
    e = dpfl.account_epsilon([ev], 1e-5).epsilon
    ref = dpfl.skellam_epsilon(d1, d2, mu, 0.03, 200, 1e-5)
    assert 0.97 * ref <= e <= ref * (1 + 1e-9)
    assert ev.kind == dpfl.EventKind.SKELLAM and ev.adjacency == dpfl.Adjacency.ZERO_OUT


def test_skellam_and_stop_rule():
    # at large variance the Skellam RDP approaches the Gaussian alpha d2^2 / (2 mu), from above
    g = 8 * 1.0 / (2 * 1e6)
    s = dpfl.skellam_rdp(8, dpfl.skellam_l1_bound(1.0, 1000), 1.0, 1e6)
    assert g <= s <= g * 1.01
    e = dpfl.skellam_epsilon(1.0, 1.0, 100.0, 0.1, 100, 1e-5)
    assert e >= dpfl.account_epsilon(dpfl.event_poisson(0.1, 10.0, 100), 1e-5, "rdp", orders=range(2, 257)).epsilon
    R = dpfl.stop_rule_rounds(0.01, 1.0, 100000, 8, 1e-5)
    curve = dpfl.rdp_compose(dpfl.event_poisson(0.01, 1.0, R))
    assert dpfl.rdp_to_delta(dpfl.rdp_default_orders(), curve, 8)[0] <= 1e-5
    curve = dpfl.rdp_compose(dpfl.event_poisson(0.01, 1.0, R + 1))
    assert dpfl.rdp_to_delta(dpfl.rdp_default_orders(), curve, 8)[0] > 1e-5
    assert dpfl.stop_rule_rounds([0.01] * 50, [1.0] * 50, 50, 8, 1e-5) == 50


# ---------------------------------------------------------------------------------------------- composition
def test_composition_adds_rdp_and_matches_single_events():
    a, b = dpfl.event_poisson(0.01, 1.1, 700), dpfl.event_gaussian(8.0, 3)
    c = dpfl.Composition().compose(a).compose(b)
    ra, rb, rc = dpfl.rdp_compose(a), dpfl.rdp_compose(b), c.rdp()
    assert all(rel(x + y, z) <= 1e-12 for x, y, z in zip(ra, rb, rc))
    for acc in ("rdp", "pld"):
        e = c.epsilon(1e-5, acc).epsilon
        assert e > max(dpfl.account_epsilon(a, 1e-5, acc).epsilon, dpfl.account_epsilon(b, 1e-5, acc).epsilon)
        assert c.delta(e, acc).delta <= 1e-5 * 1.001
    # the same event composed twice is that event with the counts added
    twice = dpfl.Composition([a, a]).epsilon(1e-5).epsilon
    assert rel(twice, dpfl.account_epsilon(a.replace(count=1400), 1e-5).epsilon) <= 1e-12
    # compose(count=) replaces the count without touching the event passed in
    d = dpfl.Composition().compose(a, count=1400)
    assert d.events[0].count == 1400 and a.count == 700 and len(d) == 1
    assert d.epsilon(1e-5).epsilon == dpfl.account_epsilon(a.replace(count=1400), 1e-5).epsilon


def test_event_fields_and_description():
    e = dpfl.event_fixed(1000, 10, 1.2, 7)
    assert (e.kind, e.adjacency, e.n, e.batch, e.z, e.count, e.q) == (
        dpfl.EventKind.FIXED, dpfl.Adjacency.REPLACE_ONE, 1000, 10, 1.2, 7, 0.01)
    assert e.describe() == "fixed(batch=10 of n=1000, z=1.2) x 7 [replace-one]"
    assert repr(dpfl.event_poisson(0.01, 1.1, 1000)) == "dpfl.Event(poisson(q=0.01, z=1.1) x 1000 [add-remove])"
    t = dpfl.event_two_stage(0.5, 0.1, 1.0, 5, 20)
    assert (t.lambda_, t.inner, t.bound) == (0.5, 5, dpfl.TwoStageBound.RPDP)
    assert dpfl.event_gaussian(2.0) == dpfl.event_gaussian(2.0, 1) != dpfl.event_gaussian(2.0, 2)
    assert dpfl.adjacency_name("zero-out") == "zero-out" and dpfl.accountant_name(dpfl.AccountantKind.PLD) == "pld"
    orders = dpfl.rdp_default_orders()
    assert orders[0] == 2 and orders[62] == 64 and orders[63] == 72 and orders[-1] == 4096


def test_budget_files(tmp_path):
    f = tmp_path / "budgets.txt"
    f.write_text("# budgets\n0.5\n\n2\n10\n")
    assert dpfl.budgets_read(f) == [0.5, 2.0, 10.0]
    g = tmp_path / "records.csv"
    g.write_text("record_id,epsilon\n2,5\n0,1\n1,0.5\n")
    assert dpfl.budgets_read_records(g, 3) == [1.0, 0.5, 5.0]
    with pytest.raises(dpfl.DpflIOError):
        dpfl.budgets_read(tmp_path / "absent.txt")
    f.write_text("0.5\nabc\n")
    with pytest.raises(dpfl.DpflIOError, match="budgets.txt line 2: 'abc'"):
        dpfl.budgets_read(f)


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -1e-5, float("nan")])
@pytest.mark.parametrize("acc", ["rdp", "pld", "gdp"])
def test_bad_delta_raises(delta, acc):
    with pytest.raises(dpfl.DpflValueError) as e:
        dpfl.account_epsilon(dpfl.event_poisson(0.01, 1.0, 10), delta, acc)
    assert str(e.value) == "delta (%s) must be in (0, 1)" % ("%g" % delta).replace("nan", "nan")
    assert e.value.status == dpfl.accountant.EINVAL and e.value.status_name == "invalid argument"
    assert isinstance(e.value, ValueError)


def test_bad_events_raise_with_the_library_message():
    cases = [
        (dpfl.event_poisson(1.5, 1.0, 10), "sampling rate q (1.5) must be in [0, 1]"),
        (dpfl.event_poisson(0.1, -1.0, 10), "noise multiplier z (-1) must be finite and >= 0"),
        (dpfl.event_poisson(0.1, 1.0, -3), "event count (-3) is negative"),
        (dpfl.event_fixed(10, 20, 1.0, 5), "fixed-size sampling needs 0 < batch (20) <= n (10)"),
        (dpfl.event_two_stage(1.5, 0.1, 1.0, 5, 3), "client rate lambda (1.5) must be in [0, 1]"),
    ]
    for ev, msg in cases:
        for call in (ev.check, lambda: dpfl.account_epsilon(ev, 1e-5), lambda: dpfl.rdp_compose(ev)):
            with pytest.raises(dpfl.DpflValueError) as e:
                call()
            assert str(e.value) == msg
    with pytest.raises(dpfl.DpflValueError, match="replace-one adjacency only"):
        dpfl.account_epsilon(dpfl.event_fixed(100, 10, 1.0, 5).replace(adjacency="add-remove"), 1e-5)


def test_not_private_raises():
    evs = [dpfl.event_poisson(0.01, 1.0, 10), dpfl.event_not_private(1)]
    for call in (lambda: dpfl.account_epsilon(evs, 1e-5, "pld"), lambda: dpfl.account_delta(evs, 1.0),
                 lambda: dpfl.calibrate_noise(evs, 1.0, 1e-5)):
        with pytest.raises(dpfl.NotPrivateError, match="is not differentially private"):
            call()
    assert dpfl.account_epsilon([evs[0], dpfl.event_not_private(0)], 1e-5).epsilon == \
        dpfl.account_epsilon(evs[0], 1e-5).epsilon


def test_library_error_is_the_one_the_cli_prints():
    ev = dpfl.event_poisson(0.01, 0.5, 10).replace(adjacency="replace-one")
    with pytest.raises(dpfl.DpflValueError) as e:
        dpfl.account_epsilon(ev, 1e-5, "gdp")
    err = cli_fails("account", "--noise", 0.5, "--q", 0.01, "--steps", 10, "--delta", 1e-5, "--adjacency",
                    "replace-one", "--accountant", "gdp")
    assert err.strip() == "dpfl: error: gdp accountant: " + str(e.value)
    with pytest.raises(dpfl.DpflValueError) as e:
        dpfl.fdp_prifedsync(10, 0.5, 1.0, 16, 600, 38, 93, 2.0)
    assert "delta" in str(e.value)
    with pytest.raises(dpfl.DpflValueError) as e:
        dpfl.pld_epsilon(dpfl.event_fixed(100, 10, 1.0, 5), 1e-5)  # no RDP fallback here


def test_bad_arguments_raise():
    ev = dpfl.event_poisson(0.01, 1.0, 10)
    bad = [
        (lambda: dpfl.account_epsilon(ev, 1e-5, "foo"), "accountant: 'foo' is not one of rdp, pld, gdp"),
        (lambda: dpfl.account_epsilon(ev, 1e-5, 7), "accountant: 7 is not one of rdp, pld, gdp"),
        (lambda: dpfl.account_epsilon(ev, 1e-5, conversion="loose"), "conversion: 'loose' is not one of"),
        (lambda: dpfl.account_delta(ev, -1.0), "epsilon (-1) must be finite and >= 0"),
        (lambda: dpfl.account_epsilon(ev, 1e-5, orders=[0.5, 2]), "RDP order 0.5 must be > 1"),
        (lambda: dpfl.calibrate_noise(ev, 0.0, 1e-5), "target epsilon (0) must be finite and > 0"),
        (lambda: dpfl.calibrate_noise(ev, 1.0, 2.0), "delta (2) must be in (0, 1)"),
        (lambda: dpfl.calibrate_noise(dpfl.event_poisson(0.01, 1.0, 100), 1.0, 1e-5, "gdp"),
         "calibration needs an upper bound, and the gdp accountant's answer for these events is asymptotic"),
        (lambda: dpfl.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.01, steps=100,
                                           accountant="gdp"), "calibration needs an upper bound"),
        (lambda: dpfl.event_poisson(0.01, 1.0, 2 ** 64), "count (18446744073709551616) does not fit in 64 bits"),
        (lambda: dpfl.event_poisson(0.01, 1.0, 1.5), "count (1.5) must be an integer"),
        (lambda: dpfl.rdp_sgm(2.0, 1.0, 4), "sampling rate q (2) must be in [0, 1]"),
        (lambda: dpfl.rdp_sgm(0.1, 1.0, 1.0), "RDP order 1 must be > 1"),
        (lambda: dpfl.rdp_fixed(10, 11, 1.0, 4), "fixed-size sampling needs 0 < batch (11) <= n (10)"),
        (lambda: dpfl.rdp_to_epsilon([2, 3], [0.1], 1e-5), "orders (2) and rdp (1) differ in length"),
        (lambda: dpfl.gdp_epsilon(1.0, 0.0), "delta (0) must be in (0, 1)"),
        (lambda: dpfl.gdp_mu(-1.0, 1e-5), "epsilon (-1) must be >= 0"),
        (lambda: dpfl.rpdp_epsilon(dpfl.RpdpParams(0.0, 0.5, 5, 20, 1e-3), 0.1), "noise (0) must be > 0"),
        (lambda: dpfl.rpdp_epsilon(dpfl.RpdpParams(1.0, 0.5, 5, 20, 1e-3), 1.5),
         "sampling probability p (1.5) must be in [0, 1]"),
        (lambda: dpfl.scf_fit_curve(dpfl.RpdpParams(1.0, 0.5, 5, 20, 0.0)), "delta (0) must be in (0, 1)"),
        (lambda: dpfl.e2e(1.0, 700, 600, 10, 0.1, 100, 1e-5), "need 0 < batch (700) <= n (600)"),
        (lambda: dpfl.stop_rule_rounds([0.01] * 3, 1.0, 5, 8, 1e-5), "q schedule has 3 values, fewer than"),
        (lambda: dpfl.skellam_epsilon(1, 1, -1, 0.1, 10, 1e-5), "Skellam accountant: bad parameters"),
    ]
    for call, msg in bad:
        with pytest.raises(dpfl.DpflValueError) as e:
            call()
        assert str(e.value).startswith(msg), (str(e.value), msg)
    with pytest.raises(TypeError):
        dpfl.account_epsilon([ev, "poisson"], 1e-5)
    with pytest.raises(TypeError):
        dpfl.Composition().compose(0.5)
    with pytest.raises(TypeError):
        ev.replace(sigma=2.0)
