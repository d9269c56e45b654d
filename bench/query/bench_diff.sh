#!/bin/sh
# bench_diff.sh - etch diff of two large traces against the two imports it
# needs: the goal is diff <= import(A) + import(B) + 1 s.
#
#   bench/query/bench_diff.sh ETCH BENCH_QUERY_IMPORT [EVENTS (10000000)]
#                             [REPS (3)]
#
# The traces are bench_query_import's (the analysis benchmark's trace,
# written through BENCH_TRACE_OUT): A on 4 threads, B on 3, EVENTS events
# each, in a temporary directory. Each command runs with a fresh cache
# directory of its own (but "diff, cached", which reuses the first diff's);
# wall time, CPU time (user + system) and peak RSS from /usr/bin/time, the
# median of REPS runs, the commands of a run one after the other (import A,
# import B, diff, so that a slow patch on a shared machine hits them alike).
#   import A, import B   etch query TRACE "select 1", cache written
#   diff, first          etch diff A B, both caches written by it
#   diff, cached         the same again: the caches read, no trace
#   diff, --no-cache     both traces read into memory
set -eu
ETCH=$1
GEN=$2
EVENTS=${3:-10000000}
REPS=${4:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-diff-XXXXXX")
trap 'rm -rf "$dir"' EXIT
BENCH_TRACE_OUT=$dir/a.pftrace "$GEN" "$EVENTS" 4 0 > /dev/null
BENCH_TRACE_OUT=$dir/b.pftrace "$GEN" "$EVENTS" 3 0 > /dev/null
echo "A: $(stat -c %s "$dir/a.pftrace") bytes, B: $(stat -c %s "$dir/b.pftrace") bytes, $EVENTS events each; median of $REPS"
echo
# run KEY CACHE CMD...: appends "wall cpu rss_kb" to $dir/KEY.
run() {
  key=$1 cache=$2
  shift 2
  rm -rf "$cache"
  ETCH_CACHE_DIR=$cache /usr/bin/time -f "%e %U %S %M" -o "$dir/time" "$@" > "$dir/out"
  awk '{ printf "%s %.2f %d\n", $1, $2 + $3, $4 }' "$dir/time" >> "$dir/$key"
}
rep=0
while [ $rep -lt "$REPS" ]; do
  run a "$dir/c1" "$ETCH" query "$dir/a.pftrace" "select 1"
  run b "$dir/c2" "$ETCH" query "$dir/b.pftrace" "select 1"
  run diff "$dir/c3" "$ETCH" diff "$dir/a.pftrace" "$dir/b.pftrace"
  ETCH_CACHE_DIR=$dir/c3 /usr/bin/time -f "%e %U %S %M" -o "$dir/time" \
    "$ETCH" diff "$dir/a.pftrace" "$dir/b.pftrace" > "$dir/out"
  awk '{ printf "%s %.2f %d\n", $1, $2 + $3, $4 }' "$dir/time" >> "$dir/cached"
  run nocache "$dir/c4" "$ETCH" diff --no-cache "$dir/a.pftrace" "$dir/b.pftrace"
  rep=$((rep + 1))
done
# median COLUMN FILE
median() { sort -n -k"$1" "$2" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
printf '%-22s %8s %8s %9s\n' "" "wall (s)" "CPU (s)" "peak RSS"
for k in a:"import A" b:"import B" diff:"diff, first" cached:"diff, cached" nocache:"diff, --no-cache"; do
  f=${k%%:*}
  printf '%-22s %8s %8s %6d MB\n' "${k#*:}" "$(median 1 "$dir/$f")" \
    "$(median 2 "$dir/$f")" $(($(median 3 "$dir/$f") / 1024))
done
echo
head -8 "$dir/out"
