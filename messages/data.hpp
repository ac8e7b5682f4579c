#pragma once
// The data that crosses actors and nodes: plain aggregates with an inspect() each.
//
// Shapes here are the whole RL loop's, defined once so later work fills in behaviour, not
// messages. Every struct is registered in messages/type_ids.hpp and has a round-trip test in
// test/test_messages.cpp: a type missing from the ID block works locally and fails only across
// nodes. No pointers, no behaviour: a struct that must carry an actor uses a handle.

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl {

// -- problems -------------------------------------------------------------------------------------

/// What the candidate kernel is written in.
enum class kernel_backend : uint8_t { cuda, triton, torch, hip, cute, tilelang, thunderkittens };

/// The precision the problem's tensors are checked and timed in.
enum class kernel_precision : uint8_t { fp32, fp16, bf16 };

const char* to_string(kernel_backend x);
const char* to_string(kernel_precision x);

/// A KernelBench-style problem: a PyTorch `Model` with get_inputs/get_init_inputs.
struct problem {
  std::string id;                 ///< stable identifier, e.g. "level1/19_ReLU"
  int32_t level = 0;              ///< KernelBench level (1-4), 0 for other sources
  int32_t number = 0;             ///< problem number within its level
  std::string name;               ///< human-readable name, e.g. "19_ReLU"
  std::string reference_source;   ///< the reference PyTorch program
  kernel_backend backend = kernel_backend::cuda; ///< backend the candidate must use
  kernel_precision precision = kernel_precision::fp32;
  std::string source_hash;        ///< hash of the normalised reference (leakage guard, caching)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, problem& x) {
  return f(caf::meta::type_name("problem"), x.id, x.level, x.number, x.name, x.reference_source,
           x.backend, x.precision, x.source_hash);
}

// -- generation -----------------------------------------------------------------------------------

/// How a sampler draws one completion.
struct sampling_params {
  double temperature = 1.0;             ///< 0 means greedy
  double top_p = 1.0;                   ///< nucleus mass kept, (0, 1]
  int32_t top_k = 0;                    ///< 0 disables top-k
  int32_t max_new_tokens = 1024;
  uint64_t seed = 0;                    ///< per-request seed, for reproducible samples
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_token_ids;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_p, x.top_k,
           x.max_new_tokens, x.seed, x.stop_strings, x.stop_token_ids);
}

/// Why a completion ended.
enum class finish_reason : uint8_t { stop_token, stop_string, length, error, cancelled };
const char* to_string(finish_reason x);

/// One completion to draw. Exactly one of prompt_text / prompt_tokens is set.
struct generation_request {
  uint64_t id = 0;                      ///< unique per requester; the answer carries it back
  std::string prompt_text;              ///< rendered prompt (remote OpenAI-style servers)
  std::vector<int32_t> prompt_tokens;   ///< token ids (built-in sampler)
  sampling_params params;
  uint64_t min_policy_version = 0;      ///< the sampler must hold at least this version
  std::string trace;                    ///< requester's label for logs, e.g. "episode 12 turn 2"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_request& x) {
  return f(caf::meta::type_name("generation_request"), x.id, x.prompt_text, x.prompt_tokens,
           x.params, x.min_policy_version, x.trace);
}

/// A drawn completion with what the learner needs for importance sampling.
struct generation_result {
  uint64_t id = 0;
  std::string completion_text;
  std::vector<int32_t> completion_tokens;
  std::vector<float> logprobs;          ///< sampler log-probability of each completion token
  finish_reason finish = finish_reason::length;
  uint64_t policy_version = 0;          ///< the weights that produced it
  int32_t prompt_token_count = 0;
  double seconds = 0;                   ///< time from request to answer on the sampler
  std::string sampler;                  ///< name of the sampler actor that answered
  std::string error;                    ///< set when finish == error
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_result& x) {
  return f(caf::meta::type_name("generation_result"), x.id, x.completion_text,
           x.completion_tokens, x.logprobs, x.finish, x.policy_version, x.prompt_token_count,
           x.seconds, x.sampler, x.error);
}

// -- evaluation -----------------------------------------------------------------------------------

/// How a candidate is checked and timed (KernelBench's defaults).
struct timing_options {
  int32_t correctness_trials = 5;  ///< fresh random inputs, each compared with allclose
  int32_t perf_trials = 100;       ///< timed runs after warm-up, L2 flushed between them
  /// 0: exactly perf_trials timed runs (KernelBench's protocol). > 0: timed runs until the 95 %
  /// confidence interval of the mean is within this share of it (0.01: +-1 %), at least 10 runs
  /// and 100 ms of them, at most perf_trials; the reference's too.
  double timing_precision = 0;
  int32_t warmup_runs = 3;
  uint64_t seed = 42;              ///< seeds the inputs of the correctness trials
  double timeout_s = 300;          ///< wall-clock budget for compile + check + timing
  bool measure_performance = true;
  bool compare_torch_compile = false; ///< also time a torch.compile reference
  double atol = -1;                ///< < 0: KernelBench's tolerance for the precision
  double rtol = -1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timing_options& x) {
  return f(caf::meta::type_name("timing_options"), x.correctness_trials, x.perf_trials,
           x.timing_precision, x.warmup_runs, x.seed, x.timeout_s, x.measure_performance,
           x.compare_torch_compile, x.atol, x.rtol);
}

/// A candidate kernel to evaluate against its problem.
struct eval_request {
  uint64_t id = 0;
  std::string candidate_source;    ///< the ModelNew program
  problem task;
  timing_options timing;
  std::string trace;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, eval_request& x) {
  return f(caf::meta::type_name("eval_request"), x.id, x.candidate_source, x.task, x.timing,
           x.trace);
}

/// Where an evaluation stopped, or `none` when the candidate was checked (correct or not).
enum class eval_error : uint8_t {
  none,
  format,        ///< no program could be extracted
  static_check,  ///< refused before running (reward hack or forbidden construct)
  compile,       ///< the extension or module failed to build
  runtime,       ///< raised while running
  mismatch,      ///< ran, but outputs differ from the reference
  timeout,       ///< passed its deadline
  crashed,       ///< the worker died or the device was corrupted
  infrastructure ///< kbrl itself failed (not the candidate's fault)
};
const char* to_string(eval_error x);

/// Runtime statistics of repeated timed runs, in milliseconds.
struct runtime_stats {
  double mean_ms = 0, std_ms = 0, min_ms = 0, max_ms = 0;
  int32_t trials = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, runtime_stats& x) {
  return f(caf::meta::type_name("runtime_stats"), x.mean_ms, x.std_ms, x.min_ms, x.max_ms,
           x.trials);
}

/// One correctness trial.
struct trial_result {
  bool passed = false;             ///< the strict check passed (CONTRACT-16: `passed`)
  double max_abs_diff = 0;
  double mean_abs_diff = 0;
  std::string note;                ///< e.g. "shape mismatch: [4, 8] vs [8, 4]"
  /// KernelBench's check passed: torch.allclose(ref, out, atol, rtol) and equal shapes. A worker
  /// that does not answer it (an older one) gets `passed`.
  bool kernelbench_passed = false;
  double max_rel_diff = 0;         ///< max |got - ref| / max |ref|
  double norm_rel_diff = 0;        ///< norm(got - ref) / norm(ref)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trial_result& x) {
  return f(caf::meta::type_name("trial_result"), x.passed, x.max_abs_diff, x.mean_abs_diff,
           x.note, x.kernelbench_passed, x.max_rel_diff, x.norm_rel_diff);
}

/// One GPU kernel of the candidate's profiled call (the worker answers up to 8, longest first).
struct kernel_time {
  std::string name;                ///< the kernel's (possibly demangled) name
  double ms = 0;                   ///< its GPU time in the profiled call
  bool own = false;                ///< the candidate's own kernel (not torch's, cuBLAS', ...)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kernel_time& x) {
  return f(caf::meta::type_name("kernel_time"), x.name, x.ms, x.own);
}

/// Seconds one phase of an evaluation took in the worker (for "where did the time go").
struct phase_time {
  std::string phase;               ///< e.g. "compile", "correctness", "coverage", "timing"
  double seconds = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, phase_time& x) {
  return f(caf::meta::type_name("phase_time"), x.phase, x.seconds);
}

/// The evaluator's verdict: a pure function of (candidate, problem, timing, device).
struct eval_result {
  uint64_t id = 0;
  bool compiled = false;
  /// The verdict the reward and the metrics use: the strict one (every trial within the strict
  /// tolerances, every runtime check passed), or KernelBench's with eval.correctness =
  /// "kernelbench" (then equal to kernelbench_correct).
  bool correct = false;
  int32_t trials_passed = 0;       ///< trials that passed the check `correct` follows
  int32_t trials_total = 0;
  eval_error error = eval_error::none;
  std::string error_excerpt;       ///< cleaned, bounded excerpt of the error output
  std::vector<trial_result> trials;
  runtime_stats kernel_runtime;
  runtime_stats reference_runtime;
  runtime_stats compiled_reference_runtime; ///< torch.compile reference, when asked for
  /// Reference mean / kernel mean when the candidate was timed and `correct` or
  /// `kernelbench_correct`; 0 otherwise.
  double speedup = 0;
  std::vector<std::string> hack_flags; ///< static-check or runtime findings, e.g. "try_except"
  std::string device;              ///< e.g. "NVIDIA H200 (gpu 0)"
  std::string evaluator;           ///< name of the evaluator actor that ran it
  double compile_seconds = 0;      ///< building/loading the candidate inside the GPU worker
  double build_seconds = 0;        ///< its build on a CPU builder ahead of the GPU (0: none, reused)
  double correctness_seconds = 0;  ///< correctness trials, reference runs excluded
  double timing_seconds = 0;       ///< the candidate's timed trials and their checks
  double reference_seconds = 0;    ///< running and timing the reference (0 when its timing was cached)
  double total_seconds = 0;        ///< on the evaluator, from request to verdict
  /// KernelBench's own verdict: every correctness trial passed torch.allclose with the
  /// request's atol/rtol and equal shapes, nothing else checked. `correct` is the strict verdict
  /// (or this one with eval.correctness = "kernelbench"). A worker that does not answer it (an
  /// older one) gets `correct`; a static-check refusal is false.
  bool kernelbench_correct = false;
  int32_t kernelbench_trials_passed = 0;
  /// The strict verdict, whichever verdict `correct` follows (so both can be shown).
  bool strict_correct = false;
  /// Share of the candidate's GPU kernel time spent in its own kernels (0..1), measured in one
  /// profiled call; -1 when not measured (CPU, backend torch, profiling off or unavailable).
  double time_coverage = -1;
  std::vector<kernel_time> kernels; ///< the profiled call's kernels (at most 8; empty: none)
  int32_t timing_input_sets = 0;   ///< input sets the timed calls rotated over (0: not timed)
  std::string timing_note;         ///< e.g. why fewer input sets than asked were used
  std::string isolation;           ///< how the candidate ran: "process" (own process), "" unknown
  /// The timing check of the timed loop: the per-trial event times' total, the host's wall
  /// clock over the same loop and the loop's calibrated overhead, in ms; all 0 when not answered.
  double timing_events_ms = 0;
  double timing_wall_ms = 0;
  double timing_overhead_ms = 0;
  /// The worker's time by phase (process start, compile, correctness, coverage, timing, ...),
  /// in the order the worker answered them; empty from an older worker.
  std::vector<phase_time> phases;
  /// The reference model and its expected outputs came from the worker's store, made for an
  /// earlier candidate of the same problem, seed and device (nothing of the reference ran).
  bool reference_shared = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, eval_result& x) {
  return f(caf::meta::type_name("eval_result"), x.id, x.compiled, x.correct, x.trials_passed,
           x.trials_total, x.error, x.error_excerpt, x.trials, x.kernel_runtime,
           x.reference_runtime, x.compiled_reference_runtime, x.speedup, x.hack_flags, x.device,
           x.evaluator, x.compile_seconds, x.build_seconds, x.correctness_seconds,
           x.timing_seconds, x.reference_seconds, x.total_seconds, x.kernelbench_correct,
           x.kernelbench_trials_passed, x.strict_correct, x.time_coverage, x.kernels,
           x.timing_input_sets, x.timing_note, x.isolation, x.timing_events_ms, x.timing_wall_ms,
           x.timing_overhead_ms, x.phases, x.reference_shared);
}

/// One file of a finished build, relative to the candidate's build folder (the extension's
/// library and the record that says which sources and flags made it).
struct build_file {
  std::string path;
  std::string bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, build_file& x) {
  return f(caf::meta::type_name("build_file"), x.path, x.bytes);
}

/// What a builder node answers: the build's verdict and, when it built, the files an evaluator
/// node installs into its own build folder so that its worker loads instead of building.
struct build_output {
  eval_result verdict;
  std::vector<build_file> files;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, build_output& x) {
  return f(caf::meta::type_name("build_output"), x.verdict, x.files);
}

// -- episodes -------------------------------------------------------------------------------------

/// One turn of an episode: the prompt, the model's answer, its verdict and its credit.
struct turn {
  int32_t index = 0;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> completion_tokens;
  std::vector<float> logprobs;     ///< sampler log-probabilities of completion_tokens
  std::string completion_text;
  eval_result verdict;
  double score = 0;                ///< this turn's reward s_t
  double return_value = 0;         ///< discounted return R_t = s_t + gamma * R_{t+1}
  double advantage = 0;            ///< filled in by the learner's advantage estimator
  uint64_t policy_version = 0;
  int32_t retries = 0;             ///< steps re-sent after a sampler/evaluator was lost
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, turn& x) {
  return f(caf::meta::type_name("turn"), x.index, x.prompt_tokens, x.completion_tokens,
           x.logprobs, x.completion_text, x.verdict, x.score, x.return_value, x.advantage,
           x.policy_version, x.retries);
}

/// A whole episode on one problem; G trajectories of one problem form a group.
struct trajectory {
  uint64_t id = 0;
  uint64_t group_id = 0;
  std::string problem_id;
  std::vector<turn> turns;
  std::vector<uint64_t> policy_versions; ///< distinct versions used, oldest first
  std::string end_reason;          ///< "success", "max_turns", "failed: ..."
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trajectory& x) {
  return f(caf::meta::type_name("trajectory"), x.id, x.group_id, x.problem_id, x.turns,
           x.policy_versions, x.end_reason);
}

/// Trajectories handed to the learner for one optimisation step.
struct trajectory_batch {
  uint64_t id = 0;
  uint64_t coordinator_step = 0;
  std::vector<trajectory> trajectories;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trajectory_batch& x) {
  return f(caf::meta::type_name("trajectory_batch"), x.id, x.coordinator_step, x.trajectories);
}

// -- policy ---------------------------------------------------------------------------------------

/// New weights from the learner: an adapter directory (PEFT layout) and, for samplers that
/// cannot read the learner's disk, the adapter_model.safetensors bytes themselves.
struct policy_update {
  uint64_t version = 0;
  uint64_t learner_step = 0;
  std::string base_model;
  std::string adapter_dir;
  std::vector<uint8_t> adapter_bytes;
  /// The adapter_config.json text (rank, alpha, targets) that goes with adapter_bytes: a sampler
  /// without access to adapter_dir needs both to rebuild the adapter. Empty without bytes.
  std::string adapter_config;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_update& x) {
  return f(caf::meta::type_name("policy_update"), x.version, x.learner_step, x.base_model,
           x.adapter_dir, x.adapter_bytes, x.adapter_config);
}

// -- metrics --------------------------------------------------------------------------------------

/// One scalar of one step: "train/loss", "eval/fast_1", ...
struct metric_record {
  uint64_t step = 0;
  std::string name;
  double value = 0;
  int64_t unix_ms = 0;
  std::string source;              ///< actor that produced it
  /// A distribution's values (TensorBoard shows a histogram; value is then their count); empty
  /// for a scalar.
  std::vector<double> samples;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, metric_record& x) {
  return f(caf::meta::type_name("metric_record"), x.step, x.name, x.value, x.unix_ms, x.source,
           x.samples);
}

// -- retrieval ------------------------------------------------------------------------------------

/// A kernel shown to the model as an example (RA-ICL).
struct retrieved_example {
  std::string id;
  std::string reference_source;
  std::string kernel_source;
  kernel_backend backend = kernel_backend::cuda;
  double score = 0;                ///< similarity to the query
  double speedup = 0;              ///< as labelled in the corpus, 0 if unknown
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, retrieved_example& x) {
  return f(caf::meta::type_name("retrieved_example"), x.id, x.reference_source, x.kernel_source,
           x.backend, x.score, x.speedup);
}

// -- nodes and actors -----------------------------------------------------------------------------

/// A key/value line of role-specific status ("queue": "3", "policy version": "12").
struct status_detail {
  std::string key;
  std::string value;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status_detail& x) {
  return f(caf::meta::type_name("status_detail"), x.key, x.value);
}

/// What every kbrl actor answers to a status request.
/// What an actor's state means for those who depend on it, read by programs (the state word is
/// for people): ok (working or ready), starting (loading, joining, restarting: ask again
/// later), degraded (working with less: some evaluators down), failed (cannot do its work:
/// last_error says why).
enum class actor_health : uint8_t { ok, starting, degraded, failed };

/// "ok", "starting", "degraded", "failed".
const char* to_string(actor_health x);

struct actor_status {
  std::string name;                ///< globally unique: "<node>/<role>[.<index>]"
  std::string role;
  std::string node;
  std::string state;               ///< a word or short phrase: "idle", "running", "degraded"
  actor_health health = actor_health::ok;
  uint64_t mailbox_size = 0;
  uint64_t messages_handled = 0;
  uint64_t restarts = 0;
  std::string last_error;
  int64_t since_unix_ms = 0;       ///< when the actor (or its latest restart) started
  std::vector<status_detail> details;
  std::vector<std::string> commands; ///< control verbs it accepts, e.g. "restart"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_status& x) {
  return f(caf::meta::type_name("actor_status"), x.name, x.role, x.node, x.state, x.health,
           x.mailbox_size, x.messages_handled, x.restarts, x.last_error, x.since_unix_ms,
           x.details, x.commands);
}

/// An actor a node hosts, as published to the cluster.
struct actor_entry {
  std::string name;
  std::string role;
  caf::actor handle;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_entry& x) {
  return f(caf::meta::type_name("actor_entry"), x.name, x.role, x.handle);
}

/// What a node says about itself when it joins.
struct node_info {
  std::string name;
  std::string host;
  uint16_t port = 0;
  std::vector<std::string> roles;
  std::vector<int32_t> gpus;
  int32_t pid = 0;
  std::string kbrl_version;
  std::string torch_version;
  std::string devices;             ///< e.g. "cpu" or "2 x NVIDIA H200"
  std::vector<actor_entry> actors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("node_info"), x.name, x.host, x.port, x.roles, x.gpus, x.pid,
           x.kbrl_version, x.torch_version, x.devices, x.actors);
}

/// Liveness of a node as the coordinator sees it.
enum class node_state : uint8_t { up, down, stopped };
const char* to_string(node_state x);

/// The coordinator's record of one node.
struct node_record {
  node_info info;
  node_state state = node_state::up;
  int64_t joined_unix_ms = 0;      ///< start of the current incarnation
  int64_t last_seen_unix_ms = 0;   ///< last heartbeat or registration
  int64_t down_unix_ms = 0;        ///< when it was seen down or stopped, 0 while up
  uint32_t incarnation = 0;        ///< 1 on first join, +1 on each rejoin
  std::string down_reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_record& x) {
  return f(caf::meta::type_name("node_record"), x.info, x.state, x.joined_unix_ms,
           x.last_seen_unix_ms, x.down_unix_ms, x.incarnation, x.down_reason);
}

/// The live membership: every node the coordinator has seen, up or not.
struct membership_view {
  std::string cluster;
  std::string coordinator;
  uint64_t revision = 0;           ///< +1 on every change
  std::vector<node_record> nodes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, membership_view& x) {
  return f(caf::meta::type_name("membership_view"), x.cluster, x.coordinator, x.revision,
           x.nodes);
}

/// A node's own status and that of each of its actors.
struct node_status {
  node_info info;
  int64_t started_unix_ms = 0;
  std::vector<actor_status> actors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_status& x) {
  return f(caf::meta::type_name("node_status"), x.info, x.started_unix_ms, x.actors);
}

} // namespace kbrl
