#pragma once
// Bookkeeping every kbrl actor keeps for its status answer: identity, counters, last error.

#include "messages/data.hpp"
#include "messages/errors.hpp"
#include "runtime/io/clock.hpp"

#include <string>
#include <vector>

namespace kbrl {

/// Counters and identity behind an actor_status. Each handler calls count() first.
struct actor_stats {
  std::string name;   ///< full name, "node/role[.i]"
  std::string role;
  std::string node;
  uint64_t handled = 0;
  uint64_t restarts = 0;
  std::string last_error;
  int64_t since_unix_ms = now_unix_ms();

  void count() { ++handled; }

  /// The status answer, with the actor's current state word, mailbox size and role details;
  /// its health is ok.
  actor_status snapshot(std::string state, size_t mailbox_size,
                        std::vector<status_detail> details = {},
                        std::vector<std::string> commands = {}) const {
    return snapshot(actor_health::ok, std::move(state), mailbox_size, std::move(details),
                    std::move(commands));
  }

  /// The same with its health (messages/data.hpp says what each means).
  actor_status snapshot(actor_health health, std::string state, size_t mailbox_size,
                        std::vector<status_detail> details = {},
                        std::vector<std::string> commands = {}) const {
    actor_status s;
    s.name = name;
    s.role = role;
    s.node = node;
    s.state = std::move(state);
    s.health = health;
    s.mailbox_size = mailbox_size;
    s.messages_handled = handled;
    s.restarts = restarts;
    s.last_error = last_error;
    s.since_unix_ms = since_unix_ms;
    s.details = std::move(details);
    s.commands = std::move(commands);
    return s;
  }
};

/// The answer of an actor that has no control verbs to a `control` request.
inline caf::error no_control_verbs(const std::string& actor, const std::string& verb) {
  return make_error(errc::not_supported, actor + " accepts no control verbs, got '" + verb + "'");
}

/// Full actor name: "head/learner", "gpu1/evaluator.0".
inline std::string actor_name(const std::string& node, const std::string& role, int index = -1) {
  auto name = node + "/" + role;
  if (index >= 0)
    name += "." + std::to_string(index);
  return name;
}

} // namespace kbrl
