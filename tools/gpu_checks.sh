#!/usr/bin/env bash
# The checks that need the GPU machine (transformers, peft, TensorBoard, CUDA), in one call.
# Runs ON the GPU machine from the repository root with .gpu/ carried (../shared/gpu/README.md):
#   bash tools/gpu_checks.sh OUT [STEP ...]
# STEPs (default: all, in this order): peft cuda tensorboard. Each step writes OUT/<step>.log and
# a failing step does not stop the others; the exit status is the number of failed steps.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
steps=${*:-peft cuda tensorboard}
failed=0

if ! bash .gpu/build.sh > "$out/build.log" 2>&1; then
  # keep going past the first failure so that one call shows every compile error
  cmake --build build-gpu -j "$(nproc)" -- -k 0 > "$out/build-all-errors.log" 2>&1
  grep -E "error:|FAILED:" "$out/build-all-errors.log" | head -40
  exit 100
fi
source .gpu/env.sh
export PATH=/opt/kbrl-deps/usr/bin:$PATH
# CPU parts of the tests: a 64-core host makes libtorch's default thread pool slower, not faster.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
tests=build-gpu/kbrl-tests

# One LoRA step in peft and in kbrl from the same start; then peft loads kbrl's adapter.
step_peft() {
  python3 tools/make_peft_step.py --golden test/data/model/golden --out "$out/peft_step" &&
    rm -rf test/data/train/peft_step && mkdir -p test/data/train &&
    cp -r "$out/peft_step" test/data/train/peft_step &&
    KBRL_EXPORT_ADAPTER_DIR="$out/kbrl_adapters" "$tests" --run_test=peft_step --log_level=message &&
    python3 tools/check_peft_loads_kbrl.py --golden test/data/model/golden \
      --kbrl "$out/kbrl_adapters" --peft "$out/peft_step"
}

# The suites with CUDA cases (they say "checks nothing here" on a machine without a GPU).
step_cuda() {
  local s rc=0
  for s in fused_ops transformer generation decode_graph trainer model_tool sampler_actor_suite; do
    echo "-- $s"
    timeout 300 "$tests" --run_test="$s" --log_level=message || rc=1
  done
  return $rc
}

# kbrl-eval's torch.compile reference (refused on torch < 2, timed here).
step_evalcompile() {
  timeout 400 "$tests" --run_test=eval_turns --log_level=message
}

# TensorBoard itself reads kbrl's event files.
step_tensorboard() {
  rm -rf /tmp/kbrl-tb-eval /tmp/kbrl-tb
  build-gpu/kbrl-eval --generations test/data/evalcli/generations --kernelbench test/data/problems \
    --backend torch --output /tmp/kbrl-tb-eval --tensorboard /tmp/kbrl-tb --step 1200 &&
    python3 test/data/evalcli/read_with_tensorboard.py /tmp/kbrl-tb
}

# TensorBoard reads an RL run's events: scalars, histograms, and a resumed run's restart marker.
step_rltensorboard() {
  rm -rf /tmp/kbrl-rl-run
  KBRL_KEEP_RL_RUN=/tmp/kbrl-rl-run "$tests" --run_test=rl_process/a_short_run_trains_then_resumes_for_exactly_one_more_step \
    --log_level=message &&
    python3 test/data/rl/read_with_tensorboard.py /tmp/kbrl-rl-run/tensorboard
}

for s in $steps; do
  echo "== $s"
  start=$(date +%s)
  if "step_$s" > "$out/$s.log" 2>&1; then
    echo "== $s: ok ($(( $(date +%s) - start )) s)"
  else
    echo "== $s: FAILED ($(( $(date +%s) - start )) s); tail of $out/$s.log:"
    tail -25 "$out/$s.log"
    failed=$((failed + 1))
  fi
done
exit $failed
