#!/usr/bin/env bash
# The test command: set-up, configure, build, then every test through CTest.
# Extra arguments go to ctest, e.g. tools/test.sh -R cluster
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KBRL_BUILD:-$root/build}
bash "$root/tools/build.sh"
cd "$build"
ctest --output-on-failure "$@"
