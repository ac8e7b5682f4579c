// kbrl-shell: look inside a running kbrl cluster.
//
//   kbrl-shell 127.0.0.1:4242                      interactive, with line editing and history
//   kbrl-shell 127.0.0.1:4242 -c "actors" --json   one command, machine-readable, for scripts
//   kbrl-shell head:4242 --manifest cluster.toml   TLS: the manifest names CA and shell certificate

#include "messages/type_ids.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/config/manifest.hpp"
#include "runtime/shell/shell_session.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <editline/readline.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted = true;
}

std::string history_path() {
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.kbrl_shell_history";
}

int interactive(kbrl::shell_session& session, const std::string& endpoint) {
  auto history = history_path();
  using_history();
  read_history(history.c_str());
  std::printf("connected to %s; type help for commands, quit or Ctrl-D to leave\n",
              endpoint.c_str());
  auto prompt = "kbrl " + endpoint + "> ";
  for (;;) {
    interrupted = false;
    char* raw = readline(prompt.c_str());
    if (raw == nullptr) {
      std::printf("\n");
      break;
    }
    std::string line{raw};
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    add_history(line.c_str());
    bool go_on = session.run(
      line, false, [](const std::string& s) { std::fputs(s.c_str(), stdout); std::fflush(stdout); },
      &interrupted);
    if (!go_on)
      break;
  }
  write_history(history.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-shell: inspect a running kbrl cluster through any of its nodes"};
  std::string endpoint, command, manifest_path, ca, cert, key;
  bool json = false;
  double timeout_s = 15;
  app.add_option("endpoint", endpoint, "HOST:PORT of any kbrl-node")->required();
  app.add_option("-c,--command", command, "Run one command and exit (exit code 1 if it failed)");
  app.add_flag("--json", json, "Machine-readable output (with -c)");
  app.add_option("--manifest", manifest_path,
                 "Cluster manifest: with TLS on, its CA and [shell] certificate are used")
    ->check(CLI::ExistingFile);
  app.add_option("--ca", ca, "CA certificate (PEM), overriding the manifest's");
  app.add_option("--cert", cert, "Shell certificate (PEM), overriding the manifest's");
  app.add_option("--key", key, "Shell private key (PEM), overriding the manifest's");
  app.add_option("--timeout", timeout_s, "Seconds to wait for an answer")->check(CLI::PositiveNumber);
  kbrl::config::add_version_flag(app, "kbrl-shell");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  auto colon = endpoint.rfind(':');
  int port = 0;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(endpoint.substr(colon + 1));
    } catch (const std::exception&) {
      port = 0;
    }
  }
  if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535) {
    std::fprintf(stderr, "kbrl-shell: '%s': expected HOST:PORT, e.g. 127.0.0.1:4242\n",
                 endpoint.c_str());
    return 2;
  }
  auto host = endpoint.substr(0, colon);

  if (!manifest_path.empty()) {
    auto m = kbrl::config::load_manifest(manifest_path);
    if (!m) {
      std::fprintf(stderr, "kbrl-shell: %s\n", kbrl::describe(m.error()).c_str());
      return 2;
    }
    if (ca.empty())
      ca = m->security.ca_file;
    if (cert.empty())
      cert = m->security.shell_certificate;
    if (key.empty())
      key = m->security.shell_key;
  }
  bool tls = !ca.empty();
  if (tls && (cert.empty() || key.empty())) {
    std::fprintf(stderr, "kbrl-shell: TLS needs a shell certificate and key ([shell] in the "
                         "manifest, or --cert and --key)\n");
    return 2;
  }

  caf::actor_system_config cfg;
  kbrl::register_message_types(cfg);
  cfg.load<caf::io::middleman>();
  if (tls) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_cafile = ca;
    cfg.openssl_certificate = cert;
    cfg.openssl_key = key;
  }
  caf::actor_system sys{cfg};
  auto target = tls ? caf::openssl::remote_actor<kbrl::node_actor>(sys, host,
                                                                    static_cast<uint16_t>(port))
                    : sys.middleman().remote_actor<kbrl::node_actor>(
                      host, static_cast<uint16_t>(port));
  if (!target) {
    std::fprintf(stderr, "kbrl-shell: cannot connect to %s: %s%s\n", endpoint.c_str(),
                 sys.render(target.error()).c_str(),
                 tls ? "" : " (is a kbrl-node running there? with TLS, pass --manifest)");
    return 1;
  }
  kbrl::shell_session session{sys, *target,
                              std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))};
  std::signal(SIGINT, on_interrupt);
  if (!command.empty()) {
    session.run(command, json, [](const std::string& s) { std::fputs(s.c_str(), stdout); },
                &interrupted);
    std::fflush(stdout);
    return session.last_failed() ? 1 : 0;
  }
  return interactive(session, endpoint);
}
