#!/usr/bin/env bash
# valgrind memcheck on a short seeded DP run (record + client level, 2 threads, a resume) and on the accountants'
# CLI: any invalid access, use of uninitialised memory or definite leak fails.  `make valgrind`.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/dpfl"
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d /tmp/dpfl-valgrind.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/run.ini" <<'INI'
[data]
dataset = synthetic
clients = 8
[model]
arch = mlp:20-16-10
[fl]
rounds = 3
sampling = poisson
client_rate = 0.5
local_steps = 2
batch = 20
[record_dp]
enabled = yes
noise = 1.0
delta = 1e-6
e2e = yes
[client_dp]
enabled = yes
noise = 1.0
clip_strategy = adaptive
quantile_noise = 2
delta = 1e-2
[run]
seed = 5
threads = 2
INI
vg() { valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite "$@"; }
failed=0
for cmd in "train $work/run.ini --out $work/r --quiet" "train --resume $work/r --set fl.rounds=4 --quiet" \
           "account --noise 1.1 --q 0.01 --steps 1000 --delta 1e-5 --accountant all" \
           "e2e --noise 30 --batch 10 --n 1000 --local-steps 10 --client-rate 0.1 --rounds 100 --delta 1e-5" \
           "calibrate --target-epsilon 2 --delta 1e-5 --q 0.01 --steps 1000"; do
  # shellcheck disable=SC2086
  if vg "$bin" $cmd >"$work/out" 2>&1; then echo "valgrind: clean: dpfl $cmd"
  else failed=$((failed + 1)); echo "valgrind: FAIL: dpfl $cmd"; cat "$work/out"; fi
done
echo "valgrind: $((5 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
