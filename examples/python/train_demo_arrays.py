#!/usr/bin/env python3
"""The demo (examples/demo.ini: FedAvg on MNIST, 10 IID clients) from NumPy arrays, with record-level DP-SGD at
epsilon = 3 as `make demo` runs it, and a plot of test accuracy against the epsilon spent so far, round by round.

MNIST is read by the library (dpfl.load_dataset: the cache `dpfl data fetch` fills, or DPFL_DATA) into NumPy
arrays, and the arrays go back to the library without a copy (float32, C-contiguous).  The plot needs matplotlib
(Debian: python3-matplotlib); without it the figures are printed and the plot is skipped with a message.
McMahan et al. 2017 (FedAvg), Abadi et al. 2016 (DP-SGD).

    python3 examples/python/train_demo_arrays.py [--rounds 6] [--train N] [--test N] [--out runs/py_demo]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import dpfl  # noqa: E402

# `make demo`'s DP run: demo.ini with these keys set (Makefile DEMO_DP)
DEMO_DP = {"record_dp": {"enabled": True, "clip": 1, "target_epsilon": 3, "delta": 1e-6},
           "fl": {"local_steps": 40, "batch": 64, "lr": 0.5}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--train", type=int, default=0, help="use the first N training examples (0: all 60,000)")
    ap.add_argument("--test", type=int, default=0, help="use the first N test examples (0: all 10,000)")
    ap.add_argument("--out", default="runs/py_demo")
    a = ap.parse_args()
    try:
        X, y, Xt, yt = dpfl.load_dataset("mnist")
    except dpfl.DpflError as e:
        print("train_demo_arrays: SKIPPED: MNIST is not here (`dpfl data fetch` downloads it): %s" % e)
        return 0
    if a.train:
        X, y = X[:a.train], y[:a.train]
    if a.test:
        Xt, yt = Xt[:a.test], yt[:a.test]
    data = dpfl.arrays(X, y, X_test=Xt, y_test=yt, name="mnist-arrays")
    print(data)
    points = []

    def on_round(r):
        points.append((r["record_epsilon"], r["test_accuracy"]))
        print("round %d/%d: test accuracy %.4f, epsilon %.4f, %d clients" % (
            r["round"], r["rounds"], r["test_accuracy"], r["record_epsilon"], r["participants"]))

    run = dpfl.train(os.path.join(HERE, "..", "demo.ini"), data=data, out=a.out, force=True, on_round=on_round,
                     overrides=dict(DEMO_DP, fl=dict(DEMO_DP["fl"], rounds=a.rounds), run={"eval_every": 1}))
    print("%s: test accuracy %.4f at epsilon %.4f (delta %g)" % (run.dir, run.summary["test_accuracy"], run.epsilon(),
                                                                 run.summary["delta"]))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot SKIPPED: matplotlib is not installed (apt-get install python3-matplotlib)")
        return 0
    eps, acc = zip(*points)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(eps, acc, marker="o")
    ax.set_xlabel("record-level epsilon spent (delta = %g)" % run.summary["delta"])
    ax.set_ylabel("test accuracy")
    ax.set_title("FedAvg + DP-SGD on MNIST, from NumPy arrays")
    ax.grid(True, alpha=0.3)
    png = os.path.join(a.out, "accuracy_vs_epsilon.png")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print("plot: %s" % png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
