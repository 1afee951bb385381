#!/usr/bin/env bash
# Every dpfl subcommand reads its command line with the one option parser (src/cli/args.c), against the option table
# in its source.  For every command listed by `dpfl --help` (and account's --event mode), with the table's rows read
# from the command's source (each `.name = "--x"` / `.alias = "-x"` in its cli_NAME function, with its CLI_ type):
#   --help exits 0 and lists every row of the table under "options:" (and `dpfl help NAME` is the same text);
#   an unknown option, a missing value, a flag given a value and a value that is not a number each fail with exit
#   status 2 and one line on stderr naming the option;
# and no source of a subcommand looks at argv itself (no `argv[` in src/cli/cmd_*.c or account_event.c, no strcmp
# on argv outside args.c and main.c's command dispatch).  Run by `make test`; BUILD is the build folder.
set -u
cd "$(dirname "$0")/.."
. tests/shtest.sh
B=${BUILD:-build}
dpfl=$PWD/$B/dpfl
export DPFL_DATA=${DPFL_DATA:-$PWD/data}
tmp=$(mktemp -d /tmp/dpfl_cli_sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# rows FUNCTION: "TYPE NAME [ALIAS]" per row of the option table in the body of `int FUNCTION(int argc, ...)`
rows() {
  local file
  file=$(grep -l "^int $1(int argc, char \*\*argv)" src/cli/*.c | grep -v front.c | head -n 1)
  [ -n "$file" ] || return 1
  awk -v f="$1" '$0 ~ "^int " f "\\(int argc" {on = 1} on {print} on && /^}/ {exit}' "$file" | tr '\n' ' ' |
    grep -o '{\.name = "[^"]*"[^{]*' | while IFS= read -r row; do
      name=$(sed -n 's/^{\.name = "\([^"]*\)".*/\1/p' <<<"$row")
      alias=$(sed -n 's/.*\.alias = "\([^"]*\)".*/\1/p' <<<"$row")
      type=$(grep -o 'CLI_[A-Z]*' <<<"$row" | head -n 1)
      echo "$type $name $alias"
    done
}

# fails NAME TEXT CMD...: exit status 2, nothing on stdout, one line on stderr holding TEXT
fails() {
  local what=$1 text=$2 rc; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || t_fail "$what: exit status $rc, not 2 ($(head -c 300 "$tmp/err"))"
  [ -s "$tmp/out" ] && t_fail "$what: wrote to stdout: $(head -c 300 "$tmp/out")"
  [ "$(wc -l <"$tmp/err")" = 1 ] || t_fail "$what: not one line on stderr: $(head -c 600 "$tmp/err")"
  grep -qF -- "$text" "$tmp/err" || t_fail "$what: no '$text' in: $(head -c 300 "$tmp/err")"
}

cmds=$("$dpfl" --help | awk '/^commands:$/ {f = 1; next} f && /^$/ {exit} f {print $1}')
[ "$(wc -w <<<"$cmds")" -ge 14 ] || { t_begin "dpfl --help lists the commands"; t_fail "commands: $cmds"; t_end; }
# MODE: the command, the function that parses its table, and the argument that selects the mode ("-": none)
modes=$(for c in $cmds; do echo "$c cli_$c -"; done; echo "account cli_account_event --event")
# without ZeroMQ, serve and join say so before they read their arguments: only their --help is checked then
nozmq=""
if "$dpfl" serve 2>&1 | grep -q "without ZeroMQ"; then nozmq="serve join"; fi
total_rows=0
while read -r cmd fn sel; do
  [ "$sel" = - ] && sel=""
  t_begin "dpfl $cmd${sel:+ $sel}: --help lists its table; unknown options, missing values and bad numbers fail on one line"
  table=$(rows "$fn") || { t_fail "no 'int $fn(int argc, char **argv)' in src/cli"; t_end; continue; }
  [ -n "$table" ] || t_fail "$fn: no option table (no '{.name = ...' rows)"
  # the help, and its options section
  if ! "$dpfl" $cmd $sel --help >"$tmp/help" 2>"$tmp/err"; then t_fail "--help: exit status not 0: $(cat "$tmp/err")"; fi
  [ -s "$tmp/err" ] && t_fail "--help wrote to stderr: $(cat "$tmp/err")"
  head -n 1 "$tmp/help" | grep -q '^usage: dpfl ' || t_fail "--help does not start with 'usage: dpfl': $(head -n 1 "$tmp/help")"
  awk '/^options:$/ {f = 1; next} f && /^$/ {exit} f {print}' "$tmp/help" >"$tmp/options"
  grep -q '^  -h, --help ' "$tmp/options" || t_fail "--help lists no -h, --help under 'options:'"
  if [ -z "$sel" ]; then
    "$dpfl" help "$cmd" >"$tmp/help2" 2>&1
    cmp -s "$tmp/help" "$tmp/help2" || t_fail "'dpfl help $cmd' differs from 'dpfl $cmd --help'"
  fi
  while read -r type name alias; do
    [ -n "$name" ] || continue
    total_rows=$((total_rows + 1))
    for o in $name $alias; do
      grep -Eq -- "^  (-[a-zA-Z], )?$o( |,|$)" "$tmp/options" || t_fail "--help does not list $o under 'options:'"
      grep -qw -- "$cmd" <<<"$nozmq" && continue
      case $type in
        CLI_FLAG) fails "$o=1" "$o takes no value" "$dpfl" $cmd "$o=1" $sel ;;
        CLI_STRING|CLI_STRINGS|CLI_LONG|CLI_DOUBLE|CLI_DOUBLES)
          if [ "$o" = "$sel" ] || [ "$name" = "$sel" ]; then fails "$o (last)" "$o: missing value" "$dpfl" $cmd "$o"
          else fails "$o (last)" "$o: missing value" "$dpfl" $cmd $sel "$o"; fi ;;
        *) t_fail "$o: unknown row type '$type'" ;;
      esac
      case $type in
        CLI_LONG) fails "$o x" "$o: 'x' is not an integer" "$dpfl" $cmd "$o" x $sel ;;
        CLI_DOUBLE|CLI_DOUBLES) fails "$o x" "$o: 'x' is not a number" "$dpfl" $cmd "$o" x $sel ;;
      esac
    done
  done <<<"$table"
  if grep -qw -- "$cmd" <<<"$nozmq"; then
    echo "dpfl $cmd: built without ZeroMQ: its argument errors are not checked"
  else
    fails "unknown option" "unknown option '--no-such-option'" "$dpfl" $cmd --no-such-option $sel
    fails "unknown option=value" "unknown option '--no-such-option'" "$dpfl" $cmd --no-such-option=1 $sel
  fi
  t_end
done <<<"$modes"
echo "cli: $total_rows option rows in $(wc -l <<<"$modes") tables"

t_begin "the parser's other errors: given twice, out of range, positional arguments too many or missing, required"
fails "given twice" "--noise given twice" "$dpfl" account --noise 1 --noise 2
fails "range" "--canaries: 0 is out of range [1, " "$dpfl" audit x.ini --canaries 0
fails "range (from 0)" "--seed: -1 is out of range [0, " "$dpfl" audit --seed -1 x.ini
fails "two configs" "more than one CONFIG.ini given ('b.ini')" "$dpfl" train a.ini b.ini
fails "three key names" "unexpected argument 'c'" "$dpfl" keygen a b c
fails "no positional argument wanted" "unexpected argument 'stray'" "$dpfl" calibrate stray
fails "no model" "missing MODEL.bin or RUN_DIR" "$dpfl" eval --json
# the run commands' config or --resume (one function for both, src/cli/config_cli.c)
for c in "train" "serve --bind tcp://127.0.0.1:1 --keys $tmp"; do
  fails "$c: no config" "missing CONFIG.ini (see 'dpfl ${c%% *} --help')" "$dpfl" $c
  fails "$c: config and --resume" "give either CONFIG.ini or --resume RUN_DIR, not both" "$dpfl" $c a.ini --resume "$tmp"
  fails "$c: --resume --out" "--out cannot be used with --resume" "$dpfl" $c --resume "$tmp" --out x
  fails "$c: --resume --force" "--force cannot be used with --resume" "$dpfl" $c --resume "$tmp" --force
done
fails "no run directory" "missing RUN_DIR" "$dpfl" report
fails "required" "--steps is required" "$dpfl" calibrate --target-epsilon 1 --delta 1e-5 --q 0.01
fails "--p list, then a bad number" "--p: 'x' is not a number" "$dpfl" scf --p 0.1 0.2 x
# the repeatable ones are not "given twice", and --opt=value is the value
out=$("$dpfl" scf --noise 1 --client-rate 0.5 --local-steps 5 --rounds 10 --delta=1e-5 --p 0.1 --p=0.2 --json 2>&1) ||
  t_fail "--p twice / --delta=: $out"
grep -q '"epsilons":\[[^],]*,[^],]*\]' <<<"$out" || t_fail "--p 0.1 --p=0.2: not two epsilons: $out"
t_end

t_begin "what parses runs: exit status 0 and the output of keygen, data info, account"
out=$("$dpfl" keygen "$tmp/keys" server 2>&1) || t_fail "keygen: exit status $?: $out"
[ -s "$tmp/keys/server.key" ] && grep -q "^$tmp/keys/server.pub " <<<"$out" || t_fail "keygen wrote no key pair: $out"
out=$("$dpfl" data info heart --seed 3 2>&1) || t_fail "data info heart --seed 3: exit status $?: $out"
grep -q "^dataset  heart$" <<<"$out" || t_fail "data info heart: $out"
out=$("$dpfl" account --steps=100 --q 0.01 --noise 1 --epsilon 1 --json 2>&1) || t_fail "account: exit status $?: $out"
grep -q '"delta":' <<<"$out" || t_fail "account --epsilon: no delta: $out"
t_end

# A printed value taken back as a setting stays within its target: calibrate's noise (rounded up) and scf's p_safe
# (rounded down), accounted again from the printed text alone; before, they were rounded to nearest and 1.08019 (for a
# target of 1) gave 1.0000039, p_safe 0.0171071 gave 1.0000014 (audit 5).
t_begin "printed calibrations are on the safe side when taken back"
for case in "1 1e-5 0.01 100" "3 1e-5 0.004 5000" "0.5 1e-6 0.02 300" "8 1e-3 0.1 1500"; do
  read -r eps delta q steps <<<"$case"
  for acc in rdp pld; do
    out=$("$dpfl" calibrate --target-epsilon "$eps" --delta "$delta" --q "$q" --steps "$steps" --accountant "$acc" 2>&1)
    z=$(sed -n 's/^noise = \([^ ]*\) .*/\1/p' <<<"$out")
    back=$("$dpfl" account --noise "$z" --q "$q" --steps "$steps" --delta "$delta" --accountant "$acc" --json 2>&1)
    t_le "$(json_num epsilon <<<"$back")" "$eps" || t_fail "calibrate $case $acc printed noise $z: $back"
  done
done
for eps in 1 2.5; do
  args=(--noise 1 --client-rate 0.5 --local-steps 5 --rounds 20 --delta 1e-5 --bound pld)
  p=$("$dpfl" scf "${args[@]}" --epsilon "$eps" 2>&1 | sed -n 's/.*p_safe = \([^ ]*\) .*/\1/p')
  back=$("$dpfl" scf "${args[@]}" --p "$p" --json 2>&1)
  t_le "$(json_num epsilon <<<"$back")" "$eps" || t_fail "scf epsilon $eps printed p_safe '$p': $back"
done
t_end

t_begin "no subcommand reads argv itself: every one goes through cli_parse"
for f in src/cli/cmd_*.c src/cli/account_event.c; do
  hits=$(grep -n 'argv\[' "$f") && t_fail "$f indexes argv: $hits"
  n_cmd=$(grep -c '^int cli_[a-z0-9_]*(int argc, char \*\*argv)' "$f")
  n_parse=$(grep -c 'cli_parse(&cmd, argc, argv)' "$f")
  [ "$n_cmd" -ge 1 ] || t_fail "$f defines no subcommand"
  [ "$n_cmd" = "$n_parse" ] || t_fail "$f: $n_cmd subcommands, $n_parse calls of cli_parse"
done
# strcmp / strncmp on an argument of argv: only the parser, and main's choice of the command
hits=$(grep -nE 'str(n)?cmp\([^;]*argv' src/cli/*.c | grep -vE '^src/cli/(args|main)\.c:') &&
  t_fail "strcmp on argv outside args.c and main.c: $hits"
t_end
t_summary
