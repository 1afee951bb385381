#!/usr/bin/env bash
# What a new user trips on (issue 37, round 2): a failed calibration or check leaves no run folder (and an
# existing one untouched); Ctrl-C / SIGTERM during dpfl train leaves an interrupted run that report, eval and
# --resume work on, bit-identically; --resume --set fl.rounds extends a finished run; the set-up's warnings are
# said once, where they matter.  Run by `make test`; BUILD (default build) is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
dpfl=$PWD/${BUILD:-build}/dpfl
export DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d /tmp/dpfl-ux-sh-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
top() { sed -n "s/^\t\"$1\":\t\([-+0-9.eEtruefals]*\).*/\1/p" "$2"; } # top KEY FILE: a top-level value of summary.json
nowall() { sed 's/"wall[a-z_]*":[-+0-9.eE]*,\{0,1\}//g' "$1"; } # a jsonl file without its timing fields

t_begin "a failed calibration or check creates nothing; a re-run then works"
bad="--set record_dp.delta=1e-6 --set record_dp.target_epsilon=1e-6" # no noise multiplier up to 1e7 reaches it
"$dpfl" train examples/own_csv.ini $bad -o "$tmp/X" --quiet >"$tmp/log" 2>&1 && t_fail "an unreachable target trained"
grep -q "no noise multiplier up to 1e7 reaches epsilon 1e-06" "$tmp/log" || t_fail "calibration: $(cat "$tmp/log")"
[ ! -e "$tmp/X" ] || t_fail "the failed calibration left $tmp/X: $(ls "$tmp/X")"
"$dpfl" train examples/demo.ini -o "$tmp/X" --set record_dp.target_epsilon=1e-6 >"$tmp/log" 2>&1 &&
  t_fail "a target_epsilon without record_dp.enabled trained"
grep -q "record_dp.target_epsilon is set but record_dp.enabled = no" "$tmp/log" || t_fail "demo: $(cat "$tmp/log")"
[ ! -e "$tmp/X" ] || t_fail "the refused config left $tmp/X"
"$dpfl" train examples/own_csv.ini --set record_dp.delta=0.5 --out "$tmp/X" --quiet >"$tmp/log" 2>&1 &&
  t_fail "delta = 0.5 trained"
grep -q "record_dp.delta: 0.5 is not below 1/n" "$tmp/log" || t_fail "delta check: $(cat "$tmp/log")"
[ ! -e "$tmp/X" ] || t_fail "the refused delta left $tmp/X"
"$dpfl" train examples/own_csv.ini --set fl.rounds=2 --out "$tmp/X" --quiet >"$tmp/log" 2>&1 ||
  t_fail "the re-run with a reachable target: $(cat "$tmp/log")"
[ "$(top rounds "$tmp/X/summary.json")" = 2 ] || t_fail "the re-run did not train 2 rounds"
# --force over an existing run: a failed calibration leaves that run as it was
(cd "$tmp/X" && md5sum ./*) > "$tmp/before"
"$dpfl" train examples/own_csv.ini $bad --out "$tmp/X" --force --quiet >"$tmp/log" 2>&1 && t_fail "--force: trained"
(cd "$tmp/X" && md5sum ./*) | cmp -s - "$tmp/before" || t_fail "--force and a failed calibration changed the old run"
"$dpfl" train --resume "$tmp/X" --quiet >"$tmp/log" 2>&1 || t_fail "--resume of the old run: $(cat "$tmp/log")"
t_end

t_begin "the report's participation plot: a line for the clients that replied when some dropped, one line when all did"
if command -v "${DPFL_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
  { printf '[data]\ndataset = heart\npartition = natural\nclients = 4\n[model]\narch = logreg\n'
    printf '[fl]\nrounds = 6\nsampling = all\nlocal_steps = 5\nbatch = 16\nlr = 0.1\n'
    printf '[client_dp]\nenabled = yes\nclip = 1.0\nnoise = 1.0\ndelta = 1e-3\n[run]\nseed = 3\nthreads = 1\n'; } > "$tmp/part.ini"
  for d in 0.5 0; do
    "$dpfl" train "$tmp/part.ini" --set client_dp.dropout=$d -o "$tmp/part$d" --quiet >"$tmp/log" 2>&1 ||
      t_fail "train, dropout $d: $(cat "$tmp/log")"
    "$dpfl" report "$tmp/part$d" -o "$tmp/part$d.html" >"$tmp/log" 2>&1 || t_fail "report, dropout $d: $(cat "$tmp/log")"
  done
  grep -q '"replied":[0-3],' "$tmp/part0.5/diagnostics.jsonl" || t_fail "dropout 0.5: every client replied every round"
  grep -q "clients that replied" "$tmp/part0.5.html" || t_fail "dropout 0.5: no line for the clients that replied"
  grep -q "clients sampled (all replied)" "$tmp/part0.5.html" && t_fail "dropout 0.5: the plot says all replied"
  grep -q "clients sampled (all replied)" "$tmp/part0.html" || t_fail "no dropout: the plot does not say all replied"
  grep -q "clients that replied" "$tmp/part0.html" && t_fail "no dropout: a second line for the clients that replied"
else
  echo "participation plot check: SKIPPED: no gnuplot (apt-get install gnuplot-nox)"
fi
t_end

t_begin "--resume --set fl.rounds=N: more rounds extend a finished run bit-identically; fewer, or past a calibration, are refused"
cfg="--unset record_dp.target_epsilon --set record_dp.noise=1.5" # own_csv.ini with the noise given
"$dpfl" train examples/own_csv.ini $cfg --set fl.rounds=4 --out "$tmp/r4" --quiet >"$tmp/log" 2>&1 || t_fail "4 rounds: $(cat "$tmp/log")"
"$dpfl" train examples/own_csv.ini $cfg --set fl.rounds=9 --out "$tmp/r9" --quiet >"$tmp/log" 2>&1 || t_fail "9 rounds: $(cat "$tmp/log")"
cp "$tmp/r4/config.ini" "$tmp/r4.ini"
out=$("$dpfl" train --resume "$tmp/r4" --set fl.rounds=3 2>&1) && t_fail "fewer rounds than released: accepted"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q "fl.rounds = 3 is below the 4 rounds the run has released" <<<"$out" ||
  t_fail "fewer rounds: $out"
cmp -s "$tmp/r4/config.ini" "$tmp/r4.ini" || t_fail "the refused resume rewrote config.ini"
out=$("$dpfl" train --resume "$tmp/r4" 2>&1) || t_fail "resume of a finished run: $out"
grep -q "has released all its 4 rounds: nothing to train" <<<"$out" || t_fail "no note: $out"
"$dpfl" train --resume "$tmp/r4" --set fl.rounds=9 --quiet >"$tmp/log" 2>&1 || t_fail "extend to 9: $(cat "$tmp/log")"
[ "$(top rounds "$tmp/r4/summary.json")" = 9 ] || t_fail "the extended run has not 9 rounds"
cmp -s "$tmp/r4/model.bin" "$tmp/r9/model.bin" || t_fail "the extended model.bin differs from a 9-round run's"
[ "$(top epsilon "$tmp/r4/summary.json")" = "$(top epsilon "$tmp/r9/summary.json")" ] || t_fail "epsilon differs"
# the metrics lines equal a 9-round run's but for the evaluation of the old last round (4, not a multiple of 5)
cmp -s <(nowall "$tmp/r4/metrics.jsonl" | sed '4s/"test_accuracy":[^,]*,"test_loss":[^,]*,//') \
       <(nowall "$tmp/r9/metrics.jsonl" | sed '4s/"test_accuracy":[^,]*,"test_loss":[^,]*,//') || t_fail "metrics.jsonl differs"
# own_csv.ini calibrates its noise for its 20 rounds: more would pass record_dp.target_epsilon
"$dpfl" train examples/own_csv.ini --set fl.rounds=3 --out "$tmp/cal" --quiet >"$tmp/log" 2>&1 || t_fail "calibrated: $(cat "$tmp/log")"
out=$("$dpfl" train --resume "$tmp/cal" --set fl.rounds=5 2>&1) && t_fail "extending a calibrated run: accepted"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q "calibrated so that its 3 rounds fit record_dp.target_epsilon = 2" <<<"$out" ||
  t_fail "calibrated: $out"
t_end

t_begin "each thing said once: delta just below 1/n is not warned about, the seed caveat once, '1 round'"
"$dpfl" train examples/own_csv.ini --set fl.rounds=1 --out "$tmp/one" >"$tmp/log" 2>&1 || t_fail "$(cat "$tmp/log")"
grep -q "warning" "$tmp/log" && t_fail "own_csv.ini (delta = 1e-3 = 0.66 / n) warns: $(cat "$tmp/log")"
grep -q "^dpfl: 1 round, " "$tmp/log" || t_fail "not '1 round': $(cat "$tmp/log")"
[ "$(grep -c "only if the seed is secret" "$tmp/log")" = 1 ] || t_fail "the seed caveat not once: $(cat "$tmp/log")"
"$dpfl" train examples/own_csv.ini --set fl.rounds=1 --set record_dp.delta=0.01 --set run.allow_large_delta=yes \
  --out "$tmp/large" >"$tmp/log" 2>&1 || t_fail "$(cat "$tmp/log")"
[ "$(grep -c "warning: record_dp.delta = 0.01 is not below 1/n" "$tmp/log")" = 1 ] || t_fail "large delta: $(cat "$tmp/log")"
grep -q '"warnings"' "$tmp/large/summary.json" || t_fail "the large delta's warning is not in summary.json"
"$dpfl" train examples/own_csv.ini --set fl.rounds=1 --unset record_dp --out "$tmp/np" >"$tmp/log" 2>&1 || t_fail "$(cat "$tmp/log")"
grep -q "secret" "$tmp/log" "$tmp/np/summary.json" && t_fail "a run without DP has the seed caveat"
t_end

if command -v mpirun >/dev/null && pkg-config --exists ompi-c 2>/dev/null; then
  t_begin "mpirun: the log and summary.json say how many ranks took part"
  printf '[data]\ndataset = synthetic\nclients = 12\n[model]\narch = mlp:20-16-10\n[fl]\nrounds = 2\nsampling = all\nlocal_steps = 3\nbatch = 8\n[run]\nseed = 7\nthreads = 1\n' > "$tmp/mpi.ini"
  MPIRUN=(mpirun --oversubscribe -np 3)
  [ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 3)
  "${MPIRUN[@]}" "$dpfl" train "$tmp/mpi.ini" --out "$tmp/mpi" >"$tmp/log" 2>&1 || t_fail "mpirun: $(cat "$tmp/log")"
  grep -q "^dpfl: mpirun, 3 ranks: rank 0 the server, 2 worker ranks training the clients$" "$tmp/log" ||
    t_fail "the log does not say 3 ranks: $(cat "$tmp/log")"
  grep -q '"transport":[[:space:]]*"mpirun, 3 ranks' "$tmp/mpi/summary.json" 2>/dev/null || t_fail "summary.json: no ranks"
  "$dpfl" train "$tmp/mpi.ini" --out "$tmp/nompi" --quiet >"$tmp/log" 2>&1 || t_fail "one process: $(cat "$tmp/log")"
  grep -q '"transport"' "$tmp/nompi/summary.json" && t_fail "a one-process run names a transport"
  t_end

  t_begin "mpirun and Ctrl-C: rank 0 stops after the round in progress, says how to resume, and the resumed run is the uninterrupted one"
  # mpirun passes the signal on after a moment (about 0.5 s here), and kills the ranks 1 s later
  # (odls_base_sigkill_timeout): rank 0 then stops cleanly if its round and summary fit, else its checkpoint stays
  sed 's/^rounds = 2$/rounds = 600/; s/^local_steps = 3$/local_steps = 20/' "$tmp/mpi.ini" > "$tmp/mpint.ini"
  env --default-signal=INT "${MPIRUN[@]}" "$dpfl" train "$tmp/mpint.ini" --out "$tmp/mpint" >"$tmp/mpint.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 3000); do [ "$(cat "$tmp/mpint/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.01; done
  kill -INT "$pid"
  wait "$pid" && t_fail "mpirun exited 0 after Ctrl-C"
  grep -q "continue with: mpirun -n 3 dpfl train --resume $tmp/mpint\$" "$tmp/mpint.log" || t_fail "no line on how to resume: $(cat "$tmp/mpint.log")"
  r=$(wc -l < "$tmp/mpint/metrics.jsonl")
  t_lt "$r" 600 || t_fail "the interrupted run has $r rounds"
  if grep -q "interrupted after round $r of 600" "$tmp/mpint.log"; then
    [ "$(top interrupted "$tmp/mpint/summary.json")" = true ] || t_fail "summary.json is not marked interrupted"
  else
    echo "mpirun killed rank 0 before its summary (odls_base_sigkill_timeout): resuming from its checkpoint"
  fi
  "${MPIRUN[@]}" "$dpfl" train --resume "$tmp/mpint" --quiet >"$tmp/log" 2>&1 || t_fail "mpirun --resume: $(cat "$tmp/log")"
  "$dpfl" train "$tmp/mpint.ini" --out "$tmp/mpone" --quiet >"$tmp/log" 2>&1 || t_fail "one process: $(cat "$tmp/log")"
  cmp -s "$tmp/mpint/model.bin" "$tmp/mpone/model.bin" || t_fail "the resumed model.bin differs from the uninterrupted run's"
  [ "$(top rounds "$tmp/mpint/summary.json")" = 600 ] || t_fail "the resumed run did not finish"
  t_end
else
  echo "mpirun checks: SKIPPED: no mpirun or OpenMPI headers"
fi

# Interrupted runs: MNIST logistic regression with DP-SGD, 100 short rounds (about 5 s on 2 cores)
if [ -e "$DPFL_DATA/cache/mnist/train-images-idx3-ubyte" ] || [ -e "$DPFL_DATA/cache/mnist/train-images-idx3-ubyte.gz" ]; then
  cat > "$tmp/int.ini" <<'EOF'
[data]
dataset = mnist
partition = iid
clients = 10

[model]
arch = logreg

[fl]
rounds = 100
sampling = all
local_steps = 10
batch = 32
lr = 0.1

[record_dp]
enabled = yes
clip = 1
noise = 1
delta = 1e-6

[run]
seed = 3
threads = 2
eval_every = 10
EOF
  "$dpfl" train "$tmp/int.ini" --out "$tmp/full" --quiet >"$tmp/log" 2>&1 || t_fail "the uninterrupted run: $(cat "$tmp/log")"

  t_begin "Ctrl-C after the first round: one line on how to resume, an interrupted run that resumes bit-identically"
  # a background job of a script starts with SIGINT ignored, and so does everything under a harness that was itself
  # started in the background (dpfl keeps a signal ignored at entry, as nohup'd programs do): env puts it back
  env --default-signal=INT "$dpfl" train "$tmp/int.ini" --out "$tmp/int" >"$tmp/int.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [ -e "$tmp/int/checkpoint.bin" ] && break; sleep 0.05; done
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || t_fail "exit status $rc after SIGINT (not 130): $(cat "$tmp/int.log")"
  [ "$(grep -c "continue with: dpfl train --resume $tmp/int\$" "$tmp/int.log")" = 1 ] ||
    t_fail "no single line on how to resume: $(cat "$tmp/int.log")"
  grep -q "interrupted after round [1-9][0-9]* of 100" "$tmp/int.log" || t_fail "final line: $(cat "$tmp/int.log")"
  [ "$(top interrupted "$tmp/int/summary.json")" = true ] || t_fail "summary.json is not marked interrupted"
  r=$(top rounds "$tmp/int/summary.json")
  t_lt "$r" 100 && t_le 1 "$r" || t_fail "the interrupted run has $r rounds"
  [ "$(wc -l < "$tmp/int/metrics.jsonl")" = "$r" ] || t_fail "metrics.jsonl has not $r lines"
  ev=$("$dpfl" eval "$tmp/int" --json 2>&1) || t_fail "dpfl eval of the interrupted run: $ev"
  acc=$(json_num test_accuracy <<<"$ev")
  t_close "$acc" "$(top test_accuracy "$tmp/int/summary.json")" 1e-9 || t_fail "eval $acc, summary.json's differs"
  "$dpfl" export "$tmp/int" -o "$tmp/int.npz" >"$tmp/log" 2>&1 && [ -s "$tmp/int.npz" ] ||
    t_fail "dpfl export of the interrupted run: $(cat "$tmp/log")"
  if command -v "${DPFL_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
    "$dpfl" report "$tmp/int" -o "$tmp/int.html" >"$tmp/log" 2>&1 || t_fail "dpfl report: $(cat "$tmp/log")"
    grep -q "(interrupted: <code>dpfl train --resume</code> continues it)" "$tmp/int.html" ||
      t_fail "the report does not say interrupted"
  fi
  "$dpfl" train --resume "$tmp/int" --quiet >"$tmp/log" 2>&1 || t_fail "--resume: $(cat "$tmp/log")"
  cmp -s "$tmp/int/model.bin" "$tmp/full/model.bin" || t_fail "the resumed model.bin differs from the uninterrupted run's"
  cmp -s <(nowall "$tmp/int/metrics.jsonl") <(nowall "$tmp/full/metrics.jsonl") || t_fail "metrics.jsonl differs"
  [ "$(top interrupted "$tmp/int/summary.json")" = false ] || t_fail "the finished run is still marked interrupted"
  [ "$(top rounds "$tmp/int/summary.json")" = 100 ] || t_fail "the resumed run did not finish"
  t_end

  t_begin "SIGTERM during the set-up or the first round: exit status 143, and the run resumes bit-identically"
  "$dpfl" train "$tmp/int.ini" --out "$tmp/term" --quiet >"$tmp/term.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [ -e "$tmp/term/config.ini" ] && break; sleep 0.01; done
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 143 ] || t_fail "exit status $rc after SIGTERM (not 143): $(cat "$tmp/term.log")"
  [ "$(top interrupted "$tmp/term/summary.json")" = true ] || t_fail "summary.json is not marked interrupted"
  [ -s "$tmp/term/checkpoint.bin" ] && [ -s "$tmp/term/model.bin" ] || t_fail "no checkpoint.bin or model.bin"
  "$dpfl" train --resume "$tmp/term" --quiet >"$tmp/log" 2>&1 || t_fail "--resume: $(cat "$tmp/log")"
  cmp -s "$tmp/term/model.bin" "$tmp/full/model.bin" || t_fail "the resumed model.bin differs from the uninterrupted run's"
  t_end
else
  echo "interrupted-run checks: SKIPPED: no MNIST in $DPFL_DATA/cache/mnist (dpfl data fetch)"
fi
t_summary
