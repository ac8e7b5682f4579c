#pragma once
// Which actors a node runs for its roles and GPUs: the one place that maps
// `--role evaluator --gpu 0,1` to "evaluator-supervisor, evaluator.0, evaluator.1".

#include <string>
#include <vector>

namespace kbrl {

/// One actor a node will spawn.
struct planned_actor {
  std::string role;   ///< "learner", "metrics", "sampler", "evaluator-supervisor", "evaluator",
                      ///< "builds" (a builder node's build service)
  int index = -1;     ///< GPU slot for per-GPU actors, -1 otherwise
  int gpu = -1;       ///< CUDA device index it is bound to, -1 for none (CPU)
  /// The learner: every GPU of the node (one data-parallel replica each; gpu is the first).
  /// Empty for the other roles.
  std::vector<int> gpus;
};

/// The actors for these roles: per-GPU samplers and evaluators (one CPU slot when no GPU is
/// given), a learner on all the GPUs (data-parallel) and the metrics sink for the learner role. Roles are expanded from "all"
/// and de-duplicated; the order is stable (learner, metrics, samplers, evaluators).
std::vector<planned_actor> plan_role_actors(const std::vector<std::string>& roles,
                                            const std::vector<int>& gpus);

/// The roles with "all" expanded, in the order of config::known_roles(), without duplicates;
/// "all" does not include "builder", which is only taken when named.
std::vector<std::string> expand_roles(const std::vector<std::string>& roles);

} // namespace kbrl
