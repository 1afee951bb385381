#!/usr/bin/env python3
"""rPDP-FL reproduction table (paper section 7.2): rPDP-FL vs Minimum, Dropout and PrivacyFree on one example
config, for the three privacy-preference distributions, averaged over seeds.

usage: scripts/rpdp_table.py examples/rpdp_heart.ini [--seeds 10] [--set KEY=VALUE ...] [--uniform EPS]
--uniform EPS adds uniform DP-SGD at epsilon EPS for every record (record_dp.target_epsilon, the config's
fl.batch, no budgets).  Prints a markdown table of mean (std) test accuracy and the mean over clients of their own test accuracy.
Every run is `./build/dpfl train`; nothing here computes a privacy number."""
import argparse, json, math, os, re, statistics, subprocess, sys, tempfile

def run(cfg, out, sets):
    cmd = ["./build/dpfl", "train", cfg, "--out", out, "--force", "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    # run from a checkout: its data/ folder unless DPFL_DATA names another (dpfl never reads the current directory)
    env = dict(os.environ)
    if not env.get("DPFL_DATA"):
        env["DPFL_DATA"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, env=env)
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
    ap.add_argument("--uniform", type=float, default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dpfl_rpdp_")
    free = without_record_dp(a.config, tmp)
    sets_free = [s for s in a.set if not s.startswith("record_dp.")]
    free_cache, uniform_cache = {}, {}
    methods = ["rpdp", "minimum", "dropout", "privacyfree"] + (["uniform"] if a.uniform else [])
    print("| budgets | method | test accuracy | client accuracy (mean over clients) | largest epsilon | records used |")
    print("|---|---|---|---|---|---|")
    for dist in a.dists.split(","):
        for method in methods:
            acc, cacc, eps, used = [], [], [], []
            for seed in range(1, a.seeds + 1):
                out = os.path.join(tmp, f"{dist}_{method}_{seed}")
                if method == "privacyfree":  # the same run for every distribution: once per seed
                    if seed not in free_cache:
                        free_cache[seed] = run(free, out, sets_free + [f"run.seed={seed}"])
                    s = free_cache[seed]
                elif method == "uniform":  # one epsilon for everyone: the same run for every distribution
                    if seed not in uniform_cache:
                        uniform_cache[seed] = run(a.config, out, a.set + ["record_dp.budgets=none",
                                                                          f"record_dp.target_epsilon={a.uniform}",
                                                                          f"run.seed={seed}"])
                    s = uniform_cache[seed]
                    eps.append(s["epsilon"])
                    used.append(float("nan"))
                else:
                    s = run(a.config, out, a.set + [f"record_dp.budgets={dist}", f"record_dp.budget_policy={method}",
                                                    f"run.seed={seed}"])
                    rb = s["record_budgets"]
                    eps.append(s["epsilon"])
                    used.append(rb["records"] - rb["unused"] - rb["dropped"])
                acc.append(s["test_accuracy"])
                cacc.append(s["not_private"].get("client_accuracy_mean", float("nan")))  # needs per-client test sets
            f = lambda v: "-" if any(math.isnan(x) for x in v) else f"{statistics.mean(v):.4f} ({statistics.pstdev(v):.4f})"
            name = f"uniform (epsilon {a.uniform:g})" if method == "uniform" else method
            print(f"| {dist} | {name} | {f(acc)} | {f(cacc)} | {max(eps) if eps else '-':{'.4g' if eps else ''}} |"
                  f" {round(statistics.mean(used)) if used and not math.isnan(used[0]) else 'all'} |")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
