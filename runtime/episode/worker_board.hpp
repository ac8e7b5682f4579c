#pragma once
// The samplers and evaluator supervisors of a running cluster, as whoever watches the membership
// last saw them (the RL run actor on the coordinator node, which follows node joins, losses and
// new incarnations). Episodes read it before each request, so a node that joins is used at once
// and a lost one is not asked again; the coordinator reads it to publish policies. An empty list
// means the run has none of that kind now: requesters wait for one rather than fail.
// Thread-safe: written by one actor, read by many.

#include "messages/interfaces.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kbrl {

class worker_board {
public:
  /// Replaces both lists and bumps the revision.
  void set(std::vector<sampler_actor> samplers, std::vector<evaluator_supervisor_actor> evaluators);
  /// Copies the lists into the arguments if the revision is newer than `seen` (else leaves them
  /// alone); returns the revision.
  uint64_t copy_if_newer(uint64_t seen, std::vector<sampler_actor>& samplers,
                         std::vector<evaluator_supervisor_actor>& evaluators) const;
  /// 0 until the first set().
  uint64_t revision() const;
  /// What is missing for a step to make progress ("a sampler", "an evaluator", "a sampler and
  /// an evaluator"), empty when both lists have members or nothing was set yet.
  std::string missing() const;

private:
  mutable std::mutex mutex_;
  uint64_t revision_ = 0;
  std::vector<sampler_actor> samplers_;
  std::vector<evaluator_supervisor_actor> evaluators_;
};

} // namespace kbrl
