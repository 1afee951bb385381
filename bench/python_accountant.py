#!/usr/bin/env python3
"""epsilon of T steps of the Poisson-subsampled Gaussian, timed as whole processes: the Python binding (python/dpfl)
with the RDP and the PLD accountant, the dpfl CLI, and -- when they can be imported -- dp_accounting's PLD and
Opacus's RDP accountants.

    python3 bench/python_accountant.py [--runs 7] [--steps 100000] [--q 0.01] [--z 1.1] [--delta 1e-5]
                                       [--build build] [--ref-python PYTHON]

Every candidate is started as a new process (interpreter start, imports, library load, the computation, exit) once
per round, the candidates in a rotated order each round so that none always runs first or last; the table gives
the median wall time over the rounds, the median of the computation alone as the process measured it (Python
candidates), and the epsilon each printed.  Each candidate runs once first, uncounted (page cache, bytecode).  /proc/loadavg is printed before and after: the machine is shared.
--ref-python is the interpreter for dp_accounting and Opacus (a venv's python, say); default: this one.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DPFL = """
import sys, time
sys.path.insert(0, {pydir!r})
import dpfl
t = time.perf_counter()
e = dpfl.account_epsilon(dpfl.event_poisson({q!r}, {z!r}, {T!r}), {delta!r}, {acc!r}).epsilon
print(e, time.perf_counter() - t)
"""

DP_ACCOUNTING = """
import time
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
t = time.perf_counter()
a = pld_privacy_accountant.PLDAccountant()
a.compose(dp_event.PoissonSampledDpEvent({q!r}, dp_event.GaussianDpEvent({z!r})), {T!r})
print(a.get_epsilon({delta!r}), time.perf_counter() - t)
"""

OPACUS = """
import time
from opacus.accountants import RDPAccountant
t = time.perf_counter()
a = RDPAccountant()
a.history = [({z!r}, {q!r}, {T!r})]
print(a.get_epsilon({delta!r}), time.perf_counter() - t)
"""

# whole-process figures measured by others on this machine kind, for what cannot be imported here
GIVEN = {"dp_accounting PLD": 1.6, "Opacus RDP": 0.6}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().strip()
    except OSError:
        return "n/a"


def importable(py, module):
    return subprocess.run([py, "-c", "import " + module], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--z", type=float, default=1.1)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ref-python", default=sys.executable)
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be >= 1")

    lib = os.path.abspath(os.path.join(a.build, "libdpfl.so"))
    cli = os.path.abspath(os.path.join(a.build, "dpfl"))
    for f in (lib, cli):
        if not os.path.exists(f):
            sys.exit("python_accountant: %s is missing: run make first" % f)
    env = dict(os.environ, DPFL_LIB=lib)  # bytecode cached as for any installed module (warm-up below)
    p = dict(q=a.q, z=a.z, T=a.steps, delta=a.delta, pydir=os.path.join(ROOT, "python"))
    cli_args = [cli, "account", "--noise", repr(a.z), "--q", repr(a.q), "--steps", str(a.steps), "--delta",
                repr(a.delta), "--json", "--accountant"]

    cands = [
        ("python3 -c pass", [sys.executable, "-c", "pass"], None),
        ("python: import dpfl", [sys.executable, "-c", "import sys; sys.path.insert(0, %r); import dpfl"
                                 % p["pydir"]], None),
        ("dpfl Python RDP", [sys.executable, "-c", DPFL.format(acc="rdp", **p)], "py"),
        ("dpfl Python PLD", [sys.executable, "-c", DPFL.format(acc="pld", **p)], "py"),
        ("dpfl CLI RDP", cli_args + ["rdp"], "json"),
        ("dpfl CLI PLD", cli_args + ["pld"], "json"),
    ]
    missing = []
    for name, mod, code in (("dp_accounting PLD", "dp_accounting", DP_ACCOUNTING), ("Opacus RDP", "opacus", OPACUS)):
        if importable(a.ref_python, mod):
            cands.append((name, [a.ref_python, "-c", code.format(**p)], "py"))
        else:
            missing.append((name, mod))

    print("T = %d steps of the Poisson-subsampled Gaussian, q = %g, z = %g, delta = %g; %d rounds, whole processes"
          % (a.steps, a.q, a.z, a.delta, a.runs))
    print("python: %s (%s)" % (sys.executable, sys.version.split()[0]))
    print("cpus: %d; loadavg before: %s" % (os.cpu_count() or 0, loadavg()))
    for name, argv, kind in cands:  # warm-up, not counted: page cache, python/dpfl/__pycache__
        subprocess.run(argv, capture_output=True, env=env)
    wall = {c[0]: [] for c in cands}
    inner = {c[0]: [] for c in cands}
    eps = {}
    for r in range(a.runs):
        k = r % len(cands)
        for name, argv, kind in cands[k:] + cands[:k]:
            t = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, env=env)
            dt = time.perf_counter() - t
            if out.returncode != 0:
                sys.exit("python_accountant: %s failed:\n%s" % (name, out.stderr))
            wall[name].append(dt)
            if kind == "py":
                e, s = out.stdout.split()[-2:]
                eps[name] = float(e)
                inner[name].append(float(s))
            elif kind == "json":
                import json
                eps[name] = json.loads(out.stdout)["epsilon"]
    print("loadavg after: %s" % loadavg())
    print()
    print("%-22s %12s %12s %12s %14s" % ("", "median wall", "min wall", "in-process", "epsilon"))
    for name, _, _ in cands:
        w = wall[name]
        ip = "%9.1f ms" % (1e3 * statistics.median(inner[name])) if inner[name] else ""
        e = "%.6f" % eps[name] if name in eps else ""
        print("%-22s %9.1f ms %9.1f ms %12s %14s" % (name, 1e3 * statistics.median(w), 1e3 * min(w), ip, e))
    for name, mod in missing:
        print("%-22s %12s  (%s not importable by %s: figure given for this machine kind, not measured)"
              % (name, "~%.1f s" % GIVEN[name], mod, a.ref_python))


if __name__ == "__main__":
    main()
