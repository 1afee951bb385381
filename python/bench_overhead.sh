#!/usr/bin/env bash
# The binding's overhead: the demo (examples/demo.ini, MNIST, 20 rounds) trained by `dpfl train` and by
# dpfl.train(the same INI, overrides fl.rounds = 20) from Python, alternating (ABBA: the CLI first in odd pairs,
# Python first in even ones, so that a machine whose load drifts favours neither), N times each (default 3); prints
# each wall time, the medians and Python's over the CLI's, and the machine's load before and after.  The two runs
# give the same model.bin (checked).  Usage: python/bench_overhead.sh [N] [ROUNDS]   (BUILD: build folder)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
N=${1:-3}
R=${2:-20}
py=/usr/bin/python3; [ -x "$py" ] || py=python3
export DPFL_LIB=$PWD/$BUILD/libdpfl.so DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
cli=() pyt=()
for i in $(seq "$N"); do
  run_cli() { "$BUILD/dpfl" train examples/demo.ini --set fl.rounds="$R" --out "$tmp/cli" --force --quiet; }
  run_py() {
    PYTHONPATH=python "$py" -c '
import sys, dpfl
dpfl.train("examples/demo.ini", out=sys.argv[1], force=True, overrides={"fl": {"rounds": int(sys.argv[2])}})' "$tmp/py" "$R"
  }
  if [ $((i % 2)) = 1 ]; then first=run_cli second=run_py; else first=run_py second=run_cli; fi
  t0=$(date +%s.%N); $first; t1=$(date +%s.%N); $second; t2=$(date +%s.%N)
  a=$(echo "$t1 - $t0" | bc) b=$(echo "$t2 - $t1" | bc)
  if [ "$first" = run_cli ]; then c=$a p=$b; else c=$b p=$a; fi
  cli+=("$c") pyt+=("$p")
  cmp -s "$tmp/cli/model.bin" "$tmp/py/model.bin" || { echo "model.bin differs between the CLI and Python"; exit 1; }
  printf 'pair %d (%s first): dpfl train %.2f s, dpfl.train %.2f s\n' "$i" "${first#run_}" "$c" "$p"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mc=$(median "${cli[@]}") mp=$(median "${pyt[@]}")
printf 'median: dpfl train %.2f s, dpfl.train %.2f s: Python / CLI = %.4f\n' "$mc" "$mp" "$(echo "$mp / $mc" | bc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
