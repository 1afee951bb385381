#!/usr/bin/env bash
# make install / uninstall, end to end: install into a temporary PREFIX, check what is there (the library with its
# soname links, headers, dpfl.pc, man pages, the shipped data), build the C examples against the installed tree with
# pkg-config (shared, found through dpfl.pc's rpath without LD_LIBRARY_PATH, and static), render every man page
# with `man -l`, find datasets the installed way (never in the current directory), then make uninstall and check
# that nothing of dpfl is left (and that a file dpfl did not install is).  Then the same through DESTDIR.  Run by `make test` (MAKE is the make
# that runs it: the build variables given to it, NATIVE=1 or MARCH=..., reach this make through MAKEFLAGS).
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
MAKE=${MAKE:-make}
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
version=$("${BUILD:-build}/dpfl" --version | awk '{print $2}')
soname=libdpfl.so.$(cut -d. -f1-2 <<<"$version")
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pc() { pkg-config "$@" dpfl; }

t_begin "make install PREFIX=tmp: binary, library and soname links, headers, dpfl.pc, man pages, shipped data"
if ! log=$($MAKE --no-print-directory install PREFIX="$prefix" LDCONFIG=true 2>&1); then
  t_fail "make install failed: $log"
fi
[ -x "$prefix/bin/dpfl" ] && [ "$("$prefix/bin/dpfl" --version)" = "dpfl $version" ] || t_fail "no working bin/dpfl"
real=$prefix/lib/libdpfl.so.$version
[ -f "$real" ] && [ ! -L "$real" ] || t_fail "lib/libdpfl.so.$version is not a file"
[ "$(readlink "$prefix/lib/$soname")" = "libdpfl.so.$version" ] || t_fail "lib/$soname does not link to the library"
[ "$(readlink -f "$prefix/lib/libdpfl.so")" = "$(readlink -f "$real")" ] || t_fail "lib/libdpfl.so does not lead to it"
readelf -d "$real" | grep -q "SONAME.*\[$soname\]" || t_fail "soname of the installed library is not $soname"
[ -f "$prefix/lib/libdpfl.a" ] || t_fail "no lib/libdpfl.a"
for h in include/dpfl/*.h; do
  cmp -s "$h" "$prefix/$h" || t_fail "$h not installed as is"
  # each public header stands alone in strict C11 with the installed include path
  log=$(echo "#include <dpfl/${h##*/}>" | $CC -std=c11 -pedantic -Wall -Wextra -Werror -I"$prefix/include" \
          -fsyntax-only -x c - 2>&1) || t_fail "<dpfl/${h##*/}> does not compile on its own: $log"
done
[ -f "$prefix/share/dpfl/heart-disease/processed.cleveland.data" ] || t_fail "heart-disease files not installed"
[ "$(pc --modversion 2>&1)" = "$version" ] || t_fail "pkg-config --modversion dpfl: $(pc --modversion 2>&1)"
grep -q -- "-I$prefix/include" <<<"$(pc --cflags)" || t_fail "pkg-config --cflags: $(pc --cflags)"
for dep in openblas gsl fftw3 libsodium libcjson zlib; do
  grep -q "^Requires.private:.*\b$dep\b" "$PKG_CONFIG_PATH/dpfl.pc" || t_fail "dpfl.pc: $dep not in Requires.private"
done
t_end

# The Python package: imported by the system's python3 from outside the checkout, with no DPFL_LIB, it loads the
# prefix's library (found relative to the package) and answers what the installed dpfl answers.
py3=/usr/bin/python3; [ -x "$py3" ] || py3=python3
pyimport() { # $1: the folder holding the installed dpfl package; prints library path, source, epsilon
  (cd "$tmp" && env -u DPFL_LIB PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$1" "$py3" -c '
import dpfl, sys
assert dpfl.__file__.startswith(sys.argv[1]), dpfl.__file__
print(dpfl.library_path()); print(dpfl.library_source())
print(repr(dpfl.account_epsilon(dpfl.event_poisson(0.02, 1.3, 500), 1e-5).epsilon))' "$1" 2>&1)
}
t_begin "make install: the Python package, imported from outside the checkout, loads the installed library"
if command -v "$py3" >/dev/null 2>&1; then
  pkg=$(dirname "$(find "$prefix/lib" -path '*/dist-packages/dpfl/__init__.py' | head -n 1)")
  if [ "$pkg" = . ]; then t_fail "no dist-packages/dpfl/__init__.py under $prefix/lib"
  else
    out=$(pyimport "$(dirname "$pkg")") || t_fail "import dpfl from $pkg: $out"
    [ "$(sed -n 1p <<<"$out")" = "$prefix/lib/$soname" ] || t_fail "dpfl loaded $(sed -n 1p <<<"$out"), not $prefix/lib/$soname"
    grep -q "^the installation this package belongs to$" <<<"$out" || t_fail "library source: $out"
    cli=$("$prefix/bin/dpfl" account --noise 1.3 --q 0.02 --steps 500 --delta 1e-5 --json | json_num epsilon)
    t_close "$(sed -n 3p <<<"$out")" "$cli" 1e-12 || t_fail "installed dpfl (Python) epsilon $(sed -n 3p <<<"$out"), dpfl account $cli"
  fi
  # pip, offline, with the system's setuptools (python/pyproject.toml): the package alone, the library by DPFL_LIB
  if "$py3" -m pip --version >/dev/null 2>&1 && "$py3" -c 'import setuptools' 2>/dev/null; then
    cp -r python "$tmp/pysrc" && rm -rf "$tmp/pysrc/tests"
    log=$("$py3" -m pip install --quiet --no-build-isolation --no-index --no-deps --target "$tmp/pip" "$tmp/pysrc" 2>&1) ||
      t_fail "pip install --no-build-isolation ./python: $log"
    out=$(cd "$tmp" && PYTHONPATH="$tmp/pip" DPFL_LIB="$prefix/lib/$soname" "$py3" -c '
import dpfl, sys; assert dpfl.__file__.startswith(sys.argv[1]); print(dpfl.library_source(), dpfl.version())' "$tmp/pip" 2>&1)
    [ "$out" = "DPFL_LIB $version" ] || t_fail "dpfl installed by pip: $out"
  else
    echo "(no pip or setuptools for $py3: pip install ./python is not tried)"
  fi
else
  echo "(no python3: the installed Python package is not imported)"
fi
t_end

t_begin "the examples, built with pkg-config against the installed tree, shared and static"
mkdir -p "$tmp/ex"
for src in examples/c/*.c; do
  name=$(basename "$src" .c)
  # shared: resolved from the prefix through the rpath dpfl.pc gives (no LD_LIBRARY_PATH)
  if ! log=$($CC -std=c11 -Wall -Wextra -Werror "$src" $(pc --cflags --libs) -o "$tmp/ex/$name" 2>&1); then
    t_fail "$name (shared) does not build: $(head -c 1500 <<<"$log")"; continue
  fi
  lib=$(env -u LD_LIBRARY_PATH ldd "$tmp/ex/$name" | sed -n "s/.*$soname => \([^ ]*\) .*/\1/p")
  [ "$lib" = "$prefix/lib/$soname" ] || t_fail "$name loads libdpfl from '$lib', not the prefix"
  # static: libdpfl.a, then its dependencies from Requires.private / Libs.private
  deps=$(pc --static --libs | tr ' ' '\n' | grep -vx -- -ldpfl | tr '\n' ' ')
  if ! log=$($CC -std=c11 -Wall -Wextra -Werror "$src" $(pc --cflags) -Wl,-Bstatic $(pc --libs-only-L) -ldpfl \
                 -Wl,-Bdynamic $deps -o "$tmp/ex/$name-static" 2>&1); then
    t_fail "$name (static) does not build: $(head -c 1500 <<<"$log")"; continue
  fi
  readelf -d "$tmp/ex/$name-static" | grep -q "NEEDED.*libdpfl" && t_fail "$name-static needs libdpfl.so"
done
# the accountant is deterministic: the installed builds print what the build tree's prints, and what dpfl says
want=$("${BUILD:-build}/examples/accountant" 0.02 1.3 500 1e-5 2 2>&1)
for v in "" -static; do
  got=$(env -u LD_LIBRARY_PATH "$tmp/ex/accountant$v" 0.02 1.3 500 1e-5 2 2>&1) || t_fail "accountant$v failed: $got"
  [ "$got" = "$want" ] || t_fail "accountant$v printed: $got (the build tree's: $want)"
done
cli=$("$prefix/bin/dpfl" account --noise 1.3 --q 0.02 --steps 500 --delta 1e-5 --json | json_num epsilon)
t_close "$(sed -n 's/^rdp epsilon: \([^ ]*\).*/\1/p' <<<"$want")" "$cli" 1e-9 || t_fail "accountant vs dpfl account: $want / $cli"
for v in "" -static; do
  out=$(env -u LD_LIBRARY_PATH "$tmp/ex/federated$v" 2>&1) || t_fail "federated$v failed: $out"
  [ "$(grep -c '^round ' <<<"$out")" = 10 ] || t_fail "federated$v: $out"
  out=$(env -u LD_LIBRARY_PATH "$tmp/ex/dpsgd$v" 50 2>&1) || t_fail "dpsgd$v failed: $out"
  grep -q '^record-level epsilon: ' <<<"$out" || t_fail "dpsgd$v: $out"
done
t_end

t_begin "man -l renders dpfl(1) and one page per subcommand, with the synopsis of --help"
cmds=$("$prefix/bin/dpfl" --help | awk '/^commands:$/ {f = 1; next} f && /^$/ {exit} f {print $1}')
[ -n "$cmds" ] || t_fail "no commands in dpfl --help"
for c in "" $cmds; do
  page=dpfl${c:+-$c}
  f=$prefix/share/man/man1/$page.1
  if [ ! -f "$f" ]; then t_fail "no $f"; continue; fi
  text=$(LC_ALL=C MANWIDTH=200 man -l "$f" 2>"$tmp/man.err")
  [ -s "$tmp/man.err" ] && t_fail "man -l $page.1: $(cat "$tmp/man.err")"
  [ "$(wc -l <<<"$text")" -gt 8 ] || t_fail "$page.1 renders to almost nothing: $text"
  grep -q "^ *$page - " <<<"$text" || t_fail "$page.1 has no NAME line '$page - ...'"
  warn=$(groff -man -ww -z "$f" 2>&1) && [ -z "$warn" ] || t_fail "groff warns about $page.1: $warn"
  # the SYNOPSIS is the help's usage line, and the description's first line is in the page
  usage=$("$prefix/bin/dpfl" $c --help | sed -n '/^usage: /{s/^usage: //p;q}')
  grep -qF -- "$usage" <<<"$text" || t_fail "$page.1 lacks the usage line '$usage'"
done
t_end

t_begin "installed datasets: share/dpfl found, the user's cache searched, the current directory never"
home=$tmp/home
mkdir -p "$home"
run() { env -u DPFL_DATA -u XDG_CACHE_HOME HOME="$home" "$@"; }
out=$(run "$prefix/bin/dpfl" data info heart 2>&1) || t_fail "heart not found after install: $out"
grep -q "^source   $prefix/share/dpfl/heart-disease$" <<<"$out" || t_fail "heart not read from the prefix: $out"
# this checkout's data/ (heart-disease/, cache/mnist/) is in the current directory and must not be used
out=$(run "$prefix/bin/dpfl" data info mnist 2>&1) && t_fail "mnist found with no cache: $out"
grep -qF "$home/.cache/dpfl/mnist, $prefix/share/dpfl/mnist" <<<"$out" || t_fail "error does not name the folders searched: $out"
out=$(run XDG_CACHE_HOME="$tmp/xdg" "$prefix/bin/dpfl" data info mnist 2>&1)
grep -qF "$tmp/xdg/dpfl/mnist" <<<"$out" || t_fail "XDG_CACHE_HOME not searched: $out"
out=$(cd "$tmp" && mkdir -p data/cache && run DPFL_DATA=data "$prefix/bin/dpfl" data info 2>&1)
grep -q "^mnist  *missing  *data/cache/mnist$" <<<"$out" || t_fail "DPFL_DATA's cache/ not used: $out"
mnist=${DPFL_DATA:-data}/cache/mnist
if [ -s "$mnist/train-images-idx3-ubyte" ]; then # a copy in the XDG cache is found, and fetch leaves it alone
  mkdir -p "$tmp/xdg/dpfl/mnist"
  for f in "$mnist"/*-ubyte; do ln -s "$(readlink -f "$f")" "$tmp/xdg/dpfl/mnist/"; done
  out=$(run XDG_CACHE_HOME="$tmp/xdg" "$prefix/bin/dpfl" data info mnist 2>&1) || t_fail "mnist in the XDG cache: $out"
  grep -q "^source   $tmp/xdg/dpfl/mnist$" <<<"$out" || t_fail "mnist not read from the XDG cache: $out"
  out=$(run XDG_CACHE_HOME="$tmp/xdg" "$prefix/bin/dpfl" data fetch 2>&1) || t_fail "data fetch: $out"
  [ -z "$(grep -v '^dpfl data: note: Fashion-MNIST' <<<"$out")" ] || t_fail "data fetch with MNIST present: $out"
else
  echo "(MNIST not in $mnist: the XDG cache read check is skipped)"
fi
t_end

t_begin "bin/dpfl loads neither ZeroMQ nor OpenMPI: serve/join/keygen run in libexec/dpfl/dpfl-deploy, or say it is missing"
deploy=$prefix/libexec/dpfl/dpfl-deploy
if [ -x "$deploy" ]; then
  need=$(readelf -d "$prefix/bin/dpfl" | grep -E 'NEEDED.*(libzmq|libmpi)')
  [ -z "$need" ] || t_fail "bin/dpfl links $need"
  readelf -d "$deploy" | grep -qE 'NEEDED.*(libzmq|libmpi)' || t_fail "dpfl-deploy links neither libzmq nor libmpi"
  out=$("$prefix/bin/dpfl" keygen "$tmp/keys" server 2>&1) || t_fail "keygen through dpfl-deploy: $out"
  [ -s "$tmp/keys/server.pub" ] && [ -s "$tmp/keys/server.key" ] || t_fail "keygen wrote no key pair: $out"
  mv "$deploy" "$tmp/deploy.moved"
  out=$("$prefix/bin/dpfl" keygen "$tmp/keys" client1 2>&1); rc=$?
  [ "$rc" = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "$deploy" <<<"$out" ||
    t_fail "keygen without dpfl-deploy: exit $rc, '$out' (one line naming $deploy expected)"
  [ -e "$tmp/keys/client1.pub" ] && t_fail "keygen without dpfl-deploy wrote a key"
  out=$("$prefix/bin/dpfl" account --noise 1.3 --q 0.02 --steps 500 --delta 1e-5 2>&1) ||
    t_fail "dpfl account needs dpfl-deploy: $out"
  mv "$tmp/deploy.moved" "$deploy"
else
  echo "(built without ZeroMQ and OpenMPI: there is no dpfl-deploy)"
fi
t_end

t_begin "make uninstall removes every file install put there, and nothing else"
touch "$prefix/bin/not-dpfl"
mkdir -p "$prefix/share/dpfl/mnist" && touch "$prefix/share/dpfl/mnist/placed-by-admin"
log=$($MAKE --no-print-directory uninstall PREFIX="$prefix" 2>&1) || t_fail "make uninstall failed: $log"
left=$(cd "$prefix" && find . \( -type f -o -type l \) ! -name not-dpfl ! -name placed-by-admin)
[ -z "$left" ] || t_fail "left after uninstall: $left"
[ -f "$prefix/bin/not-dpfl" ] && [ -f "$prefix/share/dpfl/mnist/placed-by-admin" ] || t_fail "uninstall removed a file it did not install"
[ -d "$prefix/include/dpfl" ] && t_fail "include/dpfl/ left"
rm -r "$prefix/share/dpfl/mnist" "$prefix/bin/not-dpfl"
t_end

t_begin "make install / uninstall DESTDIR=stage: everything under the stage, then nothing"
stage=$tmp/stage
log=$($MAKE --no-print-directory install DESTDIR="$stage" 2>&1) || t_fail "make install DESTDIR failed: $log"
n=$(find "$stage" \( -type f -o -type l \) | wc -l)
bin=$(find "$stage" -path '*/bin/dpfl')
[ -n "$bin" ] && [ "$("$bin" --version)" = "dpfl $version" ] || t_fail "no bin/dpfl under the stage"
[ "$n" -gt 20 ] || t_fail "only $n files under the stage"
pkg=$(dirname "$(find "$stage" -path '*/dist-packages/dpfl/__init__.py' | head -n 1)")
if [ "$pkg" = . ]; then t_fail "no dist-packages/dpfl under the stage"
elif command -v "$py3" >/dev/null 2>&1; then # staged: the package finds the staged library beside it
  out=$(pyimport "$(dirname "$pkg")") || t_fail "import dpfl from the stage: $out"
  case "$(sed -n 1p <<<"$out")" in "$stage"/*) ;; *) t_fail "staged dpfl loaded $(sed -n 1p <<<"$out")" ;; esac
fi
log=$($MAKE --no-print-directory uninstall DESTDIR="$stage" 2>&1) || t_fail "make uninstall DESTDIR failed: $log"
left=$(find "$stage" \( -type f -o -type l \))
[ -z "$left" ] || t_fail "left under the stage: $left"
t_end
t_summary
