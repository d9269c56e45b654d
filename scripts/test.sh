#!/usr/bin/env bash
# test.sh - runs the whole test suite; the second command of the README, and
# what CI runs (.ci/run).
#
#   scripts/test.sh            everything: 7-11 minutes on 2 cores, 4 of
#                              them fuzzing (12 targets x 15 s) (measured:
#                              6m55s with the build trees already there, 2
#                              cores otherwise idle; 10m55s from scratch with
#                              both cores busy)
#   scripts/test.sh --quick    the normal build only (about a minute)
#
# Stages:
#   normal      RelWithDebInfo build, every test (ctest); the ClickHouse
#               tests (tests/fleet, label clickhouse) start their own
#               servers on loopback, and are skipped, saying so, when
#               clickhouse-server is not installed (setup.sh installs it)
#   protobuf    every .pftrace the tests wrote (into $ETCH_TEST_OUT) must
#               decode with protoc --decode_raw
#   demo        scripts/demo.sh (the README's first command) works
#   interop     etch against Perfetto's own programs (traced, perfetto,
#               trace_processor_shell, the C SDK) in every direction, each
#               scenario ETCH_INTEROP_RUNS times (default 3), when
#               ETCH_PERFETTO_DIR names a directory of them (bin/, lib/,
#               include/); skipped, saying so, without it (tests/interop)
#   builds      Debug, Release, RelWithDebInfo and MinSizeRel with gcc and
#               with clang: the libraries, etch and etchd compile without a
#               warning (each build counts as one test)
#   asan+ubsan  AddressSanitizer + UndefinedBehaviorSanitizer build with
#               etch's invariant checks on (-DETCH_DCHECKS=ON: ETCH_DCHECK
#               and ETCH_NEVER abort), every test
#   tsan        ThreadSanitizer build, the tests labelled `threads`
#   fuzz        clang build of fuzz/ (libFuzzer, ASan, UBSan); every target
#               runs its seed corpus and then fuzzes for ETCH_FUZZ_SECONDS
#               (default 15)
#
# Ends with "N passed, N failed" (tests of all stages) and exits non-zero if
# anything failed. Environment: ETCH_BUILD_DIR (default build; the other
# builds go to <dir>-asan, <dir>-tsan, <dir>-fuzz and <dir>-types/),
# ETCH_JOBS (default 2), ETCH_PERFETTO_DIR (Perfetto's programs, for the
# interop stage), ETCH_INTEROP_RUNS,
# ETCH_NO_SETUP=1 to skip scripts/setup.sh.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self=$root/scripts/$(basename "${BASH_SOURCE[0]}")
cd "$root"

quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
  esac
done

build=${ETCH_BUILD_DIR:-build}
jobs=${ETCH_JOBS:-2}
start=$SECONDS
passed=0
failed=0
summary=()

say() { printf '\n==== %s\n' "$*"; }
elapsed() {
  local s=$(($SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}
# record STAGE PASS|FAIL DETAIL T0
record() {
  summary+=("$(printf '  %-11s %-4s  %-40s %s' "$1" "$2" "$3" "$(elapsed "$4")")")
}

if [ "${ETCH_NO_SETUP:-0}" != 1 ]; then
  say "setup: scripts/setup.sh"
  scripts/setup.sh
fi

# Configures and builds DIR with the given cmake options; the log goes to
# DIR/test-build.log and its end is shown on failure. TARGETS (may be empty)
# limits the build. Warnings are errors (ETCH_WERROR=ON) in every build of
# the suite; a user's build has them off by default.
build_tree() {
  local dir=$1 targets=$2
  shift 2
  mkdir -p "$dir"
  local log=$dir/test-build.log
  echo "configure + build $dir ($*)"
  if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETCH_WERROR=ON \
       "$@" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "configure of $dir failed (log: $log)"
    return 1
  fi
  # shellcheck disable=SC2086
  if ! cmake --build "$dir" -j "$jobs" ${targets:+--target $targets} \
       >> "$log" 2>&1; then
    grep -E -B2 -A6 'error|Error [0-9]' "$log" | head -n 120
    echo "build of $dir failed (log: $log)"
    return 1
  fi
}

# Runs ctest in DIR with extra arguments (prefixed by the command in
# ctest_wrap, if any); adds its counts to the totals. Sets ctest_detail.
ctest_wrap=()
run_ctest() {
  local dir=$1
  shift
  local log=$dir/test-ctest.log rc=0
  (cd "$dir" &&
   "${ctest_wrap[@]}" ctest --output-on-failure --no-tests=error -j "$jobs" "$@") \
    < /dev/null 2>&1 | tee "$log" || rc=$?
  local line total nfail
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' \
         "$log" | tail -n 1 || true)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    ctest_detail="ctest did not run (exit $rc)"
    return 1
  fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<< "$line")
  nfail=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<< "$line")
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
  ctest_detail="$((total - nfail))/$total tests passed"
  [ "$rc" -eq 0 ] && [ "$nfail" -eq 0 ]
}

# ---- normal build ----------------------------------------------------------------
t0=$SECONDS
say "normal build: $build"
mkdir -p "$build"
trace_dir=$(cd "$build" && pwd)/test-traces
rm -rf "$trace_dir"
mkdir -p "$trace_dir"
normal_built=0
# Options given explicitly, so that a cache left by another configuration
# of the same directory does not change what this stage tests.
perfetto_dir=${ETCH_PERFETTO_DIR:-}
if [ -n "$perfetto_dir" ]; then perfetto_dir=$(cd "$perfetto_dir" && pwd); fi
if build_tree "$build" "" -DETCH_SANITIZE= -DETCH_DCHECKS=OFF -DETCH_BUILD_TESTS=ON \
     -DETCH_BUILD_TOOLS=ON -DETCH_PERFETTO_DIR="$perfetto_dir"; then
  normal_built=1
  if ETCH_TEST_OUT=$trace_dir run_ctest "$build"; then
    record normal PASS "$ctest_detail" "$t0"
  else
    record normal FAIL "$ctest_detail" "$t0"
  fi
else
  failed=$((failed + 1))
  record normal FAIL "build failed: $build/test-build.log" "$t0"
fi

# ---- every trace written by the tests is well-formed protobuf ---------------------
t0=$SECONDS
say "protobuf: protoc --decode_raw on the traces the tests wrote"
if [ $normal_built = 1 ]; then
  n=0
  bad=0
  while IFS= read -r -d '' f; do
    n=$((n + 1))
    if ! err=$(protoc --decode_raw < "$f" 2>&1 > /dev/null); then
      bad=$((bad + 1))
      echo "not valid protobuf: $f: $(head -c 300 <<< "$err")"
    fi
  done < <(find "$trace_dir" -name '*.pftrace' -print0 | sort -z)
  echo "$n traces checked, $bad invalid"
  if [ $n -gt 0 ] && [ $bad -eq 0 ]; then
    passed=$((passed + 1))
    record protobuf PASS "$n traces decode" "$t0"
  else
    failed=$((failed + 1))
    [ $n -gt 0 ] || echo "no traces were written to ETCH_TEST_OUT=$trace_dir"
    record protobuf FAIL "$bad of $n traces invalid" "$t0"
  fi
else
  failed=$((failed + 1))
  record protobuf FAIL "no build" "$t0"
fi

# ---- the README's first command ----------------------------------------------------
t0=$SECONDS
say "demo: scripts/demo.sh"
if ETCH_BUILD_DIR=$build ETCH_JOBS=$jobs ETCH_WERROR=ON scripts/demo.sh < /dev/null \
     > "$build/test-demo.log" 2>&1 &&
   [ -s out/basic.pftrace ] && protoc --decode_raw < out/basic.pftrace > /dev/null; then
  grep -E '^trace: |\.pftrace \(' "$build/test-demo.log" | head -n 2
  passed=$((passed + 1))
  record demo PASS "out/basic.pftrace" "$t0"
else
  tail -n 40 "$build/test-demo.log"
  failed=$((failed + 1))
  record demo FAIL "log: $build/test-demo.log" "$t0"
fi

# ---- interop with Perfetto's own programs ------------------------------------------
t0=$SECONDS
say "interop: etch against Perfetto's programs"
if [ -z "$perfetto_dir" ]; then
  echo "skipped: ETCH_PERFETTO_DIR does not name Perfetto's programs"
  record interop SKIP "no ETCH_PERFETTO_DIR" "$t0"
elif [ $normal_built = 0 ]; then
  failed=$((failed + 1))
  record interop FAIL "no build" "$t0"
else
  log=$build/test-interop.log
  python3 tests/interop/interop.py --perfetto "$perfetto_dir" --build "$build" \
    --runs "${ETCH_INTEROP_RUNS:-3}" < /dev/null 2>&1 | tee "$log" || true
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    record interop FAIL "interop.py did not finish (log: $log)" "$t0"
  else
    ip=${line%% passed*}
    if_=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<< "$line")
    passed=$((passed + ip))
    failed=$((failed + if_))
    if [ "$if_" -eq 0 ]; then
      record interop PASS "$ip runs against Perfetto v$(
        "$perfetto_dir/bin/traced" --version 2>/dev/null |
        sed -nE 's/^Perfetto v([0-9.]+).*/\1/p' | head -n 1)" "$t0"
    else
      record interop FAIL "$if_ of $((ip + if_)) runs failed (log: $log)" "$t0"
    fi
  fi
fi

if [ $quick = 0 ]; then
  # ---- every build type with gcc and clang, warnings as errors ---------------------
  # What a user may configure: Debug, Release, RelWithDebInfo, MinSizeRel,
  # with gcc and with clang. Optimisation levels change what the compilers
  # warn about (gcc -O2/-O3's -Wmaybe-uninitialized). The shipped programs
  # only (libetch shared and static, the etch command line, etchd,
  # libetch_malloc), not the tests or benchmarks: the 8 trees from scratch
  # take 70 s on 2 idle cores (6-13 s each), 2 minutes with both cores busy;
  # a few seconds when nothing changed (a file with a warning never gets an object, so it is compiled
  # again on every run).
  t0=$SECONDS
  say "builds: every CMAKE_BUILD_TYPE with gcc and clang ($build-types/)"
  builds_bad=0
  builds_n=0
  for cc in gcc clang; do
    case $cc in gcc) cxx=g++ ;; clang) cxx=clang++ ;; esac
    for type in Debug Release RelWithDebInfo MinSizeRel; do
      dir=$build-types/$cc-$type
      builds_n=$((builds_n + 1))
      s0=$SECONDS
      mkdir -p "$dir"
      if CC=$cc CXX=$cxx cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=$type \
           -DETCH_WERROR=ON -DETCH_SANITIZE= -DETCH_BUILD_TESTS=OFF \
           -DETCH_BUILD_BENCH=OFF -DETCH_BUILD_FUZZ=OFF -DETCH_BUILD_TOOLS=ON \
           > "$dir/test-build.log" 2>&1 &&
         cmake --build "$dir" -j "$jobs" --target etch etch_static etch_cli \
           etchd etch_malloc >> "$dir/test-build.log" 2>&1; then
        passed=$((passed + 1))
        echo "$cc $type: clean ($((SECONDS - s0)) s)"
      else
        failed=$((failed + 1))
        builds_bad=$((builds_bad + 1))
        grep -E -B2 -A6 'error|Error [0-9]' "$dir/test-build.log" | head -n 60
        echo "$cc $type: FAILED (log: $dir/test-build.log)"
      fi
    done
  done
  if [ $builds_bad -eq 0 ]; then
    record builds PASS "$builds_n builds without a warning" "$t0"
  else
    record builds FAIL "$builds_bad of $builds_n builds failed" "$t0"
  fi

  # ---- AddressSanitizer + UndefinedBehaviorSanitizer -------------------------------
  t0=$SECONDS
  say "asan+ubsan build, invariant checks on: $build-asan"
  if build_tree "$build-asan" "" -DETCH_SANITIZE=address,undefined \
       -DETCH_DCHECKS=ON -DETCH_BUILD_BENCH=OFF -DETCH_BUILD_TESTS=ON -DETCH_BUILD_TOOLS=ON; then
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       run_ctest "$build-asan"; then
      record asan+ubsan PASS "$ctest_detail" "$t0"
    else
      record asan+ubsan FAIL "$ctest_detail" "$t0"
    fi
  else
    failed=$((failed + 1))
    record asan+ubsan FAIL "build failed: $build-asan/test-build.log" "$t0"
  fi

  # ---- ThreadSanitizer: the concurrent parts ----------------------------------------
  t0=$SECONDS
  say "tsan build: $build-tsan (tests labelled threads)"
  tsan_ok=0
  # Configure, then build only the programs of the `threads` tests (test
  # name = target name); everything if that does not work.
  if cmake -S . -B "$build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DETCH_WERROR=ON -DETCH_SANITIZE=thread -DETCH_BUILD_BENCH=OFF -DETCH_BUILD_TESTS=ON \
       -DETCH_BUILD_TOOLS=ON > /dev/null 2>&1; then
    targets=$(cd "$build-tsan" && ctest -N -L threads | \
              sed -nE 's/^ *Test +#[0-9]+: +([A-Za-z0-9_.-]+).*/\1/p' | tr '\n' ' ')
    if [ -n "$targets" ] &&
       build_tree "$build-tsan" "$targets" -DETCH_SANITIZE=thread \
         -DETCH_BUILD_BENCH=OFF; then
      tsan_ok=1
    elif build_tree "$build-tsan" "" -DETCH_SANITIZE=thread \
           -DETCH_BUILD_BENCH=OFF; then
      tsan_ok=1
    fi
  else
    build_tree "$build-tsan" "" -DETCH_SANITIZE=thread -DETCH_BUILD_BENCH=OFF ||
      true
  fi
  if [ $tsan_ok = 1 ]; then
    # setarch -R: TSan's runtime needs a fixed memory layout on kernels with
    # high ASLR entropy.
    norand=()
    if command -v setarch > /dev/null && setarch "$(uname -m)" -R true 2> /dev/null; then
      norand=(setarch "$(uname -m)" -R)
    fi
    ctest_wrap=("${norand[@]}")
    # die_after_fork=0: the SDK starts a session (and threads) in a forked
    # child of a threaded program, which TSan refuses by default; what a
    # child does after fork is still checked (as far as TSan can).
    # tests/query/tsan.supp: reports from inside DuckDB's library (not
    # built with TSan), which the etch command's queries run.
    if TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0 suppressions=$PWD/tests/query/tsan.supp" \
       run_ctest "$build-tsan" -L threads; then
      record tsan PASS "$ctest_detail (label threads)" "$t0"
    else
      record tsan FAIL "$ctest_detail (label threads)" "$t0"
    fi
    ctest_wrap=()
  else
    failed=$((failed + 1))
    record tsan FAIL "build failed: $build-tsan/test-build.log" "$t0"
  fi
fi

# ---- fuzz targets: build with clang and run each a few seconds -------------------
if [ $quick = 0 ]; then
  t0=$SECONDS
  say "fuzz: $build-fuzz (clang, libFuzzer; ${ETCH_FUZZ_SECONDS:-15} s per target)"
  fuzz_targets=$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//' | tr '\n' ' ')
  if CC=clang build_tree "$build-fuzz" "$fuzz_targets" -DETCH_BUILD_FUZZ=ON; then
    fuzz_bad=0
    fuzz_n=0
    for target in "$build-fuzz"/fuzz/fuzz_*; do
      [ -x "$target" ] || continue
      name=$(basename "$target")
      # Seeds: fuzz/corpus/<name without fuzz_>, else the reader's.
      seeds=fuzz/corpus/${name#fuzz_}
      [ -d "$seeds" ] || seeds=fuzz/corpus/reader
      work=$(mktemp -d)
      cp "$seeds"/* "$work"/ 2> /dev/null || true
      fuzz_n=$((fuzz_n + 1))
      if "$target" -max_len=65536 -max_total_time="${ETCH_FUZZ_SECONDS:-15}" \
           -print_final_stats=1 "$work" > "$build-fuzz/$name.log" 2>&1; then
        echo "$name: $(grep -E 'number_of_executed_units' "$build-fuzz/$name.log" | sed 's/.*: *//') inputs, clean"
      else
        fuzz_bad=$((fuzz_bad + 1))
        tail -n 40 "$build-fuzz/$name.log"
      fi
      rm -rf "$work"
    done
    if [ $fuzz_n -gt 0 ] && [ $fuzz_bad -eq 0 ]; then
      passed=$((passed + 1))
      record fuzz PASS "$fuzz_n targets clean" "$t0"
    else
      failed=$((failed + 1))
      record fuzz FAIL "$fuzz_bad of $fuzz_n targets failed" "$t0"
    fi
  else
    failed=$((failed + 1))
    record fuzz FAIL "build failed: $build-fuzz/test-build.log" "$t0"
  fi
fi

say "summary ($(elapsed "$start"))"
for line in "${summary[@]}"; do echo "$line"; done
[ $quick = 1 ] && echo "  (--quick: sanitizer builds skipped)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
