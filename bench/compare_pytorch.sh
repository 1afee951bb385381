#!/usr/bin/env bash
# dpfl against the same-machine PyTorch reference on a machine whose speed drifts: bench/compare_pytorch.sh BUILD [N]
# alternates N times (default 3) between bench_nn and bench/pytorch_reference.py for mlp:784-512-256-10, cnn-mnist,
# cnn-tf-cifar and resnet20-gn (DPFL_BENCH_MODELS=a,b,... for a subset), then prints the best and the median of
# the N runs for every row of each, their ratios, and the load average before each run.
# PyTorch is run under every OpenBLAS core type that applies to this CPU (OPENBLAS_CORETYPE unset, i.e. OpenBLAS's
# own choice, then SkylakeX / Cooperlake / SapphireRapids where /proc/cpuinfo has their AVX-512 flags, Haswell
# and, on AMD, Zen where it has AVX2): a core type whose kernels this CPU cannot run stops the process with an
# illegal instruction, so it is never tried.  Each row's PyTorch figure is the best over the core types, which is
# named.  Needs python3-torch (see pytorch_reference.py).
set -eu
BUILD=${1:-build}
N=${2:-3}
MODELS=${DPFL_BENCH_MODELS:-mlp:784-512-256-10,cnn-mnist,cnn-tf-cifar,resnet20-gn}
# plain `make` does not relink the benchmarks: a bench_nn older than the library measures old kernels
if [ ! -x "$BUILD/bench/bench_nn" ] || [ "$BUILD/libdpfl.a" -nt "$BUILD/bench/bench_nn" ]; then
  echo "compare_pytorch: $BUILD/bench/bench_nn is missing or older than $BUILD/libdpfl.a: run make $BUILD/bench/bench_nn (or make bench) first" >&2
  exit 1
fi
. bench/torch_env.sh # the OpenMP OpenBLAS for PyTorch, both cores, tcmalloc
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
cores="default"
if has avx512f; then
  cores="$cores SkylakeX"
  if has avx512_bf16; then cores="$cores Cooperlake"; fi
  if has amx_tile; then cores="$cores SapphireRapids"; fi
fi
if has avx2; then
  cores="$cores Haswell"
  if grep -qm1 AuthenticAMD /proc/cpuinfo; then cores="$cores Zen"; fi
fi
# OpenBLAS's own choice, by name: a core type equal to it is not tried again
own=$(env -u OPENBLAS_CORETYPE $PYPRE "$PY" -c 'import ctypes, torch
torch.mm(torch.rand(8, 8), torch.rand(8, 8))
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || true)
if [ -n "$own" ]; then
  kept="default"
  for c in ${cores#default}; do [ "$(echo "$c" | tr A-Z a-z)" = "$(echo "$own" | tr A-Z a-z)" ] || kept="$kept $c"; done
  cores=$kept
fi
echo "OpenBLAS core types tried for PyTorch on this CPU: $cores (default: OpenBLAS's own choice, ${own:-unknown})"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the table of the runs done so far: at the end, or when the script is interrupted (a long run on a loaded machine)
summary() {
"$PY" - "$tmp" <<'PYEOF'
import glob, json, re, statistics, sys
runs, cores = {}, {}
for path in glob.glob(f"{sys.argv[1]}/dpfl-*-*.json"):
    for r in json.load(open(path)):
        if "model" in r:
            runs.setdefault((r["model"], r["batch"], r["mode"]), []).append(r["examples_per_second"])
for path in glob.glob(f"{sys.argv[1]}/torch-*.json"):
    ct = re.sub(r".*/torch-\d+-(.*)\.json", r"\1", path)
    for r in json.load(open(path)):
        cores.setdefault((r["model"], r["batch"], r["mode"]), {}).setdefault(ct, []).append(r["examples_per_second"])
print(f"\nexamples/s over the runs: best (median); PyTorch at the core type with the best run\n"
      f"{'model':<20} {'batch':>6} {'mode':<12} {'dpfl':>17} {'PyTorch':>17} {'core type':<11} {'dpfl/PyTorch':>13}")
keys = sorted(set(runs) | set(cores), key=lambda k: (k[0], k[1], k[2] != "nonprivate", k[2]))
for model, batch, mode in keys:
    ours = runs.get((model, batch, "dpsgd" if mode.startswith("dpsgd") else mode))
    col = f"{max(ours):>8.0f} ({statistics.median(ours):>6.0f})" if ours else f"{'-':>17}"
    ref = cores.get((model, batch, mode))
    if ref:
        ct, v = max(ref.items(), key=lambda kv: max(kv[1]))
        rb, rm = max(v), statistics.median(v)
        ratio = f"{max(ours) / rb:>5.2f} ({statistics.median(ours) / rm:.2f})" if ours else "-"
        print(f"{model:<20} {batch:>6} {mode:<12} {col} {rb:>8.0f} ({rm:>6.0f}) {ct:<11} {ratio:>13}")
    else:
        print(f"{model:<20} {batch:>6} {mode:<12} {col} {'-':>17} {'-':<11} {'-':>13}")
print("\ndpfl DP-SGD / dpfl non-private (medians):")
for (model, batch, mode), v in sorted(runs.items()):
    if mode == "dpsgd" and (model, batch, "nonprivate") in runs:
        print(f"  {model} batch {batch}: {statistics.median(v) / statistics.median(runs[(model, batch, 'nonprivate')]):.2f}")
print("\nPyTorch by core type (median examples/s):")
cts = sorted({ct for d in cores.values() for ct in d})
print(f"  {'model':<20} {'batch':>6} {'mode':<12} " + " ".join(f"{c:>9}" for c in cts))
for k in keys:
    if k in cores:
        print(f"  {k[0]:<20} {k[1]:>6} {k[2]:<12} " +
              " ".join(f"{statistics.median(cores[k][c]):>9.0f}" if c in cores[k] else f"{'-':>9}" for c in cts))
PYEOF
echo "load averages (1, 5, 15 min) before each run:"; cat "$tmp/loads"
}
trap 'echo "interrupted: the runs done so far"; summary; exit 130' INT TERM
load() { cut -d' ' -f1-3 /proc/loadavg; }
for i in $(seq "$N"); do
  for m in ${MODELS//,/ }; do
    echo "run $i dpfl $m: load average $(load)" | tee -a "$tmp/loads"
    DPFL_BENCH_MODEL=$m "$BUILD/bench/bench_nn" "$tmp/dpfl-$i-${m%%:*}.json" >/dev/null
  done
  "$PY" -c 'import glob, json, sys; print(json.dumps([r for p in sorted(glob.glob(sys.argv[1])) for r in json.load(open(p))]))' \
    "$tmp/dpfl-$i-*.json" > "$tmp/dpfl-run$i.all"
  for ct in $cores; do # PyTorch checks its parameter counts against this run's dpfl rows
    echo "run $i PyTorch (OPENBLAS_CORETYPE=$ct): load average $(load)" | tee -a "$tmp/loads"
    if [ "$ct" = default ]; then env -u OPENBLAS_CORETYPE $PYPRE DPFL_BENCH_MODELS="$MODELS" "$PY" -W ignore \
        bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" "$tmp/dpfl-run$i.all" "$tmp/torch-$i-$ct.json" >"$tmp/log"
    else $PYPRE OPENBLAS_CORETYPE="$ct" DPFL_BENCH_MODELS="$MODELS" "$PY" -W ignore \
        bench/pytorch_reference.py "${DPFL_BENCH_SECONDS:-2}" "$tmp/dpfl-run$i.all" "$tmp/torch-$i-$ct.json" >"$tmp/log"
    fi
    if [ "$i" = 1 ]; then sed -n '1,/^model/p' "$tmp/log" | grep -v '^model'; fi
  done
done
summary
