#pragma once
// The metrics of an evaluation run, as KernelBench defines them (scripts/benchmark_eval_analysis.py
// and src/score.py of ScalingIntelligence/KernelBench), computed from sample records alone.
//
//   correct rate     correct samples / samples (compiled rate likewise)
//   pass@k           per problem with n samples of which c are correct, the unbiased estimator
//                    1 - C(n-c, k) / C(n, k) (HumanEval's), computed as a product so that it
//                    never overflows; averaged over the problems.
//
// Samples that have no file (kbrl-eval --generations with uneven counts per problem) are
// counted one of two ways (sample_counting):
//   kernelbench (the default) as KernelBench's calculate_pass_at_k (scripts/
//                    eval_from_generations.py): each problem has its own n, the samples it has;
//                    the rates count those only; pass@k is reported for k = 1..(most samples of
//                    a problem) and averages over the problems with at least one sample, a
//                    problem with fewer than k samples adding 0 (KernelBench stores its value
//                    under pass@n, not pass@k).
//   padded           every problem is padded to the largest count and a missing sample is a
//                    failed one (kbrl-eval before issue 18); pass@k for k = 1..n.
// fast_p is the same in both: a problem whose first sample is missing is not fast (KernelBench
// patches it in as incorrect). "missing" is always listed among the error categories.
//   fast_p           share of ALL problems of the group whose sample is correct and more than p
//                    times faster than the reference (speedup > p, strictly: a speedup equal to
//                    p does not count). Several samples per problem: as KernelBench, which scores
//                    sample 0 only, fast_p looks at the first sample of each problem;
//                    fast_p_best additionally reports the share with ANY sample correct and > p
//                    (best-of-N), never mixed into fast_p.
//   geomean speedup  geometric mean of the speedups of the correct, timed samples (KernelBench's
//                    geometric_mean_speed_ratio_correct_only; with one sample per problem the
//                    two are the same); 0 when there are none.
//   per level, per turn, per error category, hack-flag counts.
//
// Multi-turn samples: a sample's outcome after turn t is its best turn among 0..t (a correct
// turn beats an incorrect one, then the higher speedup; with no correct turn, the latest turn
// counts). The overall and per-level groups use each sample's outcome after its last turn
// (best-of-turns); the per-turn groups use the outcome after turn t, so they never go down with
// t (a sample that stopped before turn t keeps its last outcome).
//
// Samples that are correct but were not timed (speedup 0) count as correct but never as fast,
// and are left out of the geometric mean.
//
// Two verdicts (issue 16): `correct` is the one eval.correctness picks (strict by default: every
// trial within the strict tolerances and every runtime check passed); KernelBench's own
// (torch.allclose on every trial, nothing else) is reported beside it as kernelbench_correct_rate,
// kernelbench pass@k and kernelbench fast_p, computed the same way from kernelbench_correct
// (a multi-turn sample's outcome then picks its best turn by that verdict).

#include "runtime/report/sample_record.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::report {

/// The unbiased pass@k estimate for n samples of which c are correct: 1 - C(n-c,k)/C(n,k),
/// computed as 1 - prod_{i=n-c+1..n} (1 - k/i). NaN unless 0 <= c <= n and 1 <= k <= n.
double pass_at_k(int64_t n, int64_t c, int64_t k);

/// KernelBench's speedup thresholds: 0, 0.5, 0.8, 1.0, 1.5, 2.0.
const std::vector<double>& default_fast_p_thresholds();

/// How samples without a file count (see the top of this file).
enum class sample_counting { kernelbench, padded };

const char* to_string(sample_counting counting);

/// "kernelbench" or "padded"; nullopt for anything else.
std::optional<sample_counting> parse_sample_counting(const std::string& text);

/// The metrics of one group of problems (all of them, one level, or the outcome after one turn).
struct metric_group {
  std::string name;                 ///< "all", "level1", "turn 0", ...
  size_t problems = 0;
  size_t samples = 0;               ///< sample outcomes (one per sample, best-of-turns); with
                                    ///< kernelbench counting, missing samples are not among them
  size_t compiled = 0;
  size_t correct = 0;
  double compiled_rate = 0;         ///< compiled / samples
  double correct_rate = 0;          ///< correct / samples
  std::vector<double> pass_at_k;    ///< [k-1] = pass@k (k up to the most samples of a problem
                                    ///< with kernelbench counting, the fewest when padded)
  size_t pass_at_k_problems = 0;    ///< the problems pass@k averages over
  std::vector<double> fast_p;       ///< per threshold: first sample of each problem (KernelBench)
  std::vector<double> fast_p_best;  ///< per threshold: best sample of each problem (best-of-N)
  size_t timed_correct = 0;         ///< correct samples with a speedup > 0
  double geomean_speedup = 0;       ///< over those; 0 when there are none
  /// Against the torch.compile reference, over samples where it was timed (0 / empty otherwise).
  size_t compile_timed_correct = 0;
  double geomean_speedup_vs_compile = 0;
  std::vector<double> fast_p_vs_compile; ///< first sample of each problem, as fast_p
  /// The same from KernelBench's verdict (sample_record::kernelbench_correct).
  size_t kernelbench_correct = 0;
  double kernelbench_correct_rate = 0;
  std::vector<double> kernelbench_pass_at_k;
  std::vector<double> kernelbench_fast_p;
  std::map<std::string, size_t> errors;     ///< error category -> samples ("none" included)
  std::map<std::string, size_t> hack_flags; ///< flag -> samples carrying it
};

/// One problem at a glance (the report's per-problem table and chart).
struct problem_summary {
  std::string problem;
  int32_t level = 0;
  int32_t number = 0;
  size_t samples = 0;
  size_t correct = 0;
  double best_speedup = 0;          ///< best speedup of a correct sample, 0 if none
  bool first_correct = false;       ///< the first sample (the one fast_p scores)
  double first_speedup = 0;
  std::map<std::string, size_t> errors;
};

/// Everything the report, results.json and TensorBoard show.
struct eval_metrics {
  std::vector<double> thresholds;   ///< the fast_p thresholds p
  sample_counting counting = sample_counting::kernelbench;
  size_t max_samples = 0;           ///< most samples of one problem
  size_t max_turns = 0;             ///< most turns of one sample
  metric_group overall;
  std::vector<metric_group> levels; ///< one per level present, in order
  std::vector<metric_group> turns;  ///< one per turn when a sample has more than one
  std::vector<problem_summary> problems; ///< ordered by level, then number
  bool compile_reference_timed = false;  ///< some record carries a torch.compile timing
};

/// The metrics of `records` (any order; several turns of a sample are told apart by `turn`).
eval_metrics compute_metrics(const std::vector<sample_record>& records,
                             const std::vector<double>& thresholds = default_fast_p_thresholds(),
                             sample_counting counting = sample_counting::kernelbench);

/// The metrics as named scalars ("eval/correct_rate", "eval/pass@1", "eval/fast_1.0",
/// "eval/level1/fast_1.0", "eval/turn1/correct_rate", "eval/errors/compile",
/// "eval/kernelbench_correct_rate", "eval/kernelbench_pass@1", "eval/kernelbench_fast_1.0", ...), for
/// TensorBoard and metrics logs. `prefix` is put in front of every name.
std::vector<std::pair<std::string, double>> metric_scalars(const eval_metrics& m,
                                                           const std::string& prefix = "eval/");

/// "fast_1.0", "fast_0.5": the name of a threshold's metric (one decimal at least).
std::string fast_p_name(double p);

} // namespace kbrl::report
