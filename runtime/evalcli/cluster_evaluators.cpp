#include "runtime/evalcli/cluster_evaluators.hpp"

#include "messages/errors.hpp"
#include "messages/type_ids.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <optional>

namespace kbrl::evalcli {

namespace {

std::string address_of(const config::node_spec& n) {
  return n.host + ":" + std::to_string(n.port);
}

caf::expected<node_actor> connect(caf::actor_system& sys, const config::cluster_manifest& m,
                                  const config::node_spec& n) {
  if (m.security.tls())
    return caf::openssl::remote_actor<node_actor>(sys, n.host, n.port);
  return sys.middleman().remote_actor<node_actor>(n.host, n.port);
}

/// The node's evaluators, or nothing and `why` they cannot be used.
/// "" when the node's run config (TOML) has the `expected` values, else what differs.
std::string config_difference(const std::string& toml, const setting_values& expected) {
  auto cfg = config::run_config::parse(toml, "its run config");
  if (!cfg)
    return "its run config could not be read here (" + describe(cfg.error())
           + "; a different kbrl version?)";
  std::string out;
  for (auto& [key, value] : expected) {
    auto there = cfg->get_toml(key);
    if (there != value)
      out += (out.empty() ? "" : "; ") + key + " = " + there + " there, " + value + " here";
  }
  return out.empty() ? ""
                     : "it judges with other settings than this run (" + out
                         + "): start the node with this run's values, or give kbrl-eval the "
                           "node's (--config key=value)";
}

std::optional<remote_evaluator_node> reach(caf::actor_system& sys,
                                           const config::cluster_manifest& m,
                                           const config::node_spec& n,
                                           const setting_values& expected,
                                           std::chrono::milliseconds timeout, std::string& why) {
  auto where = "node " + n.name + " at " + address_of(n);
  auto handle = connect(sys, m, n);
  if (!handle) {
    why = where + ": cannot connect (" + sys.render(handle.error())
          + "; is `kbrl-node --role evaluator --manifest " + m.path + " --node " + n.name
          + "` running there?)";
    return std::nullopt;
  }
  std::optional<node_status> status;
  caf::error failed;
  caf::scoped_actor self{sys};
  self->request(*handle, timeout, status_atom::value, node_atom::value)
    .receive([&](node_status& st) { status = std::move(st); },
             [&](caf::error& err) { failed = std::move(err); });
  if (!status) {
    why = where + ": connected, but it did not say what it runs (" + sys.render(failed) + ")";
    return std::nullopt;
  }
  if (status->info.name != n.name) {
    why = where + ": the kbrl-node listening there is node '" + status->info.name + "', not "
          + n.name + " (another cluster's node on that port?)";
    return std::nullopt;
  }
  std::optional<std::string> toml;
  self->request(*handle, timeout, config_atom::value)
    .receive([&](std::string& text) { toml = std::move(text); },
             [&](caf::error& err) { failed = std::move(err); });
  if (!toml) {
    why = where + ": it did not send its run config (" + sys.render(failed) + ")";
    return std::nullopt;
  }
  if (auto diff = config_difference(*toml, expected); !diff.empty()) {
    why = where + ": " + diff;
    return std::nullopt;
  }
  remote_evaluator_node out;
  out.name = n.name;
  out.address = address_of(n);
  out.devices = status->info.devices;
  for (auto& a : status->info.actors) {
    if (a.role == "evaluator-supervisor")
      out.supervisor = caf::actor_cast<evaluator_supervisor_actor>(a.handle);
    else if (a.role == "evaluator")
      out.evaluators.push_back(a.name);
  }
  if (!out.supervisor || out.evaluators.empty()) {
    why = where + ": it runs no evaluators (started without --role evaluator?)";
    return std::nullopt;
  }
  return out;
}

} // namespace

const std::vector<std::string>& verdict_keys() {
  static const std::vector<std::string> keys{"eval.reference_mode",     "eval.rules_off",
                                             "eval.rules_warn",          "eval.rules_error",
                                             "eval.suspicious_speedup",  "eval.inputs_on",
                                             "eval.timing_input_sets",   "eval.correctness",
                                             "eval.strict_rtol",         "eval.strict_floor",
                                             "eval.strict_norm_tol",     "eval.min_time_coverage",
                                             "eval.profile_coverage",    "eval.memory_limit_gb"};
  return keys;
}

setting_values verdict_settings(const config::run_config& run) {
  setting_values out;
  for (auto& key : verdict_keys())
    out.emplace_back(key, run.get_toml(key));
  return out;
}

caf::expected<cluster_evaluators> find_cluster_evaluators(caf::actor_system& sys,
                                                         const config::cluster_manifest& manifest,
                                                         const setting_values& expected,
                                                         std::chrono::milliseconds timeout) {
  cluster_evaluators out;
  std::vector<std::string> tried;
  for (auto& n : manifest.nodes) {
    if (!n.has_role("evaluator"))
      continue;
    tried.push_back(n.name);
    std::string why;
    if (auto node = reach(sys, manifest, n, expected, timeout, why))
      out.nodes.push_back(std::move(*node));
    else
      out.warnings.push_back(why);
  }
  if (tried.empty())
    return make_error(errc::invalid_config,
                      manifest.path + ": no [[node]] has the evaluator role (roles = "
                                      "[\"evaluator\"] or [\"all\"]): nothing to evaluate on");
  if (out.nodes.empty()) {
    std::string text = "no evaluator node of cluster " + manifest.name + " (" + manifest.path
                       + ") could be used:";
    for (auto& w : out.warnings)
      text += "\n  " + w;
    return make_error(errc::node_unreachable, text);
  }
  return out;
}

std::string describe_cluster(const std::string& cluster, const cluster_evaluators& found) {
  std::string out = "cluster " + cluster + ":";
  bool first = true;
  for (auto& n : found.nodes) {
    auto count = n.evaluators.size();
    out += std::string(first ? " " : ", ") + n.name + " (" + std::to_string(count)
           + (count == 1 ? " evaluator" : " evaluators")
           + (n.devices.empty() ? "" : ", " + n.devices) + ")";
    first = false;
  }
  return out;
}

} // namespace kbrl::evalcli
