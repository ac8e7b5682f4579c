#include "tools/node/run_node.hpp"

#include "actors/node.hpp"
#include "messages/type_ids.hpp"
#include "runtime/device/devices.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/text.hpp"
#include "runtime/node/exit_watchdog.hpp"
#include "runtime/node/logging.hpp"
#include "runtime/node/rl_run_dir.hpp"
#include "runtime/node/rl_summary.hpp"
#include "runtime/node/role_plan.hpp"
#include "runtime/retrieval/model_embedder.hpp"
#include "runtime/train/learner_settings.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace kbrl {

namespace {

namespace fs = std::filesystem;

std::atomic<int> received_signal{0};

extern "C" void on_stop_signal(int sig) {
  received_signal = sig;
}

caf::expected<void> prepare_run_dir(const node_plan& plan) {
  std::error_code ec;
  fs::create_directories(fs::path(plan.run_dir) / "logs", ec);
  if (ec)
    return make_error(errc::io_failure, "cannot create run directory " + plan.run_dir + ": "
                                          + ec.message());
  if (auto res = io::write_file_atomically(plan.run_dir + "/config.toml", {plan.run.render()});
      !res)
    return res;
  return io::write_file_atomically(plan.run_dir + "/manifest.toml",
                                   {config::render_manifest(plan.manifest)});
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

/// Whether this node's port can be listened on, asked before anything starts: a second
/// single-node run beside a running one must fail before it touches a run directory or starts
/// actors. SO_REUSEADDR as publish_node: a port in TIME_WAIT is free, a live listener is not.
caf::expected<void> check_port_free(const node_plan& plan) {
  const auto& sec = plan.manifest.security;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return {}; // cannot tell: publishing will say
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(plan.self.port);
  addr.sin_addr.s_addr = htonl(sec.tls() || sec.allow_insecure ? INADDR_ANY : INADDR_LOOPBACK);
  const bool in_use = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
                      && errno == EADDRINUSE;
  ::close(fd);
  if (in_use)
    return make_error(errc::invalid_config,
                      "port " + std::to_string(plan.self.port) + " is in use (another kbrl-node, "
                        "perhaps a run still going?): stop it, or give this node another port "
                        "(--port, or the manifest's)");
  return {};
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

int run_node(const node_plan& plan_in) {
  retrieval::install_model_embedder(); // retrieval.embedder = "model:PATH"
  if (auto ok = check_port_free(plan_in); !ok) {
    std::fprintf(stderr, "kbrl-node: %s\n", describe(ok.error()).c_str());
    return 2;
  }
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
    // Every actor has ended: what is left takes well under a second when nothing sticks.
    watchdog.arm(std::chrono::seconds(5), code, "the actor system's shutdown");
    return code;
  };

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  auto settings = make_node_settings(plan, sys, rl);
  node_actor handle = sys.spawn(node, settings); // published with the public interface only
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
