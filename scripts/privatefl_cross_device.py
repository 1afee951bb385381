#!/usr/bin/env python3
"""PrivateFL (Yang et al. 2023) Table 11, cross-device FL on MNIST: every client takes part in exactly r rounds
(r = 1: 10 rounds, r = 2: 20 rounds; cohorts of 10 of the 100 clients, fl.sampling = cross-device), FedAvg and
PrivateFL (the private input transform) under CDP (client level) and LDP (record level), at each epsilon.

usage: scripts/privatefl_cross_device.py [--eps 2,4,6,8] [--r 1,2] [--methods cdp,cdp_transform,ldp,ldp_transform]
                                         [--out runs/table11] [--set KEY=VALUE ...]
Each run is `./build/dpfl train examples/privatefl_{cdp,ldp}[_transform].ini` (the binary $DPFL_BIN if set) with
the cross-device settings, the target epsilon and 200 test examples per client; it prints a markdown table of, per cell, the accuracy on the
clients' own test sets (FedAvg: the global model, `client_accuracy_mean`; PrivateFL: each client's own transform
+ the global model, `personal_accuracy_mean`), the global model on the whole test set in brackets, and the
epsilon dpfl accounted.  Nothing here computes a privacy number."""
import argparse, json, os, subprocess, sys, time

PUBLISHED = {  # Table 11, epsilon 2 / 4 / 6 / 8
    ("cdp", 1): "0.421 / 0.545 / 0.563 / 0.612", ("cdp", 2): "0.483 / 0.619 / 0.641 / 0.653",
    ("cdp_transform", 1): "0.454 / 0.577 / 0.586 / 0.633", ("cdp_transform", 2): "0.527 / 0.677 / 0.695 / 0.714",
    ("ldp", 1): "0.453 / 0.582 / 0.604 / 0.610", ("ldp", 2): "0.501 / 0.608 / 0.631 / 0.639",
    ("ldp_transform", 1): "0.502 / 0.592 / 0.628 / 0.644", ("ldp_transform", 2): "0.529 / 0.640 / 0.683 / 0.728",
}
NAMES = {"cdp": "FedAvg-CDP", "cdp_transform": "PrivateFL-CDP", "ldp": "FedAvg-LDP", "ldp_transform": "PrivateFL-LDP"}


def run(method, r, eps, out, extra):
    level = "client_dp" if method.startswith("cdp") else "record_dp"
    rounds = 10 * r
    cmd = [os.environ.get("DPFL_BIN", "./build/dpfl"), "train", f"examples/privatefl_{method}.ini", "--out", out, "--force", "--quiet",
           "--set", "fl.sampling=cross-device", "--set", "fl.client_rate=0.1", "--set", f"fl.participations={r}",
           "--set", f"fl.rounds={rounds}", "--set", f"run.eval_every={rounds}", "--set", "data.test_per_client=200",
           "--set", f"{level}.target_epsilon={eps:g}"]
    for s in extra:
        cmd += ["--set", s]
    env = dict(os.environ)
    if not env.get("DPFL_DATA"):
        env["DPFL_DATA"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    wall = time.time() - t0
    last = None
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if m.get("test_accuracy") is not None:
                last = m
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    key = "personal_accuracy_mean" if method.endswith("transform") else "client_accuracy_mean"
    acc = last.get(key, s.get("not_private", {}).get(key))  # the last evaluation's, in summary.json's diagnostics
    epsilon = s.get("client_epsilon") if level == "client_dp" else s.get("epsilon")
    return acc, last["test_accuracy"], epsilon, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", default="2,4,6,8")
    ap.add_argument("--r", default="1,2")
    ap.add_argument("--methods", default="cdp,cdp_transform,ldp,ldp_transform")
    ap.add_argument("--out", default="runs/table11")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    eps = [float(e) for e in a.eps.split(",")]
    print("| method | r (rounds) | " + " | ".join(f"eps {e:g}" for e in eps) + " | published eps 2 / 4 / 6 / 8 |")
    print("|---|---|" + "---|" * len(eps) + "---|")
    for method in a.methods.split(","):
        for r in [int(x) for x in a.r.split(",")]:
            cells = []
            for e in eps:
                acc, test, got, wall = run(method, r, e, os.path.join(a.out, f"{method}_r{r}_eps{e:g}"), a.set)
                cells.append(f"{acc:.4f} ({test:.4f}; eps {got:.3f}; {wall:.0f} s)")
                print(f"  {method} r={r} eps={e:g}: {cells[-1]}", file=sys.stderr, flush=True)
            print(f"| {NAMES[method]} | {r} ({10 * r}) | " + " | ".join(cells) + f" | {PUBLISHED[(method, r)]} |",
                  flush=True)


if __name__ == "__main__":
    main()
