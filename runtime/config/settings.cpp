// Over 800 lines: the table of every run-config key, its default and its documentation.
#include "runtime/config/settings.hpp"

#include "runtime/config/toml_util.hpp"
#include "runtime/episode/rewards.hpp"
#include "runtime/io/text.hpp"

#include "runtime/config/config_error.hpp"
#include "runtime/config/seed_config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace kbrl::config {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr bool exclusive = true; // for setting::min_exclusive: "> min" instead of ">= min"

} // namespace

const std::vector<setting>& all_settings() {
  // One line per setting: key, kind, default (TOML), meaning and unit, then allowed strings or
  // the numeric range {allowed, min, max, min_exclusive}. Keep docs to what a user must know.
  static const std::vector<setting> settings{
    {"run.name", setting_kind::string, "\"kbrl\"",
     "Name of the run: its files (logs, config.toml, manifest.toml) go to the directory "
     "<run.dir>/<run.name>."},
    {"run.dir", setting_kind::string, "\"runs\"",
     "Directory that holds one subdirectory per run; a relative path is taken from the "
     "working directory of kbrl-node."},
    {"run.seed", setting_kind::integer, "0",
     "Seed for the random number generators of the run.", {}, 0},
    {"run.overwrite", setting_kind::boolean, "false",
     "An RL run refuses to start in a run directory that already holds one (metrics, traces, "
     "coordinator.json or learner checkpoints) unless it is resumed (kbrl-node --resume DIR); "
     "true deletes that earlier run's files and starts afresh."},
    {"log.level", setting_kind::string, "\"info\"", "Lowest severity of messages that are logged.",
     {"trace", "debug", "info", "warn", "error", "off"}},
    {"log.console", setting_kind::boolean, "true", "Also write log messages to stderr."},
    {"log.flush_s", setting_kind::real, "1.0",
     "Seconds between flushes of buffered log messages to disk.", {}, 0, inf, exclusive},
    {"node.stop_after_s", setting_kind::real, "0.0",
     "Seconds after which a node stops by itself; 0 runs until SIGINT or SIGTERM.", {}, 0},
    {"node.status_interval_s", setting_kind::real, "10.0",
     "Seconds between the one-line summaries of its actors that a node logs.", {}, 0, inf,
     exclusive},
    {"sampler.backend", setting_kind::string, "\"builtin\"",
     "What samplers generate with: builtin (the model in libtorch on the sampler's GPU) or "
     "remote (an OpenAI-compatible server: vLLM, SGLang, llama.cpp server).",
     {"builtin", "remote"}},
    {"sampler.model", setting_kind::string, "\"\"",
     "Built-in sampler: model directory (Hugging Face layout) or hub id such as "
     "Qwen/Qwen2.5-Coder-1.5B-Instruct."},
    {"sampler.dtype", setting_kind::string, "\"bf16\"",
     "Built-in sampler: weight and activation type.", {"bf16", "fp32"}},
    {"sampler.slots", setting_kind::integer, "32",
     "Built-in sampler: sequences decoded together; a finished one's slot is refilled at once.",
     {}, 1, 4096},
    {"sampler.max_seq_len", setting_kind::integer, "8192",
     "Built-in sampler: prompt plus completion tokens per sequence (sizes the KV cache).", {}, 16},
    {"sampler.cuda_graphs", setting_kind::boolean, "true",
     "Built-in sampler on a GPU: replay each decode step from a CUDA graph (one per key-length "
     "bucket, captured on first use) instead of launching its kernels one by one; false: "
     "always eager. A capture that fails is logged and the sampler decodes eagerly."},
    {"sampler.queue_capacity", setting_kind::integer, "1024",
     "Generation requests a sampler holds at once; more are answered busy.", {}, 1},
    {"sampler.remote_url", setting_kind::string, "\"\"",
     "Remote sampler: server root, e.g. http://gpu-host:8000."},
    {"sampler.remote_model", setting_kind::string, "\"\"",
     "Remote sampler: model name as the server lists it under /v1/models."},
    {"sampler.remote_api", setting_kind::string, "\"completions\"",
     "Remote sampler: endpoint; chat sends the prompt text as one user message.",
     {"completions", "chat"}},
    {"sampler.remote_max_in_flight", setting_kind::integer, "64",
     "Remote sampler: requests on the wire at once.", {}, 1, 4096},
    {"sampler.remote_timeout_s", setting_kind::real, "900.0",
     "Remote sampler: seconds one request may take, retries apart.", {}, 0, inf, exclusive},
    {"sampler.remote_token_prompts", setting_kind::boolean, "true",
     "Remote sampler: send prompts as token ids (vLLM, SGLang), so the learner sees exactly the "
     "tokens sampled from."},
    {"sampler.replay_completions", setting_kind::string, "\"\"",
     "Timing runs with random weights: JSON lines {\"problem\": ID, \"completion\": TEXT} whose "
     "text replaces what the sampler generated for that problem (tokens and timing stay the "
     "generated ones); empty: off."},
    {"learner.model", setting_kind::string, "\"\"",
     "Model the learner trains a LoRA adapter for: directory (Hugging Face layout) or hub id; "
     "empty: sampler.model (learner and samplers must share the base model)."},
    {"learner.dtype", setting_kind::string, "\"bf16\"",
     "Type of the frozen base weights; the adapter and optimiser state are always float32.",
     {"bf16", "fp32"}},
    {"learner.lr", setting_kind::real, "2e-05", "Peak learning rate of AdamW.", {}, 0, inf,
     exclusive},
    {"learner.weight_decay", setting_kind::real, "0.0",
     "Decoupled weight decay of AdamW (applied to every LoRA factor).", {}, 0},
    {"learner.adam_beta1", setting_kind::real, "0.9", "AdamW's beta1.", {}, 0, 0.999999},
    {"learner.adam_beta2", setting_kind::real, "0.999", "AdamW's beta2.", {}, 0, 0.999999},
    {"learner.adam_eps", setting_kind::real, "1e-08", "AdamW's epsilon.", {}, 0, inf, exclusive},
    {"learner.schedule", setting_kind::string, "\"constant\"",
     "Learning rate after warm-up: constant, or cosine decay to min_lr_ratio * lr at "
     "total_steps.", {"constant", "cosine"}},
    {"learner.warmup_steps", setting_kind::integer, "0",
     "Optimiser steps over which the learning rate rises linearly to lr.", {}, 0},
    {"learner.total_steps", setting_kind::integer, "1000",
     "Cosine schedule: the optimiser step at which the decay ends (must exceed warmup_steps).",
     {}, 1},
    {"learner.min_lr_ratio", setting_kind::real, "0.0",
     "Cosine schedule: the final learning rate as a fraction of lr.", {}, 0, 1},
    {"learner.clip_norm", setting_kind::real, "1.0",
     "Global L2 norm the gradient is clipped to before each step; 0 disables clipping.", {}, 0},
    {"learner.micro_batch_tokens", setting_kind::integer, "16384",
     "Padded tokens (sequences x longest sequence) per forward/backward pass; a step "
     "accumulates gradients over as many micro-batches as its batch needs.", {}, 1},
    {"learner.gradient_checkpointing", setting_kind::boolean, "true",
     "Recompute each decoder layer during the backward pass instead of keeping its activations "
     "(about a third more compute, far less memory)."},
    {"learner.lora_compute_dtype", setting_kind::string, "\"base\"",
     "Where the LoRA terms of a bf16 base compute: base (in bf16, the float32 factors cast to "
     "it in each forward, as torch.autocast would; faster, no float32 copy of each activation) "
     "or float32 (each layer input widened to float32, as PEFT does). Factors, gradients and "
     "AdamW stay float32 either way; fp32 bases compute in float32 either way.",
     {"base", "float32"}},
    {"learner.logprob_chunk", setting_kind::integer, "1024",
     "Completion tokens whose logits are computed at once (memory: chunk x vocabulary x 4 "
     "bytes).", {}, 1},
    {"learner.lora_r", setting_kind::integer, "16",
     "Rank r of the LoRA factors (A is r x in_features, B is out_features x r).", {}, 1, 4096},
    {"learner.lora_alpha", setting_kind::real, "32.0",
     "LoRA alpha: the update is scaled by lora_alpha / lora_r (lora_alpha / sqrt(lora_r) with "
     "use_rslora).", {}, 0, inf, exclusive},
    {"learner.lora_dropout", setting_kind::real, "0.0",
     "Dropout probability on the LoRA input during training steps (seeded by run.seed).", {}, 0,
     0.95},
    {"learner.use_rslora", setting_kind::boolean, "false",
     "Rank-stabilised LoRA scaling lora_alpha / sqrt(lora_r)."},
    {"learner.target_modules", setting_kind::string_list,
     "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", "
     "\"down_proj\"]",
     "Linear layers of every decoder layer that get LoRA factors.",
     {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
    {"learner.loss", setting_kind::string, "\"ppo\"",
     "Loss: pg (policy gradient weighted by the importance ratio to the sampler's "
     "log-probabilities), ppo (the same ratio clipped to [1 - eps_low, 1 + eps_high]) or sft "
     "(cross-entropy on the completions).", {"pg", "ppo", "sft"}},
    {"learner.eps_low", setting_kind::real, "0.2", "PPO clipping below: ratio >= 1 - eps_low.",
     {}, 0, 0.999},
    {"learner.eps_high", setting_kind::real, "0.28",
     "PPO clipping above: ratio <= 1 + eps_high (DAPO's clip-higher).", {}, 0},
    {"learner.kl_coef", setting_kind::real, "0.0",
     "Weight of the KL penalty to the base model (the adapter switched off); > 0 costs one "
     "extra forward pass per micro-batch.", {}, 0},
    {"learner.aggregation", setting_kind::string, "\"token\"",
     "How token losses are averaged: token (every completion token of the step weighs the "
     "same) or sequence (mean per sequence, then over sequences).", {"token", "sequence"}},
    {"learner.advantage", setting_kind::string, "\"grpo\"",
     "Advantage within a group of trajectories: grpo ((return - mean) / std) or dr_grpo "
     "(return - mean). Groups whose returns are all equal are dropped.", {"grpo", "dr_grpo"}},
    {"learner.gamma", setting_kind::real, "1.0",
     "Discount of later turns' scores in a multi-turn episode's returns.", {}, 0, 1},
    {"learner.temperature", setting_kind::real, "1.0",
     "Sampling temperature the log-probabilities are defined at: must be the temperature the "
     "episodes sample with (0 counts as 1, as for greedy sampling).", {}, 0},
    {"learner.max_staleness", setting_kind::integer, "4",
     "Newest policy version minus the oldest version in a batch that the learner still trains "
     "on; staler batches are refused.", {}, 0},
    {"learner.checkpoint_every", setting_kind::integer, "50",
     "Optimiser steps between checkpoints (adapter, optimiser, generators, data cursor); 0: "
     "none.", {}, 0},
    {"learner.keep_checkpoints", setting_kind::integer, "3",
     "Newest checkpoints kept on disk; 0 keeps all.", {}, 0},
    {"learner.resume", setting_kind::boolean, "true",
     "Continue from the newest checkpoint under <run>/learner/checkpoints if there is one."},
    {"learner.publish_bytes", setting_kind::boolean, "true",
     "Send the adapter's weights inside each policy update, for samplers that cannot read the "
     "learner's run directory."},
    {"learner.data_parallel_ranks", setting_kind::integer, "1",
     "Learner replicas on a node without GPUs, training data-parallel over Gloo (more than 1 "
     "only exercises that path); on GPUs the learner has one replica per GPU of its node.",
     {}, 1, 64},
    {"learner.data_parallel_timeout_s", setting_kind::real, "600",
     "Seconds one collective of a data-parallel step (Gloo or NCCL all-reduce) may take before "
     "the step fails instead of waiting for a replica that died.", {}, 0, inf, exclusive},
    {"rl.enabled", setting_kind::boolean, "false",
     "Run RL training: the coordinator node waits for a learner, a sampler and an evaluator "
     "(on any node), runs rl.steps steps and stops; false: nodes only serve their roles."},
    {"rl.steps", setting_kind::integer, "100",
     "Training steps of the run, counted over resumes; 0: until stopped.", {}, 0},
    {"rl.problems_per_step", setting_kind::integer, "4",
     "Problems per step (B), each one GRPO group.", {}, 1, 100000},
    {"rl.group_size", setting_kind::integer, "4",
     "Samples per problem and step (G); their rewards are compared with each other.", {}, 2,
     100000},
    {"rl.mode", setting_kind::string, "\"sync\"",
     "sync: a step's episodes start after the previous step's policy is published; async: "
     "episodes run ahead of the learner by up to rl.max_staleness policy versions.",
     {"sync", "async"}},
    {"rl.max_staleness", setting_kind::integer, "1",
     "async: policy versions an episode's sampler may lag behind the learner; at most "
     "learner.max_staleness (which refuses staler batches).", {}, 0},
    {"rl.eval_every", setting_kind::integer, "0",
     "Steps between evaluations on the held-out problems (greedy, one sample each); 0: never.",
     {}, 0},
    {"rl.eval_fraction", setting_kind::real, "0.0",
     "Share of the selected problems held out of training for those evaluations, chosen per "
     "problem by a hash of its id and run.seed.", {}, 0, 0.9},
    {"rl.drop_flat_groups", setting_kind::boolean, "true",
     "Groups whose rewards are all equal (no learning signal) are not sent to the learner."},
    {"rl.traces_max_mb", setting_kind::integer, "256",
     "Size in MiB past which <run>/traces.jsonl (every trajectory) is rotated to "
     "traces.1.jsonl.", {}, 1},
    {"rl.traces_tokens", setting_kind::boolean, "false",
     "Also write each turn's prompt and completion token ids and the sampler's log-probabilities "
     "in traces.jsonl (large)."},
    {"rl.max_turns", setting_kind::integer, "4",
     "Turns per episode: after a turn that is not yet a success, the model sees the evaluator's "
     "feedback and tries again.", {}, 1, 64},
    {"rl.gamma", setting_kind::real, "0.4",
     "Discount of later turns' rewards in an episode's returns; in an RL run the learner uses "
     "this value too (learner.gamma applies to a learner fed from elsewhere).", {}, 0, 1},
    {"rl.return_aggregation", setting_kind::string, "\"sum\"",
     "How later turns flow back: sum (R_t = s_t + gamma R_t+1) or max (R_t = max(s_t, gamma "
     "R_t+1)).", {"sum", "max"}},
    {"rl.success_speedup", setting_kind::real, "1.0",
     "A correct turn at least this much faster than the reference ends the episode early.", {},
     0},
    {"rl.max_retries", setting_kind::integer, "3",
     "Per turn: times a request is sent to another sampler or evaluator after one failed.", {},
     0, 100},
    {"rl.max_failed_steps", setting_kind::integer, "3",
     "Steps in a row in which every episode failed (nothing could be sampled or judged: a "
     "tokenizer that does not fit the model, evaluators that cannot start) before the run "
     "stops with an error naming why; 0 never stops.", {}, 0, 1000000},
    {"rl.sampler_timeout_s", setting_kind::real, "900.0",
     "Seconds an episode waits for one completion.", {}, 0, inf, exclusive},
    {"rl.evaluator_timeout_s", setting_kind::real, "900.0",
     "Seconds an episode waits for one verdict (queueing included; keep it above "
     "rl.eval_timeout_s).", {}, 0, inf, exclusive},
    {"rl.eval_timeout_s", setting_kind::real, "300.0",
     "Seconds of wall clock one candidate's evaluation may take in the worker (build, "
     "correctness, timing): a hung or slow candidate holds its evaluator at most this long and "
     "gets the verdict timeout. An upper bound: once the problem's reference was timed, the "
     "evaluator allows 60 s, plus 240 s while the candidate's extension is not built, plus 1 s "
     "(or 50 times the reference's time) per call of the candidate, when that is less.", {}, 1,
     inf},
    {"rl.learner_timeout_s", setting_kind::real, "1800.0",
     "Seconds the coordinator waits for one training step.", {}, 0, inf, exclusive},
    {"rl.correctness_trials", setting_kind::integer, "5",
     "Fresh random inputs each candidate is checked on against the reference.", {}, 1, 100},
    {"rl.perf_trials", setting_kind::integer, "100",
     "Timed runs of a correct candidate (and of the reference) for its speedup; with "
     "rl.timing_precision above 0, the most it gets.", {}, 1, 100000},
    {"rl.timing_precision", setting_kind::real, "0.01",
     "Adaptive timing: timed runs stop once the 95 % confidence interval of the mean is within "
     "this share of it (0.01: +-1 %), after at least 10 runs and 100 ms of them (calls under 1 ms "
     "keep all rl.perf_trials), at most rl.perf_trials; the reference's too. 0: exactly "
     "rl.perf_trials runs, KernelBench's protocol.", {}, 0, 0.5},
    {"rl.temperature", setting_kind::real, "1.0",
     "Sampling temperature of the episodes (0: greedy); must equal learner.temperature.", {}, 0,
     10},
    {"rl.top_p", setting_kind::real, "1.0", "Nucleus sampling: probability mass kept.", {}, 0, 1,
     exclusive},
    {"rl.top_k", setting_kind::integer, "0", "Most likely tokens sampled from; 0: all.", {}, 0},
    {"rl.max_new_tokens", setting_kind::integer, "1024", "Completion tokens per turn at most.",
     {}, 1, 1000000},
    {"rl.chat_format", setting_kind::string, "\"auto\"",
     "How prompts are rendered for the policy: auto (recognised from the model's chat "
     "template; templates without a C++ renderer go to jinja) or forced: chatml, qwen3, "
     "llama3, jinja (the model's own template through python3-jinja2, as transformers).",
     {"auto", "chatml", "qwen3", "llama3", "jinja"}},
    {"problems.root", setting_kind::string, "\"\"",
     "KernelBench checkout or folder with level<N>/ folders of problem files; empty: "
     "$KERNELBENCH_ROOT."},
    {"problems.levels", setting_kind::int_list, "[1]", "Levels trained on.", {}, 1, 9},
    {"problems.numbers", setting_kind::string, "\"\"",
     "Problem numbers within each level, e.g. \"1-20,25\"; empty: all."},
    {"problems.backend", setting_kind::string, "\"cuda\"",
     "What candidates must be written in: cuda (CUDA C++ through load_inline), triton, or torch "
     "(plain PyTorch, for CPU runs).", {"cuda", "triton", "torch"}},
    {"problems.precision", setting_kind::string, "\"fp32\"",
     "Precision the problems run in (inputs, weights, tolerances).", {"fp32", "fp16", "bf16"}},
    {"reward.preset", setting_kind::string, "\"correctness\"",
     "Weights of the reward: correctness (1 x correct), kevin (0.3 x correct + speedup), or the "
     "staged stage-format, stage-compile, stage-correct, stage-speed.",
     episode::reward_preset_names()},
    {"reward.format", setting_kind::real, "-1.0",
     "Weight of an answer that parsed; -1 keeps the preset's weight, >= 0 replaces it (so do "
     "the other weights below).", {}, -1},
    {"reward.compiles", setting_kind::real, "-1.0", "Weight of a candidate that built and loaded.",
     {}, -1},
    {"reward.partial", setting_kind::real, "-1.0",
     "Weight of the share of correctness trials passed.", {}, -1},
    {"reward.correct", setting_kind::real, "-1.0", "Weight of passing every correctness trial.",
     {}, -1},
    {"reward.speed", setting_kind::real, "-1.0",
     "Weight of the speedup of a correct candidate (see speed_kind, speed_cap).", {}, -1},
    {"reward.speed_kind", setting_kind::string, "\"\"",
     "Speed term: log (log of the speedup) or linear (the speedup); empty keeps the preset's.",
     {"", "log", "linear"}},
    {"reward.speed_cap", setting_kind::real, "-1.0",
     "Largest speed term; -1 keeps the preset's, else > 0.", {}, -1},
    {"reward.reasoning", setting_kind::real, "-1.0",
     "Weight of a non-empty reasoning (think) block.", {}, -1},
    {"reward.length", setting_kind::real, "-1.0",
     "Weight of the length penalty: minus completion tokens / 1000.", {}, -1},
    {"reward.low_coverage", setting_kind::string, "\"zero\"",
     "A candidate flagged own_kernels_idle (none of its own kernels ran on the GPU) or "
     "low_time_coverage (they took less than eval.min_time_coverage of its GPU time): zero "
     "(it earns 0 and counts as a hack, like a static-check refusal) or keep (scored as any "
     "other).",
     {"zero", "keep"}},
    {"eval.python", setting_kind::string, "\"auto\"",
     "Python interpreter (with torch) that runs the evaluation workers; auto: the first of "
     "$KBRL_PYTHON, python3 on PATH and /usr/bin/python3 that imports torch."},
    {"eval.worker_script", setting_kind::string, "\"\"",
     "Path of kbrl_eval_worker.py; empty: the tools/ folder next to the kbrl executables, or of "
     "the source tree."},
    {"eval.isolation", setting_kind::string, "\"auto\"",
     "How workers are fenced off: bwrap (no network, read-only filesystem except scratch, own "
     "PID namespace, /dev/shm and /run), unshare (no network; root only), none (no sandbox: "
     "every verdict says so), or auto (bwrap, and a refusal to evaluate where it does not work). "
     "In every mode the worker may not open unix sockets.",
     {"auto", "bwrap", "unshare", "none"}},
    {"eval.inputs_on", setting_kind::string, "\"device\"",
     "Where get_inputs() draws its random tensors: device (on the GPU, seconds faster for large "
     "inputs; same seeds, other values than KernelBench) or host (KernelBench's exact values: "
     "drawn on the CPU, then copied).",
     {"device", "host"}},
    {"eval.init_on", setting_kind::string, "\"device\"",
     "Where the reference's Model and the candidate's ModelNew are constructed: device (the GPU "
     "as default device: the same seeds give both models the GPU generator's weights, equal to "
     "each other, not to KernelBench's; like inputs_on = device) or host (KernelBench's exact "
     "weights: initialised on the CPU, then moved; an 8192 x 8192 nn.Linear takes about half a "
     "second there, single-threaded, in both processes). When either cannot be built on the "
     "device (an __init__ that needs host tensors), that evaluation builds both on the host.",
     {"device", "host"}},
    {"eval.timing_input_sets", setting_kind::integer, "3",
     "Input sets the timed runs of a candidate rotate over; with more than one, outputs cached "
     "by input identity are caught. Fewer are used when they do not fit in the GPU's free memory "
     "(level-1 problems draw inputs of several GB); one set is then refilled with fresh values "
     "to check for cached outputs.",
     {}, 1, 8},
    {"eval.correctness", setting_kind::string, "\"strict\"",
     "Which verdict decides correct (and so the reward and the metrics): strict (every trial "
     "within the strict tolerances below and every runtime check of the worker passed) or "
     "kernelbench (KernelBench's own check: torch.allclose with atol/rtol on every trial, "
     "nothing else). Both verdicts are always recorded.",
     {"strict", "kernelbench"}},
    {"eval.strict_rtol", setting_kind::real, "-1.0",
     "Strict check: per-element relative tolerance; -1 (any value < 0): per precision (fp32 "
     "1e-4, fp16 and bf16 1e-2).",
     {}, -1},
    {"eval.strict_floor", setting_kind::real, "-1.0",
     "Strict check: absolute floor of the per-element tolerance, as a fraction of the largest "
     "|reference output|; -1 (any value < 0): per precision (the same numbers as strict_rtol).",
     {}, -1},
    {"eval.strict_norm_tol", setting_kind::real, "-1.0",
     "Strict check: bound on norm(output - reference) / norm(reference); -1 (any value < 0): "
     "per precision (the same numbers as strict_rtol).",
     {}, -1},
    {"eval.min_time_coverage", setting_kind::real, "0.05",
     "Compiled backends on a GPU: a candidate whose own kernels take less than this share of "
     "its GPU time (0 to 1) is flagged low_time_coverage (see reward.low_coverage).",
     {}, 0, 1},
    {"eval.memory_limit_gb", setting_kind::real, "16.0",
     "Resident memory a candidate's process (with the processes it starts) may hold, in GiB; "
     "past it the process is killed and the verdict is a runtime error flagged memory_limit. "
     "Host memory only: the GPU's is bounded by the device.",
     {}, 0.25},
    {"eval.shared_reference_mb", setting_kind::real, "4096.0",
     "Models, inputs and expected outputs a worker keeps of the references it ran, in MiB (on "
     "the device when eval.inputs_on = device): the candidates of one problem, seed and device "
     "are judged against the reference's work done once, not once each. The candidate's "
     "process still gets its own copy of the inputs and never sees the outputs. A level-2 "
     "GEMM problem's entry is about 0.8 GB (its weights and eight trials), so this keeps "
     "about five while their candidates arrive interleaved. 0: off.",
     {}, 0},
    {"eval.profile_coverage", setting_kind::boolean, "true",
     "Measure that share (the time coverage) with one extra profiled call per timed candidate; "
     "false: not measured (time_coverage -1), so neither own_kernels_idle nor "
     "low_time_coverage is flagged."},
    {"eval.reference_mode", setting_kind::string, "\"eager\"",
     "What a candidate's speedup is measured against: eager (the PyTorch reference as written, "
     "KernelBench's default) or compile (the reference compiled with torch.compile in its default "
     "mode, compilation and warm-up not timed; needs torch >= 2.0 in the worker). Timings of the "
     "two are cached apart.",
     {"eager", "compile"}},
    {"eval.drop_privileges", setting_kind::boolean, "true",
     "When kbrl runs as root, run workers as the unprivileged user nobody."},
    {"eval.max_processes", setting_kind::integer, "512",
     "Most processes the worker's user may have (stops fork storms).", {}, 16},
    {"eval.max_file_mb", setting_kind::integer, "1024",
     "Largest file a worker may write, in MiB.", {}, 1},
    {"eval.capture_kb", setting_kind::integer, "64",
     "Candidate output kept per evaluation, in KiB (first and last half).", {}, 1},
    {"eval.recycle_after", setting_kind::integer, "200",
     "Evaluations after which a worker is replaced by a fresh one (load_inline leaks).", {}, 1},
    {"eval.recycle_rss_mb", setting_kind::real, "16384.0",
     "Resident memory in MiB above which a worker is replaced.", {}, 0, inf, exclusive},
    {"eval.suspicious_speedup", setting_kind::real, "10.0",
     "Speedups above this are flagged suspicious_speedup (as KernelBench's excessive-speedup "
     "check).", {}, 1},
    {"eval.cache_dir", setting_kind::string, "\"\"",
     "Folder of caches shared by runs: reference timings, and the candidates' extension builds "
     "in its extensions/ folder (runs naming the same folder reuse each other's builds); empty: "
     "reference timings in <run.dir>/.cache, builds in each run's own directory."},
    {"eval.manifest", setting_kind::string, "\"\"",
     "kbrl-eval only: a cluster manifest whose evaluator nodes (running kbrl-node --role "
     "evaluator) evaluate its candidates, as many at once as they have evaluators (the same as "
     "kbrl-eval --manifest); empty: evaluate in kbrl-eval's own process (--gpu)."},
    {"eval.rules_off", setting_kind::string_list, "[]",
     "Static-check rule ids to switch off for this run (kbrl-eval-kernel --list-rules lists them)."},
    {"eval.rules_warn", setting_kind::string_list, "[]",
     "Static-check rule ids that only warn (reported in hack_flags, not rejected)."},
    {"eval.rules_error", setting_kind::string_list, "[]",
     "Static-check rule ids that reject a candidate even if they only warn by default."},
    {"eval.build_workers", setting_kind::integer, "0",
     "CPU workers that build candidates' extensions (load_inline) ahead of evaluation, so GPUs "
     "never wait for nvcc and duplicates are built once; 0: each GPU worker builds its own. On a "
     "builder node (kbrl-node --role builder), the builders it runs for the cluster; 0 there: "
     "one per CPU core.",
     {}, 0, 256},
    {"eval.remote_build_slots", setting_kind::integer, "8",
     "Builds an evaluator node keeps in flight on each builder node (kbrl-node --role "
     "builder), beside its own eval.build_workers; the builder node builds each source once for "
     "the whole cluster and sends the built library back.",
     {}, 1, 1024},
    {"eval.cuda_arch_list", setting_kind::string, "\"auto\"",
     "TORCH_CUDA_ARCH_LIST for every worker (builders and GPU workers must agree, or torch "
     "rebuilds); auto: the compute capabilities nvidia-smi reports, empty: leave it unset. A "
     "builder node without GPUs needs it set to the evaluator nodes' (e.g. \"9.0\")."},
    {"eval.queue_capacity", setting_kind::integer, "64",
     "Evaluation requests an evaluator node keeps waiting; more are answered busy.", {}, 1},
    {"eval.restart_limit", setting_kind::integer, "5",
     "Restarts of one evaluator allowed within eval.restart_window_s before it is degraded.", {},
     0},
    {"eval.restart_window_s", setting_kind::real, "60.0",
     "Window in seconds over which evaluator restarts are counted.", {}, 0, inf, exclusive},
    {"eval.degraded_backoff_s", setting_kind::real, "30.0",
     "Seconds a degraded evaluator waits before it is started again.", {}, 0, inf, exclusive},
    {"prompt.system", setting_kind::string,
     "\"You are an expert in writing fast, correct GPU kernels.\"",
     "System message of every episode's conversation; empty: no system message."},
    {"prompt.hardware_notes", setting_kind::string, "\"\"",
     "Where the kernels run, as the first prompt states it (e.g. \"NVIDIA H200 (Hopper, 141 GB "
     "HBM3e)\"); empty: not mentioned."},
    {"prompt.show_example", setting_kind::boolean, "true",
     "Show a short example problem and its answer for the run's backend in the first prompt."},
    {"prompt.history_token_budget", setting_kind::integer, "12000",
     "Tokens the whole conversation may take (counted with the policy's tokenizer); the oldest "
     "earlier turns are left out first.", {}, 0},
    {"prompt.require_think", setting_kind::boolean, "false",
     "An answer without the reasoning block (prompt.think_open ... prompt.think_close) is a "
     "format failure."},
    {"prompt.allow_fenced", setting_kind::boolean, "true",
     "Accept a fenced ```python block as the program when the kernel tags are absent."},
    {"prompt.think_open", setting_kind::string, "\"<think>\"",
     "Tag that opens the reasoning block of an answer."},
    {"prompt.think_close", setting_kind::string, "\"</think>\"",
     "Tag that closes the reasoning block of an answer."},
    {"prompt.kernel_open", setting_kind::string, "\"<KERNEL>\"",
     "Tag that opens the program of an answer (only the program inside the tags is run)."},
    {"prompt.kernel_close", setting_kind::string, "\"</KERNEL>\"",
     "Tag that closes the program of an answer."},
    {"retrieval.index_dir", setting_kind::string, "\"\"",
     "Retrieval index (made by kbrl-index build) whose examples are shown in prompts as few-shot "
     "demonstrations (RA-ICL); empty: no retrieval."},
    {"retrieval.k", setting_kind::integer, "3",
     "Examples retrieved per problem (the nearest of the run's backend, never the problem "
     "itself).", {}, 1, 32},
    {"retrieval.token_budget", setting_kind::integer, "3000",
     "Prompt tokens the examples may take together, counted with the policy's tokenizer; an "
     "example that does not fit is left out whole.", {}, 0, 1000000},
    {"retrieval.embedder", setting_kind::string, "\"\"",
     "Embedder of queries: empty uses the one the index was built with; builtin, http:URL or "
     "model:PATH reach that same embedder elsewhere (another embedder is refused)."},
  };
  return settings;
}

const char* to_string(setting_kind kind) {
  switch (kind) {
    case setting_kind::boolean: return "boolean";
    case setting_kind::integer: return "integer";
    case setting_kind::real: return "real";
    case setting_kind::string: return "string";
    case setting_kind::string_list: return "string_list";
    case setting_kind::int_list: return "int_list";
  }
  return "unknown";
}

const setting* find_setting(const std::string& key, const std::vector<setting>& schema) {
  for (const auto& s : schema)
    if (s.key == key)
      return &s;
  return nullptr;
}

namespace {

/// Reports one problem: line (0 = none), dotted key, what was expected and found.
using reporter = std::function<void(int line, const std::string& key, const std::string& what)>;

/// A bound as written in messages: whole numbers without a fraction.
std::string format_bound(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15)
    return std::to_string(static_cast<int64_t>(x));
  return toml_real(x);
}

/// " from 1 to 65535", " >= 0", " > 0", " <= 10", or "" for an unbounded setting.
std::string range_text(const setting& s) {
  const bool has_min = s.min > -inf, has_max = s.max < inf;
  if (has_min && has_max && !s.min_exclusive)
    return " from " + format_bound(s.min) + " to " + format_bound(s.max);
  std::string out;
  if (has_min)
    out += (s.min_exclusive ? " > " : " >= ") + format_bound(s.min);
  if (has_min && has_max)
    out += " and";
  if (has_max)
    out += " <= " + format_bound(s.max);
  return out;
}

bool in_range(const setting& s, double x) {
  return (s.min_exclusive ? x > s.min : x >= s.min) && x <= s.max;
}

/// What a value of `s` must look like, e.g. "expected an integer >= 0".
std::string expected_text(const setting& s) {
  switch (s.kind) {
    case setting_kind::boolean: return "expected true or false";
    case setting_kind::integer: return "expected an integer" + range_text(s);
    case setting_kind::real: return "expected a number" + range_text(s);
    case setting_kind::string:
      return s.allowed.empty() ? "expected a string" : "expected one of " + join(s.allowed, ", ");
    case setting_kind::string_list:
      return s.allowed.empty() ? "expected an array of strings"
                               : "expected an array of strings from " + join(s.allowed, ", ");
    case setting_kind::int_list: return "expected an array of integers" + range_text(s);
  }
  return "expected a value";
}

/// Reads a string that must be one of s.allowed (if any); reports at `key`.
std::optional<std::string> read_string(const setting& s, const toml::node& n,
                                       const std::string& key, const std::string& expected,
                                       const reporter& report) {
  if (!n.is_string()) {
    report(line_of(n), key, expected + ", got " + got(n));
    return std::nullopt;
  }
  const std::string& text = n.as_string()->get();
  if (!s.allowed.empty()
      && std::find(s.allowed.begin(), s.allowed.end(), text) == s.allowed.end()) {
    report(line_of(n), key, expected + ", got " + got(n) + did_you_mean(text, s.allowed));
    return std::nullopt;
  }
  return text;
}

/// Reads an integer within [min, max]; reports at `key`.
std::optional<int64_t> read_int(const setting& s, const toml::node& n, const std::string& key,
                                const std::string& expected, const reporter& report) {
  if (!n.is_integer() || !in_range(s, static_cast<double>(n.as_integer()->get()))) {
    report(line_of(n), key, expected + ", got " + got(n));
    return std::nullopt;
  }
  return n.as_integer()->get();
}

/// Converts `n` to a value of setting `s`, or reports every problem (at `key`, or `key[i]` for
/// list elements) and returns nothing.
std::optional<setting_value> read_value(const setting& s, const toml::node& n,
                                        const std::string& key, const reporter& report) {
  const std::string expected = expected_text(s);
  switch (s.kind) {
    case setting_kind::boolean:
      if (!n.is_boolean())
        break;
      return setting_value{n.as_boolean()->get()};
    case setting_kind::integer:
      if (auto v = read_int(s, n, key, expected, report))
        return setting_value{*v};
      return std::nullopt;
    case setting_kind::real: {
      std::optional<double> x;
      if (n.is_integer())
        x = static_cast<double>(n.as_integer()->get());
      else if (n.is_floating_point())
        x = n.as_floating_point()->get();
      if (!x || !std::isfinite(*x) || !in_range(s, *x))
        break;
      return setting_value{*x};
    }
    case setting_kind::string:
      if (auto v = read_string(s, n, key, expected, report))
        return setting_value{*v};
      return std::nullopt;
    case setting_kind::string_list:
    case setting_kind::int_list: {
      const toml::array* array = n.as_array();
      if (array == nullptr)
        break;
      const std::string element_expected =
        s.kind == setting_kind::int_list
          ? "expected an integer" + range_text(s)
          : (s.allowed.empty() ? "expected a string"
                               : "expected one of " + join(s.allowed, ", "));
      std::vector<std::string> strings;
      std::vector<int64_t> ints;
      bool ok = true;
      for (std::size_t i = 0; i < array->size(); ++i) {
        const toml::node& element = *array->get(i);
        const std::string element_key = key + "[" + std::to_string(i) + "]";
        if (s.kind == setting_kind::int_list) {
          if (auto v = read_int(s, element, element_key, element_expected, report))
            ints.push_back(*v);
          else
            ok = false;
        } else if (auto v = read_string(s, element, element_key, element_expected, report)) {
          strings.push_back(*v);
        } else {
          ok = false;
        }
      }
      if (!ok)
        return std::nullopt;
      if (s.kind == setting_kind::int_list)
        return setting_value{std::move(ints)};
      return setting_value{std::move(strings)};
    }
  }
  report(line_of(n), key, expected + ", got " + got(n));
  return std::nullopt;
}

std::string value_toml(const setting_value& value) {
  struct visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return toml_real(d); }
    std::string operator()(const std::string& s) const { return toml_quote(s); }
    std::string operator()(const std::vector<std::string>& items) const {
      std::string out = "[";
      for (std::size_t i = 0; i < items.size(); ++i)
        out += (i ? ", " : "") + toml_quote(items[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<int64_t>& items) const {
      std::string out = "[";
      for (std::size_t i = 0; i < items.size(); ++i)
        out += (i ? ", " : "") + std::to_string(items[i]);
      return out + "]";
    }
  };
  return std::visit(visitor{}, value);
}

/// True if `key` is the table part of some setting of `schema` ("log" for "log.level").
bool is_table_of_settings(const std::string& key, const std::vector<setting>& schema) {
  const std::string prefix = key + ".";
  return std::any_of(schema.begin(), schema.end(),
                     [&](const setting& s) { return s.key.rfind(prefix, 0) == 0; });
}

/// What an unknown key may have meant: the closest kbrl key, else the kbrl name of a seed
/// project's key (seed_config.hpp).
std::string unknown_key_hint(const std::string& key, const std::vector<std::string>& known) {
  auto hint = did_you_mean(key, known);
  return hint.empty() ? seed_key_hint(key) : hint;
}

/// Every setting key and every table above one: what an unknown key may have meant.
std::vector<std::string> known_names(const std::vector<setting>& schema) {
  std::vector<std::string> out;
  for (const auto& s : schema) {
    out.push_back(s.key);
    for (auto dot = s.key.find('.'); dot != std::string::npos; dot = s.key.find('.', dot + 1))
      if (std::find(out.begin(), out.end(), s.key.substr(0, dot)) == out.end())
        out.push_back(s.key.substr(0, dot));
  }
  return out;
}

/// Reads the settings in `table` (at dotted `prefix`) into `values`, reporting every problem.
void read_table(const toml::table& table, const std::string& prefix,
                const std::vector<setting>& schema, std::map<std::string, setting_value>& values,
                config_errors& errors) {
  const reporter report = [&](int line, const std::string& key, const std::string& what) {
    errors.add(line, key, what);
  };
  for (auto&& [k, node] : table) {
    const std::string name{k.str()};
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (const setting* s = find_setting(key, schema)) {
      if (auto v = read_value(*s, node, key, report))
        values[key] = std::move(*v);
    } else if (is_table_of_settings(key, schema)) {
      if (node.is_table())
        read_table(*node.as_table(), key, schema, values, errors);
      else
        errors.add(line_of(node), key,
                   "expected a table of settings ([" + key + "]), got " + got(node));
    } else {
      errors.add(line_of(k), key,
                 std::string{node.is_table() ? "unknown table" : "unknown key"}
                   + unknown_key_hint(key, known_names(schema)));
    }
  }
}

/// Wraps `text` into lines of at most `width` characters, each starting with "# ".
std::string comment(const std::string& text, std::size_t width = 98) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width - 2) {
      out += "# " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty())
    out += "# " + line + "\n";
  return out;
}

/// The defaults of `schema`; a default that does not pass its own checks is a bug.
std::map<std::string, setting_value> default_values(const std::vector<setting>& schema) {
  std::map<std::string, setting_value> values;
  for (const auto& s : schema) {
    const auto dot = s.key.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == s.key.size())
      throw std::logic_error("setting '" + s.key + "': a key needs a table, e.g. 'log.level'");
    const bool bare = std::all_of(s.key.begin(), s.key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!bare || s.key.find("..") != std::string::npos)
      throw std::logic_error("setting '" + s.key + "': use [A-Za-z0-9_-] between the dots");
    if (values.count(s.key) != 0 || is_table_of_settings(s.key, schema))
      throw std::logic_error("setting '" + s.key + "' is declared twice or is also a table");
    std::string problem;
    const reporter report = [&](int, const std::string& key, const std::string& what) {
      problem += key + ": " + what + "; ";
    };
    try {
      const toml::table parsed = toml::parse("v = " + s.default_toml, std::string_view{"default"});
      if (auto v = read_value(s, *parsed.get("v"), s.key, report))
        values[s.key] = std::move(*v);
    } catch (const toml::parse_error& e) {
      problem = std::string{e.description()};
    }
    if (values.count(s.key) == 0)
      throw std::logic_error("setting '" + s.key + "': bad default " + s.default_toml + ": "
                             + problem);
  }
  return values;
}

} // namespace

run_config::run_config(const std::vector<setting>* schema,
                       std::map<std::string, setting_value> values)
  : schema_(schema), values_(std::move(values)) {
}

run_config::run_config() : run_config(defaults()) {
}

run_config run_config::defaults(const std::vector<setting>& schema) {
  return run_config{&schema, default_values(schema)};
}

caf::expected<run_config> run_config::parse(std::string_view text, const std::string& path,
                                            const std::vector<setting>& schema) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view{path});
  } catch (const toml::parse_error& e) {
    return config_error(path, static_cast<int>(e.source().begin.line), "",
                        "TOML syntax error: " + std::string{e.description()});
  }
  run_config config = defaults(schema);
  config_errors errors{path};
  read_table(root, "", schema, config.values_, errors);
  if (!errors.empty())
    return errors.to_error();
  return config;
}

caf::expected<run_config> run_config::load(const std::string& path,
                                           const std::vector<setting>& schema) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return config_error(path, 0, "",
                        std::string{"cannot read the run config: "} + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, schema);
}

caf::error run_config::apply_override(const std::string& assignment) {
  auto trim = [](std::string s) {
    const auto first = s.find_first_not_of(" \t");
    const auto last = s.find_last_not_of(" \t");
    return first == std::string::npos ? std::string{} : s.substr(first, last - first + 1);
  };
  config_errors errors{"override '" + assignment + "'"};
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) {
    errors.add(0, "", "expected key=value, e.g. log.level=debug");
    return errors.to_error();
  }
  const std::string key = trim(assignment.substr(0, eq));
  const std::string text = trim(assignment.substr(eq + 1));
  const setting* s = find_setting(key, *schema_);
  if (s == nullptr) {
    if (is_table_of_settings(key, *schema_))
      errors.add(0, "", "'" + key + "' is a table of settings, not a setting");
    else
      errors.add(0, "", "unknown key '" + key + "'"
                          + unknown_key_hint(key, known_names(*schema_)));
    return errors.to_error();
  }
  // The value as a TOML node: bare text is a string for string settings, and is kept as a string
  // (so the error shows it) when it is not valid TOML.
  toml::table parsed;
  const bool quoted = !text.empty() && (text.front() == '"' || text.front() == '\'');
  if (s->kind != setting_kind::string || quoted) {
    try {
      parsed = toml::parse("v = " + text, std::string_view{"override"});
    } catch (const toml::parse_error&) {
      parsed.clear();
    }
  }
  if (parsed.size() != 1 || parsed.get("v") == nullptr) {
    parsed.clear();
    parsed.insert("v", text);
  }
  const reporter report = [&](int, const std::string& k, const std::string& what) {
    errors.add(0, k, what);
  };
  auto value = read_value(*s, *parsed.get("v"), key, report);
  if (!value)
    return errors.to_error();
  values_[key] = std::move(*value);
  return caf::error{};
}

caf::error run_config::apply_overrides(const std::vector<std::string>& assignments) {
  for (const auto& assignment : assignments)
    if (auto err = apply_override(assignment))
      return err;
  return caf::error{};
}

const setting_value& run_config::value_of(const std::string& key, setting_kind kind) const {
  const setting* s = find_setting(key, *schema_);
  if (s == nullptr)
    throw std::logic_error("run_config: '" + key + "' is not a declared setting");
  if (s->kind != kind)
    throw std::logic_error("run_config: '" + key + "' is a " + to_string(s->kind)
                           + " setting, read as " + to_string(kind));
  return values_.at(key);
}

bool run_config::get_bool(const std::string& key) const {
  return std::get<bool>(value_of(key, setting_kind::boolean));
}

int64_t run_config::get_int(const std::string& key) const {
  return std::get<int64_t>(value_of(key, setting_kind::integer));
}

double run_config::get_real(const std::string& key) const {
  return std::get<double>(value_of(key, setting_kind::real));
}

std::string run_config::get_string(const std::string& key) const {
  return std::get<std::string>(value_of(key, setting_kind::string));
}

std::vector<std::string> run_config::get_string_list(const std::string& key) const {
  return std::get<std::vector<std::string>>(value_of(key, setting_kind::string_list));
}

std::vector<int64_t> run_config::get_int_list(const std::string& key) const {
  return std::get<std::vector<int64_t>>(value_of(key, setting_kind::int_list));
}

std::string run_config::get_toml(const std::string& key) const {
  const setting* s = find_setting(key, *schema_);
  if (s == nullptr)
    throw std::logic_error("run_config: '" + key + "' is not a declared setting");
  return value_toml(values_.at(key));
}

std::string run_config::render() const {
  // Tables in order of first appearance, each with its settings in declaration order.
  std::vector<std::string> tables;
  for (const auto& s : *schema_) {
    const std::string table = s.key.substr(0, s.key.rfind('.'));
    if (std::find(tables.begin(), tables.end(), table) == tables.end())
      tables.push_back(table);
  }
  const run_config fallback = defaults(*schema_);
  std::ostringstream out;
  out << "# kbrl run configuration: every setting with its value. The comment above a setting\n"
         "# gives its meaning and unit, its default and what is allowed. A file given to kbrl\n"
         "# may set only some settings; the command line overrides any as key=value\n"
         "# (e.g. log.level=debug).\n";
  for (const auto& table : tables) {
    out << "\n[" << table << "]\n";
    bool first = true;
    for (const auto& s : *schema_) {
      if (s.key.substr(0, s.key.rfind('.')) != table)
        continue;
      if (!first)
        out << "\n";
      first = false;
      out << comment(s.doc);
      out << "# default: " << value_toml(fallback.values_.at(s.key));
      if (!s.allowed.empty())
        out << "; one of: " << join(s.allowed, ", ");
      if (s.kind == setting_kind::integer || s.kind == setting_kind::real
          || s.kind == setting_kind::int_list) {
        if (const std::string range = range_text(s); !range.empty())
          out << "; range:" << range;
      }
      out << "\n" << s.key.substr(s.key.rfind('.') + 1) << " = " << value_toml(values_.at(s.key))
          << "\n";
    }
  }
  return out.str();
}

} // namespace kbrl::config
