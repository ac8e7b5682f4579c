#pragma once
// Helpers for tests that run real kbrl-node / kbrl-shell processes on loopback: free ports,
// child processes with their output in files, bounded polling. Every wait has a deadline.

#include "test_support.hpp"

#include <simdjson.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace kbrl::test {

inline std::string build_dir() { return KBRL_BUILD_DIR; }
inline std::string source_dir() { return KBRL_SOURCE_DIR; }

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

/// A child process; stdout and stderr go to `log_path`. Killed (SIGKILL) on destruction if alive.
class child_process {
public:
  child_process() = default;
  child_process(std::vector<std::string> argv, std::string log_path) : log_(std::move(log_path)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
      std::vector<char*> args;
      for (auto& a : argv)
        args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("execv");
      ::_exit(127);
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  child_process(child_process&& other) noexcept { *this = std::move(other); }
  child_process& operator=(child_process&& other) noexcept {
    std::swap(pid_, other.pid_);
    std::swap(log_, other.log_);
    std::swap(status_, other.status_);
    return *this;
  }
  ~child_process() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(10));
    }
  }

  void signal(int sig) { ::kill(pid_, sig); }

  bool running() {
    if (pid_ <= 0 || status_ >= 0)
      return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      status_ = st;
      return false;
    }
    return true;
  }

  /// Waits for the exit; returns the exit code, 128+signal if killed, -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > deadline)
        return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (status_ < 0)
      return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

  std::string output() const { return read_file(log_); }
  pid_t pid() const { return pid_; }

private:
  pid_t pid_ = -1;
  std::string log_;
  int status_ = -1;
};

/// Runs a command to completion (bounded by `timeout_s` through coreutils timeout) and returns
/// its exit code and combined output.
struct command_result {
  int code = -1;
  std::string output;
};

inline command_result run_command(const std::vector<std::string>& argv, int timeout_s = 30) {
  std::string cmd = "timeout " + std::to_string(timeout_s);
  for (auto& a : argv) {
    std::string quoted = "'";
    for (char c : a)
      quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " " + quoted + "'";
  }
  cmd += " 2>&1";
  command_result res;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    res.output.append(buf, n);
  int st = ::pclose(p);
  res.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return res;
}

/// Polls `pred` every 100 ms until it holds or `timeout` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred())
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// One node of `kbrl-shell -c nodes --json`.
struct shell_node {
  std::string name, state, down_reason;
  uint64_t incarnation = 0;
  std::vector<std::string> actors;
};

/// Parses the JSON of the nodes command; empty on any error.
inline std::vector<shell_node> parse_nodes(const std::string& json) {
  std::vector<shell_node> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc))
    return {};
  simdjson::dom::array nodes;
  if (doc["nodes"].get(nodes))
    return {};
  for (auto n : nodes) {
    shell_node sn;
    std::string_view sv;
    if (!n["name"].get(sv))
      sn.name = std::string(sv);
    if (!n["state"].get(sv))
      sn.state = std::string(sv);
    if (!n["down_reason"].get(sv))
      sn.down_reason = std::string(sv);
    uint64_t inc = 0;
    if (!n["incarnation"].get(inc))
      sn.incarnation = inc;
    simdjson::dom::array actors;
    if (!n["actors"].get(actors))
      for (auto a : actors)
        if (!a.get(sv))
          sn.actors.emplace_back(sv);
    out.push_back(std::move(sn));
  }
  return out;
}

inline const shell_node* find_node(const std::vector<shell_node>& nodes, const std::string& name) {
  for (auto& n : nodes)
    if (n.name == name)
      return &n;
  return nullptr;
}

} // namespace kbrl::test
