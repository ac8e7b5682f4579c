#pragma once
// The actors a node spawns for its roles and GPUs (runtime/node/role_plan.hpp plans them):
// metrics, the evaluator supervisor with one evaluator per GPU and the CPU builders, learner,
// samplers, plain role slots; on the coordinator node the retriever (RA-ICL) and the RL run.
// The node's samplers are subscribed to the node's learner.

#include "actors/node.hpp"

#include <vector>

namespace kbrl {

/// Spawns the actors of this node's roles and GPUs (monitored by the node); returns their
/// entries. Evaluators are owned by the supervisor: their entries carry its handle and their
/// names join state.owned_by_handle.
std::vector<actor_entry> spawn_role_actors(node_pointer self);

/// Subscribes the node's evaluator supervisors to the membership (on each join): its views
/// tell them which builder nodes' build services are up.
void subscribe_supervisors(node_pointer self, const membership_actor& membership);

} // namespace kbrl
