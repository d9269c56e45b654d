#!/usr/bin/env bash
# bench.sh - build etch optimised in a build directory of its own and run the
# SDK benchmarks, printing every table of docs/performance.md:
#
#   1. ns per event, 1 and 2 threads, against a bare clock read and LTTng-UST
#   2. instructions per event under callgrind (what is left besides the clock)
#   3. bytes of trace per event (compression none and deflate)
#   4. the stripped size of the SDK library
#   5. system mode (libetch into etchd) against in-process, etchd's throughput
#   6. interceptors: a no-op one and the console against in-process
#   7. counters, bookmarks, frames, run-time names (bench/insights)
#   8. memory tracing: a malloc/free pair without and with libetch_malloc.so
#   9. custom events against a slice with the same args (bench/custom)
#
# Usage: scripts/bench.sh            everything
#        scripts/bench.sh timing     one part: timing | callgrind | bytes | size |
#                                    service | intercept | insights | memory |
#                                    custom
#
# Environment:
#   BUILD_DIR   build directory          default <repo>/build-bench
#   BUILD_TYPE  CMake build type         default RelWithDebInfo (-O2 -g)
#   JOBS        parallel build jobs      default 2
#   N           events per thread/run    default 2000000
#   REPS        timing repetitions       default 5 (the median is printed)
#   CG_N        iterations per callgrind case   default 100000
#   SERVICE_N   iterations per thread and case of bench_service  default 1000000
#   TRANSPORT_N instants of bench_transport's producer, each way   default 4000000
#   PAIRS       begin/end pairs for the bytes table  default 1000000
#   LTTNG       0 to skip setting up an LTTng session  default 1
#   ANNOTATE    1 to print callgrind_annotate of etch's slice begin and end
#   BENCH_NO_SETUP  1 to skip scripts/setup.sh --bench (installs what is
#               missing, lttng-tools included)
#   BENCH_BUFFER_KB, BENCH_CASES, BENCH_PIN  passed to bench_sdk (see its
#               header)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-2}
N=${N:-2000000}
REPS=${REPS:-5}
CG_N=${CG_N:-100000}
PAIRS=${PAIRS:-1000000}
WHAT=${1:-all}

want() { [ "$WHAT" = all ] || [ "$WHAT" = "$1" ]; }

# Installs what is missing, LTTng's session daemon included (BENCH_NO_SETUP=1
# skips it).
if [ "${BENCH_NO_SETUP:-0}" != 1 ]; then
  "$ROOT/scripts/setup.sh" --bench
fi

echo "== build ($TYPE) in $(basename "$BUILD")"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE="$TYPE" -DETCH_WERROR=ON >/dev/null
cmake --build "$BUILD" --target etch etch_static bench_sdk bench_sdk_static \
  -j"$JOBS" >/dev/null
BIN=$BUILD/bench/sdk/bench_sdk
BIN_STATIC=$BUILD/bench/sdk/bench_sdk_static

TMP=$(mktemp -d)
LTTNG_SESSION=""
SESSIOND_PID=""

cleanup() {
  if [ -n "$LTTNG_SESSION" ]; then
    lttng stop "$LTTNG_SESSION" >/dev/null 2>&1 || true
    lttng destroy "$LTTNG_SESSION" >/dev/null 2>&1 || true
  fi
  if [ -n "$SESSIOND_PID" ]; then kill "$SESSIOND_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

echo
echo "== machine"
echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "tsc:      $(grep -m1 -o -w -e constant_tsc /proc/cpuinfo || echo no) $(grep -m1 -o -w -e nonstop_tsc /proc/cpuinfo || echo no)"
echo "kernel:   $(uname -r)"
echo "compiler: $(${CC:-cc} --version | head -1)"
echo "commit:   $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on the machine adds noise)"

# ---- LTTng-UST: a recording session, so tracepoints cost their full price.
# Snapshot mode keeps the channel in overwrite mode: no event is discarded
# however fast the benchmark goes, and nothing is written to disk.
lttng_setup() {
  [ "${LTTNG:-1}" = 1 ] || return 1
  command -v lttng >/dev/null && command -v lttng-sessiond >/dev/null || return 1
  if ! lttng list >/dev/null 2>&1; then
    lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || return 1
    local pidfile=/var/run/lttng/lttng-sessiond.pid
    [ "$(id -u)" = 0 ] || pidfile=$HOME/.lttng/lttng-sessiond.pid
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -s "$pidfile" ] && break
      sleep 0.2
    done
    SESSIOND_PID=$(cat "$pidfile" 2>/dev/null || true)
    lttng list >/dev/null 2>&1 || return 1
  fi
  # Another recording session would record every tracepoint a second time
  # (and count it twice): no LTTng figures then.
  local others
  others=$(lttng list 2>/dev/null | sed -nE 's/^ *[0-9]+\) ([^ ]+) .*\[active\].*/\1/p' | tr '\n' ' ')
  if [ -n "$others" ]; then
    echo "lttng:    other LTTng sessions are recording ($others): not measured" >&2
    return 1
  fi
  LTTNG_SESSION=etchbench-$$
  lttng create "$LTTNG_SESSION" --snapshot --output="$TMP/lttng" >/dev/null 2>&1 ||
    { LTTNG_SESSION=""; return 1; }
  # Every etchbench event but `off`, which stays a disabled tracepoint.
  lttng enable-event -u -s "$LTTNG_SESSION" \
    etchbench:slice_begin,etchbench:slice_end,etchbench:instant,etchbench:counter \
    >/dev/null 2>&1 || return 1
  lttng start "$LTTNG_SESSION" >/dev/null 2>&1 || return 1
}

lttng_teardown() {
  if [ -n "$LTTNG_SESSION" ]; then
    lttng stop "$LTTNG_SESSION" >/dev/null 2>&1 || true
    lttng destroy "$LTTNG_SESSION" >/dev/null 2>&1 || true
    LTTNG_SESSION=""
  fi
}

if want timing || want callgrind; then
  if lttng_setup; then
    echo "lttng:    session $LTTNG_SESSION (snapshot, overwrite mode) recording etchbench:*"
  else
    echo "lttng:    no session could be set up: LTTng columns are the disabled cost"
  fi
  echo "          benchmark sees: $("$BIN" --lttng-state)"
fi

# ---- 1. timing
if want timing; then
  echo
  echo "== 1. ns per event"
  "$BIN" --n "$N" --reps "$REPS"
fi

# ---- 2. instructions
# Ir of one case between CALLGRIND_TOGGLE_COLLECT (the loop only) / events.
cg_ir() { # bin case -> "Ir_per_event"
  local bin=$1 c=$2 out=$TMP/cg.$(basename "$1").$2
  local info
  info=$(valgrind --tool=callgrind --collect-atstart=no \
    --callgrind-out-file="$out" "$bin" --callgrind "$c" --n "$CG_N" 2>/dev/null)
  local per
  per=$(echo "$info" | sed -n 's/.*iterations, \([0-9]*\) events each/\1/p')
  local ir
  ir=$(sed -n 's/^summary: *//p' "$out")
  mkdir -p "$BUILD/callgrind"
  cp "$out" "$BUILD/callgrind/$(basename "$bin").$c.out"
  awk -v ir="$ir" -v n="$CG_N" -v per="$per" 'BEGIN { printf "%.1f", ir / (n * per) }'
}

if want callgrind; then
  echo
  if ! command -v valgrind >/dev/null; then
    echo "== 2. instructions per event: valgrind not installed, skipped"
  else
    echo "== 2. instructions per event (callgrind, $CG_N iterations per case, loop included)"
    echo
    printf "%-34s %10s %10s %12s %12s\n" "case" "shared" "static" \
      "shared-clock" "static-clock"
    declare -A IR_SH IR_ST
    cases=$("$BIN" --list | awk '{print $1}')
    for c in $cases; do
      case $c in
        lttng_disabled | lttng_off) ;;
        lttng_*)
          # Recording tracepoints: only the shared build registers its
          # provider with a session (the static build's tracepoints stay
          # disabled), and only when a session records: never a peer at
          # a cost it did not pay.
          IR_ST[$c]=-
          if [ -n "$LTTNG_SESSION" ]; then IR_SH[$c]=$(cg_ir "$BIN" "$c"); else IR_SH[$c]=-; fi
          continue ;;
      esac
      IR_SH[$c]=$(cg_ir "$BIN" "$c")
      IR_ST[$c]=$(cg_ir "$BIN_STATIC" "$c")
    done
    for c in $cases; do
      label=$("$BIN" --list | awk -v c="$c" '$1 == c { $1 = ""; sub(/^ /, ""); print }')
      case $c in
        empty|rdtsc|boottime) ref="" ;;
        disabled) ref=empty ;;
        lttng_disabled) ref=empty ;;
        lttng_*) ref=boottime ;;
        *) ref=rdtsc ;;
      esac
      d1=-; d2=-
      if [ -n "$ref" ] && [ "${IR_SH[$c]}" != - ]; then
        d1=$(awk -v a="${IR_SH[$c]}" -v b="${IR_SH[$ref]}" 'BEGIN { printf "%.1f", a - b }')
      fi
      if [ -n "$ref" ] && [ "${IR_ST[$c]}" != - ]; then
        d2=$(awk -v a="${IR_ST[$c]}" -v b="${IR_ST[$ref]}" 'BEGIN { printf "%.1f", a - b }')
      fi
      printf "%-34s %10s %10s %12s %12s\n" "$label" "${IR_SH[$c]}" "${IR_ST[$c]}" "$d1" "$d2"
    done
    echo
    echo "Instructions per event of the whole loop body (loop counter, category"
    echo "check, call, emitter). 'clock' is the same loop around the clock alone:"
    echo "rdtsc for etch, clock_gettime for LTTng (it reads CLOCK_MONOTONIC through"
    echo "the vDSO, the same code path as BOOTTIME), the empty loop for 'disabled'."
    echo "So the last two columns are what each event costs besides reading the clock."
    echo "shared: libetch.so through the PLT; static: libetch.a. LTTng recording"
    echo "cases: shared build only, and only with a session of this run recording"
    echo "(- otherwise: a tracepoint that does not record measures nothing)."
    if [ "${ANNOTATE:-0}" = 1 ]; then
      for c in begin end; do
        echo
        echo "-- callgrind_annotate, etch $c (static)"
        callgrind_annotate --auto=yes "$BUILD/callgrind/bench_sdk_static.$c.out" \
          >"$TMP/annotate.txt" 2>/dev/null || true
        sed -n '/Ir.*file:function/,$p' "$TMP/annotate.txt" | awk 'NR <= 200'
      done
    fi
  fi
fi

lttng_teardown

# ---- 3. bytes
if want bytes; then
  echo
  echo "== 3. bytes of trace per event"
  TMPDIR=$TMP "$BIN" --bytes --n "$PAIRS"
fi

# ---- 4. size
if want size; then
  echo
  echo "== 4. SDK size (what instrumented code links: base, pb, buffer, sdk)"
  so=$(readlink -f "$BUILD/src/libetch.so")
  cp "$so" "$TMP/libetch.so"
  strip "$TMP/libetch.so"
  cp "$BUILD/src/libetch.a" "$TMP/libetch.a"
  strip --strip-debug "$TMP/libetch.a"
  printf "%-44s %10s\n" "file" "bytes"
  printf "%-44s %10s\n" "libetch.so, as built (-g)" "$(stat -c %s "$so")"
  printf "%-44s %10s\n" "libetch.so, stripped" "$(stat -c %s "$TMP/libetch.so")"
  printf "%-44s %10s\n" "libetch.a, debug info stripped" "$(stat -c %s "$TMP/libetch.a")"
  printf "%-44s %10s\n" "libetch.a, code+data of its objects (size -t)" \
    "$(size -t "$TMP/libetch.a" | awk 'END { print $4 }')"
  echo
  echo "Sections of the stripped libetch.so:"
  size -A "$TMP/libetch.so" | awk '$2 > 0 && NR > 2 && $1 != "Total" { printf "  %-20s %8d\n", $1, $2 } $1 == "Total" { printf "  %-20s %8d\n", "total", $2 }'
fi

# ---- 5. system mode and etchd
if want service; then
  echo
  echo "== 5. System mode (libetch into a private etchd) against in-process; etchd's throughput"
  "$BUILD/bench/service/bench_service" "$BUILD/tools/etchd/etchd" \
    "$BUILD/tools/etch/etch" "${SERVICE_N:-1000000}"
  echo
  echo "== 5b. etchd's read-back alone (trace buffer -> trace file)"
  cmake --build "$BUILD" --target bench_readback -j"$JOBS" >/dev/null
  "$BUILD/bench/service/bench_readback" 256 5
  echo
  echo "== 5c. One producer by shared memory, loopback TCP (emulated) and a relay"
  cmake --build "$BUILD" --target bench_transport -j"$JOBS" >/dev/null
  "$BUILD/bench/service/bench_transport" "$BUILD/tools/etchd/etchd" \
    "$BUILD/tools/etch/etch" "${TRANSPORT_N:-4000000}"
fi

# ---- 6. interceptors
if want intercept; then
  echo
  echo "== 6. Interceptors: a no-op one and the console against in-process"
  cmake --build "$BUILD" --target bench_intercept -j"$JOBS" >/dev/null
  "$BUILD/bench/intercept/bench_intercept" "${INTERCEPT_N:-200000}" "$REPS"
fi

# ---- 7. counters, bookmarks, frames, run-time names
if want insights; then
  echo
  echo "== 7. Counters, bookmarks, frames, run-time names"
  cmake --build "$BUILD" --target bench_insights -j"$JOBS" >/dev/null
  "$BUILD/bench/insights/bench_insights" "${INSIGHTS_N:-1000000}" "$REPS"
fi

# ---- 9. custom events
if want custom; then
  echo
  echo "== 9. Custom events: 3 fields against an instant with the same args"
  cmake --build "$BUILD" --target bench_custom -j"$JOBS" >/dev/null
  "$BUILD/bench/custom/bench_custom" "${CUSTOM_N:-1000000}" "$REPS"
fi

# ---- 8. memory tracing
if want memory; then
  echo
  echo "== 8. Memory tracing: ns per malloc/free pair, per malloc and per free (median of 5)"
  cmake --build "$BUILD" --target bench_malloc etch_malloc -j"$JOBS" >/dev/null
  MB=$BUILD/bench/memory/bench_malloc
  ML=$BUILD/tools/malloc/libetch_malloc.so
  MN=${MALLOC_N:-2000000}
  plain=$("$MB" "$MN")
  off=$(LD_PRELOAD=$ML "$MB" "$MN")
  rec=$(LD_PRELOAD=$ML ETCH_OUT="$TMP/malloc.pftrace" ETCH_BUFFER_KB=262144 \
        ETCH_COMPRESSION=none "$MB" "$MN")
  # "1 X" rows are pairs; "malloc 1 X" and "free 1 X" one call alone.
  for what in pair malloc free; do
    echo
    printf "%-34s %10s %10s\n" "ns per $what" "1 thread" "2 threads"
    for row in "no preload:$plain" "preload, nothing recording:$off" \
               "preload, recording:$rec"; do
      name=${row%%:*}
      vals=${row#*:}
      printf "%-34s %10s %10s\n" "$name" \
        "$(echo "$vals" | awk -v w="$what" '
            w == "pair" && NF == 2 && $1 == 1 { print $2 }
            w != "pair" && $1 == w && $2 == 1 { print $3 }')" \
        "$(echo "$vals" | awk -v w="$what" '
            w == "pair" && NF == 2 && $1 == 2 { print $2 }
            w != "pair" && $1 == w && $2 == 2 { print $3 }')"
    done
  done

  # 8b. Side by side with heaptrack, in alternating rounds: etch record
  # --malloc with its defaults (nothing lost, streaming), without and with
  # call stacks, and heaptrack (which also loses nothing and takes a stack
  # each time); ns per malloc/free pair on 1 and 4 threads and the
  # program's peak memory.
  if command -v heaptrack >/dev/null; then
    echo
    echo "== 8b. etch record --malloc and heaptrack: ns per pair (median of 5), peak RSS"
    cmake --build "$BUILD" --target etch_cli bench_malloc etch_malloc \
      -j"$JOBS" >/dev/null
    E=$BUILD/tools/etch/etch
    HN=${HEAPTRACK_N:-200000}
    printf "%-28s %10s %10s %12s %10s\n" "" "1 thread" "4 threads" \
      "peak RSS KB" "CPU/pair"
    # CPU/pair: the user and system time of every process of the run (the
    # program, etch record, heaptrack's interpreter), in ns, over all the
    # pairs made (5 runs on 1 and on 4 threads): what the way costs the
    # machine, whatever the other load does to its wall time.
    TM="/usr/bin/time -f cpu_s=%U+%S -o $TMP/cpu"
    [ -x /usr/bin/time ] || TM=
    for round in 1 2 3; do
      for way in plain etch-no-stacks etch-stacks heaptrack; do
        rm -f "$TMP/cpu"
        case $way in
          plain) out=$($TM "$MB" "$HN" pairs) ;;
          etch-no-stacks) out=$(ETCH_MALLOC_STACKS=0 $TM "$E" record -q \
                 --malloc -o "$TMP/m.pftrace" -- "$MB" "$HN" pairs 2>/dev/null) ;;
          etch-stacks) out=$($TM "$E" record -q --malloc -o "$TMP/m.pftrace" \
                 -- "$MB" "$HN" pairs 2>/dev/null) ;;
          heaptrack) out=$($TM heaptrack -o "$TMP/ht" "$MB" "$HN" pairs \
                 2>/dev/null | grep -E '^([0-9]|maxrss)') ;;
        esac
        cpu=$(awk -F'[=+]' -v n="$HN" '$1 == "cpu_s" {
                printf "%.0f", ($2 + $3) * 1e9 / (25 * n) }' \
              "$TMP/cpu" 2>/dev/null)
        rm -f "$TMP/m.pftrace" "$TMP"/ht*
        printf "%-28s %10s %10s %12s %10s\n" "round $round $way" \
          "$(echo "$out" | awk '$1 == 1 { print $2 }')" \
          "$(echo "$out" | awk '$1 == 4 { print $2 }')" \
          "$(echo "$out" | awk '$1 == "maxrss_kb" { print $2 }')" "${cpu:--}"
      done
    done
  fi
fi
