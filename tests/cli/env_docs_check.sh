#!/bin/sh
# env_docs_check.sh ETCH_BIN SOURCE_DIR - the docs' ETCH_* environment
# variables agree with libetch's table (src/base/envvars.c, as `etch env`
# prints it):
# (and the PERFETTO_* socket and relay names etch reads as Perfetto does):
# - docs/sdk.md's "Environment variables" table lists exactly the table's
#   variables, in its order, with its type, default and range;
# - every other ETCH_* name in README.md and docs/*.md is one of the
#   table's, or a name the code defines (a macro, an enumerator), a CMake
#   option, or a variable of the tools and scripts (listed below).
set -eu
etch=$1
src=$2
tmp=${TMPDIR:-/tmp}/etch_env_docs.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0

# The table: NAME TYPE DEFAULT RANGE, from etch env (every other line).
"$etch" env | awk 'NR > 1 && /^(ETCH|PERFETTO)_/ {
  name = $1; type = $2; dflt = $3; range = $0
  sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, "", range)
  print name "|" type "|" dflt "|" range }' >"$tmp/table"
cut -d'|' -f1 "$tmp/table" >"$tmp/names"
[ -s "$tmp/names" ] || { echo "etch env printed no variable"; exit 1; }

# docs/sdk.md's table, in the same shape.
awk '/^### Environment variables/ { on = 1; next }
     on && /^#/ { exit }
     on && /^\| `(ETCH|PERFETTO)_/ {
       line = $0; gsub(/\\\|/, "\001", line)
       n = split(line, c, "|")
       for (i = 2; i <= 5; i++) { gsub(/^ +| +$/, "", c[i]); gsub(/`/, "", c[i]); gsub("\001", "|", c[i]) }
       print c[2] "|" c[3] "|" c[4] "|" c[5] }' "$src/docs/sdk.md" >"$tmp/doc_table"
if ! cmp -s "$tmp/table" "$tmp/doc_table"; then
  echo "docs/sdk.md's environment variables differ from etch env's table:"
  diff "$tmp/table" "$tmp/doc_table" || true
  fail=1
fi

# Every ETCH_* and PERFETTO_* name in the docs (ETCH_ARG_*, a family, is
# none).
grep -ohE '(ETCH|PERFETTO)_[A-Z0-9_]+' "$src/README.md" "$src"/docs/*.md |
  grep -v '_$' | sort -u >"$tmp/doc_names"
# Names that are not environment variables of libetch: the public
# headers' (macros, enumerators, error codes), the macros of the sources,
# the CMake options, and the variables the tools and scripts read.
{
  grep -rhoE 'ETCH_[A-Z0-9_]+' "$src/include" | grep -v '_$'
  grep -rhoE 'X\((OK|E[A-Z0-9_]+),' "$src/include" | sed 's/^X(/ETCH_/; s/,$//'
  grep -rhoE '^[[:space:]]*#[[:space:]]*define[[:space:]]+ETCH_[A-Z0-9_]+' \
    "$src/src" "$src/tools" | grep -oE 'ETCH_[A-Z0-9_]+'
  grep -rhoE '(option|set)\(ETCH_[A-Z0-9_]+' "$src/CMakeLists.txt" \
    "$src/cmake" | grep -oE 'ETCH_[A-Z0-9_]+'
  # scripts/test.sh and the tests; the typo of
  # docs/analysis.md's `etch env --set` example.
  printf '%s\n' ETCH_BUILD_DIR ETCH_JOBS ETCH_TEST_OUT \
    ETCH_TEST_TIMEOUT ETCH_FAULT_ONLY ETCH_FUZZ_SECONDS ETCH_INTEROP_RUNS \
    ETCH_PERFETTO_DIR ETCH_BUFER_KB
} | sort -u >"$tmp/not_env"
comm -23 "$tmp/doc_names" "$tmp/not_env" >"$tmp/doc_env"
sort -u "$tmp/names" >"$tmp/names_sorted"
missing=$(comm -23 "$tmp/doc_env" "$tmp/names_sorted")
if [ -n "$missing" ]; then
  echo "named in the docs but not in libetch's table of variables:"
  echo "$missing"
  fail=1
fi
undocumented=$(comm -13 "$tmp/doc_names" "$tmp/names_sorted")
if [ -n "$undocumented" ]; then
  echo "in libetch's table but not in the docs:"
  echo "$undocumented"
  fail=1
fi
[ "$fail" = 0 ] && echo "ok: $(wc -l <"$tmp/names") variables"
exit "$fail"
