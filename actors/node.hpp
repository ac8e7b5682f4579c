#pragma once
// The node actor: one per kbrl-node process. It spawns the role actors of its roles and GPUs,
// joins the coordinator's membership, keeps sending heartbeats, and answers for its actors.
//
// States (drawn before coded, per the project's habit):
//
//   start --(coordinator node: spawn membership, register locally)--------------> joined
//     |                                                                            ^  |
//     '--(other node)--> joining --connect + ask membership + register: ok ------'  |
//                         ^   |                                                      |
//                         |   '-- any failure: log, retry after back-off (1 s .. 5 s)|
//                         '---- membership actor down / heartbeat answered false ----'
//   any state --stop--> leaving (say goodbye, wait <= 2 s) --> children told to exit --> gone
//
// A coordinator that restarts comes back empty: heartbeats answer false (unknown node) or the
// connection drops, and every node re-registers without restarting.

#include "actors/actor_stats.hpp"
#include "actors/evaluator_supervisor.hpp"
#include "messages/type_ids.hpp"
#include "runtime/node/join_state.hpp"
#include "runtime/retrieval/retrieval_settings.hpp"
#include "runtime/sampler/sampler_settings.hpp"

#include <caf/io/middleman_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <memory>
#include <set>

namespace kbrl::train {
struct learner_settings;
}

namespace kbrl {

struct rl_run_inputs;

/// Everything the node actor needs, decided by the node runtime from manifest and config.
struct node_settings {
  node_info info;                  ///< this node (actors is filled in by the node actor)
  std::string cluster;
  std::string coordinator;         ///< coordinator node name
  std::string coordinator_host;
  uint16_t coordinator_port = 0;
  bool is_coordinator = false;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds node_timeout{5000};
  std::chrono::milliseconds status_interval{10000};
  std::string run_config_toml;     ///< answered to `config`
  std::string run_dir;             ///< metrics.jsonl goes here
  caf::io::middleman_actor connector; ///< plain or TLS middleman, for connecting to the coordinator
  eval::engine_options eval_engine;   ///< template for each evaluator (scratch dirs filled per GPU)
  supervisor_settings eval_supervision;
  sampling::sampler_settings sampler; ///< template for each sampler (GPU and name filled per GPU)
  retrieval::retrieval_settings retrieval; ///< the coordinator node serves RA-ICL when index_dir is set
  /// The learner's settings (GPU filled in at spawn); null: the learner gets its defaults.
  std::shared_ptr<const train::learner_settings> learner;
  /// The coordinator node of an RL run (rl.enabled): what the run trains on; it runs as the
  /// actor "<node>/coordinator" (actors/rl_run.hpp). Null: no run.
  std::shared_ptr<const rl_run_inputs> rl;
};

struct node_actor_state {
  static inline const char* name = "node";
  node_settings settings;
  actor_stats stats;
  std::vector<actor_entry> children; ///< role actors (and membership on the coordinator)
  /// Children whose handle is their owner's (evaluators live under the supervisor, which
  /// restarts them under the same name): status and control go to the owner with the name.
  std::set<std::string> owned_by_handle;
  membership_actor membership;
  join_state join;                 ///< joined, pending join and heartbeat, attempts, stopping
  uint64_t heartbeats = 0;
  std::string last_tick_line;      ///< the status tick's last line shown at info level
};

/// The node's own behaviour: its public interface and the messages it sends itself (join: try
/// to (re)join the coordinator, retried with back-off; heartbeat: every heartbeat_interval_s
/// while joined; tick: every status_interval_s, a one-line summary in the log). Handles are
/// passed on and published as node_actor.
using node_behavior = node_actor::extend<caf::reacts_to<join_atom>, caf::reacts_to<heartbeat_atom>,
                                         caf::reacts_to<tick_atom>>;

using node_pointer = node_behavior::stateful_pointer<node_actor_state>;

/// Spawn with sys.spawn(node, settings); publish the handle (as node_actor) on the node's port.
node_behavior::behavior_type node(node_pointer self, node_settings settings);

} // namespace kbrl
