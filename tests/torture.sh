#!/usr/bin/env bash
# Torture tests (`make torture`; CI runs `tests/torture.sh --short`): a seeded record + client level DP run, the
# same run with a budget per record (record_dp.budgets), and a PriFedSync run whose clients keep their own state
# (helper model + Adam state in RUN/clients/, paged out under a 1 MiB fl.client_state_max_mb) are killed with SIGKILL
# at random moments and resumed; every resumed run must equal the uninterrupted one (model bytes,
# metrics.jsonl -- every round's epsilons --, the privacy report in summary.json, the clients' state files), so no
# charge is lost or counted twice and no partially written file is ever read.  The two crash points of the state
# files are then made exactly: a round's client files written and its checkpoint not, and the checkpoint written
# and the generations it replaced not yet removed.  Then the output directory is made read-only, deleted mid-run,
# and the checkpoint truncated or bit-flipped: each must give a clear error (exit 1, one "dpfl: error:" line) and
# leave the previous checkpoint intact.  Disk full is tested on a small tmpfs when this user may mount one.
#   tests/torture.sh [--short] [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
kills=100
[ "${1:-}" = "--short" ] && { kills=8; shift; }
bin="${1:-build}/dpfl"
[ -x "$bin" ] || { echo "torture: $bin not built" >&2; exit 2; }
work=$(mktemp -d /tmp/dpfl-torture.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; umount "$work/full" 2>/dev/null; rm -rf "$work"' EXIT
cat > "$work/run.ini" <<'INI'
[data]
dataset = synthetic
clients = 20
[model]
arch = mlp:20-32-10
[fl]
rounds = 300
sampling = poisson
client_rate = 0.5
local_steps = 3
batch = 20
[record_dp]
enabled = yes
noise = 1.0
delta = 1e-6
[client_dp]
enabled = yes
noise = 1.0
delta = 1e-3
[run]
seed = 7
threads = 2
INI
# the same run with a budget per record (rPDP-FL): its per-record ledger must survive the kills too
awk 'BEGIN{r=0} /^\[record_dp\]/{r=1} /^\[client_dp\]/{r=0} { if (r && $0 == "noise = 1.0") print "budgets = threelevels"; else print }' \
  "$work/run.ini" > "$work/runb.ini"
# clients that keep their own state: 40 clients, about 10 a round, 48 KiB each (helper + Adam m, v of 3,978
# parameters): 21 blocks fit in the cap, the others page out to their files
cat > "$work/runs.ini" <<'INI'
[data]
dataset = synthetic
clients = 40
test_per_client = 20
[model]
arch = mlp:20-128-10
[fl]
algorithm = prifedsync
rounds = 150
client_rate = 0.25
local_steps = 3
batch = 20
client_state_max_mb = 1
[record_dp]
clip = 1.0
noise = 1.0
delta = 1e-5
[run]
seed = 7
threads = 2
eval_every = 1
INI
passed=0; failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "torture: FAIL: $*"; }
privacy_report() { grep -E '"(epsilon|client_epsilon|rounds|client_rounds_charged|private|over_budget|opted_out)"' "$1/summary.json"; }

t0=$(date +%s.%N)
"$bin" train "$work/run.ini" --out "$work/ref" --quiet || { echo "torture: the reference run failed"; exit 1; }
t1=$(date +%s.%N)
"$bin" train "$work/runb.ini" --out "$work/refb" --quiet || { echo "torture: the budgets reference run failed"; exit 1; }
grep -q '"record_budgets"' "$work/refb/summary.json" || { echo "torture: the budgets run has no record_budgets"; exit 1; }
"$bin" train "$work/runs.ini" --out "$work/refs" --quiet || { echo "torture: the client-state reference run failed"; exit 1; }
grep -Eq '"paged_out":[[:space:]]*[1-9]' "$work/refs/summary.json" || { echo "torture: the client-state run paged nothing out"; exit 1; }
dur=$(echo "$t1 - $t0" | bc)
echo "torture: reference run ${dur}s; $kills kills at random moments"

# -- kill -9 at random moments, resume, compare -----------------------------------------------------------------
for i in $(seq 1 "$kills"); do
  d="$work/k$i"
  case $((i % 3)) in
    0) ini="$work/runb.ini"; ref="$work/refb" ;;
    1) ini="$work/run.ini"; ref="$work/ref" ;;
    2) ini="$work/runs.ini"; ref="$work/refs" ;;
  esac
  "$bin" train "$ini" --out "$d" --quiet 2>/dev/null &
  pid=$!
  sleep "$(awk -v s="$RANDOM" -v d="$dur" 'BEGIN { srand(s); printf "%.3f", rand() * d }')"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ -e "$d/checkpoint.bin" ]; then
    "$bin" train --resume "$d" --quiet 2>"$work/err" || { bad "kill $i: resume failed: $(cat "$work/err")"; continue; }
  else # killed before the first checkpoint: nothing was released; a new run starts over
    "$bin" train "$ini" --out "$d" --force --quiet 2>"$work/err" || { bad "kill $i: restart failed: $(cat "$work/err")"; continue; }
  fi
  if cmp -s "$d/model.bin" "$ref/model.bin" && cmp -s "$d/metrics.jsonl" "$ref/metrics.jsonl" &&
     [ "$(privacy_report "$d")" = "$(privacy_report "$ref")" ] &&
     [ "$(wc -l < "$d/diagnostics.jsonl")" -eq "$(wc -l < "$ref/diagnostics.jsonl")" ] &&
     { [ ! -d "$ref/clients" ] || diff -r "$d/clients" "$ref/clients" >/dev/null; }; then ok
  else bad "kill $i: resumed run differs"; fi
  rm -rf "$d"
done

# -- the clients' state files' two crash points, made exactly ----------------------------------------------------
# round 7's client files (generation 7) are written and durable before its checkpoint; old generations go after it
s_run() { "$bin" train "$work/runs.ini" --set fl.rounds="$1" --out "$2" --quiet; }
s_run 10 "$work/s10" && s_run 6 "$work/s6" && cp -a "$work/s6" "$work/s7" &&
  "$bin" train --resume "$work/s7" --set fl.rounds=7 --quiet || bad "state files: the set-up runs failed"
if ! ls "$work/s7/clients" | grep -q '\.g7\.bin$'; then bad "state files: round 7 wrote no client file"
else
  # killed after round 7's client files, before its checkpoint: round 6's checkpoint and every file
  cp -a "$work/s6" "$work/x"; cp "$work/s7/clients/"*.g7.bin "$work/x/clients/"
  # killed after round 7's checkpoint, before the generations it replaced were removed
  cp -a "$work/s6" "$work/y"; cp "$work/s7/clients/"* "$work/y/clients/"
  cp "$work/s7/checkpoint.bin" "$work/s7/diagnostics.jsonl" "$work/y/"
  for c in x y; do
    if ! "$bin" train --resume "$work/$c" --set fl.rounds=10 --quiet 2>"$work/err"; then bad "state files ($c): resume failed: $(cat "$work/err")"
    elif cmp -s "$work/$c/model.bin" "$work/s10/model.bin" && cmp -s "$work/$c/metrics.jsonl" "$work/s10/metrics.jsonl" &&
         diff -r "$work/$c/clients" "$work/s10/clients" >/dev/null; then ok
    else bad "state files ($c): the resumed run differs from 10 rounds straight"; fi
  done
  # a state file the checkpoint names, corrupt: a clear error when the client is next needed
  cp -a "$work/s6" "$work/z"; f=$(ls "$work/z/clients" | head -1)
  python3 - "$work/z/clients/$f" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x10; open(p, 'wb').write(b)
PY
  if "$bin" train --resume "$work/z" --set fl.rounds=40 --quiet 2>"$work/err"; then bad "corrupt state file: resume succeeded"
  elif [ "$(grep -c '^dpfl: error: ' "$work/err")" -eq 1 ] && grep -q "$f" "$work/err"; then ok; echo "torture: corrupt state file -> $(cat "$work/err")"
  else bad "corrupt state file: $(cat "$work/err")"; fi
fi

# -- a clear error and an intact checkpoint ------------------------------------------------------------------------
expect_error() { # name, then the command; the previous checkpoint of $work/e must be unchanged
  local name=$1; shift
  local before; before=$(sha256sum "$work/e/checkpoint.bin" | cut -d' ' -f1)
  if "$@" 2>"$work/err"; then bad "$name: succeeded"; return; fi
  if [ "$(grep -c '^dpfl: error: ' "$work/err")" -ne 1 ]; then bad "$name: not one error line: $(cat "$work/err")"; return; fi
  if [ -e "$work/e/checkpoint.bin" ] && [ "$(sha256sum "$work/e/checkpoint.bin" | cut -d' ' -f1)" != "$before" ]; then
    bad "$name: the previous checkpoint changed"; return; fi
  ok; echo "torture: $name -> $(cat "$work/err")"
}
fresh() { rm -rf "$work/e"; "$bin" train "$work/run.ini" --set fl.rounds=5 --out "$work/e" --quiet; }

fresh; chmod a-w "$work/e"
if [ "$(id -u)" -ne 0 ]; then
  expect_error "read-only run folder" "$bin" train --resume "$work/e" --set fl.rounds=10 --quiet
else echo "torture: (root ignores directory permissions: read-only folder checked via a read-only mount below)"; fi
chmod u+w "$work/e"

fresh; cp "$work/e/checkpoint.bin" "$work/good.bin"
head -c 100 "$work/good.bin" > "$work/e/checkpoint.bin"
expect_error "truncated checkpoint" "$bin" train --resume "$work/e" --set fl.rounds=10 --quiet
cp "$work/good.bin" "$work/e/checkpoint.bin"
python3 - "$work/e/checkpoint.bin" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x10; open(p, 'wb').write(b)
PY
expect_error "bit-flipped checkpoint" "$bin" train --resume "$work/e" --set fl.rounds=10 --quiet

# the output directory deleted while the run writes
rm -rf "$work/gone"
"$bin" train "$work/run.ini" --out "$work/gone" --quiet 2>"$work/err" &
pid=$!
for _ in $(seq 1 1000); do [ -e "$work/gone/checkpoint.bin" ] && break; sleep 0.01; done # mid-run: a round is out
mv "$work/gone" "$work/gone.deleted"; rm -rf "$work/gone.deleted" # atomic: rm -rf alone races with new files
wait "$pid"; rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c '^dpfl: error: ' "$work/err")" -eq 1 ]; then ok; echo "torture: folder deleted mid-run -> $(cat "$work/err")"
elif [ $rc -eq 0 ]; then bad "folder deleted mid-run: the run reported success"; else bad "folder deleted mid-run: $(cat "$work/err")"; fi

# disk full and read-only on small mounts (needs permission to mount: root, outside restricted containers)
mkdir -p "$work/full"
if mount -t tmpfs -o size=64k tmpfs "$work/full" 2>/dev/null; then
  "$bin" train "$work/run.ini" --set model.arch=mlp:20-256-10 --out "$work/full/r" --quiet 2>"$work/err"; rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c '^dpfl: error: ' "$work/err")" -eq 1 ] && ! ls "$work/full/r" | grep -q '\.tmp\.'; then
    ok; echo "torture: disk full -> $(cat "$work/err")"; else bad "disk full: rc $rc, $(cat "$work/err"), $(ls "$work/full/r")"; fi
  umount "$work/full"
  mkdir -p "$work/ro"; fresh; cp -a "$work/e/." "$work/ro/"
  if mount -o bind,ro "$work/ro" "$work/ro" 2>/dev/null; then
    before=$(sha256sum "$work/ro/checkpoint.bin" | cut -d' ' -f1)
    if "$bin" train --resume "$work/ro" --set fl.rounds=10 --quiet 2>"$work/err"; then bad "read-only mount: succeeded"
    elif [ "$(sha256sum "$work/ro/checkpoint.bin" | cut -d' ' -f1)" = "$before" ]; then ok; echo "torture: read-only folder -> $(cat "$work/err")"
    else bad "read-only mount: checkpoint changed"; fi
    umount "$work/ro"
  fi
else
  echo "torture: (cannot mount a tmpfs here: disk-full case skipped)"
fi
echo "torture: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
