#pragma once
// The membership actor: the coordinator node's live list of nodes and their actors.
//
// Protocol (interface: kbrl::membership_actor in messages/interfaces.hpp):
//   register(node_info, node actor)  -> monitor the node actor, table.register_node, notify
//   heartbeat(node)                  -> refresh last_seen; false tells the node to re-register
//   leave(node)                      -> the node stopped cleanly: state "stopped"
//   down message of a node actor     -> state "down", reason "connection lost" (SIGKILL, crash)
//   tick every heartbeat interval    -> nodes silent for node_timeout -> "down" (hung, cut off)
//   status/control(actor name, ...) -> forwarded to the hosting node's actor, answer relayed
// Every change is pushed as a membership_view to subscribers and logged in words.

#include "messages/type_ids.hpp"
#include "actors/actor_stats.hpp"
#include "runtime/node/membership_table.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>

namespace kbrl {

/// How the membership actor judges liveness.
struct membership_settings {
  std::string cluster;
  std::string coordinator;          ///< name of the coordinator node (this node)
  std::chrono::milliseconds heartbeat_interval{1000}; ///< also the liveness-check period
  std::chrono::milliseconds node_timeout{5000};       ///< silence after which a node is down
  std::chrono::milliseconds forward_timeout{10000};   ///< for status/control relayed to nodes
  std::function<int64_t()> clock = now_unix_ms;        ///< wall clock; tests inject a fake
};

struct membership_state {
  static inline const char* name = "membership";
  membership_settings settings;
  membership_table table{"", ""};
  std::map<std::string, actor_host_actor> node_actors; ///< current incarnation's node actor
  std::vector<membership_listener_actor> subscribers;
  actor_stats stats;
};

/// The membership's own behaviour: its public interface and the liveness check it sends itself
/// (nodes silent past node_timeout_s are marked down). Handles are passed on as
/// membership_actor.
using membership_behavior = membership_actor::extend<caf::reacts_to<tick_atom>>;

using membership_pointer = membership_behavior::stateful_pointer<membership_state>;

/// Spawn with sys.spawn(membership, settings).
membership_behavior::behavior_type membership(membership_pointer self,
                                              membership_settings settings);

} // namespace kbrl
