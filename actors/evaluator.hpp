#pragma once
// The evaluator actor: one GPU (or the CPU), one worker process, one candidate at a time.
//
// Protocol (interface: kbrl::evaluator_actor):
//   on start         start the worker (import torch, CUDA context); failure -> quit with it
//   evaluate(req)    answer the engine's verdict (crashes and timeouts are verdicts); if the worker
//                    or the device context is gone afterwards, quit with errc::worker_crashed and
//                    the reason, so the supervisor starts a fresh evaluator
//   control restart  quit with "restarted by hand"; the supervisor starts a fresh one
//   control kill-worker  SIGKILL the worker (fault injection; the next request sees the crash)
// Blocking: spawned detached, on its own thread.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/eval/eval_engine.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <memory>

namespace kbrl {

struct evaluator_state {
  static inline const char* name = "evaluator";
  actor_stats stats;
  std::unique_ptr<eval::eval_engine> engine;
  std::string current;       ///< trace of the request being evaluated
  int gpu = -1;
};

using evaluator_pointer = evaluator_actor::stateful_pointer<evaluator_state>;

/// Spawn with sys.spawn<caf::detached>(evaluator, stats, gpu, engine options).
evaluator_actor::behavior_type evaluator(evaluator_pointer self, actor_stats stats, int gpu,
                                         eval::engine_options opts);

} // namespace kbrl
