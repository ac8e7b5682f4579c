#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with .gpu/ carried: .gpu/build.sh (deps,
# env.sh, configure) but building only the named targets, for calls that need one binary.
#   bash bench/gpu_build_target.sh kbrl-bench-eval [more targets]
set -euo pipefail
script=/tmp/kbrl-gpu-build-$$.sh
sed "s/^cmake --build build-gpu -j \"\$(nproc)\"\$/cmake --build build-gpu -j \"\$(nproc)\" --target $*/" \
  .gpu/build.sh > "$script"
bash "$script"
