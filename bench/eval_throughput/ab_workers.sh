#!/usr/bin/env bash
# Runs ON a two-GPU machine (nvidia-h100-x2), from the repository root, with .gpu/ carried
# (KernelBench problems in .gpu/kb/levelN/). Compares two evaluation workers on the 64-candidate
# set with the same kbrl binary, at the same time, on identical halves of the machine:
#
#   bash bench/eval_throughput/ab_workers.sh OUT OLD_WORKER.py [NEW_WORKER.py]
#
# side "old": OLD_WORKER.py on GPU 0 and cores 0-15; side "new": NEW_WORKER.py (default: this
# checkout's tools/kbrl_eval_worker.py) on GPU 1 and cores 16-31. Each side has its own build
# cache, so each builds every distinct candidate itself. Writes OUT/kbrl_old.json,
# OUT/kbrl_new.json, their logs, and OUT/ab.txt (compare_results.py: verdicts, throughput ratio,
# kernel timings of the candidates correct on both sides).
set -uo pipefail
out=$1
old=$(realpath "$2")
new=$(realpath "${3:-tools/kbrl_eval_worker.py}")
here=$(cd "$(dirname "$0")" && pwd)
kb=${KBRL_KERNELBENCH:-.gpu/kb}
cands=/tmp/kb_cands
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,memory.total --format=csv > "$out/device.txt" 2>&1
nproc >> "$out/device.txt"
python3 "$here/make_candidates.py" --kernelbench "$kb" --out "$cands" > "$out/candidates.log" 2>&1 \
  || { cat "$out/candidates.log"; exit 1; }
t0=$(date +%s)
# only the binary this needs (KBRL_AB_BUILD=all: the whole project, as .gpu/build.sh does)
if [ "${KBRL_AB_BUILD:-bench}" = all ]; then build=(.gpu/build.sh); else
  build=(bench/gpu_build_target.sh kbrl-bench-eval)
fi
bash "${build[@]}" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
source .gpu/env.sh
export PATH=/opt/kbrl-deps/usr/bin:$PATH   # bwrap
limit=${KBRL_BENCH_LIMIT:-$(( 575 - ($(date +%s) - t0) ))}
echo "both sides start; limit $limit s"
run_side() {  # side gpu cores worker
  rm -rf "/tmp/kbrl-ab-$1"
  timeout "$limit" taskset -c "$3" build-gpu/kbrl-bench-eval \
    --manifest "$cands/manifest.json" --candidates "$cands" --kernelbench "$kb" \
    --builders "${KBRL_BUILDERS:-12}" --gpu "$2" --out "$out/kbrl_$1.json" --keep "/tmp/kbrl-ab-$1" \
    "eval.worker_script=$4" > "$out/kbrl_$1.log" 2>&1
  echo "side $1: exit $?"
}
run_side old 0 0-15 "$old" &
run_side new 1 16-31 "$new" &
wait
for side in old new; do
  echo "== $side"; grep -v "^\[20" "$out/kbrl_$side.log" | grep -v "^verdicts differ" | tail -22
done
python3 "$here/compare_results.py" --baseline "$out/kbrl_old.json" --kbrl "$out/kbrl_new.json" \
  > "$out/ab.txt" 2>&1
cat "$out/ab.txt"
