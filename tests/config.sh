#!/usr/bin/env bash
# The config from the command line and long configs (issue 37): one example file trains with and without DP
# (--set record_dp.enabled=no drops the file's record_dp keys with a note; --unset puts a key back to its default;
# --set fl.local_steps replaces the file's local_epochs), and a deployment of 100 sites, each its own CSV file, is
# one config whose dataset and source_rows lines run far past the old 198-character limit (also as --set and as
# continuation lines).  Run by `make test`; BUILD (default build) is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
dpfl=$PWD/${BUILD:-build}/dpfl
export DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d /tmp/dpfl-config-sh-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
top() { sed -n "s/^\t\"$1\":\t\([-+0-9.eE]*\).*/\1/p" "$2"; } # top KEY FILE: a top-level number of summary.json

t_begin "one example file, with and without DP from the command line"
if ! "$dpfl" train examples/own_csv.ini --set fl.rounds=2 --out "$tmp/dp" --quiet >"$tmp/log" 2>&1; then
  t_fail "with DP: $(cat "$tmp/log")"
fi
grep -q '"epsilon":' "$tmp/dp/summary.json" 2>/dev/null || t_fail "the DP run has no epsilon"
if ! "$dpfl" train examples/own_csv.ini --set fl.rounds=2 --set record_dp.enabled=no --out "$tmp/nodp" --quiet \
     >"$tmp/log" 2>&1; then
  t_fail "--set record_dp.enabled=no refused: $(cat "$tmp/log")"
fi
grep -q "note: --set record_dp.enabled=no: the config's record_dp.clip, record_dp.target_epsilon, record_dp.delta" \
  "$tmp/log" || t_fail "no note of the dropped keys: $(cat "$tmp/log")"
grep -q '^enabled = no$' "$tmp/nodp/config.ini" 2>/dev/null || t_fail "config.ini of the baseline has record_dp on"
grep -q '^target_epsilon = 0$' "$tmp/nodp/config.ini" 2>/dev/null || t_fail "the file's target_epsilon kept"
grep -q '"private":[[:space:]]*false' "$tmp/nodp/summary.json" 2>/dev/null || t_fail "the baseline is not marked private: false"
grep -q '"private":[[:space:]]*true' "$tmp/dp/summary.json" 2>/dev/null || t_fail "the DP run is not marked private: true"
# the same with --unset of the whole section
if ! "$dpfl" train examples/own_csv.ini --set fl.rounds=2 --unset record_dp --out "$tmp/unset" --quiet >"$tmp/log" 2>&1
then t_fail "--unset record_dp: $(cat "$tmp/log")"; fi
cmp -s "$tmp/nodp/model.bin" "$tmp/unset/model.bin" || t_fail "--unset record_dp and --set record_dp.enabled=no differ"
# a key the file sets that a --set switches off: local_epochs replaced by local_steps
sed 's/^local_steps = 10$/local_epochs = 1/' examples/own_csv.ini > "$tmp/epochs.ini"
grep -q '^local_epochs = 1$' "$tmp/epochs.ini" || t_fail "examples/own_csv.ini no longer sets local_steps = 10"
if ! "$dpfl" train "$tmp/epochs.ini" --set fl.rounds=1 --set fl.local_steps=20 --out "$tmp/steps" --quiet >"$tmp/log" 2>&1
then t_fail "--set fl.local_steps=20 over local_epochs: $(cat "$tmp/log")"; fi
grep -q "fl.local_epochs no longer applies and is dropped" "$tmp/log" || t_fail "no note: $(cat "$tmp/log")"
# the errors name the way out; a second --set that conflicts with the first is still refused
out=$("$dpfl" train examples/own_csv.ini --set record_dp.clip= --out "$tmp/x" 2>&1)
grep -q "use --unset record_dp.clip" <<<"$out" || t_fail "empty --set value: $out"
out=$("$dpfl" train examples/own_csv.ini --set fl.local_epochs=2 --out "$tmp/x" 2>&1)
grep -q "fl.local_epochs (--set) would be ignored: local_steps > 0" <<<"$out" || t_fail "conflicting --set: $out"
[ ! -e "$tmp/x" ] || t_fail "a refused command line left $tmp/x"
t_end

t_begin "a deployment of 100 sites: 100 CSV files in data.dataset and data.source_rows, in one line and continued"
mkdir -p "$tmp/sites"
files="" rows=""
for i in $(seq 1 100); do
  f=$(printf '%s/sites/site_%03d.csv' "$tmp" "$i")
  awk -v s="$i" 'BEGIN { for (r = 0; r < 12; r++) { x = (r * 7 + s) % 10; printf "%.2f,%.2f,%d\n", x / 10, (9 - x) / 10, (x >= 5 ? 1 : 0) } }' > "$f"
  files="$files${files:+, }$f" rows="$rows${rows:+, }12"
done
{ printf '[data]\ndataset = csv:%s\nsource_rows = %s\nheader = no\npartition = natural\nclients = 100\nclasses = 2\n' "$files" "$rows"
  printf 'test_fraction = 0.25\n\n[model]\narch = logreg\n\n[fl]\nrounds = 2\nsampling = all\nlocal_steps = 2\nlr = 0.5\n\n'
  printf '[run]\nseed = 5\n'; } > "$tmp/sites.ini"
[ "$(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$tmp/sites.ini")" -gt 3000 ] || t_fail "the line is short"
if ! "$dpfl" train "$tmp/sites.ini" --out "$tmp/sites_run" --quiet >"$tmp/log" 2>&1; then t_fail "100 sites: $(cat "$tmp/log")"; fi
grep -q '"rounds":.*2' "$tmp/sites_run/summary.json" 2>/dev/null || t_fail "no summary.json"
# the run's config.ini holds the whole list and resumes
grep -q "site_100.csv$" "$tmp/sites_run/config.ini" 2>/dev/null || t_fail "config.ini lost the file list"
"$dpfl" train --resume "$tmp/sites_run" --set fl.rounds=3 --quiet >"$tmp/log" 2>&1 || t_fail "resume: $(cat "$tmp/log")"
# the same list as --set, and as continuation lines (one file per line)
sed '/^dataset = /d' "$tmp/sites.ini" > "$tmp/noset.ini"
if ! "$dpfl" train "$tmp/noset.ini" --set "data.dataset=csv:$files" --out "$tmp/sites_set" --quiet >"$tmp/log" 2>&1
then t_fail "--set of 100 files: $(cat "$tmp/log")"; fi
{ echo '[data]'; echo "dataset = csv:$(printf '%s/sites/site_001.csv' "$tmp"),"
  for i in $(seq 2 100); do printf '    %s/sites/site_%03d.csv%s\n' "$tmp" "$i" "$([ "$i" -lt 100 ] && echo ,)"; done
  sed -n '/^source_rows/,$p' "$tmp/sites.ini" | grep -v '^clients = '; } > "$tmp/continued.ini"
# and without data.clients: the natural partition of 100 files makes 100 clients
if ! "$dpfl" train "$tmp/continued.ini" --out "$tmp/sites_cont" --quiet >"$tmp/log" 2>&1
then t_fail "continuation lines: $(cat "$tmp/log")"; fi
grep -q "note: data.clients = 100: one client per file" "$tmp/log" || t_fail "no note of the inferred clients: $(cat "$tmp/log")"
grep -q '^clients = 100$' "$tmp/sites_cont/config.ini" 2>/dev/null || t_fail "config.ini does not say clients = 100"
cmp -s "$tmp/sites_set/model.bin" "$tmp/sites_cont/model.bin" || t_fail "--set and continuation lines train differently"
t_end
t_begin "strictness: a duplicated key, '[data' without ']', a too-large integer, a glob matching nothing, an empty data.test folder, --resume of a folder that is no run"
printf '[data]\ndataset = heart\nclients = 4\n\n[fl]\nrounds = 2\n\n[data]\nclients = 5\n' > "$tmp/dup.ini"
out=$("$dpfl" train "$tmp/dup.ini" --out "$tmp/x" 2>&1)
grep -qF "data.clients ($tmp/dup.ini:9): set twice, first at line 3" <<<"$out" || t_fail "duplicate: $out"
printf '[data\ndataset = heart\n' > "$tmp/open.ini"
out=$("$dpfl" train "$tmp/open.ini" --out "$tmp/x" 2>&1)
grep -qF "config ($tmp/open.ini:1): '[data' has no closing ']'" <<<"$out" || t_fail "unclosed section: $out"
out=$("$dpfl" train examples/own_csv.ini --set fl.rounds=99999999999999999999 --out "$tmp/x" 2>&1)
grep -qF "fl.rounds (--set): 99999999999999999999 is out of range [1, 100000000]" <<<"$out" || t_fail "large integer: $out"
out=$("$dpfl" train examples/own_csv.ini --set "data.dataset=csv:$tmp/zzz/*.csv" --unset data.source_rows --out "$tmp/x" 2>&1)
grep -qF "no file matches ($tmp/zzz/*.csv): a glob pattern in data.dataset" <<<"$out" || t_fail "glob matching nothing: $out"
mkdir -p "$tmp/emptytest"
out=$("$dpfl" train examples/own_csv.ini --set "data.test=csv:$tmp/emptytest" --out "$tmp/x" 2>&1)
grep -qF "data.test names a folder, and it holds no .csv file" <<<"$out" || t_fail "empty data.test folder: $out"
mkdir -p "$tmp/notarun"
out=$("$dpfl" train --resume "$tmp/notarun" 2>&1)
grep -qF -- "--resume $tmp/notarun: not a run folder (no config.ini" <<<"$out" || t_fail "resume of no run: $out"
[ ! -e "$tmp/x" ] || t_fail "a refused command line left $tmp/x"
t_end

t_begin "raw-scale CSV features without normalize: one warning; --help shows the net: layer syntax"
awk 'BEGIN { for (r = 0; r < 200; r++) { x = (r * 37) % 100; printf "%d,%d,%d\n", 1000 + x * 10, x, (x >= 50 ? 1 : 0) } }' > "$tmp/raw.csv"
printf '[data]\ndataset = csv:%s\nheader = no\n\n[model]\narch = logreg\n\n[fl]\nrounds = 1\nlocal_steps = 1\n\n[run]\nseed = 1\n' \
  "$tmp/raw.csv" > "$tmp/raw.ini"
if ! "$dpfl" train "$tmp/raw.ini" --set data.clients=2 --out "$tmp/raw_run" >"$tmp/log" 2>&1; then t_fail "raw: $(cat "$tmp/log")"; fi
[ "$(grep -c 'far from unit scale' "$tmp/log")" = 1 ] || t_fail "not one scale warning: $(cat "$tmp/log")"
grep -q "warning: data: feature 0 of the CSV files is far from unit scale.*data.normalize = standard" "$tmp/log" ||
  t_fail "the warning does not name the feature and the fix: $(cat "$tmp/log")"
"$dpfl" train "$tmp/raw.ini" --set data.clients=2 --set data.normalize=standard --set data.feature_mean=1500,50 \
  --set data.feature_std=300,30 --out "$tmp/raw_std" >"$tmp/log" 2>&1 || t_fail "standardized: $(cat "$tmp/log")"
grep -q 'far from unit scale' "$tmp/log" && t_fail "warned with normalize = standard: $(cat "$tmp/log")"
"$dpfl" train --help | grep -q 'net:conv8k3p1,relu,pool2,fc10 from convN\[kK\]' || t_fail "--help shows no net: syntax"
t_end

if command -v "${DPFL_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
  t_begin "dpfl report -o FOLDER writes FOLDER/report.html; a run without DP says so once"
  mkdir -p "$tmp/pages"
  "$dpfl" report "$tmp/nodp" -o "$tmp/pages" >"$tmp/log" 2>&1 || t_fail "report -o FOLDER: $(cat "$tmp/log")"
  [ -s "$tmp/pages/report.html" ] || t_fail "no $tmp/pages/report.html"
  n=$(grep -oi "not differentially private" "$tmp/pages/report.html" | wc -l)
  grep -q "Not differentially private:</strong> neither" "$tmp/pages/report.html" || t_fail "banner: $(grep -o 'statement[^.]*' "$tmp/pages/report.html")"
  grep -q "private:</strong> NOT differentially private" "$tmp/pages/report.html" && t_fail "the banner says it twice"
  [ "$n" -ge 1 ] || t_fail "no banner"
  t_end
else
  echo "dpfl report checks: SKIPPED: no gnuplot (apt-get install gnuplot-nox)"
fi
t_summary
