#!/usr/bin/env bash
# mpirun -np R dpfl train (src/cli/mpi_train.c): the same model bytes and epsilons as one process for a seed, with
# dropouts and client-level DP, kept client state, input transforms, helper models, rPDP-FL budgets (the filter's
# per-record spend too, across a resume and a kill), distributed DP (secure aggregation over MPI messages) and
# DP-SCAFFOLD, on 2 and 3
# ranks, and after a resume; a setting the ranks cannot share is refused on one line.  Run by
# `make test`; skipped, saying so, where mpirun or an MPI build is missing (CI installs OpenMPI: scripts/setup.sh).
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
B=${BUILD:-build}
dpfl=$B/dpfl
if ! command -v mpirun >/dev/null || ! pkg-config --exists ompi-c 2>/dev/null; then
  echo "tests/mpi.sh: SKIP (no mpirun or OpenMPI headers: scripts/setup.sh installs openmpi-bin libopenmpi-dev)"
  t_summary
fi
tmp=$(mktemp -d /tmp/dpfl-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
MPIRUN=(mpirun --oversubscribe -np)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np)
cat >"$tmp/run.ini" <<'INI'
[data]
dataset = synthetic
partition = iid
clients = 12
[model]
arch = mlp:20-16-10
[fl]
rounds = 4
sampling = poisson
client_rate = 0.5
local_steps = 3
batch = 8
lr = 0.2
[client_dp]
enabled = yes
clip = 0.5
noise = 1.1
dropout = 0.2
delta = 1e-2
[record_dp]
enabled = yes
clip = 1.0
noise = 1.0
delta = 1e-5
[run]
seed = 7
threads = 1
eval_every = 2
INI
eps() { sed -n "s/.*\"$1\":[[:space:]]*\([-+0-9.eE]*\).*/\1/p" "$2" | head -1; }

t_begin "mpirun: 2 and 3 ranks give one process's model bytes and epsilons (client sampling, dropouts, both levels)"
"$dpfl" train "$tmp/run.ini" --out "$tmp/one" --quiet >"$tmp/one.log" 2>&1 || t_fail "one process: $(tail -1 "$tmp/one.log")"
for np in 2 3; do
  if ! "${MPIRUN[@]}" $np "$dpfl" train "$tmp/run.ini" --out "$tmp/np$np" --quiet >"$tmp/np$np.log" 2>&1; then
    t_fail "$np ranks: $(tail -2 "$tmp/np$np.log")"; continue
  fi
  cmp -s "$tmp/one/model.bin" "$tmp/np$np/model.bin" || t_fail "$np ranks: model.bin differs from one process's"
  for k in client_epsilon epsilon; do
    [ "$(eps $k "$tmp/one/summary.json")" = "$(eps $k "$tmp/np$np/summary.json")" ] ||
      t_fail "$np ranks: $k $(eps $k "$tmp/np$np/summary.json") != $(eps $k "$tmp/one/summary.json")"
  done
  [ -n "$(eps client_epsilon "$tmp/np$np/summary.json")" ] || t_fail "$np ranks: no client_epsilon in summary.json"
done
t_end

t_begin "mpirun: cross-device cohorts (each client in exactly 2 of 8 rounds) give one process's bytes and epsilons"
sed -e 's/^rounds = 4$/rounds = 8/' -e 's/^sampling = poisson$/sampling = cross-device/' \
    -e 's/^client_rate = 0.5$/client_rate = 0.25\nparticipations = 2/' "$tmp/run.ini" >"$tmp/xd.ini"
grep -q "^participations = 2$" "$tmp/xd.ini" || t_fail "xd.ini: the sed did not apply"
"$dpfl" train "$tmp/xd.ini" --out "$tmp/xd-one" --quiet >"$tmp/xd-one.log" 2>&1 || t_fail "one process: $(tail -1 "$tmp/xd-one.log")"
if "${MPIRUN[@]}" 3 "$dpfl" train "$tmp/xd.ini" --out "$tmp/xd-np3" --quiet >"$tmp/xd-np3.log" 2>&1; then
  cmp -s "$tmp/xd-one/model.bin" "$tmp/xd-np3/model.bin" || t_fail "3 ranks: model.bin differs from one process's"
  for k in client_epsilon epsilon; do
    [ -n "$(eps $k "$tmp/xd-one/summary.json")" ] || t_fail "no $k in summary.json"
    [ "$(eps $k "$tmp/xd-one/summary.json")" = "$(eps $k "$tmp/xd-np3/summary.json")" ] ||
      t_fail "3 ranks: $k $(eps $k "$tmp/xd-np3/summary.json") != $(eps $k "$tmp/xd-one/summary.json")"
  done
else
  t_fail "3 ranks: $(tail -2 "$tmp/xd-np3.log")"
fi
t_end

t_begin "mpirun: each rank holds only its own clients' files (data.source_rows); rank 0 none"
# examples/own_csv.ini: four centres' CSV files, one client each; with 3 ranks, rank 1 trains clients 0 and 2, rank 2
# clients 1 and 3 (client k on rank 1 + k mod 2).  Each rank runs in its own folder holding just those files.
names=(cleveland hungarian switzerland va)
mkdir -p "$tmp/r0"
for r in 1 2; do mkdir -p "$tmp/r$r/data/heart-disease"; done
for k in 0 1 2 3; do cp "data/heart-disease/processed.${names[$k]}.data" "$tmp/r$((1 + k % 2))/data/heart-disease/"; done
here=$PWD
bin=$(cd "$(dirname "$dpfl")" && pwd)/$(basename "$dpfl")
args=(train "$here/examples/own_csv.ini" --set fl.rounds=4 --out "$tmp/own3" --quiet)
"$dpfl" train examples/own_csv.ini --set fl.rounds=4 --out "$tmp/own1" --quiet >"$tmp/own1.log" 2>&1 ||
  t_fail "one process: $(tail -1 "$tmp/own1.log")"
if "${MPIRUN[@]}" 1 --wdir "$tmp/r0" "$bin" "${args[@]}" : -np 1 --wdir "$tmp/r1" "$bin" "${args[@]}" \
     : -np 1 --wdir "$tmp/r2" "$bin" "${args[@]}" >"$tmp/own3.log" 2>&1; then
  cmp -s "$tmp/own1/model.bin" "$tmp/own3/model.bin" || t_fail "model.bin differs from one process's"
  [ "$(eps epsilon "$tmp/own1/summary.json")" = "$(eps epsilon "$tmp/own3/summary.json")" ] || t_fail "epsilon differs"
else
  t_fail "3 ranks with their own files: $(tail -2 "$tmp/own3.log")"
fi
# rank 2 without client 3's file: refused, naming it
rm "$tmp/r2/data/heart-disease/processed.va.data"
out=$("${MPIRUN[@]}" 1 --wdir "$tmp/r0" "$bin" "${args[@]}" --force : -np 1 --wdir "$tmp/r1" "$bin" "${args[@]}" --force \
      : -np 1 --wdir "$tmp/r2" "$bin" "${args[@]}" --force 2>&1) && t_fail "a rank without its client's file ran"
grep -q "cannot open data file (data/heart-disease/processed.va.data): MPI rank 2 trains client 3" <<<"$out" ||
  t_fail "no clear error: $out"
# a partition drawn by label needs every record's label: refused where files are absent
out=$("${MPIRUN[@]}" 1 --wdir "$tmp/r0" "$bin" "${args[@]}" --force --set data.partition=shards --set data.shards=1 \
      : -np 1 --wdir "$tmp/r1" "$bin" "${args[@]}" --force --set data.partition=shards --set data.shards=1 2>&1) &&
  t_fail "a label-drawn partition ran with files absent"
grep -q "data.partition draws by label, which needs every record's label" <<<"$out" || t_fail "no clear error: $out"
t_end

# the same model bytes and epsilons as one process for CONFIG args..., on 2 and 3 ranks
same_as_one() {
  local name=$1 ini=$2; shift 2
  "$dpfl" train "$ini" --out "$tmp/$name-one" --quiet "$@" >"$tmp/$name-one.log" 2>&1 ||
    { t_fail "$name, one process: $(tail -1 "$tmp/$name-one.log")"; return; }
  for np in 2 3; do
    if ! "${MPIRUN[@]}" $np "$dpfl" train "$ini" --out "$tmp/$name-np$np" --quiet "$@" >"$tmp/$name-np$np.log" 2>&1; then
      t_fail "$name, $np ranks: $(tail -2 "$tmp/$name-np$np.log")"; continue
    fi
    cmp -s "$tmp/$name-one/model.bin" "$tmp/$name-np$np/model.bin" || t_fail "$name, $np ranks: model.bin differs"
    for k in client_epsilon epsilon; do
      [ "$(eps $k "$tmp/$name-one/summary.json")" = "$(eps $k "$tmp/$name-np$np/summary.json")" ] ||
        t_fail "$name, $np ranks: $k $(eps $k "$tmp/$name-np$np/summary.json") != $(eps $k "$tmp/$name-one/summary.json")"
    done
  done
}

t_begin "mpirun: per-client state stays on the worker that holds the client: kept optimizer state, input transforms, helper models, personal layers"
# momentum kept per client and PrivateFL's transforms (trained on the worker, never sent); PriFedSync's helper
# models (synced on the worker with the model rank 0 broadcasts after each release; clients sit rounds out at q = 0.5)
same_as_one keep "$tmp/run.ini" --set fl.optimizer=sgd --set fl.momentum=0.9 --set fl.client_state=keep --set model.transform=affine
same_as_one helper "$tmp/run.ini" --set fl.personalization=helper --set fl.helper_alpha=0.3 --set fl.weighting=uniform
# fl.personal: FedGN's GroupNorm layers stay on the worker too
same_as_one personal "$tmp/run.ini" --set model.arch=net:fc16,gn4,relu,fc10 --set fl.personal=norm
t_end

t_begin "mpirun: the workers' client states reach rank 0's checkpoint: a resume, across ranks or in one process, ends as one run"
# 2 of 4 rounds on 3 ranks, then --resume to 4 (on 3 ranks; and the same checkpoint in one process): the 4-round
# run's bytes.  Without the states in the checkpoint the resumed clients would start from fresh state.
st=(--set fl.optimizer=sgd --set fl.momentum=0.9 --set fl.client_state=keep --set model.transform=affine
    --set fl.personalization=helper --set fl.helper_alpha=0.3)
"$dpfl" train "$tmp/run.ini" --out "$tmp/st-ref" --quiet "${st[@]}" >"$tmp/st-ref.log" 2>&1 || t_fail "one process"
for how in mpi one; do
  "${MPIRUN[@]}" 3 "$dpfl" train "$tmp/run.ini" --out "$tmp/st-$how" --quiet "${st[@]}" --set fl.rounds=2 \
    >"$tmp/st-$how.log" 2>&1 || { t_fail "2 rounds on 3 ranks: $(tail -2 "$tmp/st-$how.log")"; continue; }
  if [ $how = mpi ]; then
    "${MPIRUN[@]}" 3 "$dpfl" train --resume "$tmp/st-$how" --set fl.rounds=4 --quiet >>"$tmp/st-$how.log" 2>&1
  else
    "$dpfl" train --resume "$tmp/st-$how" --set fl.rounds=4 --quiet >>"$tmp/st-$how.log" 2>&1
  fi || { t_fail "resume ($how): $(tail -2 "$tmp/st-$how.log")"; continue; }
  cmp -s "$tmp/st-ref/model.bin" "$tmp/st-$how/model.bin" || t_fail "resumed ($how): model.bin differs from the 4-round run's"
  [ "$(eps epsilon "$tmp/st-ref/summary.json")" = "$(eps epsilon "$tmp/st-$how/summary.json")" ] || t_fail "epsilon ($how)"
done
t_end

t_begin "mpirun: rPDP-FL budgets: each worker replays the levels' opt-outs round by round (dropout, minimum, rpdp policies)"
# budget_rounds = 3 of 6 rounds: the levels opt out in the run, so a worker that did not replay them would train
# records rank 0 has stopped charging
cat >"$tmp/rpdp.ini" <<'INI'
[data]
dataset = synthetic
clients = 6
[model]
arch = mlp:20-16-10
[fl]
rounds = 6
sampling = poisson
client_rate = 0.5
local_steps = 3
batch = 16
lr = 0.2
[record_dp]
enabled = yes
clip = 1.0
delta = 1e-3
budgets = threelevels
[run]
seed = 7
threads = 1
allow_large_delta = yes
INI
same_as_one rpdp "$tmp/rpdp.ini" --set record_dp.budget_policy=dropout --set record_dp.budget_rounds=3
grep -q '"opted_out":[[:space:]]*[1-9]' "$tmp/rpdp-one/summary.json" || t_fail "no level opted out: the replay is not exercised"
same_as_one rpdpmin "$tmp/rpdp.ini" --set record_dp.budget_policy=minimum
same_as_one rpdpdef "$tmp/rpdp.ini"
# a resume that changes fl.rounds plans a run without budget_rounds again: rank 0 keeps its checkpoint's plan, and a
# worker's own plan (for the new rounds) is refused -- it trained at rates rank 0 did not account (an audit)
"$dpfl" train "$tmp/rpdp.ini" --out "$tmp/rpdp-res" --quiet --set fl.rounds=3 >"$tmp/rpdp-res.log" 2>&1 ||
  t_fail "rPDP-FL, 3 rounds: $(tail -1 "$tmp/rpdp-res.log")"
out=$("${MPIRUN[@]}" 3 "$dpfl" train --resume "$tmp/rpdp-res" --set fl.rounds=5 --quiet 2>&1) &&
  t_fail "an mpirun resume under another rPDP-FL plan exited 0"
grep -q "its rPDP-FL plan differs from rank 0's" <<<"$out" || t_fail "rPDP-FL plan not refused: $(tail -2 <<<"$out")"
t_end

t_begin "mpirun: a resumed run's workers add the noise rank 0 accounts (its checkpoint's, not one calibrated anew)"
# record_dp.target_epsilon calibrates z for fl.rounds; stopped early (SIGTERM after the first checkpoint) and resumed
# with fewer rounds, rank 0 keeps the checkpoint's z while a worker's own set-up calibrates for the new rounds (less
# noise than rank 0 reported, an audit): now every worker takes rank 0's z, so mpirun resumes as one process does
cat >"$tmp/cal.ini" <<'INI'
[data]
dataset = synthetic
clients = 6
[model]
arch = mlp:20-64-10
[fl]
rounds = 60
sampling = poisson
client_rate = 0.5
local_steps = 40
batch = 8
lr = 0.1
[record_dp]
enabled = yes
clip = 1.0
target_epsilon = 4
delta = 1e-3
[run]
seed = 7
threads = 1
allow_large_delta = yes
INI
"$dpfl" train "$tmp/cal.ini" --out "$tmp/cal" --quiet >"$tmp/cal.log" 2>&1 &
cp=$!
for _ in $(seq 1 600); do [ -f "$tmp/cal/checkpoint.bin" ] && break; sleep 0.05; done
kill -TERM $cp 2>/dev/null; wait $cp
r=$(grep -c . "$tmp/cal/metrics.jsonl" 2>/dev/null || echo 0)
if [ "$r" -ge 1 ] && [ "$r" -le 57 ]; then
  cp -r "$tmp/cal" "$tmp/cal-one"; cp -r "$tmp/cal" "$tmp/cal-mpi"
  "$dpfl" train --resume "$tmp/cal-one" --set fl.rounds=$((r + 2)) --quiet >>"$tmp/cal.log" 2>&1 ||
    t_fail "one process, resume: $(tail -1 "$tmp/cal.log")"
  "${MPIRUN[@]}" 3 "$dpfl" train --resume "$tmp/cal-mpi" --set fl.rounds=$((r + 2)) --quiet >>"$tmp/cal.log" 2>&1 ||
    t_fail "3 ranks, resume: $(tail -1 "$tmp/cal.log")"
  cmp -s "$tmp/cal-one/model.bin" "$tmp/cal-mpi/model.bin" || t_fail "resumed on 3 ranks: model.bin differs from one process's"
  cmp -s "$tmp/cal-one/metrics.jsonl" "$tmp/cal-mpi/metrics.jsonl" || t_fail "resumed on 3 ranks: metrics differ"
else
  t_fail "the calibrated run was not stopped mid-run (rounds released: $r of 60)"
fi
t_end

t_begin "mpirun: distributed DP runs secure aggregation over MPI messages (rank 0 sees masked inputs only)"
# no dropout (every round released), then client_dp.dropout = 0.2 with kept state: a dropout advertises and shares
# its keys and sends no input, as in one process, so some rounds release nothing there and here alike
same_as_one ddp "$tmp/run.ini" --set client_dp.mechanism=ddp --set client_dp.noise=0.8 --set client_dp.clip=1.0 \
  --set client_dp.dropout=0 --set client_dp.ddp_tolerated_dropout=0.25
[ "$(grep -c '"ddp_released":[[:space:]]*true' "$tmp/ddp-np3/metrics.jsonl")" -ge 2 ] || t_fail "ddp: rounds were not released"
same_as_one ddpdrop "$tmp/run.ini" --set client_dp.mechanism=ddp --set client_dp.noise=0.8 --set client_dp.clip=1.0 \
  --set client_dp.dropout=0.2 --set client_dp.ddp_tolerated_dropout=0.25 --set fl.client_state=keep \
  --set fl.optimizer=sgd --set fl.momentum=0.9
t_end

t_begin "mpirun: DP-SCAFFOLD: rank 0 keeps c and broadcasts it with the model, each worker its clients' c_i; a resume ends as one run"
# record-level DP only (client_dp off); clients sit rounds out at q = 0.5, so a c not broadcast (zero on the
# workers), not updated on rank 0 or missing from its checkpoint changes the bytes
sc=(--set client_dp.enabled=no --set fl.scaffold=yes)
same_as_one scaffold "$tmp/run.ini" "${sc[@]}"
if "${MPIRUN[@]}" 3 "$dpfl" train "$tmp/run.ini" --out "$tmp/sc-res" --quiet "${sc[@]}" --set fl.rounds=2 \
     >"$tmp/sc-res.log" 2>&1 &&
   "${MPIRUN[@]}" 3 "$dpfl" train --resume "$tmp/sc-res" --set fl.rounds=4 --quiet >>"$tmp/sc-res.log" 2>&1; then
  cmp -s "$tmp/scaffold-one/model.bin" "$tmp/sc-res/model.bin" || t_fail "scaffold resumed on 3 ranks: model.bin differs"
  [ "$(eps epsilon "$tmp/scaffold-one/summary.json")" = "$(eps epsilon "$tmp/sc-res/summary.json")" ] ||
    t_fail "scaffold resumed on 3 ranks: epsilon differs"
else
  t_fail "scaffold, 2 rounds then a resume on 3 ranks: $(tail -2 "$tmp/sc-res.log")"
fi
t_end

t_begin "mpirun: what cannot run across ranks is refused on one line saying why"
out=$("${MPIRUN[@]}" 2 "$dpfl" train "$tmp/run.ini" --out "$tmp/ddp" --quiet --set client_dp.mechanism=ddp \
      --set client_dp.ddp_secagg=no 2>&1) && t_fail "distributed DP without secure aggregation under mpirun exited 0"
grep -q "client_dp.ddp_secagg = no would send each client's noisy update to rank 0 in the clear" <<<"$out" ||
  t_fail "no clear error: $out"
t_end

t_begin "mpirun: rPDP-FL filter: each record's spend, charged on its worker, reaches rank 0's checkpoint every round and goes back on a resume"
# the individual Renyi filter (Feldman-Zrnic) with 4 planned rounds: most records spend their cap in them and leave
# the sampler, the others train on past the plan.  A run that forgot a record's spend (rank 0's checkpoint without
# the workers' charges, or a resumed worker without the checkpoint's) would sample spent records again: past round
# 4 the bytes differ.  Compared with one process: model.bin, metrics.jsonl (every round's epsilon), summary.json's
# record_budgets and every record's spend in checkpoint.bin.
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
# RUN's per-record filter spend, hex: the f64 of every record, just before the round's metrics line (checkpoint.bin
# layout, src/run/checkpoint.c); an error unless some record has spent something
spend() {
  "$PY" - "$1" <<'PYS'
import json, sys
d = sys.argv[1]
ck = open(d + '/checkpoint.bin', 'rb').read()
line = open(d + '/metrics.jsonl', 'rb').read().rstrip(b'\n').split(b'\n')[-1]
n = int(json.load(open(d + '/summary.json'))['record_budgets']['records'])
at = ck.rfind(line)
if at < 8 * n: sys.exit('no metrics line in ' + d + '/checkpoint.bin')
sp = ck[at - 8 * n:at]
if not any(sp): sys.exit('no record of ' + d + ' spent anything')
print(sp.hex())
PYS
}
budgets() { "$PY" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1] + "/summary.json"))["record_budgets"], sort_keys=True))' "$1"; }
# RUN equals REF: model bytes, metrics lines, the record budgets' report and every record's spend
same_filter() {
  local what=$1 ref=$2 d=$3
  cmp -s "$ref/model.bin" "$d/model.bin" || t_fail "$what: model.bin differs"
  cmp -s "$ref/metrics.jsonl" "$d/metrics.jsonl" || t_fail "$what: metrics.jsonl differs"
  [ "$(budgets "$ref")" = "$(budgets "$d")" ] || t_fail "$what: summary.json's record_budgets differ"
  local a b
  a=$(spend "$ref" 2>&1) || t_fail "$what: $a"
  b=$(spend "$d" 2>&1) || t_fail "$what: $b"
  [ "$a" = "$b" ] || t_fail "$what: the per-record spend in checkpoint.bin differs from one process's"
}
flt=(--set record_dp.budget_policy=filter --set record_dp.budget_rounds=4)
same_as_one flt "$tmp/rpdp.ini" "${flt[@]}" --set fl.rounds=4
grep -q '"filtered_out":[[:space:]]*[1-9]' "$tmp/flt-one/summary.json" || t_fail "no record was filtered out"
for np in 2 3; do [ -d "$tmp/flt-np$np" ] && same_filter "$np ranks" "$tmp/flt-one" "$tmp/flt-np$np"; done
# with distributed DP, kept state and dropouts: round 2 samples one client, so nothing can be released and nobody trains
# (in one process as with dpfl serve): no worker may train it either (its spend, its momentum would move)
ddp=(--set client_dp.enabled=yes --set client_dp.mechanism=ddp --set client_dp.noise=0.8 --set client_dp.clip=1.0
     --set client_dp.dropout=0.2 --set client_dp.ddp_tolerated_dropout=0.25 --set client_dp.delta=1e-2
     --set fl.client_state=keep --set fl.optimizer=sgd --set fl.momentum=0.9)
same_as_one fltddp "$tmp/rpdp.ini" "${flt[@]}" --set fl.rounds=6 "${ddp[@]}"
grep -q '"participants":[[:space:]]*1[,}]' "$tmp/fltddp-one/diagnostics.jsonl" || t_fail "no round of one client"
for np in 2 3; do [ -d "$tmp/fltddp-np$np" ] && same_filter "distributed DP, $np ranks" "$tmp/fltddp-one" "$tmp/fltddp-np$np"; done
# 4 rounds, then --resume to 7: on 3 ranks from 3 ranks' checkpoint, in one process from it, on 3 ranks from one
# process's checkpoint
"$dpfl" train "$tmp/rpdp.ini" --out "$tmp/flt7" --quiet "${flt[@]}" --set fl.rounds=7 >"$tmp/flt7.log" 2>&1 ||
  t_fail "7 rounds, one process: $(tail -1 "$tmp/flt7.log")"
for how in mpi-mpi mpi-one one-mpi; do
  d=$tmp/flt-$how
  if [ "${how%-*}" = mpi ]; then "${MPIRUN[@]}" 3 "$dpfl" train "$tmp/rpdp.ini" --out "$d" --quiet "${flt[@]}" --set fl.rounds=4
  else "$dpfl" train "$tmp/rpdp.ini" --out "$d" --quiet "${flt[@]}" --set fl.rounds=4; fi >"$d.log" 2>&1 ||
    { t_fail "$how: 4 rounds: $(tail -2 "$d.log")"; continue; }
  if [ "${how#*-}" = mpi ]; then "${MPIRUN[@]}" 3 "$dpfl" train --resume "$d" --set fl.rounds=7 --quiet
  else "$dpfl" train --resume "$d" --set fl.rounds=7 --quiet; fi >>"$d.log" 2>&1 ||
    { t_fail "$how: resume: $(tail -2 "$d.log")"; continue; }
  same_filter "resumed ($how)" "$tmp/flt7" "$d"
done
# killed: worker rank 2 stopped once round 1 is out, so rank 0 waits in a round that rank 1 has trained (its
# records' spend charged there, not yet in rank 0's checkpoint); rank 0 SIGKILLed there, the job with it.  The
# resume redoes that round from the checkpoint's spend: the uninterrupted run's bytes, metrics and spend.  40
# rounds, so that the stop lands mid-run on a fast or a busy machine too.
"$dpfl" train "$tmp/rpdp.ini" --out "$tmp/flt40" --quiet "${flt[@]}" --set fl.rounds=40 >"$tmp/flt40.log" 2>&1 ||
  t_fail "40 rounds, one process: $(tail -1 "$tmp/flt40.log")"
d=$tmp/flt-kill
"${MPIRUN[@]}" 3 "$dpfl" train "$tmp/rpdp.ini" --out "$d" --quiet "${flt[@]}" --set fl.rounds=40 >"$d.log" 2>&1 &
mp=$!
r0=; r2=
for _ in $(seq 1 3000); do
  if [ -z "$r0" ] || [ -z "$r2" ]; then
    for c in $(pgrep -P $mp); do
      case $(tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep '^OMPI_COMM_WORLD_RANK=') in
        *=0) r0=$c ;; *=2) r2=$c ;;
      esac
    done
  fi
  [ -n "$r0" ] && [ -n "$r2" ] && [ -s "$d/metrics.jsonl" ] && break
  sleep 0.01
done
if [ -z "$r0" ] || [ -z "$r2" ]; then
  t_fail "kill: no rank 0 or rank 2 among mpirun's children"
else
  kill -STOP "$r2"; sleep 1
  lines=$(wc -l <"$d/metrics.jsonl")
  kill -9 "$r0"; kill -CONT "$r2" 2>/dev/null
  wait $mp && t_fail "kill: mpirun exited 0 after rank 0 was killed"
  [ "$lines" -ge 1 ] && [ "$lines" -lt 40 ] || t_fail "kill: not mid-run ($lines of 40 rounds out)"
  if "${MPIRUN[@]}" 3 "$dpfl" train --resume "$d" --quiet >>"$d.log" 2>&1; then
    same_filter "killed at round $((lines + 1)) and resumed" "$tmp/flt40" "$d"
  else
    t_fail "kill: resume: $(tail -2 "$d.log")"
  fi
fi
t_end
t_summary
