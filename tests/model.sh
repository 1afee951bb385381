#!/usr/bin/env bash
# dpfl eval and dpfl export against short runs of dpfl train: eval of a run gives summary.json's numbers to the last
# digit (MNIST standardized, heart and synthetic data whose split and values depend on run.seed, a PrivateFL input
# transform); the errors are one line; export writes an .npz that numpy.load reads and whose arrays, run by NumPy
# alone (tests/npz_forward.py), reproduce dpfl eval's accuracy -- skipped with a line saying so where python3 has no
# numpy, except under CI=true (scripts/setup.sh installs python3-numpy).  Run by `make test`; BUILD is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
B=${BUILD:-build}
dpfl=$PWD/$B/dpfl
export DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d /tmp/dpfl_model_sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# the number after "KEY": in summary.json (formatted) or one line of JSON
num() { sed -n "s/.*\"$1\":[[:space:]]*\([-+0-9.eE]*\).*/\1/p" | head -n 1; }

# config NAME DATASET ARCH [KEY=VALUE...]: a short run's config
config() {
  local name=$1 dataset=$2 arch=$3; shift 3
  { printf '[data]\ndataset = %s\npartition = iid\nclients = 4\n' "$dataset"
    printf '[model]\narch = %s\n' "$arch"
    printf '[fl]\nrounds = 2\nsampling = all\nlocal_steps = 15\nbatch = 32\nlr = 0.1\n'
    printf '[run]\nseed = 7\nthreads = 2\n'; } > "$tmp/$name.ini"
  for kv in "$@"; do
    # --set style overrides are simpler than editing sections: kept for dpfl train
    echo "$kv" >> "$tmp/$name.sets"
  done
}
train() { # train NAME: runs into $tmp/NAME
  local sets=()
  if [ -f "$tmp/$1.sets" ]; then while read -r kv; do sets+=(--set "$kv"); done < "$tmp/$1.sets"; fi
  "$dpfl" train "$tmp/$1.ini" --out "$tmp/$1" --quiet "${sets[@]}" > "$tmp/$1.log" 2>&1
}

config mnist mnist mlp:784-32-10 data.normalize=standard fl.batch=300
config heart heart logreg data.partition=natural
config synth synthetic mlp:20-16-10 run.seed=12345
config tr mnist cnn-small model.transform=affine fl.rounds=1 fl.local_steps=5
config raw mnist mlp:784-24-10 data.normalize=none
config conv mnist net:conv4k5s2,relu,pool2,fc10 fl.rounds=1
cp examples/own_csv.ini "$tmp/own.ini" && echo fl.rounds=2 > "$tmp/own.sets" # own CSV files, given constants
runs="mnist heart synth tr raw conv own"
for r in $runs; do train "$r" || echo "dpfl train $r failed: $(cat "$tmp/$r.log")"; done

t_begin "eval RUN_DIR --json: summary.json's test_accuracy and test_loss to the last digit"
for r in $runs; do
  if ! out=$("$dpfl" eval "$tmp/$r" --json 2>&1); then t_fail "$r: eval failed: $out"; continue; fi
  for k in accuracy loss; do
    want=$(num "test_$k" < "$tmp/$r/summary.json") got=$(num "test_$k" <<<"$out")
    [ -n "$want" ] && [ "$got" = "$want" ] || t_fail "$r: eval $k '$got', summary.json test_$k '$want'"
  done
done
# the test is able to fail: another seed reshuffles heart's split (and the run's standardization matters)
a=$("$dpfl" eval "$tmp/heart" --json --seed 99 | num test_accuracy)
[ "$a" != "$(num test_accuracy < "$tmp/heart/summary.json")" ] || t_fail "heart: --seed 99 changed nothing ($a)"
a=$("$dpfl" eval "$tmp/own" --json --normalize none | num test_loss)
[ "$a" != "$(num test_loss < "$tmp/own/summary.json")" ] || t_fail "own: --normalize none changed nothing ($a)"
a=$("$dpfl" eval "$tmp/mnist" --json --normalize none | num test_accuracy)
[ "$a" != "$(num test_accuracy < "$tmp/mnist/summary.json")" ] || t_fail "mnist: --normalize none changed nothing ($a)"
t_end

t_begin "eval: the text line, a model.bin beside its config.ini, --data, --split train"
out=$("$dpfl" eval "$tmp/mnist/model.bin" 2>&1)
acc=$(printf '%.4f' "$(num test_accuracy < "$tmp/mnist/summary.json")")
grep -Eq "^accuracy $acc  loss [0-9.]+  examples 10000  \(mnist test split\)$" <<<"$out" || t_fail "text line: $out"
out=$("$dpfl" eval "$tmp/mnist" --split train 2>&1)
grep -q "examples 60000  (mnist train split)" <<<"$out" || t_fail "--split train: $out"
cp "$tmp/raw/model.bin" "$tmp/bare.bin"
out=$("$dpfl" eval "$tmp/bare.bin" --data mnist --json 2>&1)
[ "$(num test_accuracy <<<"$out")" = "$(num test_accuracy < "$tmp/raw/summary.json")" ] || t_fail "bare model.bin --data mnist: $out"
t_end

# err NAME EXPECTED-TEXT CMD...: fails with one line on stderr holding the text
err() {
  local what=$1 text=$2 out rc; shift 2
  out=$("$@" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] || t_fail "$what: exit status 0"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || t_fail "$what: not one line: $out"
  grep -qF -- "$text" <<<"$out" || t_fail "$what: no '$text' in: $out"
}
t_begin "eval --data that names no dataset: one line naming --data and every form it takes"
err "eval --data nosuch" "--data: 'nosuch' is not one of mnist|" "$dpfl" eval "$tmp/mnist" --data nosuch
err "eval --data nosuch (the file forms)" "nor csv:FILES, idx:FILES or npy:FILES (X.npy,Y.npy or FILE.npz)" "$dpfl" eval "$tmp/mnist" --data nosuch
t_end
t_begin "a CSV-trained model exports and evaluates on other data with its training data folder gone (shape in model.bin)"
mkdir -p "$tmp/elsewhere" && cp -r "$tmp/own" "$tmp/elsewhere/own" && cp data/heart-disease/processed.va.data "$tmp/va.csv"
# the run's config.ini names data/heart-disease/... relative to the checkout: from elsewhere none of it is there
if ! out=$(cd "$tmp/elsewhere" && "$dpfl" export own -o "$tmp/own_gone.npz" 2>&1); then t_fail "export without the data: $out"; fi
"$dpfl" export "$tmp/own" -o "$tmp/own_here.npz" 2>/dev/null || t_fail "export with the data failed"
cmp -s "$tmp/own_gone.npz" "$tmp/own_here.npz" || t_fail "the export without the data differs from the one with it"
if ! out=$(cd "$tmp/elsewhere" && "$dpfl" eval own --data "csv:$tmp/va.csv" --split train --json 2>&1); then
  t_fail "eval --data OTHER without the run's data: $out"
fi
grep -q '"train_accuracy":' <<<"$out" || t_fail "eval --split train --json has no train_accuracy: $out"
grep -q '"examples":110' <<<"$out" || t_fail "eval --data va.csv --split train: not the 110 training rows of the file: $out"
t_end

t_begin "a model trained on standardized inputs is fed as its model.bin records, with no config.ini beside it"
# mnist: the published constants; own CSV: data.feature_mean / feature_std, one per feature
mkdir -p "$tmp/bare" && cp "$tmp/mnist/model.bin" "$tmp/bare/mnist.bin" && cp "$tmp/own/model.bin" "$tmp/bare/own.bin"
out=$("$dpfl" eval "$tmp/bare/mnist.bin" --data mnist --json 2>&1)
[ "$(num test_accuracy <<<"$out")" = "$(num test_accuracy < "$tmp/mnist/summary.json")" ] || t_fail "bare mnist model: $out"
# the run's columns (0, 1, 3, 4, 7, 9; label 13) of va.csv as a file of their own, rows with a '?' there dropped
awk -F, '{ r = $1","$2","$4","$5","$8","$10","$14; if (r !~ /\?/) print r }' "$tmp/va.csv" > "$tmp/va6.csv"
want=$("$dpfl" eval "$tmp/own" --data "csv:$tmp/va.csv" --json 2>&1)
got=$("$dpfl" eval "$tmp/bare/own.bin" --data "csv:$tmp/va6.csv" --seed 1 --json 2>&1)
for k in test_accuracy test_loss examples; do
  [ -n "$(num $k <<<"$want")" ] && [ "$(num $k <<<"$got")" = "$(num $k <<<"$want")" ] || t_fail "bare own model $k: $got, with its run: $want"
done
raw=$("$dpfl" eval "$tmp/bare/own.bin" --data "csv:$tmp/va6.csv" --seed 1 --normalize none --json 2>&1)
[ "$(num test_loss <<<"$raw")" != "$(num test_loss <<<"$got")" ] || t_fail "--normalize none changed nothing: $raw"
"$dpfl" export "$tmp/bare/own.bin" -o "$tmp/bare/own.npz" 2>/dev/null || t_fail "export of the bare own model failed"
t_end

t_begin "eval and export errors: one line, non-zero status, naming the file"
err "missing file" "$tmp/none.bin" "$dpfl" eval "$tmp/none.bin" --data mnist
printf 'not a model, but long enough to be read as one' > "$tmp/junk.bin"
err "wrong magic" "wrong magic number ($tmp/junk.bin)" "$dpfl" eval "$tmp/junk.bin" --data mnist
cp "$tmp/raw/model.bin" "$tmp/corrupt.bin"
printf '\x55' | dd of="$tmp/corrupt.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
err "corrupt" "checksum mismatch ($tmp/corrupt.bin)" "$dpfl" eval "$tmp/corrupt.bin" --data mnist
err "corrupt (export)" "checksum mismatch ($tmp/corrupt.bin)" "$dpfl" export "$tmp/corrupt.bin" --data mnist
err "no config, no --data" "give the dataset with --data" "$dpfl" eval "$tmp/bare.bin"
err "heart data for an mnist model" "model $tmp/mnist/model.bin does not fit dataset heart" "$dpfl" eval "$tmp/mnist" --data heart
err "cnn on tabular data" "does not fit dataset synthetic" "$dpfl" eval "$tmp/tr" --data synthetic
err "unknown dataset" "nosuchdata" "$dpfl" eval "$tmp/mnist" --data nosuchdata
err "bad split" "--split" "$dpfl" eval "$tmp/mnist" --split validation
err "bad format" "--format" "$dpfl" export "$tmp/mnist" --format onnx
t_end

t_begin "export: model.npz beside model.bin, never overwritten without --force, -o, the same bytes twice"
if ! out=$("$dpfl" export "$tmp/raw" 2>&1) || [ ! -s "$tmp/raw/model.npz" ]; then t_fail "export: $out"; fi
err "existing archive" "$tmp/raw/model.npz exists" "$dpfl" export "$tmp/raw"
"$dpfl" export "$tmp/raw/model.bin" -o "$tmp/again.npz" 2>/dev/null || t_fail "export -o failed"
cmp -s "$tmp/raw/model.npz" "$tmp/again.npz" || t_fail "two exports of one model differ"
"$dpfl" export "$tmp/raw" --force 2>/dev/null || t_fail "export --force failed"
"$dpfl" export "$tmp/conv" 2>/dev/null || t_fail "export of the conv run failed"
"$dpfl" export "$tmp/tr" 2>/dev/null || t_fail "export of the transform run failed"
if command -v unzip >/dev/null; then unzip -tq "$tmp/raw/model.npz" >/dev/null || t_fail "unzip -t: $(unzip -t "$tmp/raw/model.npz")"; fi
t_end

py=""
for c in ${DPFL_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import numpy' >/dev/null 2>&1; then py=$c; break; fi
done
if [ -z "$py" ]; then
  if [ "${CI:-}" = true ]; then
    t_begin "numpy reads the export"; t_fail "no python3 with numpy (scripts/setup.sh installs python3-numpy)"; t_end
  else
    echo "numpy checks of dpfl export: SKIPPED: no python3 that imports numpy (apt-get install python3-numpy, or make setup)"
  fi
else
  t_begin "numpy.load reads the export; a NumPy forward pass from its graph reproduces dpfl eval (mlp and conv on MNIST, raw and standardized as the archive says, resnet20-gn and cnn-tf-cifar on CIFAR-format data)"
  # CIFAR-10's binary format, generated (the official archive cannot be downloaded here): 5 x 40 training records
  # and 200 test records whose colour depends on the label, under a data folder of their own
  cifar=$tmp/cifar_data/cache/cifar10/cifar-10-batches-bin
  mkdir -p "$cifar"
  "$py" - "$cifar" <<'PYEOF'
import sys
import numpy as np
rng = np.random.default_rng(5)
for name, n in [("data_batch_%d.bin" % i, 40) for i in range(1, 6)] + [("test_batch.bin", 200)]:
    y = rng.integers(0, 10, n).astype(np.uint8)
    x = rng.integers(0, 120, (n, 3, 32, 32))
    x[np.arange(n), y % 3] += 12 * y[:, None, None] # the label in one channel's brightness
    np.concatenate([y[:, None], x.reshape(n, -1).astype(np.uint8)], axis=1).tofile(sys.argv[1] + "/" + name)
PYEOF
  for r in resnet:resnet20-gn tfcifar:cnn-tf-cifar; do
    config "${r%%:*}" cifar10 "${r#*:}" data.normalize=none fl.rounds=1 fl.local_steps=3 fl.batch=16 data.clients=2
    DPFL_DATA=$tmp/cifar_data train "${r%%:*}" || t_fail "dpfl train ${r#*:}: $(cat "$tmp/${r%%:*}.log")"
    DPFL_DATA=$tmp/cifar_data "$dpfl" export "$tmp/${r%%:*}" 2>/dev/null || t_fail "export of ${r#*:} failed"
  done
  mnist=$DPFL_DATA/cache/mnist
  "$dpfl" export "$tmp/mnist" 2>/dev/null || t_fail "export of the mnist run failed" # standardized: dpfl_input_*
  for r in raw conv mnist resnet tfcifar; do
    dir=$mnist data=$DPFL_DATA
    case $r in resnet | tfcifar) dir=$cifar data=$tmp/cifar_data ;; esac
    if ! got=$("$py" tests/npz_forward.py "$tmp/$r/model.npz" "$dir" 2>&1); then t_fail "$r: $got"; continue; fi
    want=$(DPFL_DATA=$data "$dpfl" eval "$tmp/$r" --json)
    # float32 sums in another order: a prediction may flip on a near tie, the loss agrees to float precision
    awk -v a="$(num test_accuracy <<<"$want")" -v b="$(sed -n 's/^accuracy \([^ ]*\) .*/\1/p' <<<"$got")" \
      'BEGIN { d = a - b; exit !(b != "" && d <= 3e-4 && d >= -3e-4) }' || t_fail "$r: numpy '$got', dpfl eval $want"
    t_close "$(sed -n 's/.* loss \([^ ]*\) .*/\1/p' <<<"$got")" "$(num test_loss <<<"$want")" 1e-4 || t_fail "$r: numpy '$got', dpfl eval $want"
    echo "$r: numpy: $got; dpfl eval: $want"
  done
  # the transform run: the archive holds the global transform's scale and shift, shaped (C,) and (C, H, W)
  out=$("$py" -c 'import numpy as np, sys
z = np.load(sys.argv[1])
print(str(z["dpfl_spec"]), z["0.scale"].shape, z["0.shift"].shape, z["1.weight"].shape, sorted(z.files)[:2])' "$tmp/tr/model.npz" 2>&1)
  [ "$out" = "transform-cp:cnn-small (1,) (1, 28, 28) (16, 1, 8, 8) ['0.scale', '0.shift']" ] || t_fail "transform archive: $out"
  t_end
fi
# docs/models.md names every layer token a spec may use: the list an unknown token's error gives (the layer table's)
t_begin layer_tokens_are_documented
config tokens synthetic net:frob
err=$("$dpfl" train "$tmp/tokens.ini" 2>&1)
toks=$(sed -n 's/.*valid layers: \([^;]*\);.*/\1/p' <<<"$err")
[ -n "$toks" ] || t_fail "no token list in: $err"
IFS=',' read -r -a list <<<"$toks"
for t in "${list[@]}"; do
  t=${t# }; t=${t%% (*}
  grep -qF "\`$t\`" docs/models.md || t_fail "docs/models.md does not name the layer token $t"
done
echo "tokens: $toks"
t_end
t_summary
