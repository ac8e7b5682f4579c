#pragma once
// The evaluator supervisor's builds ahead (actors/evaluator_supervisor.hpp): its own CPU
// builders and the builder nodes' build services it learns from the membership. The book
// (runtime/eval/build_book.hpp) decides where each candidate goes; these functions send.
// Internal to the supervisor: evaluator_supervisor.cpp and supervisor_builds.cpp.

#include "actors/evaluator_supervisor.hpp"

#include <chrono>

namespace kbrl::supervision {

using self_ptr = evaluator_supervisor_pointer;

// -- defined in evaluator_supervisor.cpp
void deliver(self_ptr self, caf::typed_response_promise<eval_result>& promise, eval_result res);
void dispatch(self_ptr self);
std::chrono::milliseconds deadline_of(self_ptr self, const eval_request& req);

// -- defined in supervisor_builds.cpp
/// Starts (or restarts) one of the supervisor's own builders.
void spawn_builder(self_ptr self, builder_slot& slot);
/// Routes a new request: through a build first where that helps, else straight to the GPUs.
void admit(self_ptr self, pending_evaluation item);
/// Hands queued builds to free builders, own ones first, then the build services.
void dispatch_builds(self_ptr self);
/// A down message from one of the supervisor's builders: restarts it; false when it was not one.
bool builder_down(self_ptr self, const caf::down_msg& msg);
/// The membership changed: the build services of the nodes that are up are the ones used.
void use_build_services(self_ptr self, const membership_view& view);

} // namespace kbrl::supervision
