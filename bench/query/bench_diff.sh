#!/bin/sh
# bench_diff.sh - etch diff of two large traces against the two imports it
# needs: the goal is diff <= import(A) + import(B) + 1 s.
#
#   bench/query/bench_diff.sh ETCH BENCH_QUERY_IMPORT [EVENTS (10000000)]
#
# The traces are bench_query_import's (the analysis benchmark's trace,
# written through BENCH_TRACE_OUT): A on 4 threads, B on 3, EVENTS events
# each, in a temporary directory. Each command runs with a cache directory
# of its own; wall time and peak RSS from /usr/bin/time.
#   import A, import B   etch query TRACE "select 1", cache written
#   diff, first          etch diff A B, both caches written by it
#   diff, cached         the same again: the caches read, no trace
#   diff, --no-cache     both traces read into memory
set -eu
ETCH=$1
GEN=$2
EVENTS=${3:-10000000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-diff-XXXXXX")
trap 'rm -rf "$dir"' EXIT
BENCH_TRACE_OUT=$dir/a.pftrace "$GEN" "$EVENTS" 4 0 > /dev/null
BENCH_TRACE_OUT=$dir/b.pftrace "$GEN" "$EVENTS" 3 0 > /dev/null
echo "A: $(stat -c %s "$dir/a.pftrace") bytes, B: $(stat -c %s "$dir/b.pftrace") bytes, $EVENTS events each"
echo
# run NAME CACHE CMD...: prints NAME, wall seconds and peak RSS.
run() {
  name=$1 cache=$2
  shift 2
  ETCH_CACHE_DIR=$cache /usr/bin/time -f "%e %M" -o "$dir/time" "$@" > "$dir/out"
  read -r wall rss < "$dir/time"
  printf '%-22s %8s s %8d MB\n' "$name" "$wall" $((rss / 1024))
}
run "import A" "$dir/c1" "$ETCH" query "$dir/a.pftrace" "select 1"
run "import B" "$dir/c2" "$ETCH" query "$dir/b.pftrace" "select 1"
run "diff, first" "$dir/c3" "$ETCH" diff "$dir/a.pftrace" "$dir/b.pftrace"
run "diff, cached" "$dir/c3" "$ETCH" diff "$dir/a.pftrace" "$dir/b.pftrace"
run "diff, --no-cache" "$dir/c4" "$ETCH" diff --no-cache "$dir/a.pftrace" "$dir/b.pftrace"
echo
head -8 "$dir/out"
