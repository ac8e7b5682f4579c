#pragma once
// The paragraph kbrl-node prints when an RL run ends: how far it got, how reward and correct
// rate moved, and where its files are. Read back from the run directory (metrics.jsonl,
// coordinator.json, the learner's checkpoints), so it says what is on disk.

#include <cstdint>
#include <string>

namespace kbrl {

/// What the run reached and where its files are. `steps` is rl.steps (0: no end), `first_step`
/// the steps done before this process started (a resume), `seconds` how long it ran.
std::string rl_run_summary(const std::string& run_dir, uint64_t steps, uint64_t first_step,
                           double seconds);

} // namespace kbrl
