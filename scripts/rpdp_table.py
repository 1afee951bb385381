#!/usr/bin/env python3
"""rPDP-FL reproduction table (paper section 7.2): rPDP-FL vs Minimum, Dropout and PrivacyFree on one example
config, for the three privacy-preference distributions, averaged over seeds.

usage: scripts/rpdp_table.py examples/rpdp_heart.ini [--seeds 10] [--set KEY=VALUE ...]
Prints a markdown table of mean (std) test accuracy and the mean over clients of their own test accuracy.
Every run is `./build/dpfl train`; nothing here computes a privacy number."""
import argparse, json, math, os, re, statistics, subprocess, sys, tempfile

def run(cfg, out, sets):
    cmd = ["./build/dpfl", "train", cfg, "--out", out, "--force", "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)

def without_record_dp(path, tmp):
    """The same config with no [record_dp] section: PrivacyFree."""
    text, keep, skip = open(path).read().splitlines(), [], False
    for line in text:
        if re.match(r"\s*\[", line):
            skip = line.strip() == "[record_dp]"
        if not skip:
            keep.append(line)
    p = os.path.join(tmp, "privacyfree.ini")
    open(p, "w").write("\n".join(keep) + "\n")
    return p

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--dists", default="threelevels,mixgauss,pareto")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dpfl_rpdp_")
    free = without_record_dp(a.config, tmp)
    sets_free = [s for s in a.set if not s.startswith("record_dp.")]
    free_cache = {}
    print("| budgets | method | test accuracy | client accuracy (mean over clients) | largest epsilon | records used |")
    print("|---|---|---|---|---|---|")
    for dist in a.dists.split(","):
        for method in ["rpdp", "minimum", "dropout", "privacyfree"]:
            acc, cacc, eps, used = [], [], [], []
            for seed in range(1, a.seeds + 1):
                out = os.path.join(tmp, f"{dist}_{method}_{seed}")
                if method == "privacyfree":  # the same run for every distribution: once per seed
                    if seed not in free_cache:
                        free_cache[seed] = run(free, out, sets_free + [f"run.seed={seed}"])
                    s = free_cache[seed]
                else:
                    s = run(a.config, out, a.set + [f"record_dp.budgets={dist}", f"record_dp.budget_policy={method}",
                                                    f"run.seed={seed}"])
                    rb = s["record_budgets"]
                    eps.append(s["epsilon"])
                    used.append(rb["records"] - rb["unused"] - rb["dropped"])
                acc.append(s["test_accuracy"])
                cacc.append(s["not_private"].get("client_accuracy_mean", float("nan")))  # needs per-client test sets
            f = lambda v: "-" if any(math.isnan(x) for x in v) else f"{statistics.mean(v):.4f} ({statistics.pstdev(v):.4f})"
            print(f"| {dist} | {method} | {f(acc)} | {f(cacc)} | {max(eps) if eps else '-':{'.4g' if eps else ''}} |"
                  f" {round(statistics.mean(used)) if used else 'all'} |")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
