#pragma once
// One evaluated candidate as kbrl-eval records it: one turn of one sample of one problem, with
// its verdict, timings and flags. results.json holds one per line of its "samples" array; the
// metrics (eval_metrics.hpp) are computed from a list of them and nothing else, so a run that
// was interrupted and resumed gives the same numbers as one that was not.

#include "messages/data.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::report {

/// Error categories beyond eval_error's (to_string(eval_error) gives the others: "none",
/// "format", "static_check", "compile", "runtime", "mismatch", "timeout", "crashed",
/// "infrastructure").
inline constexpr const char* missing_error = "missing";       ///< no file for this sample
inline constexpr const char* generation_error = "generation"; ///< the sampler failed (not the model)

/// One evaluated candidate.
struct sample_record {
  std::string problem;          ///< problem id, e.g. "level1/19_ReLU"
  int32_t level = 0;            ///< KernelBench level, 0 for problems outside one
  int32_t problem_number = 0;   ///< the problem's number within its level
  int32_t sample = 0;           ///< sample index within the problem, from 0
  int32_t turn = 0;             ///< turn of the sample's episode, from 0 (single-turn: 0)
  bool compiled = false;
  bool correct = false;         ///< the verdict eval.correctness picks (strict by default)
  /// KernelBench's own verdict (torch.allclose on every trial, nothing else); records of runs
  /// before issue 16 read back with `correct` (their verdict was KernelBench's).
  bool kernelbench_correct = false;
  /// "none" when checked and correct or not; else an error category (see above).
  std::string error = "none";
  double speedup = 0;           ///< eager reference mean / kernel mean; 0 when not timed
  double kernel_ms = 0;         ///< the candidate's mean runtime, 0 when not timed
  double reference_ms = 0;      ///< the eager PyTorch reference's mean runtime
  double compiled_reference_ms = 0; ///< the torch.compile reference's, 0 when not timed
  int32_t trials_passed = 0;
  int32_t trials_total = 0;
  std::vector<std::string> hack_flags; ///< static-check and runtime findings
  /// Share of the candidate's GPU time in its own kernels (0..1); -1 when not measured.
  double time_coverage = -1;
  std::string error_excerpt;    ///< bounded excerpt of the error output
  std::string source;           ///< where the candidate came from (path in the generations dir)
  std::string extraction;       ///< how its code was found: file, kernel_tag, python_block, ...
  std::string candidate_hash;   ///< source_hash() of the evaluated program ("" if none)
  double evaluator_seconds = 0; ///< on the evaluator, from request to verdict
  int32_t completion_tokens = 0;///< --model runs: tokens the model generated
  std::string finish;           ///< --model runs: why the completion ended (stop_token, length, ...)
  /// Where it was evaluated: the node ("kbrl-eval" for kbrl-eval's own evaluators, else the
  /// cluster manifest's node name) and the evaluator actor ("ev1/evaluator.0"); "" when no
  /// evaluator saw it (format failures, missing files) or in folders written before they existed.
  std::string node;
  std::string evaluator;
  /// Times the candidate was sent again because the evaluator node holding it was lost (its
  /// process or connection gone) before it answered; 0 when evaluated on the first try.
  int32_t retries = 0;
};

/// The speedup over the torch.compile reference, 0 when either side was not timed.
inline double speedup_vs_compile(const sample_record& r) {
  return r.kernel_ms > 0 && r.compiled_reference_ms > 0 ? r.compiled_reference_ms / r.kernel_ms
                                                          : 0;
}

/// A record filled in from an evaluator's verdict (the identity fields are left to the caller).
inline void take_verdict(sample_record& r, const eval_result& v) {
  r.compiled = v.compiled;
  r.correct = v.correct;
  r.kernelbench_correct = v.kernelbench_correct;
  r.time_coverage = v.time_coverage;
  r.error = to_string(v.error);
  r.speedup = v.speedup;
  r.kernel_ms = v.kernel_runtime.mean_ms;
  r.reference_ms = v.reference_runtime.mean_ms;
  r.compiled_reference_ms = v.compiled_reference_runtime.mean_ms;
  r.trials_passed = v.trials_passed;
  r.trials_total = v.trials_total;
  r.hack_flags = v.hack_flags;
  r.error_excerpt = v.error_excerpt;
  r.evaluator_seconds = v.total_seconds;
  r.evaluator = v.evaluator;
  r.node = v.evaluator.substr(0, v.evaluator.find('/'));
}

/// True when the verdict says something about the candidate itself; false for an infrastructure
/// failure, a failed generation or a missing file (nothing was judged).
inline bool judged(const sample_record& r) {
  return r.error != "infrastructure" && r.error != generation_error && r.error != missing_error;
}

/// How many records were judged (kbrl-eval exits 3 when none was).
inline size_t judged_samples(const std::vector<sample_record>& records) {
  size_t n = 0;
  for (auto& r : records)
    n += judged(r) ? 1 : 0;
  return n;
}

} // namespace kbrl::report
