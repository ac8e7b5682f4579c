#!/usr/bin/env bash
# Issue 19's run over two processes on one two-GPU host (nvidia-h100-x2): a TLS manifest
# (tools/make-certs.sh), the coordinator node "head" with the learner and a sampler on GPU 0, an
# evaluator node "ev" on GPU 1 with CPU builders; the GPU quickstart's workload.
#
#   bash bench/two_gpu/gpu_run.sh OUT [STAGES]
#
# STAGES (default "kill scale modes"):
#   kill   kill -9 of the evaluator node in the middle of a step, restarted 5 s later; the run
#          goes on, and check_run.py says whether traces.jsonl and metrics.jsonl hold every step
#          exactly once;
#   scale  the same workload with the evaluator node on GPU 1 only, then on GPUs 0 and 1 (two
#          evaluators): step wall time and evaluated candidates per minute, from metrics.jsonl;
#   modes  rl.mode sync, then async (rl.max_staleness 1), with KBRL_MODES_ARGS added to both:
#          wall per step and each stage's busy share. On GPUs, when KBRL_MODES_ARGS is unset,
#          sampling is made as heavy as evaluation: a random Qwen2-1.5B-shaped policy (bf16,
#          written by kbrl-bench-generate, with the Qwen2.5 tokenizer from
#          .gpu/qwen2.5-tokenizer: bench/rl_step_timeline/prepare_tokenizer.sh) generating
#          KBRL_MODES_TOKENS (default 3072) tokens per answer, its text replaced by the quickstart's
#          labelled answers (sampler.replay_completions), which the evaluator really builds and runs.
# KBRL_STEPS sets the steps of every run (default 8; 6 on the CPU), KBRL_KILL_STEP the step the
# kill stage kills in (default 3). On GPUs the scale stage's policy answers with the quickstart's
# labelled answers (sampler.replay_completions; KBRL_SCALE_ARGS replaces these overrides): after
# the first step every source is built, so the two runs compare the GPUs' evaluation, not how
# many new sources the policy happened to write.
# The extension cache is shared
# by the kill and scale runs ($KBRL_SHARED_CACHE, default OUT/cache): later runs reuse earlier
# builds. The two modes runs start from empty caches of their own: the second run would
# otherwise find every source the first one built, and evaluate faster for that alone.
# KBRL_CPU=1 runs the same on the CPU with the CPU quickstart (to try the script anywhere).
# Build first (bash .gpu/build.sh on the GPU machine); KBRL_BIN names the build folder.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
stages=" ${2:-kill scale modes} "
bin=${KBRL_BIN:-build-gpu}
if [ "${KBRL_CPU:-0}" = 1 ]; then
  cfg=config/quickstart/run.toml; run_name=quickstart; head_gpus="[]"; ev_gpus="[]"
  head_args=(); one_ev=(); two_ev=(); steps=${KBRL_STEPS:-6}; b=4; g=8
else
  cfg=config/gpu_quickstart/run.toml; run_name=gpu-quickstart; head_gpus="[0]"; ev_gpus="[0, 1]"
  head_args=(--gpu 0); one_ev=(--gpu 1); two_ev=(--gpu 0,1); steps=${KBRL_STEPS:-8}; b=2; g=8
fi
cache=${KBRL_SHARED_CACHE:-$out/cache}
mkdir -p "$cache"
chmod o+x "$cache"  # workers run as nobody when the node runs as root
port=$((20000 + RANDOM % 20000))
stamp() { echo "[$(date +%H:%M:%S)] $*"; }

bash tools/make-certs.sh "$out/certs" head ev > /dev/null
cat > "$out/cluster.toml" <<TOML
[cluster]
name = "two-gpu"
coordinator = "head"
heartbeat_interval_s = 0.5
node_timeout_s = 5.0

[security]
ca_file = "$out/certs/ca.pem"

[shell]
certificate = "$out/certs/shell.pem"
key = "$out/certs/shell.key"

[[node]]
name = "head"
host = "127.0.0.1"
port = $port
roles = ["learner", "sampler"]
gpus = $head_gpus
share_gpus = true  # the two-evaluator case puts an evaluator on GPU 0 too
certificate = "$out/certs/head.pem"
key = "$out/certs/head.key"

[[node]]
name = "ev"
host = "127.0.0.1"
port = $((port + 1))
roles = ["evaluator"]
gpus = $ev_gpus
share_gpus = true
certificate = "$out/certs/ev.pem"
key = "$out/certs/ev.key"
TOML

ev_pid=""
head_extra=()  # overrides for the head node of the next run (the modes stage)
start_ev() { # NAME INCARNATION GPU-ARGS...
  local name=$1 n=$2; shift 2
  $bin/kbrl-node --role evaluator "$@" --manifest "$out/cluster.toml" --node ev --config $cfg \
    run.dir="$out/$name-ev" eval.cache_dir="${run_cache:-$cache}" eval.build_workers=12 \
    > "$out/$name.ev.$n.log" 2>&1 &
  ev_pid=$!
}

# run NAME KILL_AT_STEP(0: none) EV-GPU-ARGS...: one RL run; its record checked.
run() {
  local name=$1 kill_at=$2; shift 2
  stamp "$name: evaluator node ${*:-on the CPU}, $steps steps of $b x $g"
  start_ev "$name" 0 "$@"
  local start=$(date +%s)
  $bin/kbrl-node --role learner,sampler "${head_args[@]}" --manifest "$out/cluster.toml" \
    --node head --config $cfg run.dir="$out/$name" rl.steps=$steps rl.problems_per_step=$b \
    rl.group_size=$g eval.cache_dir="${run_cache:-$cache}" "${head_extra[@]}" > "$out/$name.head.log" 2>&1 &
  local head_pid=$!
  if [ "$kill_at" -gt 0 ]; then
    until grep -q "step $kill_at/$steps started" "$out/$name.head.log" || ! kill -0 $head_pid 2>/dev/null; do
      sleep 0.5; done
    sleep 3  # in the middle of the step: its candidates are with the evaluator
    stamp "$name: kill -9 of the evaluator node (pid $ev_pid) during step $kill_at"
    kill -9 $ev_pid
    sleep 5
    stamp "$name: the evaluator node starts again"
    start_ev "$name" 1 "$@"
  fi
  wait $head_pid; local rc=$?
  stamp "$name: head exit $rc after $(( $(date +%s) - start )) s"
  kill $ev_pid 2>/dev/null; wait $ev_pid 2>/dev/null
  grep -E "lost|rejoin|joined|sent again|retry" "$out/$name.head.log" | head -8
  python3 bench/two_gpu/check_run.py "$out/$name/$run_name" $steps $b $g
}

summary() { # NAME [SKIP]: step wall and evaluation throughput from metrics.jsonl, steps after SKIP
  python3 - "$out/$1/$run_name/metrics.jsonl" "$1" "${2:-1}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if "rate/correct" in r]
skip = int(sys.argv[3])
later = rows[skip:] or rows  # by default the first step, which builds most sources
wall = sum(r.get("time/total", 0) for r in later)
ev = sum(r.get("step_timeline/evaluating_wall_s", 0) for r in later)
n = sum(r.get("episodes", 0) for r in later)
def busy(stage):
    return sum(r.get("step_timeline/%s_busy" % stage, 0) for r in later) / len(later)
# candidates a minute of wall time: in async mode the steps' evaluation windows overlap
print("%s: %.1f s a step, %.1f candidates evaluated a minute, evaluating %.1f s a "
      "step, busy: sampler %.2f, evaluator %.2f, learner %.2f" % (
          sys.argv[2] + ": steps %d-%d" % (len(rows) - len(later) + 1, len(rows)), wall / len(later), 60.0 * n / wall if wall > 0 else 0.0,
          ev / len(later), busy("sampler"), busy("evaluator"), busy("learner")))
PY
}

if [[ "$stages" == *" kill "* ]]; then run kill "${KBRL_KILL_STEP:-3}" "${one_ev[@]}"; fi
if [[ "$stages" == *" scale "* ]]; then
  scale_text=${KBRL_SCALE_ARGS-}
  if [ -z "${KBRL_SCALE_ARGS+set}" ] && [ "${KBRL_CPU:-0}" != 1 ]; then
    scale_text="sampler.replay_completions=$PWD/config/gpu_quickstart/solutions.jsonl"
  fi
  stamp "scale: overrides of both runs: ${scale_text:-none}"
  read -r -a head_extra <<< "$scale_text"
  # Each step draws its problems in the same order in every run, so a later run would reuse the
  # builds an earlier one paid for. A first run with the same steps ("warm", not measured) builds
  # every source; the two measured runs then differ only in their evaluators, every step counted.
  skip_first=1
  if [ "${KBRL_SCALE_WARM:-1}" = 1 ]; then run warm 0 "${two_ev[@]}"; skip_first=0; fi
  run one 0 "${one_ev[@]}"; summary one $skip_first
  run two 0 "${two_ev[@]}"; summary two $skip_first
  head_extra=()
fi
# The modes stage's policy on GPUs: random weights of Qwen2-1.5B shapes with the Qwen2.5 tokenizer.
heavy_sampler_args() {
  local model=/tmp/kbrl-qwen2-1.5b-random tokens=${KBRL_MODES_TOKENS:-3072}
  if [ ! -f "$model/config.json" ]; then
    $bin/kbrl-bench-generate --config bench/sampler_throughput/qwen2-1.5b.config.json \
      --dir "$model" --batch 1 --prompt 8 --new 2 --device cuda --dtype bf16 \
      > "$out/random-policy.log" 2>&1 || { tail -20 "$out/random-policy.log" >&2; return 1; }
  fi
  cp .gpu/qwen2.5-tokenizer/tokenizer.json .gpu/qwen2.5-tokenizer/tokenizer_config.json "$model/"
  echo "sampler.model=$model sampler.dtype=bf16 learner.dtype=bf16 \
learner.gradient_checkpointing=true sampler.max_seq_len=$((tokens + 1024)) rl.max_new_tokens=$tokens \
sampler.replay_completions=$PWD/config/gpu_quickstart/solutions.jsonl"
}

if [[ "$stages" == *" modes "* ]]; then
  modes_text=${KBRL_MODES_ARGS:-}
  if [ -z "$modes_text" ] && [ "${KBRL_CPU:-0}" != 1 ]; then modes_text=$(heavy_sampler_args) || exit 1; fi
  stamp "modes: overrides of both runs: ${modes_text:-none}"
  read -r -a modes_args <<< "$modes_text"
  for mode in sync async; do
    run_cache="$cache/modes-$mode"; rm -rf "$run_cache"; mkdir -p "$run_cache"
    chmod o+x "$run_cache"
    head_extra=(rl.mode=$mode "${modes_args[@]}")
    [ $mode = async ] && head_extra+=(rl.max_staleness=1)
    run $mode 0 "${one_ev[@]}"; summary $mode
  done
  head_extra=(); unset run_cache
fi
