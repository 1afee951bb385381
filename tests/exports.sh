#!/usr/bin/env bash
# libdpfl.so exports the library's public interface and nothing else (issue 33): the dynamic symbols it defines are
# exactly the functions and variables that the headers under include/dpfl/ declare and libdpfl.a defines.  The
# library is compiled with -fvisibility=hidden and each public header marks its declarations visible (dpfl/core.h),
# so an internal function (fl_run, rp_buf_add, dpfl_par_for, ...) is not callable through the .so, and a public one
# defined in a file that does not include its header would be missing; either is listed by name.
# "Declared" is decided by the compiler: a translation unit that includes every public header takes the address of
# each candidate name, one function per line, and a name is declared when its line compiles (a name that is no C
# identifier, such as ASan's __odr_asan.x, is declared nowhere).
# Run by `make test` (BUILD: the build folder, default build/).
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
BUILD=${BUILD:-build}
CC=${CC:-cc}
so=$BUILD/libdpfl.so
lib=$BUILD/libdpfl.a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one name per line, sorted (comm's order)
sorted() { LC_ALL=C sort -u; }
# "a, b, c" of the names in file $1 (at most 40, then how many more)
names() { awk 'NR <= 40 { s = s (NR > 1 ? ", " : "") $0 } END { if (NR > 40) s = s ", ... (" NR - 40 " more)"; print s }' "$1"; }

t_begin "libdpfl.so exports exactly the dpfl_ names include/dpfl/*.h declare that the library defines"
for f in "$so" "$lib"; do [ -f "$f" ] || { t_fail "no $f (make $f)"; t_end; t_summary; }; done
# The linker's own markers, which some linkers put in the dynamic symbol table of every shared library.
linker='^(_init|_fini|_edata|_end|__bss_start)$'
LC_ALL=C nm -D --defined-only --format=posix "$so" | awk '{ sub(/@.*/, "", $1); print $1 }' | grep -Ev "$linker" |
  sorted > "$tmp/exported"
# every global symbol the library's objects define (posix format: "name type value size"; "lib.a[x.o]:" headers)
LC_ALL=C nm -g --defined-only --format=posix "$lib" | awk 'NF >= 2 && $2 ~ /^[A-Za-z]$/ { print $1 }' |
  sorted > "$tmp/defined"
cat "$tmp/exported" "$tmp/defined" | sorted > "$tmp/candidates"
{
  for h in include/dpfl/*.h; do echo "#include \"dpfl/${h##*/}\""; done
  first=$(($(ls include/dpfl/*.h | wc -l) + 1)) # the line of the first candidate
  awk '/^[A-Za-z_][A-Za-z0-9_]*$/ { print "static void probe" NR "(void) { (void)&" $0 "; }"; next }
       { print "#error not an identifier" }' "$tmp/candidates"
} > "$tmp/probe.c"
limit=-fmax-errors=0
$CC --version 2>/dev/null | grep -qi clang && limit=-ferror-limit=0
LC_ALL=C $CC -std=c11 -Iinclude -w $limit -fsyntax-only "$tmp/probe.c" > "$tmp/probe.log" 2>&1
rc=$?
# An error on a candidate's line means "not declared"; any other error (in a header, on an #include line), or a
# failure with no error line, that the public headers do not compile together.
grep -E ': (fatal )?error:' "$tmp/probe.log" > "$tmp/errors"
sed -n 's|^[^:]*probe\.c:\([0-9]*\):[0-9]*: error:.*|\1|p' "$tmp/errors" | sort -nu > "$tmp/error_lines"
n=$(wc -l < "$tmp/candidates")
bad=$(grep -Ev 'probe\.c:[0-9]+:[0-9]+: error:' "$tmp/errors"
      awk -v a="$first" -v b="$((first + n - 1))" '$1 < a || $1 > b' "$tmp/error_lines")
[ "$rc" != 0 ] && ! [ -s "$tmp/errors" ] && bad=$(head -3 "$tmp/probe.log")
if [ -n "$bad" ]; then
  t_fail "the public headers do not compile together ($CC): $(head -3 <<<"$bad" | tr '\n' ' ')"
elif ! grep -q . "$tmp/exported" || ! grep -q . "$tmp/defined"; then
  t_fail "nm read no symbol: $(wc -l < "$tmp/exported") exported by $so, $(wc -l < "$tmp/defined") defined in $lib"
else
  awk -v a="$first" 'NR == FNR { undeclared[$1 - a + 1] = 1; next } !(FNR in undeclared)' \
    "$tmp/error_lines" "$tmp/candidates" > "$tmp/declared"
  comm -12 "$tmp/declared" "$tmp/defined" > "$tmp/expected"
  comm -23 "$tmp/exported" "$tmp/expected" > "$tmp/extra"
  comm -13 "$tmp/exported" "$tmp/expected" > "$tmp/missing"
  grep -v '^dpfl_' "$tmp/expected" > "$tmp/unprefixed"
  [ -s "$tmp/extra" ] &&
    t_fail "$so exports $(wc -l < "$tmp/extra") name(s) that no header under include/dpfl/ declares: $(names "$tmp/extra")"
  [ -s "$tmp/missing" ] &&
    t_fail "$so does not export $(wc -l < "$tmp/missing") name(s) that include/dpfl/ declares and the library" \
           "defines (is the header included where it is defined?): $(names "$tmp/missing")"
  [ -s "$tmp/unprefixed" ] && t_fail "public names without the dpfl_ prefix: $(names "$tmp/unprefixed")"
  echo "$(wc -l < "$tmp/exported") exported, $(wc -l < "$tmp/expected") declared and defined," \
       "$(($(wc -l < "$tmp/defined") - $(wc -l < "$tmp/expected"))) internal"
fi
t_end

t_begin "every function include/dpfl/*.h declares is defined in the library"
# gcc -aux-info lists the prototypes of a translation unit with the file and line each comes from.
if ! command -v gcc > /dev/null; then
  echo "(no gcc for -aux-info: skipped)"
else
  for h in include/dpfl/*.h; do echo "#include \"dpfl/${h##*/}\""; done > "$tmp/all.c"
  if ! log=$(LC_ALL=C gcc -std=c11 -Iinclude -aux-info "$tmp/aux" -fsyntax-only "$tmp/all.c" 2>&1); then
    t_fail "gcc -aux-info over the public headers: $(grep -E ': (fatal )?error:' <<<"$log" | head -3 | tr '\n' ' ')"
  else
    # "/* include/dpfl/core.h:34:NC */ extern dpfl_status dpfl_fail (dpfl_error *, ...);": the name before " ("
    sed -n 's|^/\* \(include/dpfl/[^ ]*\) \*/ extern [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\) (.*|\2 \1|p' "$tmp/aux" |
      LC_ALL=C sort -u -k1,1 > "$tmp/functions"
    [ -s "$tmp/functions" ] || t_fail "gcc -aux-info found no function in include/dpfl/*.h"
    awk 'NR == FNR { def[$1] = 1; next } !($1 in def) { print $1 " (" $2 ")" }' "$tmp/defined" "$tmp/functions" \
      > "$tmp/undefined"
    [ -s "$tmp/undefined" ] &&
      t_fail "declared in include/dpfl/ but defined nowhere in $lib: $(names "$tmp/undefined")"
    echo "$(wc -l < "$tmp/functions") functions declared"
  fi
fi
t_end
t_summary
