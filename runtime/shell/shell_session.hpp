#pragma once
// The commands of kbrl-shell, independent of the terminal: a session holds a connection to one
// node actor and turns a command line into text for a person or JSON for scripts.
//
//   nodes                    every node the coordinator has seen, up, down or stopped
//   actors [NODE]            actors of the cluster (or of one node) and their node's state
//   status ACTOR             role, node, state, mailbox, messages handled, restarts, last error,
//                            and the role's own details
//   watch ACTOR [S] [N]      status every S seconds (default 1), N times (default: until stopped)
//   config                   the run config the node runs with
//   VERB ACTOR [ARGS...]     a control verb an actor lists in its status (e.g. restart; the
//                            coordinator's pause, resume, timeline [N], trajectory PROBLEM)
//   help, quit

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace kbrl {

class shell_session {
public:
  /// `target` is the node actor the shell connected to; requests wait at most `timeout`.
  shell_session(caf::actor_system& sys, node_actor target,
                std::chrono::milliseconds timeout = std::chrono::seconds(15));

  /// Runs one command line. Output goes to `print` (watch prints several times). `json` selects
  /// machine-readable output. Returns false for "quit". Errors are printed, not thrown.
  /// `interrupted`, when set, ends a running watch.
  bool run(const std::string& line, bool json, const std::function<void(const std::string&)>& print,
           const std::atomic<bool>* interrupted = nullptr);

  /// True if the last command failed (for the exit code of `-c`).
  bool last_failed() const { return last_failed_; }

  /// The help text.
  static std::string help_text();

private:
  caf::expected<membership_view> fetch_view();
  caf::expected<actor_status> fetch_status(const std::string& actor);

  caf::actor_system& sys_;
  node_actor target_;
  std::chrono::milliseconds timeout_;
  bool last_failed_ = false;
};

/// Splits a command line at whitespace; "double quotes" group words.
std::vector<std::string> split_command_line(const std::string& line);

/// Renders rows as aligned columns under a header.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

/// Text and JSON renderings of the shell's answers (also used by tests).
std::string render_nodes(const membership_view& view, int64_t now_ms);
std::string render_nodes_json(const membership_view& view);
std::string render_actors(const membership_view& view, const std::string& node_filter);
std::string render_actors_json(const membership_view& view, const std::string& node_filter);
std::string render_status(const actor_status& st, int64_t now_ms);
std::string render_status_json(const actor_status& st);

} // namespace kbrl
