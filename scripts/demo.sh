#!/usr/bin/env bash
# demo.sh - builds etch, records a trace of examples/basic.c and shows what
# is in it. The first command of the README runs it after setup.sh.
#
#   scripts/demo.sh
#
# Environment: ETCH_BUILD_DIR (default build), ETCH_JOBS (default 2),
# ETCH_WERROR=ON|OFF (warnings as errors; scripts/test.sh sets ON, else the
# build directory's setting, OFF in a new one).
# The trace is written to out/basic.pftrace.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${ETCH_BUILD_DIR:-build}
jobs=${ETCH_JOBS:-2}
werror=()
if [ -n "${ETCH_WERROR:-}" ]; then werror=("-DETCH_WERROR=$ETCH_WERROR"); fi
mkdir -p out "$build"
trace=$root/out/basic.pftrace
log=$build/demo-build.log

say() { printf '\n== %s\n' "$*"; }

say "building etch ($build/, RelWithDebInfo, -j$jobs)"
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
           -DETCH_BUILD_TOOLS=ON "${werror[@]}" &&
       cmake --build "$build" -j "$jobs"; } > "$log" 2>&1; then
  # Build what the demo needs (the library and the example; the etch tool
  # if it builds) rather than give up on a problem elsewhere in the tree.
  echo "(the full build failed, see $log; building only the example)"
  if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
             -DETCH_BUILD_TOOLS=ON "${werror[@]}" ||
         cmake -S . -B "$build" -DETCH_BUILD_TOOLS=OFF; } >> "$log" 2>&1 ||
     ! cmake --build "$build" -j "$jobs" --target etch_example_basic \
       >> "$log" 2>&1; then
    tail -n 40 "$log"
    echo "demo.sh: build failed (full log: $log)" >&2
    exit 1
  fi
  cmake --build "$build" -j "$jobs" --target etch_cli >> "$log" 2>&1 || true
fi
echo "built: $build/examples/basic"

example=$build/examples/basic
etch=$build/tools/etch/etch
rm -f "$trace"

if [ -x "$etch" ]; then
  say "recording: etch record -o out/basic.pftrace -- $example"
  # record prints the path and a summary of the trace (etch stats --compact).
  "$etch" record -o "$trace" -- "$example" | tee "$build/demo-record.txt"
  if ! grep -q 'top slices' "$build/demo-record.txt"; then
    say "what is in it: etch stats out/basic.pftrace"
    "$etch" stats --top 5 "$trace"
  fi

  say "slices per thread, in SQL: etch query out/basic.pftrace \"select ...\""
  "$etch" query "$trace" \
    "select t.name as thread, s.name as slice, count(*) as n,
            sum(s.dur) // 1000 as total_us
     from slice s join thread_track tt on s.track_id = tt.id
     join thread t using (utid)
     group by thread, slice order by thread, total_us desc" ||
    echo "(query failed; etch stats above shows the same data)"
else
  say "recording: ETCH_OUT=out/basic.pftrace $example"
  echo "(the etch command line was not built; showing raw protobuf instead)"
  ETCH_OUT=$trace ETCH_COMPRESSION=none "$example"
  [ -s "$trace" ] || { echo "demo.sh: no trace was written" >&2; exit 1; }

  say "what is in it: protoc --decode_raw < out/basic.pftrace (first 60 lines)"
  if command -v protoc > /dev/null; then
    protoc --decode_raw < "$trace" | head -n 60 || true
    echo "... (field numbers of Perfetto's TracePacket; etch stats decodes them)"
  else
    od -A d -t x1 "$trace" | head -n 20
  fi
fi

say "trace file"
echo "$trace ($(wc -c < "$trace") bytes)"
echo "Open it at https://ui.perfetto.dev (\"Open trace file\"), or look at it with"
if [ -x "$etch" ]; then
  echo "  $etch stats|print|convert|query $trace"
else
  echo "  the etch command line (tools/etch) once it builds"
fi
