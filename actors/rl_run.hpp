#pragma once
// The RL run on the coordinator node (rl.enabled): it turns a cluster into a training run and
// ends the process when the run is done. To the rest of the cluster it is "<node>/coordinator".
//
//   [waiting] --the membership lists a learner that loaded its model, a sampler that did, an
//      |        evaluator supervisor and the metrics sink (on any node)-->
//      |        logs what is still missing every few seconds
//      v
//   [running] coordinator spawned with those actors; samplers are subscribed to the learner.
//      |      Samplers and evaluators that join, leave or come back later go on the worker
//      |      board, which episodes read before each request (none of a kind: they wait for
//      |      one, and this actor says so every few seconds). Every metrics batch passes
//      |      through here on its way to the sink: a progress line per step.
//      |  coordinator's phase "finished"
//      v
//   [finishing] the learner writes a checkpoint of its final state (unless it has one) -->
//               the node is told to stop --> kbrl-node exits 0 with a summary
//
//   waiting/running --the learner cannot train (no model...), the coordinator dies--> the node
//                     is ended with that error: kbrl-node exits 1
//
// Status and control verbs are answered by the coordinator once it runs (pause, resume, ...);
// before that the status says what the run waits for.

#include "actors/actor_stats.hpp"
#include "actors/coordinator.hpp"
#include "messages/type_ids.hpp"
#include "runtime/node/rl_settings.hpp"
#include "runtime/node/run_progress.hpp"
#include "runtime/node/worker_checks.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <map>
#include <memory>

namespace kbrl {

struct rl_run_state {
  static inline const char* name = "rl-run";

  actor_stats stats;
  std::shared_ptr<const rl_run_inputs> in;
  node_actor node;
  membership_actor membership;
  run_phase phase = run_phase::waiting;
  membership_view view;
  worker_checks checks;             ///< learners and samplers found, and whether they can work
  std::string missing;              ///< what the run still waits for, for logs and status
  std::chrono::steady_clock::time_point waiting_since = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_wait_log{};

  learner_actor learner;
  metrics_actor metrics;
  coordinator_actor coordinator;
  std::shared_ptr<worker_board> board = std::make_shared<worker_board>();
  std::string board_handles;        ///< the workers' handles last put on the board (a rejoined
                                    ///< node's actors have their old names and new handles)
  bool status_pending = false;
  /// Running: since when the board has had no sampler or no evaluator (zero: it has both).
  std::chrono::steady_clock::time_point workers_missing_since{};

  // progress
  std::chrono::steady_clock::time_point run_started, last_step_at;
  uint64_t steps_reported = 0;      ///< steps whose progress line was printed by this process
};

/// The RL run's own behaviour: its public interface and the tick it sends itself twice a second
/// (log what is still missing, see whether the run finished). Handles are passed on as
/// rl_run_actor.
using rl_run_behavior = rl_run_actor::extend<caf::reacts_to<tick_atom>>;

using rl_run_pointer = rl_run_behavior::stateful_pointer<rl_run_state>;

/// Spawn with sys.spawn(rl_run, stats, inputs, node, membership) on the coordinator node, after
/// the run directory is ready (resume prepared). Its name in stats should be
/// "<node>/coordinator".
rl_run_behavior::behavior_type rl_run(rl_run_pointer self, actor_stats stats,
                                      std::shared_ptr<const rl_run_inputs> inputs,
                                      node_actor node, membership_actor membership);

} // namespace kbrl
