#!/usr/bin/env bash
# Renders a dpfl man page in roff (man(7)) from the tool's own --help text, so that the two never disagree:
#   scripts/manpage.sh DPFL            > dpfl.1          (from `dpfl --help`)
#   scripts/manpage.sh DPFL COMMAND    > dpfl-COMMAND.1  (from `dpfl COMMAND --help`; NAME from `dpfl --help`)
# DPFL is the dpfl binary.  The help texts follow one layout, which is all this relies on:
#   - an optional first line "dpfl VERSION - summary" (dpfl --help only) and a blank line;
#   - a block starting "usage: ", continuation lines indented: the SYNOPSIS;
#   - then paragraphs separated by blank lines: lines starting in column 1 are running text (filled), indented lines
#     are kept as they are (option lists, tables);
#   - a line "name:" (lower-case words and a colon, alone) starts a section NAME, e.g. "environment:".
# Characters outside ASCII become roff escapes (perl, part of every Debian system).  The page has no date, so the
# same binary always gives the same bytes.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: $0 DPFL [COMMAND]" >&2; exit 2; fi
bin=$1 cmd=${2:-}
main=$("$bin" --help)
version=$("$bin" --version | awk '{print $2}')
commands=$(printf '%s\n' "$main" | awk '/^commands:$/ {f = 1; next} f && /^$/ {exit} f {print $1}')
if [ -z "$cmd" ]; then
  page=dpfl text=$main
  summary=$(printf '%s\n' "$main" | sed -n '1s/^dpfl [^ ]* - //p')
  see=$(for c in $commands; do printf 'dpfl-%s ' "$c"; done)
else
  summary=$(printf '%s\n' "$main" |
    awk -v c="$cmd" '/^commands:$/ {f = 1; next} f && /^$/ {exit} f && $1 == c {sub(/^ *[^ ]+ +/, ""); print; exit}')
  if [ -z "$summary" ]; then echo "$0: '$cmd' is not a command listed by '$bin --help'" >&2; exit 1; fi
  page=dpfl-$cmd see=dpfl
  text=$("$bin" "$cmd" --help)
fi
if [ -z "$summary" ]; then echo "$0: no summary line for $page" >&2; exit 1; fi

printf '%s\n' "$text" | awk -v page="$page" -v summary="$summary" -v version="$version" -v see="$see" '
function esc(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  if (s ~ /^[.'"'"']/) s = "\\&" s
  return s
}
function end_block() { if (nf) print ".fi"; nf = 0 }
BEGIN {
  printf ".TH %s 1 \"\" \"dpfl %s\" \"dpfl manual\"\n", toupper(page), version
  print ".nh"       # no hyphenation and ragged right: the text reads as the help does
  print ".ad l"
  print ".SH NAME"
  print esc(page) " \\- " esc(summary)
  state = "start"
}
state == "start" && NR == 1 && /^dpfl [^ ]+ - / { next }       # the summary line (used for NAME)
state == "start" && /^$/ { next }
state == "start" && /^usage: / {
  print ".SH SYNOPSIS"
  print ".nf"
  sub(/^usage: /, "")
  print esc($0)
  state = "usage"
  next
}
state == "usage" && /^$/ { print ".fi"; state = "body"; para = 0; section = ""; next }
state == "usage" { sub(/^       /, ""); print esc($0); next }
state == "start" { state = "body" }                                # no usage block: straight to the text
state == "body" && /^[a-z][a-z ]*:$/ {                             # "environment:" -> .SH ENVIRONMENT
  end_block()
  sub(/:$/, "")
  print ".SH " toupper($0)
  section = $0; para = 0
  next
}
state == "body" && /^$/ { end_block(); para = 1; next }
state == "body" {
  if (section == "") { print ".SH DESCRIPTION"; section = "description"; para = 0 }
  if ($0 ~ /^[ ]/) {
    if (!nf) { if (para) print ".PP"; print ".nf"; nf = 1 }
  } else {
    if (nf) { print ".fi"; nf = 0 }
    if (para) print ".PP"
  }
  para = 0
  print esc($0)
}
END {
  end_block()
  if (state == "usage") print ".fi"
  print ".SH SEE ALSO"
  n = split(see, pages, " ")
  for (i = 1; i <= n; i++) printf ".BR %s (1)%s\n", esc(pages[i]), i < n ? "," : ""
}' | perl -CSD -pe 's/([^\x00-\x7f])/sprintf("\\[u%04X]", ord $1)/ge'   # UTF-8 text -> roff escapes (\[u2014])
