#pragma once
// How an episode (actors/episode.hpp) runs: turns, discounting, rewards, prompts, sampling and
// timing of its requests, retries and back-off; filled from the run config's rl.*, reward.*,
// prompt.* and eval.* keys (runtime/node/rl_settings.cpp).

#include "messages/data.hpp"
#include "runtime/episode/prompts.hpp"
#include "runtime/episode/rewards.hpp"

#include <chrono>
#include <cstdint>

namespace kbrl {

struct episode_settings {
  int32_t max_turns = 4;
  double gamma = 0.4;                            ///< discount of later turns' scores
  episode::return_aggregation aggregation = episode::return_aggregation::sum;
  episode::reward_weights rewards;
  episode::prompt_settings prompts;
  sampling_params sampling;
  timing_options timing;
  double success_speedup = 1.0;   ///< a correct turn faster than this ends the episode
  int32_t max_retries = 3;        ///< per step, over samplers/evaluators
  std::chrono::milliseconds sampler_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds evaluator_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds busy_backoff_first{250};
  std::chrono::milliseconds busy_backoff_max{std::chrono::seconds(8)};
  std::chrono::milliseconds busy_wait_limit{std::chrono::minutes(30)}; ///< per step, in all
  /// Every generation request asks the sampler for at least this policy version (a sampler
  /// holding an older one waits for the update): the coordinator's staleness bound in
  /// asynchronous mode. 0: any version.
  uint64_t min_policy_version = 0;
  /// The coordinator step this episode belongs to: the round its work is timed under in
  /// episode_resources::stages.
  uint64_t round = 0;
};

} // namespace kbrl
