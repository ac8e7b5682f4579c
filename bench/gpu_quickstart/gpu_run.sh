#!/usr/bin/env bash
# The GPU quickstart end to end on a GPU machine, as BENCHMARKS.md records it:
#   1. every example answer's label against the real evaluator (and its speedup);
#   2. kbrl-eval of the shipped policy on the held-out problems (pass@1, fast_1), 8 samples each;
#   3. the RL run (README's GPU quickstart command);
#   4. kbrl-eval of the trained policy (its last adapter) on the held-out problems;
#   5. the curve and the before/after table (summary.md).
# Run from the repository root after building (build-gpu/ on the GPU machine, or KBRL_BIN):
#   bash bench/gpu_quickstart/gpu_run.sh OUT [STEPS] [STAGES]
# STAGES (default: all, in this order): labels before rl after summary. A later call with the
# rest continues in the same OUT (and the same build cache).
# Builds are cached in one folder for all four stages (eval.cache_dir): a source built for the
# label check is not built again by the run; each stage's log says how many builds it made.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
steps=${2:-20}
stages=" ${3:-labels before rl after summary} "
want() { [[ "$stages" == *" $1 "* ]]; }
bin=${KBRL_BIN:-build-gpu}
qs=config/gpu_quickstart
cache=${KBRL_QS_CACHE:-/tmp/kbrl-gpu-quickstart-cache}
builders=${KBRL_QS_BUILDERS:-12}
stamp() { echo "[$(date +%H:%M:%S)] $*"; }

if want labels; then
  stamp "1. labels of config/gpu_quickstart/solutions.jsonl"
  python3 $qs/check_labels.py --kbrl-eval $bin/kbrl-eval --out "$out/labels" --gpu 0 \
    --builders "$builders" eval.cache_dir=$cache > "$out/labels.log" 2>&1
  echo "labels: exit $?"; grep -E "differs|labels hold" "$out/labels.log"
fi

heldout() { # NAME [--adapter DIR]
  local name=$1; shift
  $bin/kbrl-eval --model $qs/policy "$@" --prompt-style episode --config $qs/run.toml \
    --kernelbench $qs/heldout --levels 1 --backend cuda --gpu 0 --builders "$builders" --samples 8 \
    --temperature 1.0 --max-new-tokens 768 --trials 2 --perf-trials 20 --output "$out/$name" \
    eval.cache_dir=$cache > "$out/$name.log" 2>&1
  echo "$name: exit $?"; grep -E "pass@1|fast_1" "$out/$name.log" | head -4
}
if want before; then
  stamp "2. held-out problems, the shipped policy"
  heldout before
fi

if want rl; then
  stamp "3. RL: kbrl-node --role all --gpu 0 --config $qs/run.toml (rl.steps=$steps)"
  start=$(date +%s)
  $bin/kbrl-node --role all --gpu 0 --config $qs/run.toml run.dir="$out/runs" \
    rl.steps="$steps" eval.cache_dir=$cache > "$out/rl.log" 2>&1
  echo "rl: exit $? after $(( $(date +%s) - start )) s"; tail -3 "$out/rl.log"
fi

if want after; then
  stamp "4. held-out problems, the trained policy"
  ckpt=$(ls -d "$out"/runs/gpu-quickstart/learner/checkpoints/step-* 2>/dev/null | tail -1)
  if [ -n "$ckpt" ]; then heldout after --adapter "$ckpt/adapter"; else echo "after: no checkpoint"; fi
fi

if want summary; then
  stamp "5. summary"
  python3 bench/gpu_quickstart/summarize.py "$out" > "$out/summary.md" 2>&1
  cat "$out/summary.md"
fi
