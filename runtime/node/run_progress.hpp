#pragma once
// What the RL run (actors/rl_run.hpp) tells a person about its steps, and how it knows the
// learner's newest checkpoint already holds its final state. Pure functions.

#include "messages/data.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl {

/// The progress line of one step from its metrics ("step 2/10: mean reward 0.125, ...").
/// `step_seconds` is how long the step took, `mean_step_seconds` the mean over this process's
/// steps (for the time left); `steps` 0 means no end.
std::string progress_line(const std::vector<metric_record>& step_metrics, uint64_t step,
                          uint64_t steps, double step_seconds, double mean_step_seconds);

/// Whether a learner's status details say its newest checkpoint ("last checkpoint", a path
/// ending in step-NNNNNN) is of its current step ("step").
bool checkpoint_is_current(const std::vector<status_detail>& learner_details);

} // namespace kbrl
