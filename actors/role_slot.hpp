#pragma once
// A role slot: the actor a node spawns for a role whose behaviour is not in this build yet
// (sampler, learner, evaluator before their issues land). It answers status like every actor,
// saying which GPUs it holds and that it is idle, so the cluster's shape is visible and
// testable end to end. A real role actor replaces it by spawning under the same name.

#include "actors/actor_stats.hpp"
#include "messages/type_ids.hpp"

#include <caf/typed_event_based_actor.hpp>

namespace kbrl {

struct role_slot_state {
  static inline const char* name = "role-slot";
  actor_stats stats;
  std::vector<status_detail> details;
};

using role_slot_pointer = status_actor::stateful_pointer<role_slot_state>;

/// Spawn with sys.spawn(role_slot, stats (name/role/node set), details shown in status).
status_actor::behavior_type role_slot(role_slot_pointer self, actor_stats stats,
                                      std::vector<status_detail> details);

} // namespace kbrl
