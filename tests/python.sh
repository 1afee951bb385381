#!/usr/bin/env bash
# The Python binding's tests (python/tests, pytest) against $BUILD/libdpfl.so and $BUILD/dpfl; run by tests/run.sh
# as one more test binary, so it prints cmocka's summary lines for run.sh to count.  Without python3 or pytest it
# prints one line saying so and counts nothing -- except under CI=true, where scripts/setup.sh has installed
# python3-pytest and a missing pytest is a failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
py=""
for c in ${DPFL_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import pytest' >/dev/null 2>&1; then py=$c; break; fi
done
if [ -z "$py" ]; then
  why="python3 not found"
  command -v python3 >/dev/null 2>&1 && why="pytest is not importable by python3"
  if [ "${CI:-}" = true ]; then
    echo "python binding tests: $why (scripts/setup.sh installs python3-pytest)"
    echo "[  FAILED  ] 1 test(s)."
    exit 1
  fi
  echo "python binding tests: SKIPPED: $why (apt-get install python3-pytest, or make setup)"
  exit 0
fi
out=$(PYTHONDONTWRITEBYTECODE=1 DPFL_LIB="$PWD/$BUILD/libdpfl.so" DPFL_CLI="$PWD/$BUILD/dpfl" \
      "$py" -m pytest -q -p no:cacheprovider python/tests 2>&1); rc=$?
printf '%s\n' "$out"
last=$(printf '%s\n' "$out" | tail -n 1)
n_of() { printf '%s\n' "$last" | sed -n "s/.*\b\([0-9][0-9]*\) $1.*/\1/p" | head -n 1; }
p=$(n_of passed); f=$(n_of failed); e=$(n_of error)
p=${p:-0}; f=$((${f:-0} + ${e:-0}))
echo "[  PASSED  ] $p test(s)."
[ "$f" -gt 0 ] && echo "[  FAILED  ] $f test(s), listed above."
if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then echo "pytest exited with status $rc"; fi
exit $rc
