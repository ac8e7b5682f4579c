#pragma once
// The coordinator's book of nodes: who joined, when, whether it is still alive.
//
// Pure bookkeeping with explicit time, so it is tested without actors or clocks; the membership
// actor (actors/membership.hpp) feeds it registrations, heartbeats and down messages.
//
//                 register                       silence > timeout, or connection lost
//   (unknown) ------------------> up ----------------------------------------------> down
//                                 ^  \  leave                                         |
//                                 |   '-------> stopped                               |
//                                 '------------------ register (incarnation + 1) -----'
//                                                     (also from stopped)

#include "messages/data.hpp"

#include <optional>
#include <string>
#include <vector>

namespace kbrl {

/// What a registration changed.
enum class join_kind { first_join, rejoin };

class membership_table {
public:
  membership_table(std::string cluster, std::string coordinator);

  /// Records a node joining or rejoining at `now_ms`. A node that registers again while up is a
  /// rejoin as well (the process restarted faster than it was seen down).
  join_kind register_node(node_info info, int64_t now_ms);

  /// Records a heartbeat. Returns false when the node is unknown or not up: it must register.
  bool heartbeat(const std::string& node, int64_t now_ms);

  /// Marks an up node down with a reason. Returns false if it was not up (nothing changed).
  bool mark_down(const std::string& node, const std::string& reason, int64_t now_ms);

  /// Marks a node that said goodbye as stopped. Returns false if it was not up.
  bool mark_stopped(const std::string& node, int64_t now_ms);

  /// Marks every up node whose last sign of life is older than `timeout_ms` as down and
  /// returns their names.
  std::vector<std::string> expire_silent(int64_t now_ms, int64_t timeout_ms);

  /// The record of a node, or nullptr.
  const node_record* find(const std::string& node) const;

  /// The node hosting the actor with this full name ("node/role.i"), or nullptr.
  const node_record* find_actor_host(const std::string& actor_name) const;

  /// A copy of the whole table as it travels in messages.
  membership_view view() const;

  /// Number of nodes in the given state.
  size_t count(node_state state) const;

  /// Bumped on every change.
  uint64_t revision() const { return revision_; }

private:
  node_record* find_mutable(const std::string& node);

  std::string cluster_;
  std::string coordinator_;
  uint64_t revision_ = 0;
  std::vector<node_record> nodes_; // in order of first join
};

/// The node part of a full actor name: "gpu1" for "gpu1/evaluator.0", "" if there is no '/'.
std::string node_of_actor(const std::string& actor_name);

} // namespace kbrl
