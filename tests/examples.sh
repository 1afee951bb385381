#!/usr/bin/env bash
# The C examples (examples/c/, built by make against this build's libdpfl.so): each runs, and what it prints is
# checked against the dpfl tool computing the same thing (`dpfl account`, `dpfl calibrate`) or against what it
# must be (an accuracy well above chance, a budget never passed).  Run by `make test` after the cmocka suites;
# BUILD (default build) is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
B=${BUILD:-build}
dpfl=$B/dpfl
ex=$B/examples
field() { sed -n "s/^$1: \([^ ,]*\).*/\1/p"; } # field LABEL < output: the value after "LABEL: "

# accountant Q Z T DELTA TARGET: its epsilons and calibrated noise against the tool's, to 1e-9 relative
check_accountant() {
  local q=$1 z=$2 t=$3 d=$4 target=$5 out cli
  if ! out=$("$ex/accountant" "$q" "$z" "$t" "$d" "$target" 2>&1); then t_fail "accountant exited non-zero: $out"; return; fi
  cli=$("$dpfl" account --noise "$z" --q "$q" --steps "$t" --delta "$d" --json | json_num epsilon)
  t_close "$(field 'rdp epsilon' <<<"$out")" "$cli" 1e-9 || t_fail "rdp epsilon $(field 'rdp epsilon' <<<"$out") != dpfl account's $cli"
  cli=$("$dpfl" account --noise "$z" --q "$q" --steps "$t" --delta "$d" --accountant pld --json | json_num epsilon)
  t_close "$(field 'pld epsilon' <<<"$out")" "$cli" 1e-9 || t_fail "pld epsilon $(field 'pld epsilon' <<<"$out") != dpfl account's $cli"
  t_le "$(field 'rdp epsilon' <<<"$out")" "$(field 'composed rdp epsilon' <<<"$out")" ||
    t_fail "composing a second phase lowered epsilon: $out"
  cli=$("$dpfl" calibrate --target-epsilon "$target" --delta "$d" --q "$q" --steps "$t" --json | json_num noise)
  t_close "$(field 'calibrated noise' <<<"$out")" "$cli" 1e-9 || t_fail "calibrated noise $(field 'calibrated noise' <<<"$out") != dpfl calibrate's $cli"
  t_le "$(field 'calibrated rdp epsilon' <<<"$out")" "$target" || t_fail "calibrated noise misses the target: $out"
}

t_begin "example accountant: epsilon, composition and calibration agree with dpfl account / calibrate"
check_accountant 0.01 1.1 1000 1e-5 3
check_accountant 0.05 0.8 200 1e-6 2
out=$("$ex/accountant" 1.5 1 10 1e-5 1 2>&1) && t_fail "a sampling rate of 1.5 was accepted"
grep -q "sampling rate q" <<<"$out" || t_fail "no error naming q: $out"
t_end

t_begin "example dpsgd: learns the caller's data; its epsilon is dpfl account's for the steps it took"
if out=$("$ex/dpsgd" 300 2>&1) && one=$("$ex/dpsgd" 1 2>&1); then
  acc=$(field 'test accuracy' <<<"$out")
  t_le 0.85 "$acc" || t_fail "test accuracy $acc after 300 steps (three classes: chance is 0.33)"
  t_lt "$(field 'test accuracy' <<<"$one")" "$acc" || t_fail "300 steps no better than 1: $acc"
  q=$(sed -n 's/.* q: \([^,]*\),.*/\1/p' <<<"$out") z=$(sed -n 's/.* noise: \([^,]*\),.*/\1/p' <<<"$out")
  cli=$("$dpfl" account --noise "$z" --q "$q" --steps 300 --delta 1e-5 --json | json_num epsilon)
  t_close "$(field 'record-level epsilon' <<<"$out")" "$cli" 1e-9 || t_fail "epsilon != dpfl account's $cli: $out"
else
  t_fail "dpsgd exited non-zero: $out $one"
fi
t_end

t_begin "example federated: a callback per round, epsilon rising to dpfl account's, a budget that stops it"
if out=$("$ex/federated" 2>&1); then
  rounds=$(grep -c '^round ' <<<"$out")
  [ "$rounds" = 10 ] || t_fail "$rounds round lines, expected 10: $out"
  eps=$(sed -n 's/^round .* record-level epsilon \([^ ]*\) .*/\1/p' <<<"$out")
  awk 'NR > 1 && !($1 > prev) { bad = 1 } { prev = $1 } END { exit bad }' <<<"$eps" || t_fail "epsilon not increasing: $eps"
  last=$(grep '^round 10:' <<<"$out")
  acc=$(sed -n 's/.*test accuracy \([^,]*\),.*/\1/p' <<<"$last")
  t_le 0.85 "$acc" || t_fail "final test accuracy $acc"
  q=$(sed -n 's/.*: q \([^,]*\), .*/\1/p' <<<"$last") steps=$(sed -n 's/.*, \([0-9]*\) steps).*/\1/p' <<<"$last")
  z=$(sed -n 's/.*noise multiplier \([^,]*\),.*/\1/p' <<<"$out") d=$(sed -n 's/.*, delta \(.*\)$/\1/p' <<<"$out")
  # numbers in the shortest form that reads back as the same double, not 17 digits (0.080000000000000002)
  [ "$z" = 1.2 ] && [ "$q" = 0.08 ] || t_fail "noise multiplier '$z' and q '$q', not 1.2 and 0.08"
  cli=$("$dpfl" account --noise "$z" --q "$q" --steps "$steps" --delta "$d" --json | json_num epsilon)
  t_close "$(sed -n 's/.* record-level epsilon \([^ ]*\) .*/\1/p' <<<"$last")" "$cli" 1e-9 ||
    t_fail "final epsilon != dpfl account --noise $z --q $q --steps $steps: $cli"
  # a budget between rounds 3 and 4: three rounds train, the fourth is refused before it trains
  budget=$(awk 'NR == 3 { a = $1 } NR == 4 { printf "%.9g", (a + $1) / 2 }' <<<"$eps")
  if capped=$("$ex/federated" "$budget" 2>&1); then
    [ "$(grep -c '^round ' <<<"$capped")" = 3 ] || t_fail "budget $budget: not 3 rounds: $capped"
    grep -q "^stopped before round 4" <<<"$capped" || t_fail "budget $budget: no stop before round 4: $capped"
    t_le "$(sed -n 's/^round 3: .* record-level epsilon \([^ ]*\) .*/\1/p' <<<"$capped")" "$budget" ||
      t_fail "budget $budget passed: $capped"
  else
    t_fail "federated $budget exited non-zero: $capped"
  fi
else
  t_fail "federated exited non-zero: $out"
fi
t_end
t_summary
