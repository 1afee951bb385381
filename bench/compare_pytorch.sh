#!/usr/bin/env bash
# dpfl against the same-machine PyTorch reference on a machine whose speed drifts: bench/compare_pytorch.sh BUILD [N]
# alternates N times (default 3) between bench_nn (MLP and cnn-mnist) and bench/pytorch_reference.py, then prints
# the best of the N runs for every row of each and their ratio.  Needs python3-torch (see pytorch_reference.py).
set -eu
BUILD=${1:-build}
N=${2:-3}
. bench/torch_env.sh # the OpenMP OpenBLAS for PyTorch, both cores, tcmalloc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$N"); do
  for m in mlp:784-512-256-10 cnn-mnist; do
    DPFL_BENCH_MODEL=$m "$BUILD/bench/bench_nn" "$tmp/dpfl-$i-${m%%:*}.json" >/dev/null
  done
  $PYPRE "$PY" -W ignore bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" - "$tmp/torch-$i.json" >/dev/null
done
"$PY" - "$tmp" <<'PYEOF'
import glob, json, sys
best = {}
for side in ("dpfl", "torch"):
    for path in glob.glob(f"{sys.argv[1]}/{side}-*.json"):
        for r in json.load(open(path)):
            if "model" in r:
                k = (side, r["model"], r["batch"], r["mode"])
                best[k] = max(best.get(k, 0), r["examples_per_second"])
print(f"best of the runs, examples/s\n{'model':<20} {'batch':>6} {'mode':<11} {'dpfl':>9} {'PyTorch':>9} {'ratio':>6}")
for (side, model, batch, mode), ours in sorted(best.items()):
    if side != "dpfl":
        continue
    v = best.get(("torch", model, batch, mode))
    ref = f"{v:>9.0f} {ours / v:>6.2f}" if v else f"{'-':>9} {'-':>6}"
    print(f"{model:<20} {batch:>6} {mode:<11} {ours:>9.0f} {ref}")
PYEOF
