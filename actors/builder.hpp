#pragma once
// A builder: one CPU worker process that builds candidates' extensions (load_inline) ahead of
// their evaluation, so GPUs spend their time checking and timing kernels, not waiting for nvcc.
//
// Protocol (interface: kbrl::builder_actor):
//   on start     start the worker (no GPU visible); failure -> quit with it
//   build(req)   answer the engine's build verdict; if the worker died or hung, quit afterwards
//                (the supervisor starts a fresh builder)
// Blocking: spawned detached, on its own thread.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"
#include "runtime/eval/eval_engine.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kbrl {

struct builder_state {
  static inline const char* name = "builder";
  actor_stats stats;
  std::unique_ptr<eval::eval_engine> engine;
  uint64_t builds = 0;
};

using builder_pointer = builder_actor::stateful_pointer<builder_state>;

/// One CPU builder, as its owner (an evaluator supervisor or a build service) sees it.
struct builder_slot {
  std::string name;
  builder_actor handle;
  bool busy = false;
  uint64_t builds = 0;
  uint64_t restarts = 0;
  std::string last_error;
};

/// Starts (or restarts) the builder of `slot` for its owner (an evaluator supervisor or a build
/// service) on `node`: its own scratch folder below the template's, monitored by the owner, and
/// its address in `live`, the owner's list for stopping its workers when it ends.
/// `spawn(owner, stats, engine options)` spawns it (tests pass doubles).
template <class Owner, class Spawn>
void start_builder(Owner* owner, builder_slot& slot, const std::string& node,
                   eval::engine_options engine, const Spawn& spawn,
                   std::map<std::string, caf::actor_addr>& live) {
  actor_stats stats;
  stats.name = slot.name;
  stats.role = "builder";
  stats.node = node;
  stats.restarts = slot.restarts;
  engine.worker.scratch_dir += "/" + slot.name.substr(slot.name.find('/') + 1);
  slot.handle = spawn(owner, stats, engine);
  owner->monitor(slot.handle);
  live[slot.name] = slot.handle.address();
  slot.busy = false;
}

/// The slot whose builder the down message is from, with the loss recorded (its reason, one
/// more restart) and logged; null when it is from none of them. The owner starts it again.
builder_slot* lost_builder(std::vector<builder_slot>& slots, const caf::down_msg& msg,
                           const std::string& reason);

/// Spawn with sys.spawn<caf::detached>(builder, stats, engine options with gpu = -1).
builder_actor::behavior_type builder(builder_pointer self, actor_stats stats,
                                     eval::engine_options opts);

} // namespace kbrl
