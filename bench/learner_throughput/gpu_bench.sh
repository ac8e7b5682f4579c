#!/usr/bin/env bash
# Runs ON the GPU machine from the repository root with .gpu/ carried: builds kbrl if needed,
# then measures kbrl's learner and its peer (transformers + peft) on the same shapes in one run,
# and prints a table with the ratios. Every row writes OUT/<row>.json (figures, or {"error"})
# and OUT/<row>.log; a row that fails or times out does not stop the others.
#
#   bash bench/learner_throughput/gpu_bench.sh OUT [ROWS]
#
# ROWS, comma-separated (default 1.5b,7b,16k,dp):
#   1.5b     Qwen2-1.5B shapes, 8 x 2048 tokens: kbrl and peft (ANCHORS.md: peft 18,600 tokens/s)
#   7b       Qwen2.5-7B shapes, 4 x 2048 tokens: kbrl and peft (ANCHORS.md: peft 6,860 tokens/s)
#   16k      Qwen2.5-7B shapes, one 16,384-token sequence: kbrl (and peft, for reference)
#   dp       data-parallel scaling, 1.5B shapes 8 x 2048 per GPU: kbrl on 1 GPU and on 2 (and 4
#            when the machine has them); needs nvidia-h200-x2 (or -x4)
#   nockpt   1.5B shapes 8 x 2048 without gradient checkpointing (kbrl and peft)
#   paths    the trainer's faster paths against its older ones, in the same build, 1.5B shapes
#            8 x 2048 with checkpointing: -lora-fp32 (LoRA terms in float32, as PEFT computes
#            them: --lora-compute float32), -mask (attention through the explicit boolean mask:
#            --attention mask) and -old (both); compare with the kbrl-1.5b-8x2048 row
#   16kmask  the 16k row through the explicit mask (the attention path before is_causal)
#   composition  the training path's libtorch compositions of RMSNorm, SwiGLU and RoPE
#            (KBRL_TRAIN_KERNELS=composition) instead of its fused kernels (the default) at 1.5B
#            8 x 2048 and 7B 4 x 2048; compare with the kbrl-1.5b-8x2048 and kbrl-7b-4x2048 rows
#   profile  one 1.5B 8 x 2048 step of kbrl under the kernel profiler (--profile): the longest
#            kernels go to OUT/kbrl-1.5b-profile.log, the Chrome trace to /tmp (it is large)
# A device command may run 10 minutes: on one machine run `1.5b,7b` then `16k,dp` as two
# commands if the build is not cached (the first builds; the random checkpoints under /tmp are
# reused while the machine stays warm). ROW_TIMEOUT (seconds, default 420) bounds each row.
set -uo pipefail
out=$1
rows=${2:-1.5b,7b,16k,dp}
here=$(cd "$(dirname "$0")" && pwd)
row_timeout=${ROW_TIMEOUT:-420}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/device.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
peak=790 # TFLOP/s of bf16 dense matmul measured on an H200 (ANCHORS.md)
grep -q H100 "$out/device.txt" && peak=798
if [ ! -x build-gpu/kbrl-bench-train ]; then
  bash .gpu/build.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
source .gpu/env.sh
# Which collectives this build has (CMake's probes; their logs are under build-gpu/probes/).
grep -E "^KBRL_(GLOO|NCCL|CUDA_ALLOCATOR)_PROBE" build-gpu/CMakeCache.txt | tee "$out/probes.txt"

small=$here/qwen2-1.5b.config.json
[ -f "$small" ] || small=$here/../sampler_throughput/qwen2-1.5b.config.json
large=$here/qwen2.5-7b.config.json

# row NAME COMMAND...: runs one measurement with a time limit; a failure leaves an error record.
row() {
  local name=$1
  shift
  echo "== $name: $*"
  timeout -k 10 "$row_timeout" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$out/$name.json" ]; then
    python3 - "$out/$name.json" "$name" "$rc" "$out/$name.log" <<'PY'
import json, os, sys
path, name, rc, log = sys.argv[1:5]
doc = {}
if os.path.exists(path):
    try:
        doc = json.load(open(path))
    except Exception:
        doc = {}
if "error" not in doc:
    tail = open(log, errors="replace").read().strip().splitlines()[-3:] if os.path.exists(log) else []
    reason = "timed out" if rc in ("124", "137") else "exit %s" % rc
    doc = {"label": name, "error": "%s: %s" % (reason, " | ".join(tail)[-400:])}
json.dump(doc, open(path, "w"))
PY
  fi
  tail -n 2 "$out/$name.log"
}

kbrl() { # kbrl NAME CONFIG DIR BATCH SEQ [more options]
  local name=$1 config=$2 dir=$3 batch=$4 seq=$5
  shift 5
  row "$name" build-gpu/kbrl-bench-train --config "$config" --dir "$dir" --batch "$batch" \
    --seq "$seq" --rank 32 --warmup "${WARMUP:-2}" --steps "${STEPS:-5}" --peak-tflops "$peak" \
    --label "$name" --out "$out/$name.json" "$@"
}
peer() { # peer NAME CONFIG BATCH SEQ [more options]
  local name=$1 config=$2 batch=$3 seq=$4
  shift 4
  row "$name" python3 "$here/peft_train_step.py" --config "$config" --batch "$batch" \
    --seq "$seq" --rank 32 --warmup "${WARMUP:-2}" --steps "${STEPS:-5}" --peak-tflops "$peak" \
    --label "$name" --out "$out/$name.json" "$@"
}

for r in ${rows//,/ }; do
  case $r in
    1.5b)
      kbrl kbrl-1.5b-8x2048 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0
      peer peft-1.5b-8x2048 "$small" 8 2048 ;;
    7b)
      kbrl kbrl-7b-4x2048 "$large" /tmp/kbrl-bench-qwen2.5-7b 4 2048 --gpus 0
      peer peft-7b-4x2048 "$large" 4 2048 ;;
    16k)
      WARMUP=1 STEPS=2 kbrl kbrl-7b-1x16384 "$large" /tmp/kbrl-bench-qwen2.5-7b 1 16384 --gpus 0
      WARMUP=1 STEPS=2 peer peft-7b-1x16384 "$large" 1 16384 ;;
    dp)
      [ -s "$out/kbrl-1.5b-8x2048.json" ] && grep -q tokens_per_s "$out/kbrl-1.5b-8x2048.json" \
        || kbrl kbrl-1.5b-8x2048 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0
      if [ "$gpus" -ge 2 ]; then
        kbrl kbrl-1.5b-8x2048-dp2 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0,1
      else
        echo "== dp: this machine has $gpus GPU(s); data-parallel rows need nvidia-h200-x2"
      fi
      if [ "$gpus" -ge 4 ]; then
        kbrl kbrl-1.5b-8x2048-dp4 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0,1,2,3
      fi ;;
    nockpt)
      kbrl kbrl-1.5b-8x2048-nockpt "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0 \
        --checkpointing off
      peer peft-1.5b-8x2048-nockpt "$small" 8 2048 --checkpointing off ;;
    paths)
      [ -s "$out/kbrl-1.5b-8x2048.json" ] && grep -q tokens_per_s "$out/kbrl-1.5b-8x2048.json" \
        || kbrl kbrl-1.5b-8x2048 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0
      kbrl kbrl-1.5b-8x2048-lora-fp32 "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0 \
        --lora-compute float32
      kbrl kbrl-1.5b-8x2048-mask "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0 \
        --attention mask
      kbrl kbrl-1.5b-8x2048-old "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0 \
        --lora-compute float32 --attention mask ;;
    composition)
      KBRL_TRAIN_KERNELS=composition kbrl kbrl-1.5b-8x2048-composition "$small" \
        /tmp/kbrl-bench-qwen2-1.5b 8 2048 --gpus 0
      KBRL_TRAIN_KERNELS=composition kbrl kbrl-7b-4x2048-composition "$large" \
        /tmp/kbrl-bench-qwen2.5-7b 4 2048 --gpus 0 ;;
    16kmask)
      WARMUP=1 STEPS=2 kbrl kbrl-7b-1x16384-mask "$large" /tmp/kbrl-bench-qwen2.5-7b 1 16384 \
        --gpus 0 --attention mask ;;
    profile)
      WARMUP=1 STEPS=1 kbrl kbrl-1.5b-profile "$small" /tmp/kbrl-bench-qwen2-1.5b 8 2048 \
        --gpus 0 --profile /tmp/kbrl-1.5b-train-trace.json ;;
    *) echo "unknown row set '$r' (1.5b, 7b, 16k, dp, nockpt, paths, composition, 16kmask, profile)" ;;
  esac
done

python3 "$here/summarize.py" "$out" | tee "$out/summary.txt"
