#pragma once
// What one training step's trajectories say: groups without reward variance (no learning
// signal under group-normalised advantages) and the scalars logged for the step.

#include "messages/data.hpp"

#include <optional>
#include <string>
#include <vector>

namespace kbrl::episode {

/// A trajectory's reward for group comparisons: its first turn's return (which holds the
/// discounted later turns).
double trajectory_reward(const trajectory& t);

/// Splits trajectories into groups (by group_id) and keeps those whose rewards differ.
struct group_filter_result {
  std::vector<trajectory> kept;
  size_t groups_kept = 0;
  size_t groups_dropped = 0;   ///< every reward equal: no signal
};
group_filter_result drop_flat_groups(std::vector<trajectory> trajectories, double tolerance = 1e-9);

/// The step's scalars, named as metrics.jsonl and TensorBoard show them:
///   reward/mean|std|min|max          over trajectories (first turn's return)
///   rate/format|compiled|correct|hack|fast_1   shares of turns (fast_1: correct and faster;
///                                    hack: refused by the static checks)
///   rate/kernelbench_correct         share of turns KernelBench's check accepts (`correct` is
///                                    the verdict eval.correctness picks, strict by default)
///   rate/low_coverage                share of turns flagged own_kernels_idle or
///                                    low_time_coverage (zeroed with reward.low_coverage = zero)
///   rate/failed                      trajectories ended by a failure of kbrl (no sampler...)
///   speedup/mean|median|min|max      over correct turns with a speedup
///   episodes, turns, turns/mean, tokens, tokens/prompt, tokens/completion,
///   tokens/completion_mean           (per turn)
///   rate/correct_turnN, turnN/reward_mean      per turn index N (1-based)
///   multiturn/success_rate           trajectories with a correct turn (the seeds' name)
///   multiturn/avg_turns              turns per trajectory
///   multiturn/turn_N/format_rate|compile_rate|correct_rate   per turn index N (0-based, as
///                                    the seeds count)
///   levelN/reward_mean, levelN/correct_rate, levelN/compile_rate   per KernelBench level
///                                    (problem ids "levelN/...")
///   policy/entropy                   mean negative log-probability of the sampled tokens (an
///                                    estimate of the policy's entropy per token)
///   policy/version_min|max           versions the turns were sampled with
///   staleness/mean|max               learner_version minus those versions (when given)
/// and two distributions (records with samples, shown as TensorBoard histograms):
///   hist/reward (every trajectory's reward), hist/speedup (correct turns; absent if none).
std::vector<metric_record> summarize_step(const std::vector<trajectory>& trajectories,
                                          uint64_t step, const std::string& source,
                                          std::optional<uint64_t> learner_version = {});

} // namespace kbrl::episode
