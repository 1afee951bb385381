#!/usr/bin/env bash
# dpfl against the same-machine PyTorch reference on a machine whose speed drifts: bench/compare_pytorch.sh BUILD [N]
# alternates N times (default 3) between bench_nn (MLP and cnn-mnist) and bench/pytorch_reference.py, then prints
# the best and the median of the N runs for every row of each, their ratios, and the load average before each run.
# Needs python3-torch (see pytorch_reference.py).
set -eu
BUILD=${1:-build}
N=${2:-3}
. bench/torch_env.sh # the OpenMP OpenBLAS for PyTorch, both cores, tcmalloc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$N"); do
  echo "run $i: load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for m in mlp:784-512-256-10 cnn-mnist; do
    DPFL_BENCH_MODEL=$m "$BUILD/bench/bench_nn" "$tmp/dpfl-$i-${m%%:*}.json" >/dev/null
  done
  $PYPRE "$PY" -W ignore bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" - "$tmp/torch-$i.json" >/dev/null
done
"$PY" - "$tmp" <<'PYEOF'
import glob, json, statistics, sys
runs = {}
for side in ("dpfl", "torch"):
    for path in glob.glob(f"{sys.argv[1]}/{side}-*.json"):
        for r in json.load(open(path)):
            if "model" in r:
                runs.setdefault((side, r["model"], r["batch"], r["mode"]), []).append(r["examples_per_second"])
print(f"examples/s over the runs: best (median)\n{'model':<20} {'batch':>6} {'mode':<11} {'dpfl':>17} {'PyTorch':>17} "
      f"{'ratio':>13}")
for (side, model, batch, mode), ours in sorted(runs.items()):
    if side != "dpfl":
        continue
    ref = runs.get(("torch", model, batch, mode))
    b, m = max(ours), statistics.median(ours)
    col = f"{b:>8.0f} ({m:>6.0f})"
    if ref:
        rb, rm = max(ref), statistics.median(ref)
        print(f"{model:<20} {batch:>6} {mode:<11} {col} {rb:>8.0f} ({rm:>6.0f}) {b / rb:>5.2f} ({m / rm:.2f})")
    else:
        print(f"{model:<20} {batch:>6} {mode:<11} {col} {'-':>17} {'-':>13}")
PYEOF
