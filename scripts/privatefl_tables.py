#!/usr/bin/env python3
"""PrivateFL (Yang et al. 2023) Tables 7, 8 and 11 on MNIST (100 clients x 2 classes), by settings alone on the
examples privatefl_{cdp,ldp}[_transform].ini:

  7   activations: ReLU (the examples' mlp 784-600-100-10 without biases), Tanh (the same with tanh), Tanh + the
      private transform, under CDP (client level) and LDP (record level)
  8   CDP per-round clip (the examples' fixed clip) against per-step clip (client_dp.clip_strategy = per-step,
      McMahan et al. 2018), and per-step + the transform
  5   DP-SCAFFOLD (fl.scaffold = yes, LDP), with and without the transform, beside FedAvg-LDP
  11  cross-device: every client in exactly r rounds (fl.sampling = cross-device, cohorts of 10, r = 1: 10 rounds,
      r = 2: 20 rounds), FedAvg and PrivateFL under CDP and LDP

usage: scripts/privatefl_tables.py TABLE [--eps 2,4,6,8] [--rounds N] [--rows A,B] [--out runs/privatefl_tableT]
                                   [--set KEY=VALUE ...]
--rounds N (tables 5, 7 and 8) trains N rounds instead of the examples' 150 (the noise is calibrated for N).  Each
cell is one `./build/dpfl train` (the binary $DPFL_BIN if set) with the target epsilon and 200 test examples per
client: FedAvg rows give the global model's accuracy on the clients' own test sets (`client_accuracy_mean`),
PrivateFL rows each client's own transform + the global model there (`personal_accuracy_mean`); in brackets the
global model on the whole test set and the epsilon dpfl accounted.  Nothing here computes a privacy number."""
import argparse, json, os, subprocess, sys, time

TANH = "model.arch=net:fc600nb,tanh,fc100nb,tanh,fc10nb"
# table -> rows: (key, label, example, settings, published at epsilon 2 / 4 / 6 / 8)
TABLES = {
    "7": [
        ("cdp_relu", "CDP ReLU", "privatefl_cdp", [], "0.612 / 0.753 / 0.788 / 0.797"),
        ("cdp_tanh", "CDP Tanh", "privatefl_cdp", [TANH], "0.620 / 0.741 / 0.784 / 0.793"),
        ("cdp_tanh_transform", "CDP Tanh + PrivateFL", "privatefl_cdp_transform", [TANH],
         "0.701 / 0.783 / 0.884 / 0.923"),
        ("ldp_relu", "LDP ReLU", "privatefl_ldp", [], "0.379 / 0.496 / 0.511 / 0.548"),
        ("ldp_tanh", "LDP Tanh", "privatefl_ldp", [TANH], "0.702 / 0.734 / 0.769 / 0.812"),
        ("ldp_tanh_transform", "LDP Tanh + PrivateFL", "privatefl_ldp_transform", [TANH],
         "0.743 / 0.831 / 0.852 / 0.895"),
    ],
    "8": [
        ("per_round", "per-round clip", "privatefl_cdp", [], "0.641 / 0.745 / 0.796 / 0.827"),
        ("per_step", "per-step clip", "privatefl_cdp", ["client_dp.clip_strategy=per-step"],
         "0.652 / 0.763 / 0.774 / 0.829"),
        ("per_step_transform", "per-step clip + PrivateFL", "privatefl_cdp_transform",
         ["client_dp.clip_strategy=per-step"], "0.726 / 0.804 / 0.892 / 0.911"),
    ],
}
TABLES["5"] = [
    ("fedavg_ldp", "FedAvg-LDP", "privatefl_ldp", [], "-"),
    ("dp_scaffold", "DP-SCAFFOLD (LDP)", "privatefl_ldp", ["fl.scaffold=yes"], "0.306 / 0.448 / 0.560 / 0.634"),
    ("dp_scaffold_transform", "DP-SCAFFOLD + PrivateFL (LDP)", "privatefl_ldp_transform", ["fl.scaffold=yes"],
     "0.531 / 0.557 / 0.652 / 0.691"),
]
CROSS = ["fl.sampling=cross-device", "fl.client_rate=0.1"]
TABLES["11"] = [
    (f"{m}_r{r}", f"{label}, r = {r} ({10 * r} rounds)", f"privatefl_{m}",
     CROSS + [f"fl.participations={r}", f"fl.rounds={10 * r}"], pub)
    for m, label, pubs in [
        ("cdp", "FedAvg-CDP", ["0.421 / 0.545 / 0.563 / 0.612", "0.483 / 0.619 / 0.641 / 0.653"]),
        ("cdp_transform", "PrivateFL-CDP", ["0.454 / 0.577 / 0.586 / 0.633", "0.527 / 0.677 / 0.695 / 0.714"]),
        ("ldp", "FedAvg-LDP", ["0.453 / 0.582 / 0.604 / 0.610", "0.501 / 0.608 / 0.631 / 0.639"]),
        ("ldp_transform", "PrivateFL-LDP", ["0.502 / 0.592 / 0.628 / 0.644", "0.529 / 0.640 / 0.683 / 0.728"]),
    ]
    for r, pub in [(1, pubs[0]), (2, pubs[1])]
]


def run(example, sets, eps, out):
    level = "client_dp" if "_cdp" in example else "record_dp"
    cmd = [os.environ.get("DPFL_BIN", "./build/dpfl"), "train", f"examples/{example}.ini", "--out", out, "--force",
           "--quiet", "--set", "data.test_per_client=200", "--set", f"{level}.target_epsilon={eps:g}"]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ)
    if not env.get("DPFL_DATA"):
        env["DPFL_DATA"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    wall = time.time() - t0
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    key = "personal_accuracy_mean" if example.endswith("transform") else "client_accuracy_mean"
    acc = s.get("not_private", {}).get(key)  # the last evaluation's (summary.json's diagnostics)
    epsilon = s.get("client_epsilon") if level == "client_dp" else s.get("epsilon")
    return acc, s["test_accuracy"], epsilon, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table", choices=sorted(TABLES))
    ap.add_argument("--eps", default="2,4,6,8")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--rows", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    eps = [float(e) for e in a.eps.split(",")]
    out = a.out or f"runs/privatefl_table{a.table}"
    rows = [r for r in TABLES[a.table] if not a.rows or r[0] in a.rows.split(",")]
    print("| row | " + " | ".join(f"eps {e:g}" for e in eps) + " | published eps 2 / 4 / 6 / 8 |")
    print("|---|" + "---|" * len(eps) + "---|", flush=True)
    for key, label, example, sets, published in rows:
        sets = list(sets)
        if a.rounds and a.table != "11":
            sets += [f"fl.rounds={a.rounds}"]
        rounds = next((int(s.split("=")[1]) for s in sets if s.startswith("fl.rounds=")), 150)
        sets += [f"run.eval_every={rounds}"] + a.set
        cells = []
        for e in eps:
            acc, test, got, wall = run(example, sets, e, os.path.join(out, f"{key}_eps{e:g}"))
            cells.append(f"{acc:.4f} ({test:.4f}; eps {got:.3f}; {wall:.0f} s)")
            print(f"  {key} eps={e:g}: {cells[-1]}", file=sys.stderr, flush=True)
        print(f"| {label} | " + " | ".join(cells) + f" | {published} |", flush=True)


if __name__ == "__main__":
    main()
