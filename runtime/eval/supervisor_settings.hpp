#pragma once
// How an evaluator supervisor (actors/evaluator_supervisor.hpp) runs its evaluators: queue,
// restart budget, back-off and CPU builders; filled from the run config's eval.* keys
// (evaluation_supervision, runtime/node/node_plan.cpp).

#include "runtime/io/clock.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace kbrl {

struct supervisor_settings {
  size_t queue_capacity = 64;                        ///< requests waiting at most
  uint32_t restart_limit = 5;                        ///< restarts allowed per window per slot
  std::chrono::milliseconds restart_window{60000};
  std::chrono::milliseconds degraded_backoff{30000}; ///< wait before a degraded slot retries
  std::chrono::milliseconds request_margin{30000};   ///< added to a request's own timeout
  size_t build_workers = 0;                          ///< CPU builders; 0: GPUs build themselves
  /// Builds kept in flight on each builder node's build service (kbrl-node --role builder).
  size_t remote_build_slots = 8;
  std::function<int64_t()> clock = now_unix_ms;      ///< wall clock (ms); tests inject a fake
};

} // namespace kbrl
