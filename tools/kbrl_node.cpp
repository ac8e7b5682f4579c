// kbrl-node: one process of a kbrl cluster (or the whole of it with --role all).
//
//   kbrl-node --role learner --manifest cluster.toml
//   kbrl-node --role evaluator --gpu 0,1 --manifest cluster.toml --node gpu1
//   kbrl-node --role all                       (one machine, loopback, no manifest)
//   kbrl-node --role all log.level=debug node.stop_after_s=5
//   kbrl-node --role all --config run.toml rl.enabled=true      (train; exits when done)
//   kbrl-node --role all --resume runs/kbrl rl.steps=200        (continue that run)

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/config/manifest.hpp"
#include "runtime/device/devices.hpp"
#include "tools/node/run_node.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"kbrl-node: runs one node of a kbrl cluster.\n\n"
               "Each machine runs one kbrl-node per role (or --role all for everything in one\n"
               "process). The manifest names the cluster, its coordinator and every node; without\n"
               "one, a single node runs on 127.0.0.1. Settings come from the run config (--config)\n"
               "and key=value overrides, e.g. log.level=debug node.stop_after_s=10.\n"
               "SIGINT or SIGTERM stops the node cleanly."};
  kbrl::node_launch launch;
  std::vector<std::string> gpus_text;
  bool list_nodes = false;
  app.add_option("--role", launch.roles,
                 "Role(s) of this node: learner, sampler, evaluator, all (the three), or builder (a CPU machine that builds for the evaluators); comma-separated")
    ->delimiter(',')->allow_extra_args(false);
  app.add_option("--gpu", gpus_text, "CUDA device indices this node uses, e.g. 0 or 0,1")
    ->delimiter(',')->allow_extra_args(false);
  app.add_option("--manifest", launch.manifest_path, "Cluster manifest (TOML)")
    ->check(CLI::ExistingFile);
  app.add_option("--node", launch.node_name,
                 "Which manifest node this process is (needed when several fit --role)");
  app.add_option("--port", launch.port, "Port to listen on without a manifest (default 4242)")
    ->check(CLI::Range(1, 65535));
  std::vector<std::string> config_args;
  app.add_option("--config", config_args,
                 "Run config (TOML), or a key=value override as kbrl-eval takes them; repeatable");
  app.add_option("--resume", launch.resume_dir,
                 "Continue the RL run in this run directory (its config.toml, the learner's "
                 "newest checkpoint, coordinator.json); overrides apply on top, e.g. "
                 "rl.steps=200");
  app.add_flag("--list-nodes", list_nodes,
               "Print the manifest's node names, one per line, and exit (for scripts)");
  app.add_option("overrides", launch.overrides, "Run-config overrides, key.sub=value");
  kbrl::config::add_version_flag(app, "kbrl-node");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;
  // --config takes a file or key=value (kbrl-eval's spelling); overrides given either way apply
  // in order after the file.
  std::vector<std::string> config_overrides;
  for (auto& c : config_args) {
    if (c.find('=') != std::string::npos) {
      config_overrides.push_back(c);
    } else if (!launch.config_path.empty()) {
      std::fprintf(stderr, "kbrl-node: --config %s: one run config file at most (%s given "
                           "before); key=value overrides may follow\n",
                   c.c_str(), launch.config_path.c_str());
      return 2;
    } else {
      launch.config_path = c;
    }
  }
  launch.overrides.insert(launch.overrides.begin(), config_overrides.begin(),
                          config_overrides.end());

  if (list_nodes) {
    if (launch.manifest_path.empty()) {
      std::fprintf(stderr, "kbrl-node: --list-nodes needs --manifest\n");
      return 2;
    }
    auto m = kbrl::config::load_manifest(launch.manifest_path);
    if (!m) {
      std::fprintf(stderr, "kbrl-node: %s\n", kbrl::describe(m.error()).c_str());
      return 2;
    }
    for (auto& n : m->nodes)
      std::printf("%s\n", n.name.c_str());
    return 0;
  }
  for (auto& g : gpus_text) {
    try {
      size_t used = 0;
      int gpu = std::stoi(g, &used);
      if (used != g.size() || gpu < 0)
        throw std::invalid_argument(g);
      launch.gpus.push_back(gpu);
    } catch (const std::exception&) {
      std::fprintf(stderr, "kbrl-node: --gpu %s: expected a non-negative integer\n", g.c_str());
      return 2;
    }
  }
  launch.gpus_given = !gpus_text.empty();
  launch.cuda_devices = kbrl::cuda_device_count();
  auto plan = kbrl::plan_node(launch);
  if (!plan) {
    std::fprintf(stderr, "kbrl-node: %s\n", kbrl::describe(plan.error()).c_str());
    return 2;
  }
  return kbrl::run_node(*plan);
}
