#!/usr/bin/env bash
# install_test.sh - installs the build into a temporary prefix and builds
# programs against it the two ways a user would: pkg-config (shared and
# static) and find_package(etch); runs them with ETCH_OUT and checks the
# trace they write.
#
#   install_test.sh BUILD_DIR WORK_DIR LIBDIR CC CMAKE
set -euo pipefail
build=$1 work=$2 libdir=$3 cc=$4 cmake=$5
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

step() { echo "== $*"; }

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log"
for f in include/etch/etch.h include/etch/common.h "$libdir/libetch.a" \
         "$libdir/libetch.so" "$libdir/pkgconfig/etch.pc" \
         "$libdir/cmake/etch/etchConfig.cmake" \
         "$libdir/cmake/etch/etchConfigVersion.cmake"; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done

# Every file the install wrote is in docs/building.md's "installed" table
# (the links to shared libraries aside): a cell's `path/name` gives the
# directory for the bare names after it; lib/ is LIBDIR; * is a wildcard.
step "docs/building.md names every installed file"
doc=$here/../../docs/building.md
mapfile -t documented < <(awk '
  /^\| installed \|/ { in_table = 1; next }
  in_table && !/^\|/ { exit }
  in_table {
    dir = ""
    line = $0
    while (match(line, /`[^`]*`/)) {
      tok = substr(line, RSTART + 1, RLENGTH - 2)
      line = substr(line, RSTART + RLENGTH)
      if (tok ~ /\//) { dir = tok; sub(/\/[^\/]*$/, "", dir); print tok }
      else if (dir != "" && tok ~ /\./) print dir "/" tok
    }
  }' "$doc" | sed "s|^lib/|$libdir/|")
[ "${#documented[@]}" -gt 5 ] || { echo "FAIL: no installed table in $doc"; exit 1; }
undocumented=0
while IFS= read -r f; do
  ok=0
  for pat in "${documented[@]}"; do
    # shellcheck disable=SC2053
    if [[ $f == $pat ]]; then ok=1; break; fi
  done
  if [ $ok = 0 ]; then
    echo "FAIL: $f is installed but not in docs/building.md's table"
    undocumented=$((undocumented + 1))
  fi
done < <(cd "$prefix" && find . -type f | sed 's|^\./||' | sort)
[ $undocumented = 0 ] || exit 1
echo "ok: ${#documented[@]} entries cover every installed file"

# Checks that a trace file exists, is not empty and starts with 0x0A (field
# 1, length-delimited: the first TracePacket of a Trace).
check_trace() {
  local f=$1
  [ -s "$f" ] || { echo "FAIL: $f missing or empty"; exit 1; }
  local first
  first=$(od -An -tx1 -N1 "$f" | tr -d ' \n')
  [ "$first" = 0a ] || { echo "FAIL: $f starts with 0x$first, not 0x0a"; exit 1; }
  echo "ok: $(basename "$f"): $(wc -c < "$f") bytes"
  if [ -n "${ETCH_TEST_OUT:-}" ] && [ -d "${ETCH_TEST_OUT}" ]; then
    cp "$f" "$ETCH_TEST_OUT/install_$(basename "$f")"
  fi
}

run_consumer() {
  local exe=$1 name=$2
  ETCH_OUT="$work/$name.pftrace" "$exe"
  check_trace "$work/$name.pftrace"
}

export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
step "pkg-config: $(pkg-config --modversion etch)"
# shellcheck disable=SC2046
"$cc" -std=gnu11 -Wall -Wextra -Werror -o "$work/pc_shared" \
  "$here/consumer.c" $(pkg-config --cflags --libs etch) \
  -Wl,-rpath,"$(pkg-config --variable=libdir etch)"
run_consumer "$work/pc_shared" pc_shared
# Without a run path, as docs/building.md says: the loader does not find
# libetch.so.0 in the prefix; LD_LIBRARY_PATH or ld.so.conf.d is the cure.
# shellcheck disable=SC2046
"$cc" -std=gnu11 -Wall -Wextra -Werror -o "$work/pc_norpath" \
  "$here/consumer.c" $(pkg-config --cflags --libs etch)
if ldconfig -p 2>/dev/null | grep -q 'libetch\.so\.0'; then
  echo "skip: a libetch.so.0 is installed in the loader's path"
elif ETCH_OUT="$work/norpath.pftrace" "$work/pc_norpath" 2> "$work/norpath.err"; then
  echo "FAIL: pc_norpath started without a run path to $prefix/$libdir"; exit 1
elif ! grep -q 'libetch.so.0: cannot open shared object file' "$work/norpath.err"; then
  echo "FAIL: unexpected loader error:"; cat "$work/norpath.err"; exit 1
else
  echo "ok: without a run path: $(head -1 "$work/norpath.err" | sed 's/.*: error/error/')"
fi
LD_LIBRARY_PATH="$(pkg-config --variable=libdir etch)" \
  run_consumer "$work/pc_norpath" pc_norpath_ld_library_path
# Static: the same flags with --static, libetch.a instead of libetch.so.
static_libs=$(pkg-config --static --libs etch | sed 's/-letch\b/-l:libetch.a/')
# shellcheck disable=SC2046,SC2086
"$cc" -std=gnu11 -Wall -Wextra -Werror -o "$work/pc_static" \
  "$here/consumer.c" $(pkg-config --cflags etch) $static_libs
if ldd "$work/pc_static" | grep -q 'libetch\.so'; then
  echo "FAIL: pc_static links libetch.so"; exit 1
fi
run_consumer "$work/pc_static" pc_static
if [ -e "$prefix/$libdir/pkgconfig/etch-reader.pc" ]; then
  # shellcheck disable=SC2046
  "$cc" -std=gnu11 -Wall -Wextra -Werror -o "$work/pc_reader" \
    "$here/read_consumer.c" $(pkg-config --cflags --libs etch-reader) \
    -Wl,-rpath,"$prefix/$libdir"
  "$work/pc_reader" "$work/pc_shared.pftrace"
fi

step "find_package(etch)"
"$cmake" -S "$here/consumer" -B "$work/cmake-build" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Release > "$work/cmake-configure.log" ||
  { cat "$work/cmake-configure.log"; exit 1; }
"$cmake" --build "$work/cmake-build" -j 2 > "$work/cmake-build.log" ||
  { cat "$work/cmake-build.log"; exit 1; }
run_consumer "$work/cmake-build/consumer_shared" cmake_shared
run_consumer "$work/cmake-build/consumer_static" cmake_static
if [ -x "$work/cmake-build/read_consumer" ]; then
  "$work/cmake-build/read_consumer" "$work/cmake_static.pftrace"
fi
echo "install test: all consumers built and traced"
