#pragma once
// What one training step's trajectories say: groups without reward variance (no learning
// signal under group-normalised advantages) and the scalars logged for the step.

#include "messages/data.hpp"

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

/// The step's scalars, named as metrics.jsonl and TensorBoard show them ("reward/mean", ...).
std::vector<metric_record> summarize_step(const std::vector<trajectory>& trajectories,
                                          uint64_t step, const std::string& source);

} // namespace kbrl::episode
