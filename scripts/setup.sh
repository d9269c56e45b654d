#!/usr/bin/env bash
# setup.sh - installs what building and testing etch needs, from Debian's
# packages, and only what is missing. Safe to run again: it then does
# nothing. Needs root (or sudo) only when something has to be installed.
#
#   scripts/setup.sh           what building and testing need
#   scripts/setup.sh --bench   also what scripts/bench.sh needs (lttng-tools:
#                              the session daemon that makes LTTng-UST record)
set -euo pipefail

packages=(
  build-essential     # gcc, g++, make, libc headers
  cmake
  pkg-config
  zlib1g-dev          # deflate-compressed packets (libetch, reader)
  libzstd-dev         # zstd-compressed packets (reader)
  libcurl4-openssl-dev  # etch load, etch query --clickhouse (HTTP to ClickHouse)
  clickhouse-server   # the ClickHouse tests (tests/fleet) start their own servers
  protobuf-compiler   # protoc --decode_raw checks every trace the tests write
  liblttng-ust-dev    # benchmarks against LTTng-UST
  clang               # fuzz targets, second compiler
  valgrind
  universal-ctags     # tests/cli/size_check.sh counts functions' lines
  python3
  libmicrohttpd-dev   # etch ui's HTTP server (without it etch has no ui)
  libunwind-dev       # bench_unwind and unwind_tests compare etch's unwinder with it
  libdw-dev           # etch symbolize names the frames (symbols, DWARF lines)
  chromium            # etch ui's browser tests (tests/ui), headless
  chromium-driver
)

bench_packages=(
  lttng-tools         # lttng, lttng-sessiond: an LTTng session to compare with
  heaptrack           # bench/memory: memory tracing side by side with heaptrack
)
case ${1:-} in
  "") ;;
  --bench) packages+=("${bench_packages[@]}") ;;
  *) echo "setup.sh: unknown option $1 (usage: setup.sh [--bench])" >&2; exit 2 ;;
esac

# npm fetches DuckDB's library and the browser tests' playwright-core
# (below); Debian's when there is no npm at all
# (a nodejs from elsewhere brings its own npm, which Debian's would conflict
# with).
command -v npm > /dev/null || packages+=(nodejs npm)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

if ! command -v dpkg-query > /dev/null || ! command -v apt-get > /dev/null; then
  echo "setup.sh: not a Debian system (no dpkg/apt-get); install these by hand:" >&2
  echo "  ${packages[*]//#*/}" >&2
  exit 1
fi

missing=()
for line in "${packages[@]}"; do
  p=${line%%#*}
  p=${p// /}
  [ -n "$p" ] || continue
  installed "$p" || missing+=("$p")
done

# DuckDB (etch query, stats of a database, the cache of a trace's tables):
# not packaged by Debian. Its shared library ships, MIT-licensed, in the npm
# package below; `npm pack` fetches that version (the registry checks the
# package's integrity, and so does the sha256 here) and the library is
# unpacked into .deps/duckdb/ of the checkout (git ignores .deps/). CMake
# takes a libduckdb installed on the system first (cmake/FindDuckDB.cmake).
duckdb_pkg=@duckdb/node-bindings-linux-x64
duckdb_version=1.5.6-r.1
duckdb_sha256=1b9f82478539bb9a1d1df44bd103121a12ae52142c07158dc52b97d2ec1d69ff
root=$(cd "$(dirname "$0")/.." && pwd)
duckdb_dir=$root/.deps/duckdb

fetch_duckdb() {
  if [ -f "$duckdb_dir/libduckdb.so" ] &&
     [ "$(cat "$duckdb_dir/VERSION" 2>/dev/null)" = "$duckdb_version" ]; then
    return 0
  fi
  if [ "$(uname -m)" != x86_64 ]; then
    echo "setup.sh: DuckDB: the npm package is for x86_64 only; install" >&2
    echo "  libduckdb (duckdb.h is not needed) where CMake finds it" >&2
    return 1
  fi
  local tmp
  tmp=$(mktemp -d)
  echo "setup.sh: fetching DuckDB's library ($duckdb_pkg@$duckdb_version, MIT)"
  if ! (cd "$tmp" && npm pack --silent "$duckdb_pkg@$duckdb_version" \
          > npm.log 2>&1); then
    tail -n 20 "$tmp/npm.log" >&2
    echo "setup.sh: cannot fetch $duckdb_pkg@$duckdb_version with npm pack" >&2
    echo "  (is the npm registry reachable? npm config get registry)" >&2
    rm -rf "$tmp"
    return 1
  fi
  local tgz
  tgz=$(ls "$tmp"/*.tgz)
  if [ "$(sha256sum < "$tgz" | cut -d' ' -f1)" != "$duckdb_sha256" ]; then
    echo "setup.sh: $tgz: not the pinned package (sha256 differs)" >&2
    rm -rf "$tmp"
    return 1
  fi
  tar -xzf "$tgz" -C "$tmp" package/libduckdb.so package/LICENSE
  mkdir -p "$duckdb_dir"
  mv "$tmp/package/libduckdb.so" "$tmp/package/LICENSE" "$duckdb_dir/"
  echo "$duckdb_version" > "$duckdb_dir/VERSION"
  rm -rf "$tmp"
  echo "setup.sh: DuckDB $duckdb_version in $duckdb_dir"
}

# The browser tests' driver: playwright-core at the version
# tests/ui/package-lock.json pins (with its integrity hash), into
# tests/ui/node_modules (git ignores it). It drives Debian's chromium; it
# downloads no browser of its own.
fetch_playwright() {
  local ui=$root/tests/ui
  local want
  want=$(sed -n 's/.*"playwright-core": "\(.*\)".*/\1/p' "$ui/package.json")
  if [ -f "$ui/node_modules/playwright-core/package.json" ] &&
     grep -q "\"version\": \"$want\"" "$ui/node_modules/playwright-core/package.json"; then
    return 0
  fi
  echo "setup.sh: installing playwright-core $want into tests/ui/node_modules (npm ci)"
  if ! (cd "$ui" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts \
          --no-audit --no-fund > /dev/null 2>&1); then
    echo "setup.sh: npm ci in tests/ui failed: the browser tests will be skipped" >&2
  fi
  return 0
}

system_duckdb() {
  [ -z "${ETCH_SETUP_NO_SYSTEM_DUCKDB:-}" ] &&
    /sbin/ldconfig -p 2>/dev/null | grep -q 'libduckdb\.so '
}

if [ ${#missing[@]} -eq 0 ]; then
  system_duckdb || fetch_duckdb || exit 1
  fetch_playwright
  echo "setup.sh: all build dependencies are installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo > /dev/null; then
    sudo=(sudo)
  else
    echo "setup.sh: missing packages and not root: ${missing[*]}" >&2
    echo "  run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup.sh: installing ${missing[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo[@]}" apt-get update -q &&
       "${sudo[@]}" apt-get install -y -q --no-install-recommends \
         "${missing[@]}"; } < /dev/null > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "setup.sh: apt-get failed (output above)" >&2
  exit 1
fi
system_duckdb || fetch_duckdb || exit 1
fetch_playwright
echo "setup.sh: done"
