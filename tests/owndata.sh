#!/usr/bin/env bash
# Your own data from the command line: examples/own_csv.ini (the heart-disease centres read as plain CSV files, one
# client per file) trains, resumes from its run folder, and bad files fail on one line naming the file and line,
# leaving no run folder behind.  Run by `make test`; BUILD (default build) is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
dpfl=${BUILD:-build}/dpfl
export DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d /tmp/dpfl-owndata-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
top() { sed -n "s/^\t\"$1\":\t\([-+0-9.eE]*\).*/\1/p" "$2"; } # top KEY FILE: a top-level number of summary.json

t_begin "own CSV files: one client per file, record-level DP, summary, resume; no extension past the calibration"
if out=$("$dpfl" train examples/own_csv.ini --set fl.rounds=4 --out "$tmp/run" --quiet 2>&1); then
  eps=$(top epsilon "$tmp/run/summary.json")
  acc=$(top test_accuracy "$tmp/run/summary.json")
  t_le "$eps" 2 || t_fail "record-level epsilon '$eps' above the target 2"
  t_lt 0 "$eps" || t_fail "no record-level epsilon in summary.json"
  t_lt 0.3 "$acc" || t_fail "test accuracy '$acc' (5 classes, the largest holds about 0.45)"
  grep -q '^dataset = csv:data/heart-disease/processed\.cleveland\.data, .*/processed\.va\.data$' "$tmp/run/config.ini" ||
    t_fail "config.ini does not keep the csv: spec"
  # the files are read again and must give the same clients (the checkpoint refuses another partition)
  out=$("$dpfl" train --resume "$tmp/run" --quiet 2>&1) || t_fail "resume failed: $out"
  [ "$(top rounds "$tmp/run/summary.json")" = 4 ] || t_fail "the resumed run has not its 4 rounds"
  # the noise was calibrated for 4 rounds: more are refused on one line, and config.ini keeps fl.rounds = 4
  if out=$("$dpfl" train --resume "$tmp/run" --set fl.rounds=6 --quiet 2>&1); then
    t_fail "a resume past the calibrated rounds was accepted"
  else
    grep -q "calibrated so that its 4 rounds fit record_dp.target_epsilon = 2" <<<"$out" || t_fail "resume: $out"
  fi
  grep -q '^rounds = 4$' "$tmp/run/config.ini" || t_fail "the refused resume changed config.ini's rounds"
  t_le "$(top epsilon "$tmp/run/summary.json")" 2 || t_fail "epsilon above 2 after the resume"
else
  t_fail "dpfl train examples/own_csv.ini failed: $out"
fi
t_end

t_begin "the installed library and tool ignore DPFL_TEST_NOISE_DIVISOR: no environment variable changes a mechanism"
# the audit tests' broken mechanism exists only in the copy of src/mech/noise.c that the test binaries link
if "$dpfl" train examples/own_csv.ini --set fl.rounds=2 --set run.seed=3 --out "$tmp/plain" --quiet >/dev/null 2>&1 &&
   DPFL_TEST_NOISE_DIVISOR=1e12 "$dpfl" train examples/own_csv.ini --set fl.rounds=2 --set run.seed=3 --out "$tmp/env" \
     --quiet >/dev/null 2>&1; then
  cmp -s "$tmp/plain/model.bin" "$tmp/env/model.bin" || t_fail "DPFL_TEST_NOISE_DIVISOR changed the trained model"
else
  t_fail "dpfl train examples/own_csv.ini failed"
fi
for f in "$dpfl" "${BUILD:-build}/libdpfl.so"; do
  if grep -aq -e DPFL_TEST_NOISE_DIVISOR -e dpfl_test_noise_divisor "$f"; then t_fail "$f names the test-only noise hook"; fi
done
t_end

t_begin "own CSV files: a missing value, a missing file, a wrong column and absent sites' files fail on one line"
printf 'age,chol,label\n50,200,1\n60,,0\n' > "$tmp/site.csv"
check_error() { # WANT [SETTINGS...]: non-zero exit, one line containing WANT, no run folder
  local want=$1 out rc
  shift
  { printf '[data]\npartition = iid\nclients = 1\nlabel_column = label\n'; printf '%s\n' "$@"
    printf '[model]\narch = logreg\n[fl]\nrounds = 1\n'; } > "$tmp/bad.ini"
  out=$("$dpfl" train "$tmp/bad.ini" --out "$tmp/bad" --quiet 2>&1); rc=$?
  [ "$rc" != 0 ] || t_fail "exit 0 for $*"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || t_fail "not one line: $out"
  grep -qF -- "$want" <<<"$out" || t_fail "'$out' does not say '$want'"
  [ ! -e "$tmp/bad/summary.json" ] || t_fail "a failed run left $tmp/bad/summary.json"
  rm -rf "$tmp/bad"
}
check_error "missing value ($tmp/site.csv): line 3, column 2" "dataset = csv:$tmp/site.csv"
check_error "cannot open data file ($tmp/none.csv)" "dataset = csv:$tmp/none.csv"
check_error "no column named 'weight'" "dataset = csv:$tmp/site.csv" "feature_columns = weight" "missing = drop"
check_error "data.label_column is set but would be ignored" "dataset = heart"
mkdir -p "$tmp/site/data/heart-disease" && cp data/heart-disease/processed.hungarian.data "$tmp/site/data/heart-disease/"
out=$(cd "$tmp/site" && "$OLDPWD/$dpfl" train "$OLDPWD/examples/own_csv.ini" --out "$tmp/site/run" --quiet 2>&1); rc=$?
[ "$rc" != 0 ] || t_fail "dpfl train ran with 3 of the 4 files absent"
grep -qF "cannot open data file (data/heart-disease/processed.cleveland.data): 3 of the 4 files are not here" <<<"$out" ||
  t_fail "absent files: '$out'"
[ ! -e "$tmp/site/run/summary.json" ] || t_fail "a refused run left summary.json"
t_end

t_begin "dpfl data info CONFIG.ini: the config's own data per source, absent files marked"
out=$("$dpfl" data info examples/own_csv.ini 2>&1) || t_fail "data info failed: $out"
grep -q "^classes  5$" <<<"$out" || t_fail "no 'classes  5': $out"
grep -q "^sources  #0 242/61 #1 216/54 #2 94/23 #3 110/27" <<<"$out" || t_fail "sources: $out"
out=$(cd "$tmp/site" && "$OLDPWD/$dpfl" data info "$OLDPWD/examples/own_csv.ini" 2>&1) || t_fail "data info (one file): $out"
grep -q "#0 242/61 (not here) #1 216/54 #2 94/23 (not here)" <<<"$out" || t_fail "absent files not marked: $out"
grep -q "^train    0:134 1:82 2:0" <<<"$out" || t_fail "placeholders counted as labels: $out"
t_end
t_summary
