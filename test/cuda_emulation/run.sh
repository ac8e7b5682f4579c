#!/usr/bin/env bash
# Builds and runs the CPU emulation of the fused CUDA kernels (emulate_fused_kernels.cpp) against
# the system's CPU libtorch; needs the CUDA headers (cuda_bf16.h, cuda_fp16.h) at
# ${CUDA_HOME:-/usr/local/cuda}/include, no GPU. Usage: bash test/cuda_emulation/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${TMPDIR:-/tmp}/kbrl-emulate-fused-kernels
torch_include=${TORCH_INCLUDE:-/usr/include}
g++ -std=c++17 -O1 -ffp-contract=off -pthread -I"$root" -I"$here" -I"$cuda/include" \
  -I"$torch_include/torch/csrc/api/include" "$here/emulate_fused_kernels.cpp" -o "$out" \
  -ltorch -ltorch_cpu -lc10
"$out"
