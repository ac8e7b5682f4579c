#pragma once
// kbrl-eval --manifest: the evaluators of a running kbrl cluster, found the way kbrl-shell finds
// a node. kbrl-eval is a client of the cluster, not a node: it does not join the membership; it
// connects to the node actor each [[node]] with the evaluator role publishes at its host:port
// (plain, or mutual TLS with the manifest's [shell] certificate), asks it for its actors, and
// takes its evaluator supervisor and the number of evaluators that supervisor owns.
//
// A node judges with the eval.* settings of its own run config, not kbrl-eval's: the keys that
// decide verdicts (verdict_keys()) must have the same values on the node as in kbrl-eval's run
// config (after --reference and --config), or the node is not used (a run on mixed rules would
// not give the results of a local run).
//
// Unreachable nodes at start: kbrl-eval goes on with the nodes it reached and warns, naming each
// node it could not use and why (so a cluster with one machine down still evaluates); when it
// reaches none, it is an error listing every node and address it tried. Nothing is sent to a
// node before every node was tried.

#include "messages/interfaces.hpp"
#include "runtime/config/manifest.hpp"
#include "runtime/config/settings.hpp"

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::evalcli {

/// One evaluator node of the cluster, reached.
struct remote_evaluator_node {
  std::string name;                      ///< the manifest's node name
  std::string address;                   ///< host:port
  evaluator_supervisor_actor supervisor; ///< where its evaluations are sent
  std::vector<std::string> evaluators;   ///< the evaluators it owns, e.g. "ev1/evaluator.0"
  std::string devices;                   ///< as the node describes them, e.g. "cpu"
};

/// (key, value as TOML) pairs of run-config settings.
using setting_values = std::vector<std::pair<std::string, std::string>>;

/// The run-config keys that decide a verdict on the evaluator node (the request does not carry
/// them): eval.reference_mode, eval.rules_off/warn/error, eval.suspicious_speedup,
/// eval.inputs_on, eval.timing_input_sets, eval.correctness, eval.strict_rtol/floor/norm_tol,
/// eval.min_time_coverage, eval.profile_coverage, eval.memory_limit_gb.
const std::vector<std::string>& verdict_keys();

/// The values of verdict_keys() in `run`.
setting_values verdict_settings(const config::run_config& run);

struct cluster_evaluators {
  std::vector<remote_evaluator_node> nodes; ///< at least one
  std::vector<std::string> warnings;        ///< one line per evaluator node that was not usable
};

/// Connects to every evaluator node of `manifest` through `sys` (which has the io middleman
/// loaded, and the OpenSSL manager when the manifest has TLS), waiting at most `timeout` for each
/// node's answer; a node whose run config differs from `expected` (verdict_settings()) is not
/// used. Fails with errc::invalid_config when the manifest has no evaluator node, and
/// errc::node_unreachable when no evaluator node could be used (the text names each node, its
/// address and why).
caf::expected<cluster_evaluators> find_cluster_evaluators(caf::actor_system& sys,
                                                         const config::cluster_manifest& manifest,
                                                         const setting_values& expected,
                                                         std::chrono::milliseconds timeout);

/// "cluster NAME: ev1 (1 evaluator, cpu), ev2 (2 evaluators, 2 x NVIDIA H200)", for run_info.
std::string describe_cluster(const std::string& cluster, const cluster_evaluators& found);

} // namespace kbrl::evalcli
