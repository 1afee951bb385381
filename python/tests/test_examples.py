"""examples/python/*.py run, with short settings, and say what they promise: the Opacus-style epsilon equals
`dpfl account`'s, the rPDP-FL rates keep every budget, and the demo from arrays trains (and plots accuracy against
epsilon into a PNG where matplotlib is installed; MNIST must be in DPFL_DATA's cache, else the example says it
skipped).  DPFL_CLI and DPFL_LIB come from tests/python.sh."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EX = os.path.join(ROOT, "examples", "python")


def run(name, *args):
    r = subprocess.run([sys.executable, os.path.join(EX, name)] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, "%s failed (%d): %s%s" % (name, r.returncode, r.stdout, r.stderr)
    return r.stdout


def test_opacus_epsilon_agrees_with_dpfl_account():
    out = run("opacus_epsilon.py", "--epochs", 2)
    assert "agree with dpfl account: yes" in out
    assert "steps" in out and "PLD" in out


def test_rpdp_budgets_from_a_numpy_vector(tmp_path):
    pytest.importorskip("numpy")
    out = run("rpdp_budgets.py", "--records", 300, "--rounds", 3, "--out", tmp_path / "r")
    assert "the run's noise and rates are the ones above" in out
    assert os.path.exists(tmp_path / "r" / "model.bin")


def test_train_demo_from_arrays(tmp_path):
    pytest.importorskip("numpy")
    out = run("train_demo_arrays.py", "--rounds", 2, "--train", 2000, "--test", 300, "--out", tmp_path / "d")
    if "SKIPPED: MNIST" in out:
        pytest.skip(out.strip())
    assert "round 2/2" in out and "at epsilon" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot SKIPPED: matplotlib is not installed" in out
    else:
        png = tmp_path / "d" / "accuracy_vs_epsilon.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
