"""Differential test: dpfl's accounting of the discrete Gaussian (the event kind discrete-gaussian, a leaf of the
event tree) is never below its exact privacy computed by summation in tests/reference/dgauss_ref.py: the Renyi
divergence of the pair (k + N_Z(0, s^2), N_Z(0, s^2)) at every order, and the hockey-stick divergence of T releases
at the epsilon dpfl reports for delta.  Both are lower bounds on the mechanism's (one concrete pair), so a dpfl
number below them is an under-report.  RDP is also tight where alpha k is an integer (CKS: the bound is attained)."""

import math
import os
import sys

import pytest

pytest.importorskip("numpy", reason="the discrete Gaussian reference needs numpy")

import dpfl  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import dgauss_ref  # noqa: E402


def _events(s, k, T):
    return dpfl.tree_events({"self_composed": {"count": T, "event": {"discrete_gaussian": {"z": s / k}}}})


@pytest.mark.parametrize("s", [0.6, 1.0, 2.5, 6.0])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_rdp_never_below_the_exact_divergence(s, k):
    orders = [1.5, 2.0, 2.5, 3.0, 7.0, 16.0, 40.0]
    rdp = dpfl.rdp_compose(_events(s, k, 1), orders)
    for a, r in zip(orders, rdp):
        exact = dgauss_ref.renyi(a, k, s)
        assert r >= exact * (1 - 1e-12), (s, k, a, r, exact)
        if a * k == int(a * k):
            assert abs(r - exact) <= 1e-9 * exact, (s, k, a, r, exact)


@pytest.mark.parametrize("s,k,T", [(0.8, 1, 1), (1.0, 1, 4), (2.0, 1, 16), (3.0, 2, 8), (5.0, 3, 2), (1.5, 2, 1)])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_epsilon_never_below_the_exact_hockey_stick(s, k, T, delta, accountant):
    g = dpfl.account_epsilon(_events(s, k, T), delta, accountant)
    assert g.answered == "rdp"  # PLD has no discrete Gaussian: RDP's floor, said so
    ref = dgauss_ref.hockey_stick(g.epsilon, k, s, T)
    assert ref <= delta * (1 + 1e-9), (s, k, T, delta, g.epsilon, ref)
    # and the bound is not vacuous: a little below dpfl's epsilon the pair itself needs more than 0
    assert dgauss_ref.hockey_stick(max(0.0, 0.5 * g.epsilon), k, s, T) > 0
