#!/usr/bin/env python3
"""rPDP-FL from a NumPy vector of per-record budgets: the sampling rate each budget buys, then a run with them.

Each record i gets its own budget eps_i (here three levels, as in rPDP-FL's experiments); the record is sampled at
every local step with the largest probability p_i whose two-stage epsilon*(p_i) stays within eps_i (Liu et al.
2024, "Cross-silo Federated Learning with Record-level Personalized Differential Privacy": Simulation-CurveFitting
gives the first guess, the exact accountant the answer).  The same vector then drives a run (record_dp.budgets =
file) trained from NumPy arrays, whose summary reports the largest epsilon any record spent.

    python3 examples/python/rpdp_budgets.py [--records 600] [--rounds 10] [--out runs/py_rpdp]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402
import dpfl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", default="runs/py_rpdp")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    budgets = rng.choice([1.0, 2.0, 5.0], size=a.records, p=[0.7, 0.2, 0.1])  # the vector: one epsilon per record
    local_steps, delta = 10, 1e-3

    # the rate each budget buys (every client takes part in every round: lambda = 1)
    probe = dpfl.RpdpParams(z=1.0, lambda_=1.0, inner=local_steps, rounds=a.rounds, delta=delta)
    z = dpfl.rpdp_calibrate_noise(probe, budgets.max())  # the largest budget is met at p = 1
    params = probe._replace(z=z)
    fit = dpfl.scf_fit_curve(params)
    eps1 = dpfl.rpdp_epsilon(params, 1.0)
    print("noise multiplier %.4g: a record sampled at every step (p = 1) spends %.4g" % (z, eps1))
    print("SCF fit eps*(p) = %.4g exp(%.4g p) + %.4g (r^2 %.5f)" % (fit.a, fit.b, fit.c, fit.r2))
    print("budget  records  p (safe rate)  epsilon*(p)")
    for eps in np.unique(budgets):
        p = dpfl.rpdp_safe_rate(params, fit, float(eps), eps1)
        spent = dpfl.rpdp_epsilon(params, p)
        assert spent <= eps * (1 + 1e-9), (eps, p, spent)
        print("%6g  %7d  %13.6f  %11.6f" % (eps, int((budgets == eps).sum()), p, spent))

    # the same budgets in a run trained from arrays: 3 clients, natural partition, a separate test set
    X = rng.normal(size=(a.records, 8)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=a.records) > 0).astype(np.int32)
    Xt = rng.normal(size=(200, 8)).astype(np.float32)
    yt = (Xt[:, 0] - Xt[:, 1] > 0).astype(np.int32)
    os.makedirs(a.out, exist_ok=True)
    budget_file = os.path.join(a.out, "..", os.path.basename(a.out) + "_budgets.txt")
    np.savetxt(budget_file, budgets, fmt="%.17g")  # one epsilon per training record, in the arrays' order
    cfg = {"data": {"partition": "natural", "clients": 3}, "model": {"arch": "logreg"},
           "fl": {"rounds": a.rounds, "sampling": "all", "local_steps": local_steps, "lr": 0.5},
           "record_dp": {"enabled": True, "clip": 0.5, "delta": delta, "budgets": "file",
                         "budget_file": os.path.abspath(budget_file),
                         "budget_max": float(budgets.max())},  # the noise meets the largest budget at p = 1
           "run": {"seed": 1, "threads": 1}}
    ids = np.arange(a.records) % 3
    run = dpfl.train(cfg, data=dpfl.arrays(X, y, client_ids=ids, X_test=Xt, y_test=yt), out=a.out, force=True)
    rb = run.summary["record_budgets"]
    print("run %s: %d rounds, test accuracy %.3f, largest epsilon spent by a record %.4g (largest budget %g, "
          "noise %.4g)" % (run.dir, len(run.history), run.summary["test_accuracy"], run.epsilon(), budgets.max(),
                           rb["noise"]))
    print("the run's noise and rates are the ones above: noise %.4g, p from %.6f to %.6f" % (
        rb["noise"], rb["p"]["min"], rb["p"]["max"]))
    assert run.epsilon() <= budgets.max() * (1 + 1e-9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
