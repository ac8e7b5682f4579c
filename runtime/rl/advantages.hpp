#pragma once
// Advantages of scored trajectories, computed within groups (the G trajectories one problem got).
//
// Every turn t of a trajectory has a score s_t (its reward). Returns are discounted within the
// trajectory, from its last turn back:
//
//   R_t = s_t + gamma * R_{t+1},   R_{T-1} = s_{T-1}
//
// and each turn's advantage is its return normalised across the group at the same turn index
// (per-turn normalisation: turn t of one trajectory is compared with turn t of the others that
// reached it):
//
//   grpo      A_t = (R_t - mean_t) / (std_t + std_epsilon)   GRPO; std_t the sample standard
//                                                            deviation (n - 1), as TRL computes it
//   dr_grpo   A_t =  R_t - mean_t                            Dr. GRPO: no division by the std,
//                                                            which favours near-solved groups
//
// A single-turn episode is the plain group-normalised case. A turn index reached by only one
// trajectory of its group gets advantage 0 (nothing to compare with).
//
// A group whose returns are all equal at every turn index carries no signal: all advantages
// would be 0 and the group would only dilute the step. Such groups (and groups of one) are
// dropped from the batch and reported, so the learner can count them.
//
// This file knows nothing about tensors: it works on messages/data.hpp's trajectories.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::rl {

/// How returns are turned into advantages (see above).
enum class advantage_kind : uint8_t { grpo, dr_grpo };

/// "grpo" or "dr_grpo".
const char* to_string(advantage_kind kind);

/// The kind spelled `name` ("grpo", "dr_grpo"). Fails with errc::invalid_argument naming the
/// allowed spellings.
caf::expected<advantage_kind> parse_advantage_kind(const std::string& name);

/// Settings of compute_advantages().
struct advantage_options {
  advantage_kind kind = advantage_kind::grpo;
  /// Discount of later turns' scores, in [0, 1]. Default 1 (undiscounted).
  double gamma = 1.0;
  /// Added to the standard deviation before dividing (grpo); > 0. Default 1e-4 (TRL's).
  double std_epsilon = 1e-4;
};

/// What compute_advantages() kept and dropped.
struct advantage_report {
  std::size_t groups = 0;                ///< groups seen
  std::size_t groups_kept = 0;
  std::size_t trajectories_kept = 0;
  std::size_t turns_kept = 0;
  /// Groups whose returns were all equal (or that had one trajectory): dropped.
  std::vector<uint64_t> dropped_groups;
  std::size_t trajectories_dropped = 0;  ///< in dropped groups, plus those without turns
  double mean_score = 0;                 ///< mean over every turn seen (dropped ones included)
};

/// The discounted returns of `scores` (see above); empty for no scores.
std::vector<double> discounted_returns(const std::vector<double>& scores, double gamma);

/// Fills return_value and advantage of every turn of `trajectories` and removes the trajectories
/// of groups without signal (and trajectories without turns), keeping the order of the rest.
/// Groups are formed by group_id. Fails with errc::invalid_argument, changing nothing, for gamma
/// outside [0, 1], std_epsilon <= 0, or a score that is not finite (naming trajectory and turn).
caf::expected<advantage_report> compute_advantages(std::vector<trajectory>& trajectories,
                                                   const advantage_options& options);

} // namespace kbrl::rl
