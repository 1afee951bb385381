#!/usr/bin/env bash
# Runs every benchmark binary: bench/run.sh BUILD_DIR.  bench_nn writes bench/results.json.  With
# DPFL_BENCH_PYTORCH=1 and PyTorch importable (optional: apt-get install python3-torch), the same-machine PyTorch
# reference runs last (about 40 s more) and prints dpfl / PyTorch for each row it has.
set -eu
BUILD=${1:-build}
"$BUILD/bench/bench_nn" bench/results.json
for b in "$BUILD"/bench/bench_*; do
  case "$b" in */bench_nn) continue ;; esac
  if [ -x "$b" ] && [ -f "$b" ]; then "$b"; fi
done
. bench/torch_env.sh
if [ "${DPFL_BENCH_PYTORCH:-0}" != 1 ]; then
  echo "PyTorch reference: DPFL_BENCH_PYTORCH=1 make bench (needs python3-torch), or bench/compare_pytorch.sh"
elif "$PY" -c 'import torch' 2>/dev/null; then
  $PYPRE "$PY" -W ignore bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" bench/results.json
else
  echo "PyTorch reference skipped (python3 cannot import torch; apt-get install python3-torch to run it)"
fi
