#!/usr/bin/env bash
# Installs what is missing (tools/setup.sh), configures and builds kbrl into build/ (or $KBRL_BUILD).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KBRL_BUILD:-$root/build}
bash "$root/tools/setup.sh"
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
# ccache (when installed) lets several checkouts of the project share compiled objects;
# CCACHE_BASEDIR makes their absolute paths not matter.
launcher=""
if command -v ccache >/dev/null; then
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "kbrl: configuring $build"
  cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=RelWithDebInfo $launcher >/dev/null
fi
echo "kbrl: building (first build takes a few minutes on 2 cores)"
cmake --build "$build" -j "$(nproc)"
