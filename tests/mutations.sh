#!/usr/bin/env bash
# Every line of tests/mutations.txt can be applied (so `make mutate` tests what it says): "name | path | old | new"
# with a unique name, a file that exists, old text that occurs in it exactly once, and new text that differs.  A
# change to a line a mutation points at fails here, in `make test`, not hours later in `make mutate`.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
t_begin every_mutation_applies_to_exactly_one_place
out=$(python3 - <<'PY'
import os
bad, names, n = [], set(), 0
for k, line in enumerate(open("tests/mutations.txt"), 1):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    parts = [x.strip() for x in line.split(" | ", 3)]
    if len(parts) != 4:
        bad.append(f"tests/mutations.txt:{k}: not 'name | path | old | new'"); continue
    name, path, old, new = parts
    old, new = old.replace("\\n", "\n"), new.replace("\\n", "\n")
    n += 1
    if name in names: bad.append(f"tests/mutations.txt:{k}: {name}: the name is used twice")
    names.add(name)
    if not os.path.isfile(path):
        bad.append(f"tests/mutations.txt:{k}: {name}: no file {path}"); continue
    c = open(path, encoding="utf-8").read().count(old)
    if c != 1: bad.append(f"tests/mutations.txt:{k}: {name}: its old text occurs {c} times in {path} (must be once)")
    if old == new: bad.append(f"tests/mutations.txt:{k}: {name}: old and new text are the same")
print("\n".join(bad) if bad else f"mutations: all {n} apply to exactly one place")
PY
) || t_fail "the check did not run"
echo "$out"
case "$out" in mutations:*) ;; *) t_fail "$(echo "$out" | wc -l) mutation(s) cannot be applied" ;; esac
t_end
t_summary
