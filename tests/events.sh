#!/usr/bin/env bash
# Every run carries its events: short runs of every privacy mode on the heart-disease centres, then
# `dpfl account --event summary.json`, which recomputes each reported epsilon from the composition the run recorded
# and exits 1 when one differs.  Also: the recomputed numbers are the ones summary.json reports at its top level
# (epsilon / epsilon_ledger, client_epsilon, ddp.epsilon), and a tampered event is refused or disagrees.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
DPFL="$B/dpfl"
export DPFL_DATA=${DPFL_DATA:-$(pwd)/data}
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
tmp=$(mktemp -d /tmp/dpfl-events.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0; n=0
cat >"$tmp/base.ini" <<'INI'
[data]
dataset = heart
partition = natural
clients = 4
[model]
arch = logreg
[fl]
rounds = 3
sampling = all
local_steps = 4
batch = 16
lr = 0.5
[run]
seed = 3
eval_every = 3
INI
# name | overrides
modes=(
  "record|--set record_dp.enabled=yes --set record_dp.noise=1.1 --set record_dp.clip=0.5"
  "record-pld|--set record_dp.enabled=yes --set record_dp.noise=1.1 --set record_dp.accountant=pld"
  "record-fixed|--set record_dp.enabled=yes --set record_dp.noise=1.3 --set record_dp.sampler=fixed"
  "record-secure|--set record_dp.enabled=yes --set record_dp.noise=1.2 --set record_dp.secure_mode=yes"
  "replicated|--set record_dp.enabled=yes --set record_dp.noise=1.1 --set data.partition=iid --set data.samples_per_client=243"
  "client|--set client_dp.enabled=yes --set client_dp.noise=1.0 --set client_dp.clip=1 --set fl.sampling=poisson --set fl.client_rate=0.5"
  "client-pld|--set client_dp.enabled=yes --set client_dp.noise=1.0 --set client_dp.accountant=pld --set fl.sampling=fixed --set fl.clients_per_round=2"
  "ddp|--set client_dp.enabled=yes --set client_dp.noise=1.0 --set client_dp.mechanism=ddp --set fl.sampling=poisson --set fl.client_rate=0.75"
  "e2e|--set record_dp.enabled=yes --set record_dp.noise=1.5 --set record_dp.e2e=yes --set fl.sampling=poisson --set fl.client_rate=0.5"
  "e2e-cdp|--set record_dp.enabled=yes --set record_dp.noise=1.5 --set record_dp.e2e=yes --set client_dp.enabled=yes --set client_dp.noise=1.0"
  "rpdp|--set record_dp.enabled=yes --set record_dp.budgets=threelevels --set record_dp.delta=1e-3 --set record_dp.clip=0.5"
  "rpdp-filter|--set record_dp.enabled=yes --set record_dp.budgets=threelevels --set record_dp.delta=1e-3 --set record_dp.clip=0.5 --set record_dp.budget_policy=filter"
  "prifedsync|--set fl.algorithm=prifedsync --set record_dp.noise=1.0 --set fl.sampling=all"
  "cross-device|--set client_dp.enabled=yes --set client_dp.noise=1.0 --set client_dp.clip=1 --set fl.sampling=cross-device --set fl.client_rate=0.5 --set fl.participations=2 --set fl.rounds=4"
  "cross-device-record|--set record_dp.enabled=yes --set record_dp.noise=1.1 --set fl.sampling=cross-device --set fl.client_rate=0.25 --set fl.participations=1 --set fl.rounds=4"
  "scaffold|--set record_dp.enabled=yes --set record_dp.noise=1.1 --set fl.scaffold=yes"
)
for m in "${modes[@]}"; do
  name=${m%%|*}; sets=${m#*|}
  n=$((n + 1))
  # shellcheck disable=SC2086
  if ! "$DPFL" train "$tmp/base.ini" $sets --out "$tmp/$name" --force --quiet >"$tmp/$name.log" 2>&1; then
    echo "FAIL events $name: the run failed"; tail -3 "$tmp/$name.log"; fail=1; continue
  fi
  if ! "$DPFL" account --event "$tmp/$name/summary.json" >"$tmp/$name.acc" 2>&1; then
    echo "FAIL events $name: dpfl account --event"; cat "$tmp/$name.acc"; fail=1; continue
  fi
  # the events cover the numbers summary.json reports, and recompute them
  if ! "$PY" - "$tmp/$name/summary.json" "$name" <<'PY'
import json, subprocess, sys
path, name = sys.argv[1], sys.argv[2]
s = json.load(open(path))
ev = s.get("events", {})
want = {}
if "epsilon" in s and s.get("unit") == "record":
    want["record"] = s.get("epsilon_ledger", s["epsilon"])
if s.get("client_epsilon") is not None:
    want["client"] = s["client_epsilon"]
if s.get("client_epsilon_e2e") is not None:
    want["client_e2e"] = s["client_epsilon_e2e"]
if "ddp" in s:
    want["client"] = s["ddp"]["epsilon"]
if not want:
    sys.exit("%s: summary.json reports no epsilon" % name)
for k, v in want.items():
    if k not in ev:
        sys.exit("%s: summary.json reports %s epsilon %g but has no events.%s" % (name, k, v, k))
    e = ev[k].get("epsilon")
    if e is None or abs(e - v) > 1e-9 * max(1, abs(v)):
        sys.exit("%s: events.%s epsilon %r, summary reports %r" % (name, k, e, v))
    if not ev[k]["composed"]:
        sys.exit("%s: events.%s composes nothing" % (name, k))
if name == "rpdp-filter":
    (f,) = ev["record"]["composed"]
    rb = s["record_budgets"]
    # the worst record's filter: the run's order, the largest cap (its budget less the conversion), RDP only
    if not (f["kind"] == "rdp-filter" and f["alpha"] == rb["filter_order"] and ev["record"]["accountant"] == "rdp"
            and abs(f["cap"] + rb["filter_conversion"] - rb["budget"]["max"]) <= 1e-12 * rb["budget"]["max"]):
        sys.exit("%s: events.record %r is not the filter of the largest budget (%r)" % (name, f, rb["budget"]))
if name == "replicated" and not (ev["record"]["held_by"] > 1 and s.get("worst_record_copies", 1) == ev["record"]["held_by"]):
    sys.exit("%s: a replicated record must be held by several clients (held_by %r)" % (name, ev["record"]["held_by"]))
PY
  then fail=1; continue; fi
  # the tree alone (dp_accounting's DpEvent algebra: sampled leaves, self_composed, composed, held_by) gives the
  # same epsilons: every entry's "composed" list removed, the tree normalized by the library
  "$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))
for e in s["events"].values(): del e["composed"]
json.dump(s, open(sys.argv[2], "w"))' "$tmp/$name/summary.json" "$tmp/$name-tree.json"
  if ! "$DPFL" account --event "$tmp/$name-tree.json" >"$tmp/$name.tacc" 2>&1; then
    echo "FAIL events $name: the tree alone"; cat "$tmp/$name.tacc"; fail=1; continue
  fi
  echo "ok   events $name: $(tr '\n' ' ' <"$tmp/$name.acc")"
done
# tampering: a lower noise in the recorded event makes the recomputed epsilon disagree (exit 1, one line)
"$PY" - "$tmp/record/summary.json" "$tmp/tampered.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["events"]["record"]["composed"][0]["z"] *= 0.9
del s["events"]["record"]["tree"]
json.dump(s, open(sys.argv[2], "w"))
# the same noise lowered in the tree alone, and in the tree beside an untouched list
s = json.load(open(sys.argv[1]))
e = s["events"]["record"]
e["tree"]["composed"][0]["self_composed"]["event"]["poisson_sampled"]["event"]["gaussian"]["z"] *= 0.9
json.dump(s, open(sys.argv[2].replace("tampered", "tampered-both"), "w"))
del e["composed"]
json.dump(s, open(sys.argv[2].replace("tampered", "tampered-tree"), "w"))
PY
if "$DPFL" account --event "$tmp/tampered.json" >"$tmp/t.out" 2>&1 || ! grep -q "differs from the reported" "$tmp/t.out"; then
  echo "FAIL events tampered: a changed event was not caught"; cat "$tmp/t.out"; fail=1
else echo "ok   events tampered: caught"; fi
if "$DPFL" account --event "$tmp/tampered-tree.json" >"$tmp/t.out" 2>&1 || ! grep -q "differs from the reported" "$tmp/t.out"; then
  echo "FAIL events tampered tree: a changed tree was not caught"; cat "$tmp/t.out"; fail=1
else echo "ok   events tampered tree: caught"; fi
if "$DPFL" account --event "$tmp/tampered-both.json" >"$tmp/t.out" 2>&1 || ! grep -q '"tree" and "composed" differ at event 0' "$tmp/t.out"; then
  echo "FAIL events tree vs list: a tree that disagrees with its list was not refused"; cat "$tmp/t.out"; fail=1
else echo "ok   events tree vs list: $(cat "$tmp/t.out")"; fi
# the filter's cap lowered: caught; the filter's event given to PLD: refused in one line naming both
"$PY" - "$tmp/rpdp-filter/summary.json" "$tmp/filter-cap.json" "$tmp/filter-pld.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["events"]["record"]["composed"][0]["cap"] *= 0.9
del s["events"]["record"]["tree"]
json.dump(s, open(sys.argv[2], "w"))
s = json.load(open(sys.argv[1]))
s["events"]["record"]["accountant"] = "pld"
json.dump(s, open(sys.argv[3], "w"))
PY
if "$DPFL" account --event "$tmp/filter-cap.json" >"$tmp/fc.out" 2>&1 || ! grep -q "differs from the reported" "$tmp/fc.out"; then
  echo "FAIL events filter cap: a lowered cap was not caught"; cat "$tmp/fc.out"; fail=1
else echo "ok   events filter cap: caught"; fi
if "$DPFL" account --event "$tmp/filter-pld.json" >"$tmp/fp.out" 2>&1 || [ "$(wc -l <"$tmp/fp.out")" -ne 1 ] ||
   ! grep -q 'pld accountant does not support rdp-filter events' "$tmp/fp.out"; then
  echo "FAIL events filter pld: $(cat "$tmp/fp.out")"; fail=1
else echo "ok   events filter pld: $(cat "$tmp/fp.out")"; fi
# a malformed event: one line naming the file and the field
"$PY" - "$tmp/record/summary.json" "$tmp/bad.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
del s["events"]["record"]["composed"][0]["q"]
del s["events"]["record"]["tree"]
json.dump(s, open(sys.argv[2], "w"))
PY
if "$DPFL" account --event "$tmp/bad.json" >"$tmp/b.out" 2>&1 || [ "$(wc -l <"$tmp/b.out")" -ne 1 ] ||
   ! grep -q 'bad.json: events.record: event 0 (poisson) has no "q"' "$tmp/b.out"; then
  echo "FAIL events malformed: $(cat "$tmp/b.out")"; fail=1
else echo "ok   events malformed: $(cat "$tmp/b.out")"; fi
# calibration searches the aggregation mode's own event: adaptive clipping with sigma_b = 0.4 refuses the probe
# z = 1 (z must stay below 2 sigma_b), so the event is probed at 0.5 and converted back; the run lands on the target
if ! "$DPFL" train "$tmp/base.ini" --set client_dp.enabled=yes --set client_dp.clip=1 --set client_dp.clip_strategy=adaptive \
     --set client_dp.quantile_noise=0.4 --set client_dp.target_epsilon=40 --set fl.sampling=poisson --set fl.client_rate=0.5 \
     --out "$tmp/calibrated-adaptive" --force --quiet >"$tmp/ca.log" 2>&1 ||
   ! "$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))
e, z = s["client_epsilon"], s["client_noise"]
sys.exit(0 if 39.9 <= e <= 40 and z < 0.8 else "client epsilon %r at z %r: not calibrated to 40" % (e, z))' "$tmp/calibrated-adaptive/summary.json"; then
  echo "FAIL events calibrated adaptive: $(tail -1 "$tmp/ca.log")"; fail=1
else echo "ok   events calibrated adaptive: the mode's event, probed below its refusal, lands on the target"; fi
[ $fail -eq 0 ] && echo "events: $n modes recomputed from their events" || echo "events: FAILED"
exit $fail
