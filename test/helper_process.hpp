#pragma once
// A helper program of the tests (the fake OpenAI, embedding and scripted servers under
// test/data) as a child process: it announces itself on its first stdout line (JSON with its
// ports) and exits when its stdin closes, so a test that dies takes it along (and the kernel's
// parent-death signal covers a crash).

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kbrl::test {

class helper_process {
public:
  /// Starts `args` (args[0] is the program's path) and reads its first stdout line, waiting at
  /// most 10 s for it.
  explicit helper_process(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    int in[2], out[2];
    BOOST_REQUIRE(::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    char c;
    pollfd p{out[0], POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(out[0], &c, 1) == 1 && c != '\n')
      first_line_ += c;
    ::close(out[0]);
  }

  helper_process(const helper_process&) = delete;
  helper_process& operator=(const helper_process&) = delete;

  /// Closes its stdin and waits up to 2 s for it to exit, then kills it.
  ~helper_process() {
    ::close(stdin_);
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  /// What it printed first (without the newline); empty if it printed nothing within 10 s.
  const std::string& first_line() const { return first_line_; }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string first_line_;
};

} // namespace kbrl::test
