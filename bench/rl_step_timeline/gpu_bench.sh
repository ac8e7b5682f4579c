#!/usr/bin/env bash
# The RL step timeline on one GPU: kbrl-node --role all with a Qwen2-1.5B-shaped random policy,
# 8 KernelBench level-1 problems x 8 samples per step, the sampler's text replaced by the
# evaluator benchmark's recorded candidates (which the evaluators really build and run), a few
# steps in sync then in async mode; prints the per-stage timeline table of each and the ratio of
# step wall time to the slowest stage.
#
# Runs ON the GPU machine from the repository root, AFTER the build (it builds nothing):
#   bash .gpu/build.sh && source .gpu/env.sh            # build-gpu/kbrl-node, kbrl-shell, ...
#   bash bench/rl_step_timeline/gpu_bench.sh OUT [MODES] [STEPS]
# MODES: "sync async" (default), or one of them (two calls fit better into 600-s device calls;
# summarize.py then compares OUT/sync and OUT/async). STEPS: steps per mode (default 3).
#
# Progress goes to stdout as it happens (do not pipe it through tail: a device call returns only
# what was printed before its limit): the replay check, a kbrl-eval-kernel check of one replayed
# kernel on the free GPU (skip with KBRL_PRECHECK=0), then every 30 s the run's steps, verdicts
# and GPU memory; the first verdicts with their error text as soon as they are logged, and what
# the workers were handed (build folders, builder inputs) compared byte for byte with the
# candidates. OUT/<mode>/ gets metrics.jsonl, verdict_lines.txt and node_problems.txt while the
# mode runs and again when it ends.
#
# Both modes build into one shared extension cache ($KBRL_SHARED_CACHE, default
# /tmp/kbrl-rl-timeline-cache, passed as eval.cache_dir: builds under extensions/, reference
# timings beside them), so the second mode reuses the first mode's builds.
#
# One turn per episode unless $KBRL_TURNS says otherwise (the issue's step: 8 x 8 single answers).
# Needs: $KERNELBENCH_ROOT (default .gpu/kb) holding level1/19_ReLU.py ...; a Qwen2.5 tokenizer
# folder $KBRL_TOKENIZER_DIR (default .gpu/qwen2.5-tokenizer, with tokenizer.json and
# tokenizer_config.json; prepare it here with bench/rl_step_timeline/prepare_tokenizer.sh), since
# the random checkpoint has none. Extra run-config overrides (key=value ...) go in $KBRL_EXTRA.
set -uo pipefail
out=${1:?usage: gpu_bench.sh OUT [MODES] [STEPS]}
modes=${2:-sync async}
steps=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
kb=${KERNELBENCH_ROOT:-.gpu/kb}
tokdir=${KBRL_TOKENIZER_DIR:-.gpu/qwen2.5-tokenizer}
bin=${KBRL_BIN:-build-gpu}
model=${KBRL_RL_MODEL:-/tmp/kbrl-qwen2-1.5b-rl}
port=${KBRL_PORT:-4555}
limit=${KBRL_BENCH_LIMIT:-540}          # seconds per mode, startup included
numbers=19,20,21,22,25,26,27,28         # 8 level-1 problems with recorded candidates
mkdir -p "$out"
t_start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/device.txt" 2>&1
nproc >> "$out/device.txt"
for f in "$bin/kbrl-node" "$bin/kbrl-bench-generate" "$bin/kbrl-shell"; do
  [ -x "$f" ] || { echo "gpu_bench: $f missing: build first (bash .gpu/build.sh)"; exit 1; }
done
[ -f "$tokdir/tokenizer.json" ] || { echo "gpu_bench: no $tokdir/tokenizer.json (see the header)"; exit 1; }
[ -f "$kb/level1/19_ReLU.py" ] || { echo "gpu_bench: no KernelBench level 1 under $kb"; exit 1; }
[ -f .gpu/env.sh ] && source .gpu/env.sh

# 1. The policy: random Qwen2-1.5B shapes in bf16 (written once; no end-of-sequence token, so
#    every completion runs to rl.max_new_tokens), with the Qwen2.5 tokenizer beside it.
if [ ! -f "$model/config.json" ]; then
  "$bin/kbrl-bench-generate" --config bench/sampler_throughput/qwen2-1.5b.config.json --dir "$model" \
    --batch 1 --prompt 8 --new 2 --device cuda --dtype bf16 > "$out/checkpoint.log" 2>&1 \
    || { tail -20 "$out/checkpoint.log"; exit 1; }
fi
cp "$tokdir/tokenizer.json" "$model/"
[ -f "$tokdir/tokenizer_config.json" ] && cp "$tokdir/tokenizer_config.json" "$model/"

# 2. The recorded completions: the evaluator benchmark's candidates of the 8 problems; each
#    parsed kernel must be byte-equal to its candidate file (what kbrl-bench-eval reads).
cands=/tmp/kb_cands
python3 bench/eval_throughput/make_candidates.py --kernelbench "$kb" --out "$cands" \
  > "$out/candidates.log" 2>&1 || { cat "$out/candidates.log"; exit 1; }
python3 "$here/make_replay.py" --manifest "$cands/manifest.json" --candidates "$cands" --level 1 \
  --numbers "$numbers" --out "$out/replay.jsonl" | tee "$out/replay.log" || exit 1
python3 "$here/check_replay.py" kernels "$out/replay.jsonl" "$cands" | tee "$out/replay_check.txt"

# 2b. One replayed kernel (19_ReLU, correct in the bench) through kbrl-eval-kernel on the GPU
#     while nothing else holds it, with timing as the RL run does it: correct here and wrong in
#     the run points at the run (memory shared with the sampler and learner, settings); wrong
#     here at the kernel, the problem or the device. The worker holds about 8 input-sized tensors
#     at once while checking correctness and about 14 while timing (3 input sets, their expected
#     outputs and clones; measured on the CPU with a 256-MiB input): 48 and 84 GiB for these
#     problems' 6-GiB inputs, which an H200 (141 GiB) holds and an H100 (80 GiB) does not.
if [ "${KBRL_PRECHECK:-1}" != 0 ] && [ -x "$bin/kbrl-eval-kernel" ]; then
  mkdir -p "$out/precheck"
  if c=$(python3 "$here/check_replay.py" extract "$out/replay.jsonl" level1/19_ReLU \
           "$out/precheck/kernel.py"); then
    echo "== precheck: $c as replayed, kbrl-eval-kernel on a free GPU 0 (5 trials, 10 timed runs)"
    t0=$(date +%s)
    timeout 150 "$bin/kbrl-eval-kernel" --problem "$kb/level1/19_ReLU.py" \
      --candidate "$out/precheck/kernel.py" --backend cuda --gpu 0 --perf-trials 10 --timeout 120 \
      --json > "$out/precheck/verdict.json" 2> "$out/precheck/stderr.txt"
    rc=$?
    echo "   exit $rc after $(( $(date +%s) - t0 )) s: $(head -c 600 "$out/precheck/verdict.json")"
    head -5 "$out/precheck/stderr.txt"
  fi
fi
shared_cache=${KBRL_SHARED_CACHE:-/tmp/kbrl-rl-timeline-cache}
mkdir -p "$shared_cache"
chmod o+x "$shared_cache"   # workers run as nobody when the node runs as root

# The mode's small result files under OUT/<mode>: every verdict (the evaluators log them at
# debug level, also when no step finished), the log's errors and warnings, the metrics so far.
snapshot() {
  local dir=$1 metrics=$2
  grep -E "evaluator\.[0-9]+: .* turn [0-9]+: " "$dir/node.log" | cut -c1-400 > "$dir/verdict_lines.txt"
  grep -E "error|warn" "$dir/node.log" | head -20 > "$dir/node_problems.txt"
  if [ -n "$metrics" ]; then cp "$metrics" "$dir/metrics.jsonl"; fi
}

# The first N verdict lines of a node log with the lines their error text continues on.
first_verdicts() {
  awk -v n="$2" '
    /evaluator\.[0-9]+: .* turn [0-9]+: / { if (++seen > n) exit; more = 8; print substr($0, 1, 400); next }
    /^\[/ { more = 0; next }
    more > 0 { more--; print "      " substr($0, 1, 300) }' "$1"
}

# The running node's coordinator, through kbrl-shell ("" when none answers).
coordinator() {
  "$bin/kbrl-shell" "127.0.0.1:$port" -c "actors" --json 2>/dev/null \
    | python3 -c 'import json,sys; print(next((a["name"] for a in json.load(sys.stdin) if a["role"] == "coordinator"), ""))' 2>/dev/null
}

# The coordinator keeps each problem's latest trajectory as it arrives: its parsed kernel (what
# the evaluator was sent) and its verdict with the error excerpt (600 + 600 characters; the log
# line keeps 300), for 19_ReLU (correct in the bench) when it has a verdict already.
first_trajectory() {
  local dir=$1 coord problem=level1/19_ReLU
  coord=$(coordinator)
  [ -n "$coord" ] || { echo "   (no coordinator answered kbrl-shell yet)"; return; }
  grep -q " $problem trajectory" "$dir/verdict_lines.txt" \
    || problem=$(head -1 "$dir/verdict_lines.txt" | sed -E 's/.*evaluator\.[0-9]+: ([^ ]+) trajectory.*/\1/')
  "$bin/kbrl-shell" "127.0.0.1:$port" -c "trajectory $coord $problem" > "$dir/first_trajectory.txt" 2>&1
  sed -n '/^  parsed kernel/,/^  verdict:/p' "$dir/first_trajectory.txt" | sed '$d' \
    > "$dir/first_received_kernel.txt"
  echo "   $problem, as the coordinator has it ($dir/first_trajectory.txt;" \
    "kernel: $(wc -l < "$dir/first_received_kernel.txt") lines in first_received_kernel.txt):"
  head -1 "$dir/first_trajectory.txt" | sed 's/^/     /'
  sed -n '/^  verdict:/,/^  reward:/p' "$dir/first_trajectory.txt" | head -40 | sed 's/^/   /'
}

gpu_memory() {
  echo "   GPU memory: $(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader 2>&1)"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 \
    | sed 's/^/     /'
}

# 3. One run per mode.
# The run directory lies under /tmp, not under OUT: evaluation workers run as user nobody when
# the node runs as root, and OUT may sit in a home directory nobody cannot enter.
turns=${KBRL_TURNS:-1}
for mode in $modes; do
  run_dir="$out/$mode"
  runs_root=${KBRL_RUNS_ROOT:-/tmp/kbrl-rl-timeline}/$mode
  rm -rf "$run_dir" "$runs_root"
  mkdir -p "$run_dir" "$runs_root"
  # [rl] and [problems] keys as the node's run config defines them (rl.*, problems.*).
  cat > "$run_dir/run.toml" <<EOF
[run]
name = "rl-timeline-$mode"
dir = "$runs_root"

[sampler]
model = "$model"
dtype = "bf16"
slots = 64
max_seq_len = 4096
replay_completions = "$(cd "$out" && pwd)/replay.jsonl"

[learner]
max_staleness = 2

[rl]
enabled = true
steps = $steps
problems_per_step = 8
group_size = 8
mode = "$mode"
max_staleness = 1
max_new_tokens = 512
max_turns = $turns

[problems]
root = "$(cd "$kb" && pwd)"
levels = [1]
numbers = "19-22,25-28"
backend = "cuda"

[eval]
cache_dir = "$shared_cache"
EOF
  echo "== $mode: kbrl-node --role all --gpu 0, $steps steps (log: $run_dir/node.log)"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$bin/kbrl-node" --role all --gpu 0 --port "$port" --config "$run_dir/run.toml" \
    node.stop_after_s="$limit" log.level=debug ${KBRL_EXTRA:-} > "$run_dir/node.log" 2>&1 &
  node_pid=$!
  # Done when every step's timeline is in metrics.jsonl (or the node ended, or time is up).
  # Meanwhile: progress every 30 s, the first verdicts with their error text as soon as they are
  # logged, and the mode's small result files under OUT refreshed on every pass.
  metrics=""
  shown=0
  last_report=$t0
  while kill -0 "$node_pid" 2>/dev/null; do
    metrics=$(find "$runs_root" -name metrics.jsonl 2>/dev/null | head -1)
    snapshot "$run_dir" "$metrics"
    done_steps=0
    [ -n "$metrics" ] && done_steps=$(grep -c '"step_timeline/wall_s"' "$metrics")
    verdicts=$(wc -l < "$run_dir/verdict_lines.txt")
    if [ "$shown" -lt 3 ] && [ "$verdicts" -gt "$shown" ]; then
      echo "   [$(( $(date +%s) - t0 )) s] first verdicts (with their error text):"
      first_verdicts "$run_dir/node.log" 3 | tail -n +"$(( $(first_verdicts "$run_dir/node.log" "$shown" | wc -l) + 1 ))"
      if [ "$shown" -eq 0 ]; then
        gpu_memory
        python3 "$here/check_replay.py" received "$out/replay.jsonl" "$cands" "$runs_root" \
          "$shared_cache/extensions" | sed 's/^/   /'
        first_trajectory "$run_dir"
      fi
      shown=$(( verdicts < 3 ? verdicts : 3 ))
    fi
    if [ $(( $(date +%s) - last_report )) -ge 30 ]; then
      last_report=$(date +%s)
      echo "   [$(( last_report - t0 )) s] steps $done_steps/$steps, verdicts $verdicts" \
        "(correct $(grep -c ': correct' "$run_dir/verdict_lines.txt")), GPU memory used" \
        "$(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader 2>/dev/null)"
    fi
    [ "$done_steps" -ge "$steps" ] && break
    if [ $(( $(date +%s) - t0 )) -ge "$limit" ]; then
      echo "   time limit ($limit s) reached"
      break
    fi
    sleep 5
  done
  # The shell's view of the same timeline, from the running node.
  coord=$(coordinator)
  if [ -n "$coord" ]; then
    "$bin/kbrl-shell" "127.0.0.1:$port" -c "timeline $coord" 2>&1 | tee "$run_dir/shell_timeline.txt"
    "$bin/kbrl-shell" "127.0.0.1:$port" -c "trajectory $coord 19_ReLU" > "$run_dir/shell_trajectory.txt" 2>&1
    head -40 "$run_dir/shell_trajectory.txt"
  else
    echo "   (no coordinator found through kbrl-shell)"
  fi
  kill -TERM "$node_pid" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$node_pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$node_pid" 2>/dev/null
  wait "$node_pid" 2>/dev/null
  snapshot "$run_dir" "$metrics"
  echo "   $mode: $(( $(date +%s) - t0 )) s; last log lines:"
  grep -E "step [0-9]+|error|failed" "$run_dir/node.log" | tail -8
  traces=$(find "$runs_root" -name traces.jsonl 2>/dev/null | head -1)
  [ -n "$traces" ] && python3 "$here/trace_verdicts.py" "$traces" | tee "$run_dir/verdicts.txt" | head -30
  echo "   verdicts logged: $(wc -l < "$run_dir/verdict_lines.txt"); by kind:"
  sed -E 's/.* turn [0-9]+: ([a-z ,]+).*/\1/' "$run_dir/verdict_lines.txt" | sort | uniq -c | head
  python3 "$here/check_replay.py" received "$out/replay.jsonl" "$cands" "$runs_root" \
    "$shared_cache/extensions" | sed 's/^/   /'
  tail -200 "$run_dir/node.log" > "$run_dir/node_tail.log"
done

# 4. The table and the ratios.
args=()
for mode in sync async; do
  [ -f "$out/$mode/metrics.jsonl" ] && args+=("$mode=$out/$mode/metrics.jsonl")
done
[ ${#args[@]} -gt 0 ] && python3 "$here/summarize.py" "${args[@]}" --skip 1 --json "$out/summary.json"
echo "total: $(( $(date +%s) - t_start )) s"
