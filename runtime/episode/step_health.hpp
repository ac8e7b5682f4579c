#pragma once
// Whether a training step's episodes got anywhere: an episode *failed* when it ended
// "failed: ..." (no sampler or evaluator could serve it, the sampler could not generate) or
// every verdict it got was kbrl's own failure (`infrastructure`). A step whose episodes all
// failed taught nothing; several in a row mean the run cannot work (a tokenizer that does not
// fit the model, evaluators that cannot start) and should stop saying why, not score zeros.

#include "messages/data.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::episode {

struct step_health {
  size_t episodes = 0;
  size_t failed = 0;
  /// The failures' reasons, most frequent first: "8 x the sampler could not generate: ...".
  std::string reasons;

  bool all_failed() const { return episodes > 0 && failed == episodes; }
};

/// Whether one trajectory failed in the sense above; `why` gets the reason.
bool episode_failed(const trajectory& t, std::string* why = nullptr);

step_health check_step(const std::vector<trajectory>& trajectories);

/// Counts steps in a row whose episodes all failed; says when the run should stop.
class failed_step_counter {
public:
  /// `limit` 0: never stop.
  explicit failed_step_counter(uint64_t limit) : limit_(limit) {}
  /// Records a committed step; true when this makes `limit` failed steps in a row.
  bool record(const step_health& h);
  uint64_t in_a_row() const { return in_a_row_; }

private:
  uint64_t limit_;
  uint64_t in_a_row_ = 0;
};

} // namespace kbrl::episode
