#pragma once
// How the coordinator (actors/coordinator.hpp) runs an RL run: steps, batch shape, mode and
// staleness, held-out rounds, traces, timeouts; filled from the run config's rl.* keys
// (runtime/node/rl_settings.cpp). The defaults are the settings table's
// (test rl_run/the_coordinator_and_episode_defaults_are_the_settings_tables).

#include "runtime/episode/episode_settings.hpp"
#include "runtime/episode/worker_board.hpp"
#include "runtime/rl/advantages.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kbrl {

/// How far episodes may run ahead of the learner.
enum class coordinator_mode : uint8_t {
  sync,  ///< a step's episodes start after the previous step's policy is published
  async, ///< up to max_staleness steps ahead (actors/coordinator.hpp explains)
};
const char* to_string(coordinator_mode m);
/// "sync" or "async"; anything else is std::nullopt.
std::optional<coordinator_mode> parse_coordinator_mode(const std::string& text);

struct coordinator_settings {
  uint64_t steps = 100;           ///< training steps to run (0: until stopped); rl.steps
  size_t problems_per_step = 4;   ///< B
  size_t group_size = 4;          ///< G samples per problem
  uint64_t eval_every = 0;        ///< steps between held-out evaluations (0: never)
  bool drop_flat_groups = true;   ///< groups whose rewards are all equal are not trained on
  std::chrono::milliseconds learner_timeout{std::chrono::minutes(30)};
  std::string run_dir;            ///< traces.jsonl and coordinator.json go here
  uint64_t traces_max_bytes = 256ull << 20; ///< traces.jsonl is rotated to traces.1.jsonl past this
  bool traces_tokens = false;     ///< token ids and log-probabilities in traces.jsonl; rl.traces_tokens
  /// The learner's advantage settings, for the advantages traces.jsonl shows (none: no field).
  std::optional<rl::advantage_options> trace_advantage;
  uint64_t seed = 0;
  episode_settings episodes;
  /// sync (default) or async (episodes up to max_staleness steps ahead of the learner).
  coordinator_mode mode = coordinator_mode::sync;
  /// K: in async mode, how many steps episodes may run ahead; in both modes, trajectories
  /// with a turn sampled more than K versions before the learner's current one are not sent
  /// to the learner (dropped and counted). Keep it <= learner.max_staleness, else the learner
  /// refuses what passes here. Default 1.
  uint64_t max_staleness = 1;
  /// Per-step timelines kept for the status and `timeline` views. Default 20.
  size_t timeline_steps = 20;
  /// How long a sampler may take to confirm a new policy before publishing counts as done
  /// without it. Default 5 minutes.
  std::chrono::milliseconds publish_timeout{std::chrono::minutes(5)};
  /// Steps in a row whose episodes all failed before the coordinator stops with an error
  /// (0: never). Default 3.
  uint64_t max_failed_steps = 3;
  /// When set, samplers and evaluators come from here (see worker_board): episodes read it
  /// before each request, publishing reads it for the samplers to send a policy to.
  std::shared_ptr<const worker_board> workers;
};

} // namespace kbrl
