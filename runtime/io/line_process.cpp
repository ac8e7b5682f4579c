#include "runtime/io/line_process.hpp"

#include "messages/errors.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kbrl::io {

namespace {

caf::error failure(const std::vector<std::string>& argv, const std::string& what) {
  return make_error(errc::io_failure, argv.front() + " " + (argv.size() > 1 ? argv[1] : "")
                                        + ": " + what);
}

} // namespace

line_process::line_process(std::vector<std::string> argv) : argv_(std::move(argv)) {
}

line_process::~line_process() {
  stop();
}

caf::expected<void> line_process::start() {
  // A helper that dies must not kill us with SIGPIPE when we write its next request.
  std::signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0)
    return failure(argv_, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return failure(argv_, std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (auto& a : argv_)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return failure(argv_, std::string("cannot start: ") + std::strerror(rc));
  }
  pid_ = pid;
  to_child_ = in[1];
  from_child_ = out[0];
  pending_.clear();
  return {};
}

void line_process::stop() {
  if (to_child_ >= 0)
    ::close(to_child_);
  if (from_child_ >= 0)
    ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    // Closing stdin ends a well-behaved helper; one that lingers is killed.
    for (int i = 0; i < 50; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      ::usleep(2000);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

caf::expected<std::string> line_process::exchange(const std::string& request,
                                                  std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;
    stop();
    if (auto ok = start(); !ok)
      return ok.error();
  }
  std::string line = request + "\n";
  for (size_t done = 0; done < line.size();) {
    auto n = ::write(to_child_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      stop();
      return failure(argv_, "it stopped reading (it exited?)");
    }
    done += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = pending_.find('\n'); nl != std::string::npos) {
      auto answer = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return answer;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      stop();
      return failure(argv_, "no answer within " + std::to_string(timeout.count()) + " ms");
    }
    pollfd pfd{from_child_, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      continue;
    char buf[65536];
    auto n = ::read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      stop();
      return failure(argv_, "it exited without answering (its errors are above)");
    }
    pending_.append(buf, static_cast<size_t>(n));
  }
}

} // namespace kbrl::io
