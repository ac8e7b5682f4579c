#!/usr/bin/env bash
# Installs what is missing (tools/setup.sh), configures and builds kbrl into build/ (or $KBRL_BUILD).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KBRL_BUILD:-$root/build}
bash "$root/tools/setup.sh"
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "kbrl: configuring $build"
  cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "kbrl: building (first build takes a few minutes on 2 cores)"
cmake --build "$build" -j "$(nproc)"
