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
  libsqlite3-dev      # etch query / stats
  protobuf-compiler   # protoc --decode_raw checks every trace the tests write
  liblttng-ust-dev    # benchmarks against LTTng-UST
  clang               # fuzz targets, second compiler
  valgrind
  python3
)

bench_packages=(
  lttng-tools         # lttng, lttng-sessiond: an LTTng session to compare with
)
case ${1:-} in
  "") ;;
  --bench) packages+=("${bench_packages[@]}") ;;
  *) echo "setup.sh: unknown option $1 (usage: setup.sh [--bench])" >&2; exit 2 ;;
esac

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

if [ ${#missing[@]} -eq 0 ]; then
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
echo "setup.sh: done"
