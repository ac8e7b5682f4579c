#pragma once
// Planning one kbrl-node process: pick this node out of the manifest, merge the run config,
// check roles, GPUs, the RL run's settings and the run directory, and derive the evaluation
// engine's options. Everything that can be wrong in the inputs is checked here, before anything
// starts (tools/node/run_node.hpp starts it).

#include "runtime/config/manifest.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/supervisor_settings.hpp"
#include "runtime/node/rl_settings.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl {

/// What the command line of kbrl-node says.
struct node_launch {
  std::vector<std::string> roles;     ///< --role (comma-separated allowed)
  std::vector<int> gpus;              ///< --gpu N[,M]
  bool gpus_given = false;
  std::string manifest_path;          ///< --manifest; empty: a single node on loopback
  std::string node_name;              ///< --node
  uint16_t port = 4242;               ///< --port, only without a manifest
  std::string config_path;            ///< --config
  std::vector<std::string> overrides; ///< key.sub=value
  /// --resume RUN_DIR: continue the RL run in that directory with its config.toml (overrides
  /// apply on top, e.g. rl.steps=200).
  std::string resume_dir;
  /// CUDA devices this machine has (kbrl-node asks libtorch: cuda_device_count()); the --gpu
  /// list is checked against it. 0: none, GPU slots run on the CPU.
  int cuda_devices = 0;
};

/// A launch checked against manifest and config: everything needed to start.
struct node_plan {
  config::cluster_manifest manifest;
  config::node_spec self;             ///< this node, roles and GPUs as launched
  config::run_config run;
  std::string run_dir;                ///< <run.dir>/<run.name>
  bool resume = false;                ///< --resume: continue the run in run_dir
  /// The RL run this node drives: enabled only on the coordinator node with rl.enabled.
  rl_run_settings rl;
};

/// Validates a launch: loads manifest and config, picks the node, checks roles and GPUs, and on
/// the coordinator node of an RL run the [rl]/[problems]/[reward] keys and the run directory (a
/// fresh run refuses one holding an earlier run unless run.overwrite; --resume needs one).
/// Errors name the file, key or flag at fault; nothing has been started or written yet.
caf::expected<node_plan> plan_node(const node_launch& launch);

/// Evaluator engine options from the run config's eval.* settings (scratch and build directories
/// are filled in per evaluator by the node).
eval::engine_options evaluation_engine_options(const config::run_config& run);

/// Evaluator supervision settings from the run config's eval.* settings.
supervisor_settings evaluation_supervision(const config::run_config& run);

/// Where kbrl_eval_worker.py is when eval.worker_script is empty.
std::string default_worker_script();

} // namespace kbrl
