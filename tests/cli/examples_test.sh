#!/bin/sh
# examples_test.sh - runs every command the header comments of examples/*.c
# show, as a reader would type them, against the traces they make.
#
#   examples_test.sh ETCH_BIN EXAMPLES_BIN_DIR EXAMPLES_SOURCE_DIR
#
# A command is a line of the first comment indented by three spaces or more
# after " * " ("ETCH_OUT=x.pftrace ./prog", "etch query x.pftrace ..."); a
# line with an unclosed quote goes on with the next ones; "# or: CMD" after
# a command is a second command. Commands that make a trace (ETCH_OUT=...,
# etch record) run first, then the others. Each must exit 0 without a word
# from etch on stderr other than etch record's summary; then the output of
# some is checked exactly.
set -eu
etch_bin=$1
bin_dir=$2
src_dir=$3

work=$(mktemp -d "${TMPDIR:-/tmp}/etch-examples.XXXXXX")
trap 'rm -rf "$work"' EXIT
# etch query's cache of the traces' tables: here, not in the user's.
export ETCH_CACHE_DIR="$work/cache"
mkdir "$work/bin"
ln -s "$etch_bin" "$work/bin/etch"
for f in "$src_dir"/*.c; do
  name=$(basename "$f" .c)
  [ -x "$bin_dir/$name" ] && ln -s "$bin_dir/$name" "$work/$name"
done

# The commands of every header, one per line, into $work/commands.
for f in "$src_dir"/*.c; do
  awk '
    NR == 1 && $0 !~ /^\/\*/ { exit }
    /\*\// { exit }
    {
      line = $0
      sub(/^ \*/, "", line)
      if (open) {                       # inside a quote: go on
        sub(/^ +/, "", line)
        cmd = cmd " " line
      } else if (line ~ /^   +[^ ]/) {  # a command
        sub(/^ +/, "", line)
        cmd = line
      } else {
        next
      }
      n = gsub(/"/, "\"", cmd)
      open = n % 2
      if (open) next
      # "# or: CMD" is a second command; any other comment goes.
      alt = ""
      if (match(cmd, /#[ ]*or:[ ]*/)) {
        alt = substr(cmd, RSTART + RLENGTH)
        cmd = substr(cmd, 1, RSTART - 1)
      } else if (match(cmd, /[ ]#[ ]/)) {
        cmd = substr(cmd, 1, RSTART - 1)
      }
      sub(/ +$/, "", cmd)
      print cmd
      if (alt != "") { sub(/ +$/, "", alt); print alt }
      cmd = ""
    }
  ' "$f"
done > "$work/all"
grep -E 'ETCH_OUT=|etch record' "$work/all" > "$work/commands" || true
grep -vE 'ETCH_OUT=|etch record' "$work/all" >> "$work/commands" || true
if ! grep -q '^etch ' "$work/commands"; then
  echo "FAIL: no etch command found in the headers of $src_dir/*.c"
  exit 1
fi

fail=0
n=0
cd "$work"
while IFS= read -r cmd; do
  n=$((n + 1))
  echo "+ $cmd"
  st=0
  PATH="$work/bin:$PATH" sh -c "$cmd" > "out.$n" 2> "err.$n" < /dev/null || st=$?
  if [ "$st" -ne 0 ]; then
    echo "FAIL: exit status $st from: $cmd"
    cat "err.$n"
    fail=$((fail + 1))
    continue
  fi
  # etch's own errors and warnings start with "etch: ".
  if grep -q '^etch: ' "err.$n"; then
    echo "FAIL: etch complained running: $cmd"
    cat "err.$n"
    fail=$((fail + 1))
  fi
  case $cmd in
    *display_value*)
      # The custom events' query: one row per field, uint64 unsigned.
      for want in 'Demo\.Sample +debug\.u64 +18000000000000000000$' \
                  'Demo\.Sample +debug\.flag +true$' \
                  'Demo\.Sample +debug\.text +hello$' \
                  'Demo\.Setting +debug\.key +quality$'; do
        if ! grep -Eq "$want" "out.$n"; then
          echo "FAIL: no line matching '$want' in the output of: $cmd"
          cat "out.$n"
          fail=$((fail + 1))
        fi
      done ;;
    ./custom_analyzer*)
      if ! grep -qx '  u64 = 18000000000000000000' "out.$n" ||
         ! grep -qx 'setting quality = 3' "out.$n"; then
        echo "FAIL: unexpected output of: $cmd"
        cat "out.$n"
        fail=$((fail + 1))
      fi ;;
    etch\ record*)
      trace=$(echo "$cmd" | sed -n 's/.* -o \([^ ]*\).*/\1/p')
      if ! grep -q "^trace: $trace (" "err.$n"; then
        echo "FAIL: etch record did not name $trace: $cmd"
        cat "err.$n"
        fail=$((fail + 1))
      fi ;;
  esac
done < commands
echo "$n commands, $fail failed"
[ "$fail" -eq 0 ] && [ "$n" -gt 0 ]
