#!/usr/bin/env python3
"""rPDP-FL section 7.1.1 (Table 2): SCF vs Filter in centralized training, ThreeLevels budgets 2.0 / 4.7 / 11.8 for
70 / 20 / 10 % of the records (shuffled per seed), every record pooled into one client.

  SCF      record_dp.budget_policy = rpdp: DP-SGD, record i sampled with its own p_i (the safe inverse of its
           budget), noise calibrated so that p = 1 meets the largest budget over the run's steps
  Filter   record_dp.budget_policy = filter: private gradient descent (every record in every step), each record
           clipped to what its Renyi budget has left and filtered out once it is spent (Feldman and Zrnic 2021)
  PrivacyFree  the same steps without record-level DP (Poisson batches are not drawn: shuffled passes of fl.batch)

usage: scripts/rpdp_centralized.py examples/rpdp_heart.ini [--seeds 5] [--set KEY=VALUE ...]
Both methods run the config's rounds x local_steps steps (--set fl.rounds=... to change it).  Prints a markdown
table of mean (std) test accuracy, seconds per step, the expected batch and the records filtered out.  Every run is
`./build/dpfl train`; nothing here computes a privacy number."""
import argparse, json, os, random, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpdp_table import run, without_record_dp  # noqa: E402

LEVELS = [(2.0, 0.7), (4.7, 0.2), (11.8, 0.1)]

def budget_file(n, seed, path):
    b = []
    for eps, share in LEVELS[:-1]:
        b += [eps] * round(share * n)
    b += [LEVELS[-1][0]] * (n - len(b))
    random.Random(seed).shuffle(b)
    with open(path, "w") as f:
        f.write("\n".join(repr(x) for x in b) + "\n")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--methods", default="rpdp,filter,privacyfree")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dpfl_rpdp_central_")
    pooled = ["data.partition=iid", "data.clients=1", "fl.sampling=poisson", "fl.client_rate=1"]
    # the number of training records: a one-step budget run reports it
    probe = run(a.config, os.path.join(tmp, "probe"), pooled + a.set + ["fl.rounds=1", "fl.local_steps=1",
                                                                        "record_dp.budgets=threelevels"])
    n = int(probe["record_budgets"]["records"])
    print(f"| method | test accuracy | s / step | expected batch | records filtered out | largest epsilon |")
    print("|---|---|---|---|---|---|")
    for method in a.methods.split(","):
        acc, sps, batch, out_, eps = [], [], [], [], []
        for seed in range(1, a.seeds + 1):
            out = os.path.join(tmp, f"{method}_{seed}")
            sets = pooled + a.set + [f"run.seed={seed}"]
            if method == "privacyfree":
                s = run(without_record_dp(a.config, tmp), out, [x for x in sets if not x.startswith("record_dp.")])
            else:
                bf = os.path.join(tmp, f"budgets_{seed}.txt")
                budget_file(n, seed, bf)
                s = run(a.config, out, sets + ["record_dp.budgets=file", f"record_dp.budget_file={bf}",
                                               f"record_dp.budget_max={LEVELS[-1][0]}",
                                               f"record_dp.budget_policy={method}"])
                rb = s["record_budgets"]
                batch.append(rb["per_client"][0]["expected_batch"])
                out_.append(s["not_private"].get("filtered_out", rb.get("opted_out", 0)))
                eps.append(s["epsilon"])
            acc.append(s["test_accuracy"])
            if method != "privacyfree":
                steps = s["rounds"] * s["record_budgets"]["local_steps"]
                sps.append(s["not_private"]["wall_seconds_cumulative"] / steps)
        m = lambda v: "-" if not v else f"{statistics.mean(v):.4f} ({statistics.pstdev(v):.4f})"
        print(f"| {method} | {m(acc)} | {statistics.mean(sps):.4f} |" if sps else f"| {method} | {m(acc)} | - |", end="")
        print(f" {round(statistics.mean(batch))} | {round(statistics.mean(out_))} | {max(eps):.4g} |" if eps
              else " - | - | - |")
        sys.stdout.flush()

if __name__ == "__main__":
    main()
