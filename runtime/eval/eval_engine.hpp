#pragma once
// Evaluates candidates on one device through one worker process: the part of an evaluator that
// needs no actor. Owns the worker, replaces it when it is recycled, and turns the worker's
// answers - or its death - into eval_results. Blocking: the evaluator actor runs it on its own
// thread.
//
// Per request:
//   static checks (C++, before any process) -> rejected: verdict static_check, no worker touched
//   reference timing: cached per (reference hash, device, precision, timing settings), the
//                     torch.compile reference's apart from the eager one's
//   worker `evaluate` with a deadline; build directory keyed by a hash of the candidate source
//   timeout / crash -> verdict timeout / crashed, and the worker is gone (needs_restart())
//   sticky CUDA error or a failed canary after the candidate -> needs_restart()
//   every `recycle_after` evaluations, or RSS above `recycle_rss_mb`: a fresh worker

#include "messages/data.hpp"
#include "runtime/eval/static_checks.hpp"
#include "runtime/eval/worker_process.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace kbrl::eval {

/// Evaluator settings beyond how the worker is started. Defaults follow KernelBench.
struct engine_options {
  worker_options worker;
  uint32_t recycle_after = 200;     ///< evaluations before the worker is replaced (load_inline leaks)
  double recycle_rss_mb = 16384;    ///< replace the worker when its RSS passes this
  double suspicious_speedup = 10;   ///< speedups above this are flagged "suspicious_speedup"
  /// Where get_inputs() draws: "device" (the worker's GPU; inputs of several GB take
  /// milliseconds instead of seconds) or "host" (KernelBench's exact values, drawn on the CPU).
  std::string inputs_on = "device";
  /// Where Model and ModelNew are constructed: "device" (faster for large layers; the GPU
  /// generator's weights, the same in both) or "host" (KernelBench's weights).
  std::string init_on = "device";
  /// What `speedup` is measured against: "eager" (the reference as written) or "compile" (the
  /// reference compiled with torch.compile, default mode; the worker fails the evaluation as
  /// infrastructure when its torch has no torch.compile). A request's
  /// timing.compare_torch_compile also times the compiled reference, whatever the mode.
  std::string reference_mode = "eager";
  /// Input sets the timed calls rotate over (KernelBench uses one; more catch outputs cached by
  /// input identity). The worker uses fewer when they do not fit in the device's free memory.
  int timing_input_sets = 3;
  /// Which verdict `correct` (and so the reward and the metrics) follows: "strict" (the
  /// worker's strict comparison and runtime checks) or "kernelbench" (KernelBench's allclose
  /// verdict, kernelbench_correct; see use_kernelbench_verdict()).
  std::string correctness = "strict";
  /// The strict check's tolerances, sent to the worker; < 0: per precision (fp32 1e-4,
  /// fp16/bf16 1e-2). rtol: per element, relative; floor: absolute floor as a fraction of the
  /// largest |reference output|; norm_tol: bound on norm(got - ref) / norm(ref).
  double strict_rtol = -1;
  double strict_floor = -1;
  double strict_norm_tol = -1;
  /// Compiled backends on a GPU: below this share of GPU time in the candidate's own kernels
  /// the worker flags the candidate low_time_coverage (in [0, 1]).
  double min_time_coverage = 0.05;
  /// Measure the time coverage at all (one extra profiled call per timed candidate).
  bool profile_coverage = true;
  /// A build worker (the builder actor): its hello does not ask the worker to start spare
  /// candidate processes, which only evaluations use.
  bool builds_only = false;
  /// Resident memory of a candidate's process and its children, GiB (the worker kills it past).
  double memory_limit_gb = 16;
  std::chrono::milliseconds start_timeout{120000}; ///< importing torch + first CUDA context
  std::chrono::milliseconds canary_timeout{30000};
  /// Once a problem's reference was timed, candidates get scaled_timeout_s() of the request's
  /// timeout_s with these (base 0: the request's timeout_s as it is).
  double scaled_timeout_base_s = 60;
  double scaled_timeout_build_s = 240; ///< added while the candidate's extension is not built
  /// How long past a candidate's timeout_s the engine waits for the worker's own timeout answer
  /// before it kills the worker. The worker stops the candidate at timeout_s and answers; on a
  /// loaded machine (spare candidate processes importing torch beside it) that answer can take
  /// seconds, and a kill then costs a worker start (~10 s) for nothing.
  std::chrono::milliseconds kill_grace{10000};
  size_t excerpt_bytes = 4000;      ///< longest error excerpt kept
  /// Per-run severities of static-check rules (validated with validate_overrides()).
  std::map<std::string, severity> rule_overrides;
  /// Tensors (inputs and expected outputs) the worker keeps of the references it ran, MiB:
  /// the candidates of one problem, seed and device share the reference's work (0: off).
  double shared_reference_mb = 4096;
  /// JSONL file of reference timings shared across engines and runs (one line per problem,
  /// device, precision and timing settings); empty keeps them in memory only.
  std::string reference_cache_file;
};

/// What one `evaluate` answer of the worker says (worker_protocol.md), before the engine adds
/// what only it knows: cached reference timings, the speedup and the device.
struct evaluate_answer {
  /// The answered fields (runtime/eval/verdict_codec.hpp), the excerpt bounded to
  /// opts.excerpt_bytes, an unknown error category taken as infrastructure, and with
  /// opts.correctness = "kernelbench" the KernelBench verdict in `correct`. Reference runtimes
  /// as answered, speedup 0.
  eval_result verdict;
  bool sticky_cuda_error = false; ///< the device context is poisoned: a fresh worker next
};

/// Reads the worker's `evaluate` answer `json`; `trials_asked` is trials_total when the answer
/// has none. Fails with errc::invalid_argument when `json` is not a JSON object.
caf::expected<evaluate_answer> parse_evaluate_answer(std::string_view json,
                                                     const engine_options& opts,
                                                     int32_t trials_asked);

/// A candidate's evaluation budget scaled to its problem: `base_s` (process, inputs, checks)
/// + `build_s` (a build still to come) + `calls` x max(1 s, 50 x the reference's time), never
/// more than `requested_s`. A hang then holds an evaluator about a minute on a fast problem
/// instead of the whole requested budget, while slow problems keep room.
double scaled_timeout_s(double requested_s, double base_s, double build_s, int64_t calls,
                        double reference_ms);

/// Whether a candidate of `backend` may build an extension when its program is loaded, and so
/// needs the build allowance of its time budget until its build folder exists: CUDA and HIP
/// candidates do (load_inline), Triton ones compile on first call; a torch-backend candidate
/// does only with a C++ CPU extension, which its source names. It only sizes the budget: a
/// hidden spelling gets the budget of a plain program, no other verdict.
bool may_build_an_extension(kernel_backend backend, const std::string& source);

/// The stable identity of a piece of source: FNV-1a 64 of the text, as 16 hex digits.
std::string source_hash(std::string_view text);

class eval_engine {
public:
  explicit eval_engine(engine_options opts);
  ~eval_engine();

  /// Starts (or restarts) the worker and greets it. Fails with the worker's reason.
  caf::expected<void> start();

  /// Evaluates one request. Always returns a verdict: problems of the candidate and crashes are
  /// verdicts, not errors. `device` in the result is filled in. Starts the worker first if none
  /// is running (after the static checks, so a refused candidate never costs a process).
  eval_result evaluate(const eval_request& req);

  /// Builds the candidate's extensions without evaluating it (for a worker without a GPU):
  /// static checks, then the worker's `build` op into the build directory keyed by the source's
  /// hash - the one evaluate() uses, so the GPU worker later only loads the library. The verdict
  /// says compiled true, or error static_check / compile / timeout / crashed.
  eval_result build(const eval_request& req);

  /// The build directory of a candidate: extensions_dir/<hash of its source>.
  std::string build_dir_of(const std::string& candidate_source) const;

  /// True after a crash, timeout, sticky CUDA error or failed canary: the device context or the
  /// worker is gone and start() must run before the next evaluation. The evaluator actor fails
  /// with last_failure() so its supervisor restarts it.
  bool needs_restart() const { return needs_restart_; }
  /// True when the pending restart is a planned recycle (after recycle_after evaluations or
  /// above recycle_rss_mb), not a failure: the device context is fine, and the next
  /// evaluation starts the fresh worker itself, without a supervisor restart.
  bool restart_is_planned() const { return needs_restart_ && restart_planned_; }
  const std::string& last_failure() const { return last_failure_; }

  /// Device name the worker reported ("cpu", "NVIDIA H200").
  const std::string& device() const { return device_; }
  uint64_t evaluations() const { return evaluations_; }
  uint64_t workers_started() const { return workers_started_; }
  uint64_t reference_cache_hits() const { return ref_cache_hits_; }
  /// Verdicts whose reference model and expected outputs came from the worker's store.
  uint64_t references_shared() const { return references_shared_; }
  isolation_mode isolation() const;
  /// What confines a candidate process's file writes to its own folders, as the worker said
  /// at start: "landlock ABI N", or "off: why" (tools/kbrl_eval/write_fence.py).
  const std::string& write_fence() const { return write_fence_; }

  /// Kills the worker now (tests inject faults with it; the next request sees a crash).
  void kill_worker();
  /// The worker's pid, -1 if none.
  pid_t worker_pid() const;

private:
  /// A verdict for req with nothing decided yet.
  eval_result empty_verdict(const eval_request& req) const;
  /// The worker died or hung during a request: a timeout or crashed verdict, and a fresh
  /// worker before the next request.
  void worker_lost(eval_result& res, const caf::error& err, const captured_output& printed,
                   const std::string& during);
  /// The worker answered something that is not JSON: kbrl's fault, and a fresh worker next time.
  void unreadable_answer(eval_result& res, const std::string& answer);
  /// Fills res and returns true when the static checks reject the candidate.
  bool refuse_statically(const eval_request& req, eval_result& res);
  /// Starts a worker if none is usable; on failure fills res (infrastructure) and returns false.
  bool ensure_worker(eval_result& res);
  void load_reference_cache();
  void remember_reference(const std::string& key, const runtime_stats& st);
  caf::expected<std::string> request(const std::string& json, std::chrono::milliseconds deadline);
  void maybe_recycle();
  bool canary_ok();

  engine_options opts_;
  std::unique_ptr<worker_process> worker_;
  std::string device_ = "unknown";
  std::string write_fence_ = "unknown";
  uint64_t next_id_ = 1;
  uint64_t evaluations_ = 0;
  uint64_t since_start_ = 0;
  uint64_t workers_started_ = 0;
  uint64_t ref_cache_hits_ = 0;
  uint64_t references_shared_ = 0;
  bool needs_restart_ = true;
  bool restart_planned_ = false;   ///< needs_restart_ comes from maybe_recycle()
  std::string last_failure_ = "not started";
  std::map<std::string, runtime_stats> reference_times_; ///< key: ref hash|device|precision|timing
};

} // namespace kbrl::eval
