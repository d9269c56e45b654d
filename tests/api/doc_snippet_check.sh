#!/bin/sh
# doc_snippet_check.sh - compile the C block a documentation page shows under
# a heading, as a user would copy it; used by the API tests
# (tests/api/CMakeLists.txt).
#
#   doc_snippet_check.sh DOC.md 'HEADING' OUTDIR -- COMPILER [FLAGS...]
#
# The first ```c block after the line '## HEADING' (any level) is written
# to OUTDIR/snippet.c and compiled by compile_check.sh with COMPILER FLAGS.
set -eu
doc=$1
heading=$2
outdir=$3
shift 3
[ "${1:-}" = "--" ] || { echo "usage: $0 DOC HEADING OUTDIR -- COMPILER [FLAGS...]"; exit 2; }
mkdir -p "$outdir"
awk -v h="$heading" '
  !found && $0 ~ /^#+ / { t = $0; sub(/^#+ +/, "", t); if (t == h) found = 1; next }
  found && !inblock && /^```c *$/ { inblock = 1; next }
  inblock && /^``` *$/ { exit }
  inblock { print }
' "$doc" > "$outdir/snippet.c"
if [ ! -s "$outdir/snippet.c" ]; then
  echo "FAILED: no \`\`\`c block under '$heading' in $doc"
  exit 1
fi
echo "--- the block under '$heading' in $doc:"
cat "$outdir/snippet.c"
echo "---"
exec sh "$(dirname "$0")/compile_check.sh" "$outdir" "$outdir/snippet.c" "$@"
