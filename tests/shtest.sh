# Sourced by the shell tests (tests/examples.sh, tests/install.sh): cmocka-style lines, so that tests/run.sh counts
# them like the C suites ("[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s), listed below:").
#   t_begin NAME; ...checks calling t_fail MESSAGE...; t_end      one test
#   t_summary                                                     the totals; exits 1 if any test failed
t_passed=0 t_failed=() t_name="" t_ok=1
t_begin() { t_name=$1 t_ok=1; echo "[ RUN      ] $t_name"; }
t_fail() { echo "$t_name: $*"; t_ok=0; }
t_end() {
  if [ "$t_ok" = 1 ]; then echo "[       OK ] $t_name"; t_passed=$((t_passed + 1))
  else echo "[  FAILED  ] $t_name"; t_failed+=("$t_name"); fi
}
t_summary() {
  echo "[==========] $((t_passed + ${#t_failed[@]})) test(s) run."
  echo "[  PASSED  ] $t_passed test(s)."
  if [ ${#t_failed[@]} -gt 0 ]; then
    echo "[  FAILED  ] ${#t_failed[@]} test(s), listed below:"
    for f in "${t_failed[@]}"; do echo "[  FAILED  ] $f"; done
    exit 1
  fi
  exit 0
}
# t_close A B REL: |A - B| <= REL |B| (numbers as printed); t_le A B: A <= B; t_lt A B: A < B
t_close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; m = b; if (d < 0) d = -d; if (m < 0) m = -m;
                                                        exit !(a != "" && b != "" && d <= r * m) }'; }
t_le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }
t_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }'; }
# json_num KEY < JSON: the number after "KEY": in one line of JSON
json_num() { sed -n "s/.*\"$1\":\([-+0-9.eE]*\).*/\1/p"; }
