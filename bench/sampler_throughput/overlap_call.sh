#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with .gpu/ carried: one device call that
# builds the sampler benchmark (and with GOLDEN=1 the tests, running the GPU golden tests of the
# decode path first), then measures the decode step with and without its overlaps, in the same
# call, two rounds:
#   - the decode kernels' programmatic dependent launch (runtime/model/cuda/dependent_launch.cuh;
#     KBRL_DECODE_PDL=off turns it off),
#   - the engine's step overlap (generation_engine.hpp; --overlap on,off).
# Then one profiled batch-1 run with the defaults (decode_profile.py: kernels and idle time).
# OFF names another switch for the "off" rows instead of PDL, e.g.
# OFF=KBRL_DECODE_QKV_ROPE=off (RoPE and the cache write folded into the q|k|v GEMV or not).
#   [GOLDEN=1] [OFF=VAR=value] bash bench/sampler_throughput/overlap_call.sh OUT [BATCHES]
set -uo pipefail
out=$1
batches=${2:-1,128}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/device.txt"
targets="kbrl-bench-generate"
[ "${GOLDEN:-0}" = 1 ] && targets="kbrl-tests kbrl-bench-generate"
bash bench/gpu_prebuilt.sh ensure $targets > "$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
source .gpu/env.sh
if [ "${GOLDEN:-0}" = 1 ]; then
  echo "== golden tests (fused_ops, decode_graph, generation)"
  timeout 300 build-gpu/kbrl-tests --run_test=fused_ops,decode_graph,generation \
    --log_level=test_suite > "$out/golden.txt" 2>&1
  tail -2 "$out/golden.txt"
fi

generate() {
  build-gpu/kbrl-bench-generate --config "$here/qwen2-1.5b.config.json" \
    --dir /tmp/kbrl-qwen2-1.5b --cuda-graphs on --device cuda --dtype bf16 --prompt 512 \
    --new 256 "$@" 2>&1 | grep -E "^batch|bound|fell back|rror"
}
off=${OFF:-KBRL_DECODE_PDL=off}
for round in 1 2; do
  echo "== round $round"
  (export "$off"; generate --batch "$batches" --overlap off,on --out "$out/r$round-off.json") \
    | sed "s/^/[$off] /"
  generate --batch "$batches" --overlap off,on --out "$out/r$round-on.json" \
    | sed 's/^/[defaults] /'
done
echo "== profile, batch 1, defaults"
build-gpu/kbrl-bench-generate --config "$here/qwen2-1.5b.config.json" \
  --dir /tmp/kbrl-qwen2-1.5b --cuda-graphs on --device cuda --dtype bf16 --prompt 512 --new 256 \
  --batch 1 --profile /tmp/kbrl-trace.json > /dev/null 2>&1
python3 "$here/decode_profile.py" /tmp/kbrl-trace.json 255 --top 12 > "$out/b1_profile.txt"
tail -7 "$out/b1_profile.txt"
