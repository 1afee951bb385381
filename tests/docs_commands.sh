#!/usr/bin/env bash
# Every command in the manual runs: the fenced shell and Python blocks of README.md and docs/results.md,
# docs/performance.md, docs/architecture.md, docs/config.md, docs/python.md and docs/api.md, in document order (Python
# with the checkout's python/ package first on its path, as `make install` would put it), each file in a fresh scratch
# folder that links the checkout's top-level entries (so `runs/`, keys and outputs land there, not in the checkout);
# docs/config.md's generated part is what tools/gen_config_doc.py writes from this build (the key table and the
# library's defaults); every source path docs/architecture.md names exists.  Run by `make test` and `make docs-check`.
#
# Conventions in the documents (the reader sees them as ordinary comments):
#   ```sh / ```bash          each line is one command (a line ending in \ continues), run with bash from the
#                            scratch folder; it must exit 0
#   ```python                run as one script with python3 from the scratch folder
#   ```ini, ```text, ...     not run
#   <!-- docs-check: file NAME -->   before a block: the block is written to NAME in the scratch folder (a config
#                            that later commands use), not run
#   ... # ...; docs-check: skip      the line is not run (a training of minutes or hours, a benchmark, a command
#                            that waits for another process, or one that needs what this machine lacks); the
#                            comment says why
#   ... # ...; docs-check: add ARGS  the line runs with ARGS appended (e.g. --set fl.rounds=1: the document says so)
# BUILD (default build) is the build folder; the scratch folder's build/ links to it.  DOCS_TIMEOUT (default 300)
# bounds each command, in seconds; DOCS_FILES (a space-separated list) checks only those documents' commands.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
root=$PWD
build=${BUILD:-build}
export DPFL_DATA=${DPFL_DATA:-$root/data}
export DPFL_LIB=$root/$build/libdpfl.so
py=/usr/bin/python3
[ -x "$py" ] || py=python3
timeout_s=${DOCS_TIMEOUT:-300}
read -r -a docs <<<"${DOCS_FILES:-README.md docs/results.md docs/performance.md docs/architecture.md docs/config.md docs/python.md docs/api.md}"
tmp=$(mktemp -d /tmp/dpfl-docs-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ran=0 skipped=0

# extract DOC DIR: one item per command / block into DIR: NNNN.meta ("LINE KIND [EXTRA]") and NNNN.body
extract() {
  awk -v dir="$2" '
    function item(kind, extra) { n++; f = sprintf("%s/%04d", dir, n); printf "%d\t%s\t%s\n", NR, kind, extra > (f ".meta"); close(f ".meta"); return f ".body" }
    /^<!-- docs-check: file [^ ]+ -->$/ { pending = $4; next }
    /^```/ {
      if (!infence) {
        infence = 1; lang = substr($0, 4); body = ""
        if (pending != "") { mode = "file"; name = pending; pending = "" }
        else if (lang == "sh" || lang == "bash" || lang == "shell") mode = "sh"
        else if (lang == "python") { mode = "py"; start = NR }
        else mode = "none"
        cont = ""
        next
      }
      infence = 0
      if (mode == "file") { b = item("file", name); printf "%s", body > b; close(b) }
      if (mode == "py") { b = item("py", ""); printf "%s", body > b; close(b) }
      next
    }
    !infence { pending = ""; next }
    mode == "file" || mode == "py" { body = body $0 "\n"; next }
    mode == "sh" {
      line = cont $0
      if (line ~ /\\$/) { cont = substr(line, 1, length(line) - 1) " "; next }
      cont = ""
      if (line ~ /^[ \t]*(#.*)?$/) next
      if (line ~ /docs-check: skip/) {
        reason = line; sub(/^[^#]*#[ \t]*/, "", reason); sub(/;?[ \t]*docs-check: skip.*/, "", reason)
        b = item("skip", reason); cmd = line; sub(/[ \t]+#.*$/, "", cmd); printf "%s\n", cmd > b; close(b); next
      }
      if (match(line, /docs-check: add .*$/)) {
        add = substr(line, RSTART + 16); cmd = line; sub(/[ \t]+#.*$/, "", cmd); line = cmd " " add
      }
      b = item("cmd", ""); printf "%s\n", line > b; close(b)
    }
  ' "$1"
}

# sandbox NAME: a scratch folder linking the checkout's top-level entries but runs/ (and build/ to BUILD)
sandbox() {
  local d=$tmp/$1 e
  mkdir -p "$d"
  for e in "$root"/* "$root"/.[!.]*; do
    case ${e##*/} in runs|build|.git|'.[!.]*') continue ;; esac
    ln -s "$e" "$d/${e##*/}"
  done
  ln -s "$root/$build" "$d/build"
  printf '%s\n' "$d"
}

for doc in "${docs[@]}"; do
  t_begin "$doc: every fenced command runs"
  name=$(printf '%s' "$doc" | tr '/.' '__')
  items=$tmp/items_$name
  mkdir -p "$items"
  extract "$doc" "$items"
  box=$(sandbox "$name")
  for meta in "$items"/*.meta; do
    [ -e "$meta" ] || { echo "  $doc: no fenced command"; break; }
    IFS=$'\t' read -r line kind extra < "$meta"
    body=${meta%.meta}.body
    case $kind in
      file) cp "$body" "$box/$extra"; echo "  $doc:$line: wrote $extra" ;;
      skip) echo "  $doc:$line: skipped ($extra): $(cat "$body")"; skipped=$((skipped + 1)) ;;
      cmd|py)
        start=$(date +%s.%N)
        if [ "$kind" = cmd ]; then
          out=$(cd "$box" && PATH="$box/build:$PATH" timeout "$timeout_s" bash -o pipefail -c "$(cat "$body")" 2>&1 </dev/null); rc=$?
          what=$(cat "$body")
        else
          out=$(cd "$box" && PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" timeout "$timeout_s" "$py" "$body" 2>&1 </dev/null); rc=$?
          what="python block"
        fi
        secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        ran=$((ran + 1))
        if [ $rc -eq 0 ]; then echo "  $doc:$line: ok (${secs} s): $what"
        else t_fail "$doc:$line: exit $rc after ${secs} s: $what"; printf '%s\n' "$out" | tail -5; fi ;;
    esac
  done
  t_end
done

t_begin "docs/config.md is what tools/gen_config_doc.py writes from the key table"
out=$("$py" tools/gen_config_doc.py --check "$build" 2>&1) || t_fail "$out"
t_end

t_begin "every source path docs/architecture.md names exists"
n=0
for p in $(grep -o '`[a-z_./]*`' docs/architecture.md | tr -d '`' | grep -E '^(src|include|tests|examples|scripts|bench|python|fuzz|tools|docs)/' | sort -u); do
  n=$((n + 1))
  [ -e "$p" ] || t_fail "docs/architecture.md names $p, which does not exist"
done
[ "$n" -gt 30 ] || t_fail "only $n paths found in docs/architecture.md"
# the Modules list names files by module: "- `mech` — ... `sampler.c` ..." is src/mech/sampler.c
while read -r f; do
  n=$((n + 1))
  [ -e "$f" ] || t_fail "docs/architecture.md's Modules list names $f, which does not exist"
done < <(awk '/^## Modules/ { on = 1; next } /^## / { on = 0 } on && /^$/ { m = "" } on && /^- `[a-z]+` / { m = $2; gsub(/`/, "", m) }
              on && m != "" { s = $0; while (match(s, /`[a-z_0-9]+\.[ch]`/)) { print "src/" m "/" substr(s, RSTART + 1, RLENGTH - 2)
                                                                                  s = substr(s, RSTART + RLENGTH) } }' docs/architecture.md)
t_end

echo "docs commands: $ran run, $skipped skipped"
t_summary
