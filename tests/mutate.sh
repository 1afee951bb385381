#!/usr/bin/env bash
# Mutation check (`make mutate`; not run by CI): for every line of tests/mutations.txt, apply the one-line change to
# a scratch copy of the working tree, rebuild, run the test suite (the C test binaries first, then, if they all
# pass, the whole of `make test`), and require at least one failing test.  Prints
# one line per mutation and the score; exits 1 unless every mutation was killed.
#   tests/mutate.sh [NAME...]   only the named mutations
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=$(mktemp -d /tmp/dpfl-mutate.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
total=0; killed=0; survived=""
while IFS= read -r line <&3; do # fd 3: a test that reads stdin (mpirun does) must not eat the list
  case "$line" in ''|'#'*) continue ;; esac
  name=$(printf '%s' "$line" | awk -F' [|] ' '{print $1}')
  if [ $# -gt 0 ]; then
    want=0; for n in "$@"; do [ "$n" = "$name" ] && want=1; done
    [ $want -eq 1 ] || continue
  fi
  total=$((total + 1))
  rm -rf "$scratch/tree"; mkdir -p "$scratch/tree"
  # the working tree (tracked and untracked, not ignored) plus the current build for incremental rebuilds
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -a -t "$scratch/tree" 2>/dev/null
  [ -d build ] && cp -a build "$scratch/tree/build"
  mkdir -p "$scratch/tree/data"; [ -e data/cache ] && ln -s "$root/data/cache" "$scratch/tree/data/cache"
  if ! python3 - "$scratch/tree" "$line" <<'PY'
import sys
root, line = sys.argv[1], sys.argv[2]
name, path, old, new = [x.strip() for x in line.split(' | ', 3)]
old, new = old.replace('\\n', '\n'), new.replace('\\n', '\n')
p = root + '/' + path
s = open(p).read()
if s.count(old) != 1:
    sys.exit('mutate: %s: the text occurs %d times in %s (must be once)' % (name, s.count(old), path))
open(p, 'w').write(s.replace(old, new))
PY
  then echo "ERROR    $name (stale mutation: fix tests/mutations.txt)"; survived="$survived $name"; continue; fi
  (cd "$scratch/tree" && touch "$(printf '%s' "$line" | awk -F' [|] ' '{print $2}')" &&
     make -s -j2 build/dpfl $(ls tests/test_*.c | sed 's|tests/\(.*\)\.c|build/tests/\1|') >"$scratch/build.log" 2>&1)
  if [ $? -ne 0 ]; then echo "ERROR    $name (the mutant does not build: fix tests/mutations.txt)"; tail -3 "$scratch/build.log"; survived="$survived $name"; continue; fi
  (cd "$scratch/tree" && BUILD=build timeout 600 tests/run.sh build/tests/test_* >"$scratch/test.log" 2>&1)
  rc=$?
  # the C tests missed it: the rest of `make test` (the shell tests, the Python binding and its brute-force
  # reference suite, which pins some accountants' bounds) before calling it a survivor
  if [ $rc -eq 0 ]; then
    (cd "$scratch/tree" && DPFL_DATA="${DPFL_DATA:-$root/data}" timeout 1800 make -s -j2 test >"$scratch/test.log" 2>&1)
    rc=$?
  fi
  if [ $rc -ne 0 ]; then
    failed=$(grep -o '^\[  FAILED  \] [A-Za-z_0-9]*$' "$scratch/test.log" | awk '{print $4}' | sort -u | head -3 | tr '\n' ' ')
    [ -z "$failed" ] && failed=$(grep -m1 'exited with status' "$scratch/test.log")
    [ -z "$failed" ] && failed=$(grep -m1 -E 'FAIL|failed|Error' "$scratch/test.log" | cut -c1-120)
    echo "KILLED   $name ($failed)"; killed=$((killed + 1))
  else
    echo "SURVIVED $name"; survived="$survived $name"
  fi
done 3< tests/mutations.txt
echo "mutation score: $killed / $total killed${survived:+ (survived:$survived)}"
[ "$killed" -eq "$total" ]
