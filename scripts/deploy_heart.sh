#!/usr/bin/env bash
# The four heart-disease centres (cleveland, hungarian, switzerland, va) as four client processes of one deployed
# training on this machine's loopback: CURVE keys for the server and each centre, `dpfl serve` and four
# `dpfl join`, each centre keeping its own optimizer state and its own record-level ledger (rPDP-FL: a privacy
# budget per record, examples/rpdp_heart.ini).  Prints the run's summary and each centre's own epsilon.
#
#   scripts/deploy_heart.sh [OUT_DIR] [--config FILE] [--own-files] [--check] [--set section.key=value]...
#
# OUT_DIR (default runs/deploy_heart) gets keys/, the run directory run/, each centre's state centre<K>/ and the
# logs.  --check also trains the same config with `dpfl train` and requires the same model.bin bytes and epsilon.
# --own-files: each process holds only its own data, as at real sites (config examples/own_csv.ini: the centres'
# files read as CSV, record-level DP-SGD): centre K runs in OUT_DIR/site<K>/, which holds its own file alone,
# given to it by `dpfl join --data FILE`, and the server in OUT_DIR/server/, which holds none (it trains no client;
# it has no test set then, so it reports no accuracy).
# DPFL=path/to/dpfl picks the binary (default build/dpfl); PORT=N the port (default: a free one in 47000-48999).
set -euo pipefail
cd "$(dirname "$0")/.."

out=runs/deploy_heart config=examples/rpdp_heart.ini check=0 own=0
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --check) check=1; shift ;;
    --own-files) own=1; [ "$config" = examples/rpdp_heart.ini ] && config=examples/own_csv.ini; shift ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "deploy_heart: unknown option $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
dpfl=${DPFL:-build/dpfl}
[ -x "$dpfl" ] || { echo "deploy_heart: no $dpfl: run make first" >&2; exit 1; }
if "$dpfl" serve 2>&1 | grep -q "without ZeroMQ"; then "$dpfl" serve 2>&1 | head -1 >&2; exit 1; fi

port=${PORT:-}
if [ -z "$port" ]; then  # a port nothing answers on, from a random start in 47000-48999
  start=$((47000 + RANDOM % 1000))
  for p in $(seq "$start" $((start + 999))); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
  done
fi

rm -rf "$out" && mkdir -p "$out/keys/server/clients"
here=$PWD
out=$(cd "$out" && pwd) dpfl=$(cd "$(dirname "$dpfl")" && pwd)/$(basename "$dpfl") config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
names=(cleveland hungarian switzerland va)
wd_server=$here wd=("$here" "$here" "$here" "$here") own_data=("" "" "" "")
if [ $own -eq 1 ]; then  # each site's folder holds its own file only; the server's none
  mkdir -p "$out/server"
  wd_server=$out/server
  for k in 0 1 2 3; do
    mkdir -p "$out/site$k"
    cp "data/heart-disease/processed.${names[$k]}.data" "$out/site$k/${names[$k]}.csv"
    wd[$k]=$out/site$k own_data[$k]="--data ${names[$k]}.csv"
  done
fi
"$dpfl" keygen "$out/keys/server" server >/dev/null
for k in 0 1 2 3; do
  "$dpfl" keygen "$out/keys/centre$k" "client$k" >/dev/null
  cp "$out/keys/centre$k/client$k.pub" "$out/keys/server/clients/"
  cp "$out/keys/server/server.pub" "$out/keys/centre$k/"
done

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

t0=$(date +%s.%N)
(cd "$wd_server" && exec "$dpfl" serve "$config" "${sets[@]}" --bind "tcp://127.0.0.1:$port" --keys "$out/keys/server" \
  --out "$out/run" --join-timeout 60 --round-timeout 60) >"$out/server.log" 2>&1 &
server=$!
for k in 0 1 2 3; do
  (cd "${wd[$k]}" && exec "$dpfl" join --server "tcp://127.0.0.1:$port" --config "$config" "${sets[@]}" --client "$k" \
    --keys "$out/keys/centre$k" --state "$out/centre$k" --idle-timeout 120 ${own_data[$k]}) >"$out/centre$k.log" 2>&1 &
  pids+=($!)
done
pids+=($server)
rc=0
wait "$server" || rc=$?
for k in 0 1 2 3; do wait "${pids[$k]}" || rc=$?; done
t1=$(date +%s.%N)
pids=()
if [ $rc -ne 0 ]; then
  echo "deploy_heart: a process failed (exit $rc); logs in $out:" >&2
  tail -n 5 "$out"/server.log "$out"/centre*.log >&2
  exit 1
fi

num() { sed -n "s/^[[:space:]]*\"$2\":[[:space:]]*\([-0-9.eE+]*\),\{0,1\}$/\1/p" "$1" | head -1; }
echo "deploy_heart: 4 centres on 127.0.0.1:$port, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s wall (server start to last exit)"
sed -n '/^dpfl: [0-9]* rounds/,$p' "$out/server.log"
for k in 0 1 2 3; do
  echo "  centre $k: $(num "$out/centre$k/client.json" rounds_trained) rounds trained, its records' largest epsilon" \
       "$(num "$out/centre$k/client.json" epsilon) (its own ledger, $out/centre$k/client.json)"
done
echo "  run directory: $out/run (summary.json, metrics.jsonl, model.bin); logs: $out/*.log"

if [ $check -eq 1 ]; then
  (cd "$here" && "$dpfl" train "$config" "${sets[@]}" --out "$out/sim" --force --quiet)
  cmp -s "$out/sim/model.bin" "$out/run/model.bin" || { echo "deploy_heart: model.bin differs from dpfl train's" >&2; exit 1; }
  e1=$(num "$out/sim/summary.json" epsilon) e2=$(num "$out/run/summary.json" epsilon)
  [ "$e1" = "$e2" ] || { echo "deploy_heart: epsilon $e2, dpfl train $e1" >&2; exit 1; }
  echo "  --check: the same model.bin bytes and epsilon ($e1) as dpfl train"
fi
