#include "runtime/node/node_runtime.hpp"

#include "actors/node.hpp"
#include "messages/type_ids.hpp"
#include "runtime/device/devices.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/io/text.hpp"
#include "runtime/node/exit_watchdog.hpp"
#include "runtime/node/logging.hpp"
#include "runtime/node/rl_run_dir.hpp"
#include "runtime/node/rl_summary.hpp"
#include "runtime/node/role_plan.hpp"
#include "runtime/train/learner_settings.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace kbrl {

namespace {

namespace fs = std::filesystem;

std::atomic<int> received_signal{0};

extern "C" void on_stop_signal(int sig) {
  received_signal = sig;
}

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

caf::expected<void> write_file_atomically(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out)
      return make_error(errc::io_failure, "cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return make_error(errc::io_failure, "cannot rename " + tmp + " to " + path + ": "
                                          + ec.message());
  return caf::unit;
}

caf::expected<void> prepare_run_dir(const node_plan& plan) {
  std::error_code ec;
  fs::create_directories(fs::path(plan.run_dir) / "logs", ec);
  if (ec)
    return make_error(errc::io_failure, "cannot create run directory " + plan.run_dir + ": "
                                          + ec.message());
  if (auto res = write_file_atomically(plan.run_dir + "/config.toml", plan.run.render()); !res)
    return res;
  return write_file_atomically(plan.run_dir + "/manifest.toml",
                               config::render_manifest(plan.manifest));
}

std::chrono::milliseconds seconds_setting(const config::run_config& run, const std::string& key) {
  return std::chrono::milliseconds(static_cast<int64_t>(run.get_real(key) * 1000));
}

node_settings make_node_settings(const node_plan& plan, caf::actor_system& sys,
                                 std::shared_ptr<const rl_run_inputs> rl) {
  auto& m = plan.manifest;
  auto& coord = m.coordinator_node();
  node_settings s;
  s.info.name = plan.self.name;
  s.info.host = plan.self.host;
  s.info.port = plan.self.port;
  s.info.roles = expand_roles(plan.self.roles);
  s.info.gpus.assign(plan.self.gpus.begin(), plan.self.gpus.end());
  s.info.pid = static_cast<int32_t>(::getpid());
  s.info.kbrl_version = KBRL_VERSION;
  s.info.torch_version = torch_version();
  s.info.devices = describe_devices(plan.self.gpus);
  s.cluster = m.name;
  s.coordinator = coord.name;
  s.coordinator_host = coord.host;
  s.coordinator_port = coord.port;
  s.is_coordinator = coord.name == plan.self.name;
  s.heartbeat_interval = std::chrono::milliseconds(
    static_cast<int64_t>(m.heartbeat_interval_s * 1000));
  s.node_timeout = std::chrono::milliseconds(static_cast<int64_t>(m.node_timeout_s * 1000));
  s.status_interval = std::chrono::milliseconds(
    static_cast<int64_t>(plan.run.get_real("node.status_interval_s") * 1000));
  s.run_config_toml = plan.run.render();
  s.run_dir = plan.run_dir;
  s.connector = m.security.tls() ? sys.openssl_manager().actor_handle()
                                 : sys.middleman().actor_handle();
  s.eval_engine = evaluation_engine_options(plan.run);
  s.eval_supervision = evaluation_supervision(plan.run);
  s.sampler = sampling::sampler_settings_from(plan.run, -1, "");
  s.retrieval = retrieval::retrieval_settings_from(plan.run);
  s.rl = std::move(rl);
  if (auto learner = train::learner_settings_from(plan.run, -1, plan.run_dir)) {
    apply_rl_to_learner(plan.run, *learner);
    s.learner = std::make_shared<const train::learner_settings>(std::move(*learner));
  }
  return s;
}

caf::expected<uint16_t> publish_node(const node_plan& plan, const node_actor& handle) {
  auto& sec = plan.manifest.security;
  // reuse = SO_REUSEADDR: a restarted node can listen again while connections of its previous
  // life linger in TIME_WAIT; a second live listener on the same port is still refused.
  if (sec.tls())
    return caf::openssl::publish(handle, plan.self.port, nullptr, true);
  const char* bind = sec.allow_insecure ? nullptr : "127.0.0.1";
  return handle.home_system().middleman().publish(handle, plan.self.port, bind, true);
}

/// Blocks until a stop signal, the stop time, or the node actor's end; returns why it ended.
caf::error wait_for_stop(caf::actor_system& sys, const node_actor& handle, double stop_after_s) {
  caf::scoped_actor self{sys};
  self->monitor(handle);
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::milliseconds(static_cast<int64_t>(stop_after_s * 1000));
  bool sent_stop = false;
  bool done = false;
  caf::error reason;
  while (!done) {
    self->receive([&](caf::down_msg& msg) {
                    done = true;
                    reason = std::move(msg.reason);
                  },
                  caf::after(std::chrono::milliseconds(100)) >> [&] {
                    if (sent_stop)
                      return;
                    if (int sig = received_signal.load()) {
                      spdlog::info("received {}, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
                    } else if (stop_after_s > 0 && std::chrono::steady_clock::now() >= deadline) {
                      spdlog::info("node.stop_after_s = {} reached, stopping", stop_after_s);
                    } else {
                      return;
                    }
                    sent_stop = true;
                    self->send(handle, stop_atom::value);
                  });
  }
  return reason;
}

} // namespace

std::string default_worker_script() {
  // Installed or build-tree layouts first (tools/ next to the executable's parent), then the
  // source tree this binary was built from.
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (auto dir : {exe.parent_path().parent_path() / "tools",
                     exe.parent_path().parent_path() / "share/kbrl/tools"})
      if (fs::exists(dir / "kbrl_eval_worker.py"))
        return (dir / "kbrl_eval_worker.py").string();
  return std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
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
  o.reference_mode = run.get_string("eval.reference_mode");
  o.timing_input_sets = static_cast<int>(run.get_int("eval.timing_input_sets"));
  o.correctness = run.get_string("eval.correctness");
  o.strict_rtol = run.get_real("eval.strict_rtol");
  o.strict_floor = run.get_real("eval.strict_floor");
  o.strict_norm_tol = run.get_real("eval.strict_norm_tol");
  o.min_time_coverage = run.get_real("eval.min_time_coverage");
  o.profile_coverage = run.get_bool("eval.profile_coverage");
  o.memory_limit_gb = run.get_real("eval.memory_limit_gb");
  auto cache_dir = run.get_string("eval.cache_dir");
  // Builds are shared only when eval.cache_dir is named, as in kbrl-eval
  // (runtime/evalcli/evaluator_setup.cpp); otherwise a node builds in its run directory
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
  if (auto ok = check_gpus(plan.self.gpus); !ok)
    return ok.error();
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

int run_node(const node_plan& plan_in) {
  auto plan = plan_in;
  if (auto ok = prepare_run_dir(plan); !ok) {
    std::fprintf(stderr, "kbrl-node: %s\n", describe(ok.error()).c_str());
    return 1;
  }
  log_options lo;
  lo.logger_name = plan.self.name;
  lo.file = plan.run_dir + "/logs/" + plan.self.name + ".log";
  lo.level = plan.run.get_string("log.level");
  lo.console = plan.run.get_bool("log.console");
  lo.flush_s = plan.run.get_real("log.flush_s");
  if (auto ok = setup_logging(lo); !ok) {
    std::fprintf(stderr, "kbrl-node: %s\n", describe(ok.error()).c_str());
    return 1;
  }

  // The coordinator node of an RL run: the run directory made consistent, the problems and
  // the policy's tokenizer loaded, before anything else starts.
  std::shared_ptr<const rl_run_inputs> rl;
  uint64_t first_step = 0;
  auto started = std::chrono::steady_clock::now();
  if (plan.rl.enabled) {
    auto cannot_start = [&](const std::string& what) {
      spdlog::error("the RL run cannot start: {}", what);
      spdlog::default_logger()->flush();
      return 1;
    };
    if (plan.resume) {
      auto point = prepare_resume(plan.run_dir, plan.rl.coordinator.problems_per_step);
      if (!point)
        return cannot_start("resuming " + plan.run_dir + ": " + describe(point.error()));
      if (!point->adjusted.empty())
        spdlog::warn("{}", point->adjusted);
      spdlog::info("resuming the run in {} after step {} (policy v{}); {} metrics line(s) and {} "
                   "trace line(s) of later steps removed, those steps run again",
                   plan.run_dir, point->step, point->policy_version,
                   point->metrics_lines_removed, point->trace_lines_removed);
      first_step = point->step;
    } else if (plan.run.get_bool("run.overwrite")) {
      auto earlier = earlier_run_files(plan.run_dir);
      if (!earlier.empty()) {
        spdlog::warn("run.overwrite: removing the earlier run in {} ({})", plan.run_dir,
                     join(earlier));
        if (auto ok = remove_earlier_run(plan.run_dir); !ok)
          return cannot_start(describe(ok.error()));
      }
    }
    std::vector<std::string> levels;
    for (auto l : plan.rl.problems.levels)
      levels.push_back(std::to_string(l));
    spdlog::info("loading the problems of level(s) {} from {}{} and the tokenizer of {}",
                 join(levels), plan.rl.problems.root,
                 plan.run.get_string("problems.numbers").empty()
                   ? ""
                   : " (numbers " + plan.run.get_string("problems.numbers") + ")",
                 plan.rl.policy_model);
    auto inputs = load_rl_inputs(plan.rl);
    if (!inputs)
      return cannot_start(describe(inputs.error()));
    spdlog::info("{} problems: {} for training, {} held out; prompts in the {} chat format",
                 inputs->train.size() + inputs->eval.size(), inputs->train.size(),
                 inputs->eval.size(), inputs->chat->name());
    if (!inputs->eval.empty() && plan.rl.coordinator.eval_every == 0)
      spdlog::warn("{} problem(s) are held out of training (rl.eval_fraction) but never "
                   "evaluated (rl.eval_every = 0)",
                   inputs->eval.size());
    rl = std::make_shared<const rl_run_inputs>(std::move(*inputs));
  }

  auto& sec = plan.manifest.security;
  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.load<caf::io::middleman>();
  if (sec.tls()) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = plan.self.certificate;
    cfg.openssl_key = plan.self.key;
    cfg.openssl_cafile = sec.ca_file;
  }
  // Declared before the actor system: it outlives (and so bounds) the system's destructor.
  exit_watchdog watchdog;
  caf::actor_system sys{cfg};
  // Every actor ends first (checkpoints written, worker processes stopped); only the actor
  // system's own teardown after that is bounded (exit_watchdog.hpp says why).
  auto leave = [&](int code) {
    sys.await_all_actors_done();
    watchdog.arm(std::chrono::seconds(20), code, "the actor system's shutdown");
    return code;
  };

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  auto settings = make_node_settings(plan, sys, rl);
  auto handle = sys.spawn(node, settings);
  auto port = publish_node(plan, handle);
  if (!port) {
    spdlog::error("cannot listen on port {} (is another process using it?): {}", plan.self.port,
                  sys.render(port.error()));
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
    return leave(1);
  }
  spdlog::info("node {} of cluster {} listening on {}:{} ({}); roles {}; {}", plan.self.name,
               plan.manifest.name, sec.tls() || sec.allow_insecure ? "0.0.0.0" : "127.0.0.1",
               *port, sec.tls() ? "TLS, peers must present a certificate signed by the CA"
                                : "no TLS",
               join(expand_roles(plan.self.roles)), settings.info.devices);
  {
    caf::scoped_actor self{sys};
    self->request(handle, std::chrono::seconds(10), status_atom::value, node_atom::value)
      .receive(
        [&](const node_status& st) {
          std::vector<std::string> names;
          for (auto& a : st.actors)
            names.push_back(a.name);
          spdlog::info("actors: {}", join(names));
        },
        [&](caf::error& err) { spdlog::warn("cannot list actors: {}", sys.render(err)); });
  }
  auto reason = wait_for_stop(sys, handle, plan.run.get_real("node.stop_after_s"));
  auto summarize = [&] {
    if (!rl)
      return;
    auto text = rl_run_summary(plan.run_dir, plan.rl.coordinator.steps, first_step,
                               std::chrono::duration<double>(std::chrono::steady_clock::now()
                                                             - started)
                                 .count());
    spdlog::info("{}", text);
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  };
  if (reason && reason != caf::exit_reason::normal && reason != caf::exit_reason::user_shutdown) {
    spdlog::error("node {} failed: {}", plan.self.name, sys.render(reason));
    summarize();
    spdlog::default_logger()->flush();
    return leave(1);
  }
  summarize();
  spdlog::info("node {} stopped cleanly", plan.self.name);
  spdlog::default_logger()->flush();
  return leave(0);
}

} // namespace kbrl
