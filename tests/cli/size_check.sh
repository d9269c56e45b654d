#!/bin/sh
# size_check.sh SOURCE_DIR - no C file in src/ or tools/ over 1000 lines and
# no function over 200 lines (functions as ctags sees them, from the line of
# their name to their closing brace). A room that grew past these did
# several jobs; split it by job rather than raising the limits.
set -eu
src=$1
fail=0
cd "$src"
files=$(find src tools -name '*.c' | sort)
for f in $files; do
  n=$(wc -l <"$f")
  if [ "$n" -gt 1000 ]; then
    echo "$f: $n lines (at most 1000)"
    fail=1
  fi
done
if ! command -v ctags >/dev/null 2>&1; then
  echo "size_check: ctags not found (scripts/setup.sh installs universal-ctags)"
  exit 1
fi
# shellcheck disable=SC2086
ctags --fields=+ne --c-kinds=f -o - $files | awk -F'\t' '
  { line = ""; end = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    if (line != "" && end != "" && end - line + 1 > 200)
      printf "%s: %s is %d lines (at most 200)\n", $2, $1, end - line + 1 }' >"${TMPDIR:-/tmp}/etch_size.$$"
if [ -s "${TMPDIR:-/tmp}/etch_size.$$" ]; then
  cat "${TMPDIR:-/tmp}/etch_size.$$"
  fail=1
fi
rm -f "${TMPDIR:-/tmp}/etch_size.$$"
[ "$fail" -eq 0 ] && echo "size_check: every C file <= 1000 lines, every function <= 200"
exit "$fail"
