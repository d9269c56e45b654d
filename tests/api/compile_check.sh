#!/bin/sh
# compile_check.sh - compile sources with a given compiler and flags; used by
# the API tests (tests/api/CMakeLists.txt).
#
#   compile_check.sh [--compiled-out|--no-etch] OUTDIR SOURCE... -- COMPILER [FLAGS...]
#
# Each SOURCE is compiled on its own into OUTDIR. With --compiled-out, every
# object must also be free of etch__ symbols (emitters, call sites, scope
# helpers): only the category registration of ETCH_CATEGORY_DEFINE may stay.
# With --no-etch, no symbol naming etch may be in the object at all.
set -eu
compiled_out=0
if [ "${1:-}" = "--compiled-out" ]; then
  compiled_out=1
  shift
elif [ "${1:-}" = "--no-etch" ]; then
  compiled_out=2
  shift
fi
outdir=$1
shift
mkdir -p "$outdir"
sources=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  sources="$sources $1"
  shift
done
[ $# -gt 1 ] || { echo "usage: $0 [--compiled-out] OUTDIR SOURCE... -- COMPILER [FLAGS...]"; exit 2; }
shift
fail=0
n=0
for src in $sources; do
  obj="$outdir/$(basename "$src").o"
  echo "+ $* -c $src"
  if ! "$@" -c "$src" -o "$obj"; then
    echo "FAILED: $src"
    fail=$((fail + 1))
    continue
  fi
  n=$((n + 1))
  if [ $compiled_out = 2 ]; then
    bad=$(nm "$obj" | grep -i 'etch' || true)
    if [ -n "$bad" ]; then
      echo "FAILED: $src compiled with ETCH_COMPILE_OUT still names etch:"
      echo "$bad"
      fail=$((fail + 1))
    fi
  fi
  if [ $compiled_out = 1 ]; then
    bad=$(nm "$obj" | grep 'etch__' | grep -v 'etch__cat_register_' || true)
    if [ -n "$bad" ]; then
      echo "FAILED: $src compiled with ETCH_COMPILE_OUT still has etch__ symbols:"
      echo "$bad"
      fail=$((fail + 1))
    fi
  fi
done
echo "$n compiled, $fail failed"
[ $fail = 0 ]
