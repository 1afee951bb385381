#!/usr/bin/env bash
# Run libFuzzer harnesses one after another: scripts/fuzz.sh SECONDS build/fuzz/fuzz_NAME...
# Each starts from its committed seeds (fuzz/corpus/NAME, read-only) plus what earlier runs found
# (build/fuzz/corpus/NAME, where new inputs go), with fuzz/NAME.dict when there is one.  A crash, leak, UB report
# or timeout is saved as build/fuzz/artifacts/NAME-* and fails the script; the log is build/fuzz/logs/NAME.log.
# One process per harness (-jobs/-workers not used) and a private temp dir each, so it is safe beside other work.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=$1; shift
mkdir -p build/fuzz/artifacts build/fuzz/logs
failed=0
for bin in "$@"; do
  name=$(basename "$bin")
  work=build/fuzz/corpus/$name
  mkdir -p "$work"
  dict=(); [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
  log=build/fuzz/logs/$name.log
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$name-" "${dict[@]}" "$work" "fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    failed=1
    echo "fuzz: $name FAILED (exit $rc) after ${execs:-?} executions; log $log:" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5 >&2
  else
    echo "fuzz: $name: ${execs:-?} executions in ${secs} s, no crash"
  fi
done
exit $failed
