#!/usr/bin/env bash
# Runs ON a GPU machine (one or two GPUs), from the repository root, with .gpu/ carried
# (prepared as README.md says; KernelBench problems in .gpu/kb/levelN/): builds
# kbrl-eval-kernel, runs the hack catalogue with every static rule off in SHARDS interleaved
# shards spread over the GPUs, and merges them into one table.
#
#   bash bench/hack_catalogue/gpu_catalogue.sh OUT [SHARDS]      (default 8; about 8 minutes on
#                                                                 2 x H200, CUDA builds dominate)
#
# KBRL_CATALOGUE_GPUS (e.g. "1", or "0 1") limits the shards to those GPUs, so that another
# measurement can have the others; default all of the machine's.
# KBRL_CATALOGUE_ARGS adds run_catalogue.py options to every shard, e.g. "--timing-precision 0.01"
# (adaptive timing as RL runs use it).
# OUT gets results.json and results.md (the merged table) and one folder per shard. Each shard
# stops at the call's time limit (KBRL_CATALOGUE_LIMIT seconds from the start, default 570):
# entries it did not reach are listed as "not run".
set -uo pipefail
out=$1
shards=${2:-8}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
t0=$(date +%s)
bash bench/gpu_build_target.sh kbrl-eval-kernel > "$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
source .gpu/env.sh
export PATH=/opt/kbrl-deps/usr/bin:$PATH   # bwrap
export KERNELBENCH_ROOT=${KERNELBENCH_ROOT:-$PWD/.gpu/kb}
read -r -a gpu_list <<< "${KBRL_CATALOGUE_GPUS:-$(seq -s ' ' 0 $(( $(nvidia-smi -L | wc -l) - 1 )))}"
gpus=${#gpu_list[@]}
limit=$(( ${KBRL_CATALOGUE_LIMIT:-570} - ($(date +%s) - t0) ))
dirs=()
for k in $(seq 1 "$shards"); do
  g=${gpu_list[$(( (k - 1) % gpus ))]}
  # shellcheck disable=SC2086
  timeout "$limit" python3 "$here/run_catalogue.py" --out "$out/shard$k" --shard "$k/$shards" \
    --gpu "$g" ${KBRL_CATALOGUE_ARGS:-} > "$out/shard$k.log" 2>&1 &
  dirs+=("$out/shard$k")
done
wait
echo "shards done: $(( $(date +%s) - t0 )) s"
rm -rf "$out"/shard*/cache
python3 "$here/run_catalogue.py" --out "$out" --merge "${dirs[@]}" \
  --label "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $gpus GPU(s), $shards shards"
