#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with .gpu/ carried (KernelBench problem
# files in .gpu/kb/levelN/). Writes everything it measures under OUT.
#
#   bash bench/eval_throughput/gpu_bench.sh kbrl OUT
#       builds kbrl-bench-eval (bench/gpu_prebuilt.sh), then evaluates the 64 candidates with
#       it on GPU 0, pinned to the first 16 CPU cores (what one GPU of a single-GPU machine gets
#       here). KBRL_EVAL_SPARES and KBRL_EVAL_FULL_CUDA_HEADER reach its workers (worker
#       README), to compare spare counts or the full torch header in the same call;
#       KBRL_TIMING_PRECISION (e.g. 0.01, as RL runs time) is passed as --timing-precision
#       (default 0: KernelBench's 100 timed runs). KBRL_BENCH_OVERRIDES adds run-config
#       overrides, e.g. "eval.init_on=host eval.shared_reference_mb=1024". KBRL_BENCH_WARM_HEADERS=1
#       keeps the precompiled headers the last run on this machine made (and nothing else),
#       as an RL run's later steps find them; by default every run starts without them.
#       KBRL_BUILDERS sets the builder count (default 12).
#   bash bench/eval_throughput/gpu_bench.sh baseline OUT SHARDS [PREVIOUS_OUT]
#       the KernelBench-protocol baseline, split into SHARDS contiguous slices of the manifest,
#       slice i on GPU i and its own 16 cores, each slice one sequential process as the protocol
#       says; --resume continues from PREVIOUS_OUT/baseline_i.json. compare_results.py adds the
#       slices' wall times: the time one process on one GPU would have taken.
set -uo pipefail
mode=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
kb=${KBRL_KERNELBENCH:-.gpu/kb}
cands=/tmp/kb_cands
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,memory.total --format=csv > "$out/device.txt" 2>&1
nproc >> "$out/device.txt"
python3 "$here/make_candidates.py" --kernelbench "$kb" --out "$cands" > "$out/candidates.log" 2>&1 \
  || { cat "$out/candidates.log"; exit 1; }

case "$mode" in
kbrl)
  t0=$(date +%s)
  # only the binary this needs: kept, carried in .gpu/prebuilt.tar.xz, or built (about 90 s)
  bash bench/gpu_prebuilt.sh ensure kbrl-bench-eval > "$out/build.log" 2>&1 \
    || { tail -40 "$out/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
  source .gpu/env.sh
  export PATH=/opt/kbrl-deps/usr/bin:$PATH   # bwrap
  keep=/tmp/kbrl-bench-keep
  if [ "${KBRL_BENCH_WARM_HEADERS:-0}" = 1 ] && [ -d "$keep/extensions" ]; then
    # an RL run's later steps: the precompiled headers an earlier run made here are kept,
    # nothing else (no library, no reference timing, no wish)
    find "$keep" -mindepth 1 -maxdepth 1 ! -name extensions -exec rm -rf {} +
    find "$keep/extensions" -mindepth 1 -maxdepth 1 ! -name .kbrl-pch ! -name .kbrl-host-pch \
      -exec rm -rf {} +
    echo "kept the precompiled headers of the last run: $(ls -A "$keep/extensions" | tr '\n' ' ')"
  else
    rm -rf "$keep"
  fi
  limit=${KBRL_BENCH_LIMIT:-$(( 570 - ($(date +%s) - t0) ))}  # inside a 600-s device call
  echo "kbrl-bench-eval: limit $limit s"
  timeout "$limit" taskset -c 0-15 build-gpu/kbrl-bench-eval \
    --manifest "$cands/manifest.json" --candidates "$cands" --kernelbench "$kb" \
    --builders "${KBRL_BUILDERS:-12}" --gpu 0 --out "$out/kbrl.json" --keep "$keep" \
    --timing-precision "${KBRL_TIMING_PRECISION:-0}" ${KBRL_BENCH_OVERRIDES:-} \
    > "$out/kbrl.log" 2>&1
  echo "kbrl-bench-eval exit $?"
  grep -v "^\[20" "$out/kbrl.log" | tail -12
  python3 "$here/ninja_steps.py" "$keep/extensions" > "$out/build_steps.txt" 2>&1
  cat "$out/build_steps.txt"
  ;;
baseline)
  shards=${3:-4}
  previous=${4:-}
  total=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$cands/manifest.json")
  per=$(( (total + shards - 1) / shards ))
  for ((i = 0; i < shards; i++)); do
    [ -n "$previous" ] && [ -f "$previous/baseline_$i.json" ] && cp "$previous/baseline_$i.json" "$out/"
    timeout "${KBRL_BENCH_LIMIT:-560}" taskset -c $((16 * i))-$((16 * i + 15)) \
      python3 "$here/kernelbench_baseline.py" --manifest "$cands/manifest.json" \
      --candidates "$cands" --kernelbench "$kb" --start $((i * per)) --limit "$per" --resume \
      --gpu "$i" --out "$out/baseline_$i.json" > "$out/baseline_$i.log" 2>&1 &
  done
  wait
  for ((i = 0; i < shards; i++)); do
    echo "shard $i: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(len(d['candidates']), 'done,', round(d['total_seconds'],1), 's')" "$out/baseline_$i.json" 2>&1)"
  done
  ;;
*)
  echo "usage: gpu_bench.sh kbrl|baseline OUT [SHARDS [PREVIOUS_OUT]]" >&2
  exit 2
  ;;
esac
