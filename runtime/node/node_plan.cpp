#include "runtime/node/node_plan.hpp"

#include "messages/error_codes.hpp"
#include "messages/errors.hpp"
#include "runtime/device/gpu_indices.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/io/text.hpp"
#include "runtime/io/tool_scripts.hpp"
#include "runtime/node/rl_run_dir.hpp"
#include "runtime/train/learner_settings.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace kbrl {

namespace {

namespace fs = std::filesystem;

/// Picks this node out of the manifest: --node, else the only node, else the only node with the
/// requested roles.
caf::expected<config::node_spec> pick_node(const config::cluster_manifest& m,
                                           const node_launch& launch) {
  std::vector<std::string> names;
  for (auto& n : m.nodes)
    names.push_back(n.name);
  if (!launch.node_name.empty()) {
    if (auto* n = m.find(launch.node_name))
      return *n;
    return make_error(errc::invalid_config, m.path + ": --node " + launch.node_name
                                              + ": no such node (the manifest has "
                                              + join(names) + ")");
  }
  if (m.nodes.size() == 1)
    return m.nodes.front();
  std::vector<const config::node_spec*> fitting;
  for (auto& n : m.nodes) {
    bool all = true;
    for (auto& r : launch.roles)
      all = all && n.has_role(r);
    if (all)
      fitting.push_back(&n);
  }
  if (fitting.size() == 1)
    return *fitting.front();
  if (fitting.empty())
    return make_error(errc::invalid_config, m.path + ": no node has the roles --role "
                                              + join(launch.roles, ",") + " (nodes: "
                                              + join(names) + ")");
  return make_error(errc::invalid_config,
                    m.path + ": " + std::to_string(fitting.size())
                      + " nodes fit --role " + join(launch.roles, ",")
                      + "; say which one this is with --node NAME (one of " + join(names) + ")");
}

std::chrono::milliseconds seconds_setting(const config::run_config& run, const std::string& key) {
  return std::chrono::milliseconds(static_cast<int64_t>(run.get_real(key) * 1000));
}

} // namespace

std::string default_worker_script() {
  return io::tool_script("kbrl_eval_worker.py");
}

eval::engine_options evaluation_engine_options(const config::run_config& run) {
  eval::engine_options o;
  o.worker.python = eval::resolve_python(run.get_string("eval.python"));
  o.worker.script = run.get_string("eval.worker_script");
  if (o.worker.script.empty())
    o.worker.script = default_worker_script();
  o.worker.isolation = *eval::parse_isolation(run.get_string("eval.isolation"));
  o.worker.drop_privileges = run.get_bool("eval.drop_privileges");
  o.worker.max_processes = static_cast<uint64_t>(run.get_int("eval.max_processes"));
  o.worker.max_file_bytes = static_cast<uint64_t>(run.get_int("eval.max_file_mb")) << 20;
  o.worker.capture_bytes = static_cast<size_t>(run.get_int("eval.capture_kb")) << 10;
  o.recycle_after = static_cast<uint32_t>(run.get_int("eval.recycle_after"));
  o.recycle_rss_mb = run.get_real("eval.recycle_rss_mb");
  o.suspicious_speedup = run.get_real("eval.suspicious_speedup");
  o.inputs_on = run.get_string("eval.inputs_on");
  o.init_on = run.get_string("eval.init_on");
  o.reference_mode = run.get_string("eval.reference_mode");
  o.timing_input_sets = static_cast<int>(run.get_int("eval.timing_input_sets"));
  o.correctness = run.get_string("eval.correctness");
  o.strict_rtol = run.get_real("eval.strict_rtol");
  o.strict_floor = run.get_real("eval.strict_floor");
  o.strict_norm_tol = run.get_real("eval.strict_norm_tol");
  o.min_time_coverage = run.get_real("eval.min_time_coverage");
  o.profile_coverage = run.get_bool("eval.profile_coverage");
  o.memory_limit_gb = run.get_real("eval.memory_limit_gb");
  o.shared_reference_mb = run.get_real("eval.shared_reference_mb");
  auto cache_dir = run.get_string("eval.cache_dir");
  // Builds are shared only when eval.cache_dir is named, as in kbrl-eval
  // (tools/evalcli/evaluator_setup.cpp); otherwise a node builds in its run directory
  // (actors/node.cpp).
  if (cache_dir.empty())
    cache_dir = run.get_string("run.dir") + "/.cache";
  else
    o.worker.extensions_dir = cache_dir + "/extensions";
  o.reference_cache_file = cache_dir + "/reference_times.jsonl";
  auto arch = run.get_string("eval.cuda_arch_list");
  if (arch == "auto")
    arch = detect_cuda_arch_list();
  if (!arch.empty())
    o.worker.extra_env.push_back("TORCH_CUDA_ARCH_LIST=" + arch);
  for (auto& [key, level] : {std::pair{"eval.rules_off", eval::severity::off},
                             std::pair{"eval.rules_warn", eval::severity::warning},
                             std::pair{"eval.rules_error", eval::severity::error}})
    for (auto& rule : run.get_string_list(key))
      o.rule_overrides[rule] = level;
  return o;
}

supervisor_settings evaluation_supervision(const config::run_config& run) {
  supervisor_settings s;
  s.queue_capacity = static_cast<size_t>(run.get_int("eval.queue_capacity"));
  s.restart_limit = static_cast<uint32_t>(run.get_int("eval.restart_limit"));
  s.restart_window = seconds_setting(run, "eval.restart_window_s");
  s.degraded_backoff = seconds_setting(run, "eval.degraded_backoff_s");
  s.build_workers = static_cast<size_t>(run.get_int("eval.build_workers"));
  s.remote_build_slots = static_cast<size_t>(run.get_int("eval.remote_build_slots"));
  return s;
}

caf::expected<node_plan> plan_node(const node_launch& launch) {
  node_plan plan;
  for (auto& r : launch.roles) {
    auto& known = config::known_roles();
    if (std::find(known.begin(), known.end(), r) == known.end())
      return make_error(errc::invalid_config, "--role " + r + ": expected one of "
                                                + join(known));
  }
  if (launch.roles.empty())
    return make_error(errc::invalid_config, "--role is required (one of "
                                              + join(config::known_roles()) + ")");
  if (launch.manifest_path.empty()) {
    if (launch.port == 0)
      return make_error(errc::invalid_config, "--port: expected a port from 1 to 65535");
    plan.manifest = config::single_node_manifest(launch.port, launch.gpus);
    plan.manifest.nodes.front().roles = launch.roles;
    plan.self = plan.manifest.nodes.front();
  } else {
    auto m = config::load_manifest(launch.manifest_path);
    if (!m)
      return std::move(m.error());
    plan.manifest = std::move(*m);
    auto self = pick_node(plan.manifest, launch);
    if (!self)
      return std::move(self.error());
    plan.self = std::move(*self);
    for (auto& r : launch.roles)
      if (!plan.self.has_role(r))
        return make_error(errc::invalid_config,
                          launch.manifest_path + ": --role " + r + ": node " + plan.self.name
                            + " is declared with roles [" + join(plan.self.roles)
                            + "] in the manifest");
    plan.self.roles = launch.roles;
    if (launch.gpus_given) {
      // A node without `gpus` in the manifest has no GPU ("Default: [] (no GPU)"): it may not
      // take one, which could belong to another node of its host.
      for (auto g : launch.gpus)
        if (std::find(plan.self.gpus.begin(), plan.self.gpus.end(), g) == plan.self.gpus.end())
          return make_error(errc::invalid_config, launch.manifest_path + ": --gpu "
                                                    + std::to_string(g) + ": node "
                                                    + plan.self.name
                                                    + " does not list that GPU in the manifest");
      plan.self.gpus = launch.gpus;
    }
  }
  std::sort(plan.self.gpus.begin(), plan.self.gpus.end());
  if (std::adjacent_find(plan.self.gpus.begin(), plan.self.gpus.end()) != plan.self.gpus.end())
    return make_error(errc::invalid_config, "--gpu: a GPU is listed twice");
  if (auto ok = check_gpus(plan.self.gpus, launch.cuda_devices); !ok)
    return make_error(errc::invalid_config, error_text(ok.error())); // a launch error like the rest
  fs::path resume_dir;
  if (!launch.resume_dir.empty()) {
    if (!launch.config_path.empty())
      return make_error(errc::invalid_config,
                        "--resume continues with the run's own config.toml: change settings "
                        "with key=value overrides (e.g. rl.steps=200), not --config");
    std::error_code ec;
    resume_dir = fs::absolute(launch.resume_dir).lexically_normal();
    if (resume_dir.has_filename() == false)
      resume_dir = resume_dir.parent_path();
    if (!fs::is_directory(resume_dir, ec))
      return make_error(errc::invalid_config,
                        "--resume " + launch.resume_dir + ": no such directory");
    auto cfg = config::run_config::load((resume_dir / "config.toml").string());
    if (!cfg)
      return make_error(errc::invalid_config,
                        "--resume " + launch.resume_dir
                          + ": not a readable kbrl run directory (its config.toml): "
                          + describe(cfg.error()));
    plan.run = std::move(*cfg);
    plan.resume = true;
  } else if (!launch.config_path.empty()) {
    auto cfg = config::run_config::load(launch.config_path);
    if (!cfg)
      return std::move(cfg.error());
    plan.run = std::move(*cfg);
  }
  for (auto& o : launch.overrides)
    if (auto err = plan.run.apply_override(o))
      return err;
  if (plan.resume) {
    // The directory named is the run, wherever it was moved to; its learner continues from its
    // newest checkpoint.
    for (auto o : {"run.dir=" + resume_dir.parent_path().string(),
                   "run.name=" + resume_dir.filename().string(), std::string("learner.resume=true")})
      if (auto err = plan.run.apply_override(o))
        return make_error(errc::invalid_config, "--resume " + launch.resume_dir + ": "
                                                  + describe(err));
  }
  if (auto ok = eval::validate_overrides(evaluation_engine_options(plan.run).rule_overrides); !ok)
    return ok.error();
  if (auto ok = train::learner_settings_from(plan.run, -1, ""); !ok)
    return ok.error();
  plan.run_dir = fs::absolute(fs::path(plan.run.get_string("run.dir")) / plan.run.get_string("run.name"))
                   .lexically_normal()
                   .string();
  const bool coordinator = plan.manifest.coordinator_node().name == plan.self.name;
  if (plan.run.get_bool("rl.enabled") && coordinator) {
    auto rl = rl_run_settings_from(plan.run, plan.run_dir, std::getenv("KERNELBENCH_ROOT"));
    if (!rl)
      return std::move(rl.error());
    plan.rl = std::move(*rl);
    if (!plan.resume && !plan.run.get_bool("run.overwrite")) {
      auto earlier = earlier_run_files(plan.run_dir);
      if (!earlier.empty())
        return make_error(errc::invalid_config,
                          plan.run_dir + " holds an earlier run (" + join(earlier)
                            + "): continue it with --resume " + plan.run_dir
                            + ", start another with run.name=NEW_NAME, or replace it with "
                              "run.overwrite=true");
    }
  } else if (plan.resume) {
    return make_error(errc::invalid_config,
                      "--resume " + launch.resume_dir
                        + (coordinator ? ": the run's config has rl.enabled = false, so there is "
                                         "no RL run to continue"
                                       : ": only the coordinator node ("
                                           + plan.manifest.coordinator_node().name
                                           + ") continues a run; start this node as usual"));
  }
  return plan;
}

} // namespace kbrl
