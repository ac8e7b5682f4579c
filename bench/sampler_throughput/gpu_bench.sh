#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with .gpu/ carried: builds kbrl, then measures
# the built-in sampler and its peer (transformers generate) on the same shapes in one run, and
# prints the ratios. Results go under OUT.
#   bash bench/sampler_throughput/gpu_bench.sh OUT [BATCHES]
set -uo pipefail
out=$1
batches=${2:-1,32,128}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/device.txt"
[ -x build-gpu/kbrl-bench-generate ] || bash .gpu/build.sh > "$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
source .gpu/env.sh
build-gpu/kbrl-bench-generate --config "$here/qwen2-1.5b.config.json" --dir /tmp/kbrl-qwen2-1.5b \
  --batch "$batches" --device cuda --dtype bf16 --out "$out/kbrl.json" 2>&1 | tee "$out/kbrl.log"
python3 "$here/transformers_generate.py" --config "$here/qwen2-1.5b.config.json" \
  --batch "$batches" --out "$out/peer.json" 2>&1 | grep -v Warning | tee "$out/peer.log"
python3 - "$out/kbrl.json" "$out/peer.json" <<'PY'
import json, sys
k, p = (json.load(open(f)) for f in sys.argv[1:3])
peer = {r["batch"]: r["tokens_per_s"] for r in p["runs"]}
for r in k["runs"]:
    b = r["batch"]
    ratio = r["tokens_per_s"] / peer[b] if b in peer else float("nan")
    print("batch %4d: kbrl %8.1f tokens/s, transformers %8.1f, ratio %.1fx%s" % (
        b, r["tokens_per_s"], peer.get(b, float("nan")), ratio,
        ", %.0f%% of the bandwidth bound" % (100 * r["tokens_per_s"] / k["batch1_bound_tokens_per_s"])
        if b == 1 else ""))
PY
