#!/usr/bin/env python3
"""epsilon of an Opacus-style DP-SGD setting, three ways, against `dpfl account` (the library behind all of them).

Opacus writes `accountant = RDPAccountant(); accountant.step(noise_multiplier=z, sample_rate=q)` once per step and
`accountant.get_epsilon(delta)`; dp_accounting writes the event `SelfComposedDpEvent(PoissonSampledDpEvent(q,
GaussianDpEvent(z)), T)`; dpfl takes either spelling (dpfl.Accountant, dpfl.SelfComposed) and its own
(dpfl.event_poisson).  Abadi et al. 2016 (DP-SGD), Mironov 2017 (RDP).

    python3 examples/python/opacus_epsilon.py [--batch 256] [--n 60000] [--epochs 15] [--noise 1.1] [--delta 1e-5]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import dpfl  # noqa: E402  (the installed package, or this checkout's python/)


def dpfl_cli():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "dpfl")
    return os.environ.get("DPFL_CLI") or shutil.which("dpfl") or here


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--noise", type=float, default=1.1)
    ap.add_argument("--delta", type=float, default=1e-5)
    a = ap.parse_args()
    q = a.batch / a.n
    steps = int(a.epochs / q)
    print("DP-SGD: q = %d/%d, noise multiplier %g, %d epochs = %d steps, delta %g" % (a.batch, a.n, a.noise,
                                                                                        a.epochs, steps, a.delta))
    acc = dpfl.Accountant("rdp")  # Opacus: RDPAccountant(); a step per batch
    for _ in range(steps):
        acc.step(noise_multiplier=a.noise, sample_rate=q)
    opacus_style = acc.get_epsilon(delta=a.delta)
    event = dpfl.SelfComposed(dpfl.PoissonSampled(q, dpfl.Gaussian(a.noise)), steps)  # dp_accounting's tree
    dp_accounting_style = dpfl.RdpAccountant().compose(event).get_epsilon(a.delta)
    pld = event.epsilon(a.delta, "pld").epsilon
    out = subprocess.run([dpfl_cli(), "account", "--noise", repr(a.noise), "--q", repr(q), "--steps", str(steps),
                          "--delta", repr(a.delta), "--json"], capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)["epsilon"]
    print("  Opacus-style  dpfl.Accountant('rdp').step() x %d  epsilon %.12g" % (steps, opacus_style))
    print("  dp_accounting dpfl.RdpAccountant().compose(...)     epsilon %.12g" % dp_accounting_style)
    print("  dpfl account --json (RDP)                          epsilon %.12g" % cli)
    print("  PLD (tighter)                                      epsilon %.12g" % pld)
    sigma = dpfl.get_noise_multiplier(target_epsilon=opacus_style, target_delta=a.delta, sample_rate=q,
                                      steps=steps)
    print("  get_noise_multiplier(target_epsilon=that) = %.6g (the noise given: %g)" % (sigma, a.noise))
    same = abs(opacus_style - cli) <= 1e-9 * cli and abs(dp_accounting_style - cli) <= 1e-9 * cli
    print("agree with dpfl account: %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
