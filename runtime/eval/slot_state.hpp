#pragma once
// The life of an evaluator slot in its supervisor (actors/evaluator_supervisor.hpp):
//
//   starting --ready--> running --worker lost--> restarting --ready--> running
//                          |                          |
//                          +--budget spent (restart_budget.hpp)--> degraded --back-off--> starting
//
// The status shows a running slot as "idle" or "evaluating".

#include <cstdint>

namespace kbrl::eval {

enum class slot_state : uint8_t { starting, running, restarting, degraded };

/// "starting", "running", "restarting", "degraded".
inline const char* to_string(slot_state s) {
  switch (s) {
    case slot_state::starting:
      return "starting";
    case slot_state::running:
      return "running";
    case slot_state::restarting:
      return "restarting";
    case slot_state::degraded:
      return "degraded";
  }
  return "unknown";
}

} // namespace kbrl::eval
