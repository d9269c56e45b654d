#!/bin/sh
# run_browser_tests.sh ETCH UI_TRACE_GEN TESTS_UI_DIR [FILE] - the browser
# tests of etch ui (FILE in TESTS_UI_DIR, browser.test.mjs by default) under
# node --test, with Debian's chromium
# driven by playwright-core (tests/ui/node_modules, from npm ci). Exits 77
# (ctest: skipped) saying what is missing when chromium, node or
# playwright-core is not there; scripts/setup.sh installs all three.
etch=$1 gen=$2 dir=$3 file=${4:-browser.test.mjs}
chromium=${ETCH_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "ui_browser: SKIPPED: no chromium at $chromium (scripts/setup.sh installs Debian's chromium; ETCH_CHROMIUM names another)"
  exit 77
fi
if ! command -v node > /dev/null; then
  echo "ui_browser: SKIPPED: no node (scripts/setup.sh installs it)"
  exit 77
fi
if [ ! -f "$dir/node_modules/playwright-core/package.json" ]; then
  echo "ui_browser: SKIPPED: no playwright-core in $dir/node_modules (scripts/setup.sh runs npm ci there)"
  exit 77
fi
ETCH_BIN=$etch UI_TRACE_GEN=$gen ETCH_CHROMIUM=$chromium \
  exec node --test --test-concurrency=1 "$dir/$file"
