#!/usr/bin/env bash
# Issue 33's "no struct passed whole to more than ~10 functions", checked: scripts/struct_fanout.py --check 10 on
# src/ (no struct type but the value types it lists is taken whole by more than 10 function definitions outside its
# module, nor by more than 20 in all; no function of the round path over 80 lines), and the check itself on small
# trees it must refuse: a struct of fl/ taken by 11 functions in run/, one module passing its own struct to 21
# functions, an 81-line function in src/fl/round.c.  Run by `make test`.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

t_begin no_struct_is_taken_whole_by_more_than_10_functions_outside_its_module
out=$(python3 scripts/struct_fanout.py --check 10 2>&1) || t_fail "$out"
echo "$out"
t_end

# tree DIR TYPE_MODULE CALLER_MODULE N: a struct god_state defined in src/TYPE_MODULE/state.h, taken by N functions
# defined in src/CALLER_MODULE/use.c
tree() {
  mkdir -p "$1/src/$2" "$1/src/$3" "$1/scripts"
  printf 'typedef struct {\n    int a, b;\n} god_state;\n' > "$1/src/$2/state.h"
  : > "$1/src/$3/use.c"
  for i in $(seq 1 "$4"); do printf 'int use_%d(const god_state *s)\n{\n    return s->a + %d;\n}\n' "$i" "$i" >> "$1/src/$3/use.c"; done
  : > "$1/src/$2/state.c"
}
# refused DIR WHAT REASON: the check fails on the tree DIR (WHAT: what it holds), saying REASON
refused() {
  if out=$(python3 scripts/struct_fanout.py --root "$1" --check 10 2>&1); then t_fail "accepted $2: $out"
  else echo "$out" | grep -qF "$3" || t_fail "wrong reason for $2: $out"; fi
}
t_begin the_check_refuses_a_struct_that_other_modules_take_whole
tree "$tmp/a" fl run 11
refused "$tmp/a" "god_state taken by 11 functions of run/" "god_state (module fl) is taken whole by 11 functions outside fl/"
tree "$tmp/b" fl run 10
python3 scripts/struct_fanout.py --root "$tmp/b" --check 10 >/dev/null 2>&1 || t_fail "refused 10 functions outside"
t_end

t_begin the_check_refuses_a_struct_its_own_module_passes_everywhere
tree "$tmp/c" run run 21
refused "$tmp/c" "god_state taken by 21 functions of its own module" \
  "god_state (module run) is taken whole by 21 functions (at most 20)"
t_end

t_begin the_check_refuses_a_function_over_80_lines_in_the_round_path
tree "$tmp/d" fl fl 1
{ echo 'int round_all(int x)'; echo '{'; for i in $(seq 1 78); do echo "    x += $i;"; done; echo '}'; } > "$tmp/d/src/fl/round.c"
refused "$tmp/d" "an 81-line function in src/fl/round.c" "81  src/fl/round.c:1 round_all"
t_end
t_summary
