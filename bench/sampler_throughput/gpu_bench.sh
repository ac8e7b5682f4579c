#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with .gpu/ carried: builds kbrl, then measures
# the built-in sampler and its peer (transformers generate) on the same shapes in one run, and
# prints the ratios. Results go under OUT.
#   bash bench/sampler_throughput/gpu_bench.sh OUT [BATCHES] [GRAPHS]
# GRAPHS: on,off (default: kbrl runs each batch with CUDA graphs and then eagerly), on, or off.
# KBRL_PROFILE=1 adds one profiled run of the first batch before its measurement (kbrl-bench-
# generate --profile): the longest kernels per decode step go to kbrl.log, the trace to /tmp.
# KBRL_COMPARE_SDPA=1 also runs kbrl with KBRL_DECODE_ATTENTION=sdpa (decode attention through
# at::scaled_dot_product_attention instead of kbrl's kernel) on the same batches, graphs on.
# KBRL_COMPARE_GROUPED=1 also runs kbrl with KBRL_DECODE_ATTENTION=grouped (the kernel that
# serves a whole GQA group per block, for batches above 1) on the same batches, graphs on.
set -uo pipefail
out=$1
batches=${2:-1,32,128}
graphs=${3:-on,off}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/device.txt"
# Always (re)build: incremental when build-gpu/ exists, and a stale binary would measure old code.
bash .gpu/build.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
source .gpu/env.sh
build-gpu/kbrl-bench-generate --config "$here/qwen2-1.5b.config.json" --dir /tmp/kbrl-qwen2-1.5b \
  --batch "$batches" --cuda-graphs "$graphs" --device cuda --dtype bf16 --out "$out/kbrl.json" \
  ${KBRL_PROFILE:+--profile /tmp/kbrl-generate-trace.json} 2>&1 | tee "$out/kbrl.log"
if [ "${KBRL_COMPARE_SDPA:-0}" = 1 ]; then
  KBRL_DECODE_ATTENTION=sdpa build-gpu/kbrl-bench-generate --config "$here/qwen2-1.5b.config.json" \
    --dir /tmp/kbrl-qwen2-1.5b --batch "$batches" --cuda-graphs on --device cuda --dtype bf16 \
    --out "$out/kbrl-sdpa.json" 2>&1 | sed 's/^/[sdpa] /' | tee "$out/kbrl-sdpa.log"
fi
if [ "${KBRL_COMPARE_GROUPED:-0}" = 1 ]; then
  KBRL_DECODE_ATTENTION=grouped build-gpu/kbrl-bench-generate \
    --config "$here/qwen2-1.5b.config.json" --dir /tmp/kbrl-qwen2-1.5b --batch "$batches" \
    --cuda-graphs on --device cuda --dtype bf16 --out "$out/kbrl-grouped.json" 2>&1 \
    | sed 's/^/[grouped] /' | tee "$out/kbrl-grouped.log"
fi
python3 "$here/transformers_generate.py" --config "$here/qwen2-1.5b.config.json" \
  --batch "$batches" --out "$out/peer.json" 2>&1 | grep -v Warning | tee "$out/peer.log"
python3 - "$out/kbrl.json" "$out/peer.json" <<'PY'
import json, sys
k, p = (json.load(open(f)) for f in sys.argv[1:3])
peer = {r["batch"]: r["tokens_per_s"] for r in p["runs"]}
for r in k["runs"]:
    b = r["batch"]
    mode = "graphs on " if r.get("cuda_graphs", False) else "graphs off"
    ratio = r["tokens_per_s"] / peer[b] if b in peer else float("nan")
    fallback = ""
    if r.get("cuda_graphs") and r.get("graph_steps", 0) < r.get("decode_steps", 0):
        fallback = " (only %d of %d steps from graphs!)" % (r["graph_steps"], r["decode_steps"])
    print("batch %4d, %s: kbrl %8.1f tokens/s, transformers %8.1f, ratio %.1fx%s%s" % (
        b, mode, r["tokens_per_s"], peer.get(b, float("nan")), ratio,
        ", %.0f%% of the bandwidth bound" % (100 * r["tokens_per_s"] / k["batch1_bound_tokens_per_s"])
        if b == 1 else "", fallback))
PY
# Each decode step against its memory-traffic bound (weights + the cached rows it attends to).
python3 "$here/step_bound.py" "$out/kbrl.json" "$here/qwen2-1.5b.config.json" | tee "$out/step_bound.txt"
