#pragma once
// The evaluator supervisor: one per evaluator node. Owns one evaluator per GPU, spreads requests
// over them through a bounded queue, and restarts an evaluator whose worker died, hung, or left
// the device corrupted.
//
// Each evaluator slot, drawn before coded:
//
//            spawned                          quit / down (crash, sticky CUDA error, by hand)
//   starting -------> running (idle | busy) --------------------------------------> restarting
//      ^                                                                               |
//      |  within budget: spawn a fresh evaluator (same name, new worker) <-------------'
//      |                                                                               |
//      '---- back-off (degraded_backoff) passed ---- degraded <-- more than restart_limit
//                                                                  restarts in restart_window
//
// Requests: a full queue answers errc::busy (the sender backs off); each request is answered
// exactly once. The request in flight when an evaluator dies is answered with the evaluator's
// crash verdict. A request handed to an evaluator that went away before answering it (it was
// already on its way out, or was killed from outside) goes back to the front of the queue, at most
// twice; one that hangs an evaluator past its deadline gets a `crashed` verdict made here.
// Requests queued behind a crash wait in the supervisor's queue and run on the fresh evaluator.
// While every slot is degraded, queued requests are answered with an `infrastructure` verdict.
//
// Builds ahead (when build_workers > 0, or builder nodes are up: the membership's views, to
// which the node subscribes the supervisor, list their build services): a load_inline candidate
// first goes to a builder - a CPU worker of this node or a builder node's service
// (actors/build_service.hpp, whose files are installed here) - so GPUs never wait for nvcc. Candidates are keyed by the hash of their source: a
// duplicate waits for (or reuses) the first one's build and is never built twice; a failed build
// is answered as a compile verdict for every copy without touching a GPU. A builder that dies or
// hangs costs nothing but time: its candidates go to the GPUs, which build them themselves.

#include "actors/actor_stats.hpp"
#include "actors/builder.hpp"
#include "messages/type_ids.hpp"
#include "runtime/eval/build_book.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/slot_table.hpp"
#include "runtime/eval/supervisor_settings.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>

namespace kbrl {

/// One GPU's evaluator to run: its name, device and engine.
struct evaluator_slot {
  std::string name;
  int gpu = -1;
  eval::engine_options engine;
};

/// A builder node's build service, as the supervisor sees it (from the membership).
struct remote_builds {
  std::string name; ///< "<builder node>/builds"
  build_service_actor handle;
  size_t in_flight = 0;
  uint64_t builds = 0;
};

/// How the supervisor starts its workers. real_workers(): detached evaluator and builder actors
/// (actors/evaluator.hpp, actors/builder.hpp); tests pass doubles.
struct supervisor_workers {
  std::function<evaluator_actor(caf::local_actor* parent, const actor_stats&, int gpu,
                                const eval::engine_options&)>
    evaluator;
  std::function<builder_actor(caf::local_actor* parent, const actor_stats&,
                              const eval::engine_options&)>
    builder;
};
supervisor_workers real_workers();

struct pending_evaluation {
  eval_request request;
  caf::typed_response_promise<eval_result> promise;
  int attempts = 0; ///< times it was handed to an evaluator that went away before answering
  double build_seconds = 0; ///< what a CPU builder spent on its build (the first of duplicates)
};

struct evaluator_supervisor_state {
  static inline const char* name = "evaluator-supervisor";
  actor_stats stats;
  supervisor_settings settings;
  supervisor_workers workers;
  eval::slot_table slots{5, std::chrono::milliseconds(60000)}; ///< set from settings at spawn
  std::map<std::string, eval::engine_options> engines;   ///< slot name -> its engine
  std::map<std::string, evaluator_actor> handles;        ///< slot name -> its current evaluator
  std::deque<pending_evaluation> queue;
  uint64_t answered = 0;
  uint64_t refused_busy = 0;
  eval::engine_options builder_engine;                   ///< template for builders
  std::vector<builder_slot> builders;
  std::vector<remote_builds> remote;                     ///< builder nodes' build services
  eval::build_book<pending_evaluation> builds;
  /// The current evaluator of each slot and each builder, shared with the clean-up that stops
  /// them when the supervisor ends (that clean-up runs after this state is gone, so it must not
  /// touch it). Weak addresses: a strong handle kept here would keep a stopped worker actor
  /// alive, and the actor system waits for every detached actor to be destroyed before it exits.
  std::shared_ptr<std::map<std::string, caf::actor_addr>> live_workers =
    std::make_shared<std::map<std::string, caf::actor_addr>>();
};

/// The supervisor's own behaviour: its public interface and the message it sends itself when a
/// degraded evaluator's back-off has passed (start it again). Handles are passed on as
/// evaluator_supervisor_actor.
using evaluator_supervisor_behavior =
  evaluator_supervisor_actor::extend<caf::reacts_to<start_atom, std::string>>;

using evaluator_supervisor_pointer =
  evaluator_supervisor_behavior::stateful_pointer<evaluator_supervisor_state>;

/// Spawn with sys.spawn(evaluator_supervisor, stats, settings, slots, builder engine options
/// (used when settings.build_workers > 0)).
evaluator_supervisor_behavior::behavior_type
evaluator_supervisor(evaluator_supervisor_pointer self, actor_stats stats,
                     supervisor_settings settings, std::vector<evaluator_slot> slots,
                     eval::engine_options builder_engine);

/// The same with the workers started by `workers` (tests: doubles under CAF's test coordinator).
evaluator_supervisor_behavior::behavior_type
evaluator_supervisor_with(evaluator_supervisor_pointer self, actor_stats stats,
                          supervisor_settings settings, std::vector<evaluator_slot> slots,
                          eval::engine_options builder_engine, supervisor_workers workers);

} // namespace kbrl
