#!/usr/bin/env bash
# Runs every benchmark binary: bench/run.sh BUILD_DIR.  bench_nn writes bench/results.json.
set -eu
BUILD=${1:-build}
"$BUILD/bench/bench_nn" bench/results.json
for b in "$BUILD"/bench/bench_*; do
  case "$b" in */bench_nn) continue ;; esac
  if [ -x "$b" ] && [ -f "$b" ]; then "$b"; fi
done
