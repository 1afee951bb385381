#!/usr/bin/env bash
# Runs every benchmark binary: bench/run.sh BUILD_DIR.  bench_nn writes bench/results.json.  When PyTorch can be
# imported (optional: apt-get install python3-torch), the same-machine PyTorch reference runs last and prints
# dpfl / PyTorch for each non-private row.
set -eu
BUILD=${1:-build}
"$BUILD/bench/bench_nn" bench/results.json
for b in "$BUILD"/bench/bench_*; do
  case "$b" in */bench_nn) continue ;; esac
  if [ -x "$b" ] && [ -f "$b" ]; then "$b"; fi
done
PY=/usr/bin/python3 # Debian's python3-torch installs for the system Python
[ -x "$PY" ] || PY=python3
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" -W ignore bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" bench/results.json
else
  echo "PyTorch reference skipped (python3 cannot import torch; apt-get install python3-torch to run it)"
fi
