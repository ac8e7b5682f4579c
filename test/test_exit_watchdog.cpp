// The bound on a node's last shutdown step (runtime/node/exit_watchdog.hpp), in child processes:
// an armed watchdog ends a process that is stuck with the intended exit code; one destroyed in
// time does nothing.

#include "runtime/node/exit_watchdog.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>


using namespace std::chrono_literals;

namespace {

/// Runs `body` in a child process and returns its exit code (128 + signal if killed), or -1
/// if it is still running after 60 s (then it is killed).
template <class F>
int exit_code_of_child(F body) {
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    std::_Exit(99);
  }
  int status = 0;
  for (int i = 0; i < 600; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(100ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

} // namespace

BOOST_AUTO_TEST_SUITE(exit_watchdog)

BOOST_AUTO_TEST_CASE(an_armed_watchdog_ends_a_stuck_process_with_the_intended_code) {
  const int code = exit_code_of_child([] {
    kbrl::exit_watchdog watchdog;
    watchdog.arm(200ms, 7, "the test's stuck step");
    std::this_thread::sleep_for(120s); // stuck, as the actor system's destructor can be
  });
  BOOST_CHECK_EQUAL(code, 7);
}

BOOST_AUTO_TEST_CASE(a_watchdog_destroyed_in_time_does_nothing) {
  const int code = exit_code_of_child([] {
    {
      kbrl::exit_watchdog watchdog;
      watchdog.arm(300ms, 7, "a step that finishes");
    }
    std::this_thread::sleep_for(900ms); // past the grace period: nothing may fire now
    std::_Exit(3);
  });
  BOOST_CHECK_EQUAL(code, 3);
}

BOOST_AUTO_TEST_CASE(re_arming_replaces_the_first_deadline) {
  const int code = exit_code_of_child([] {
    kbrl::exit_watchdog watchdog;
    watchdog.arm(200ms, 7, "first");
    watchdog.arm(60s, 8, "second");
    std::this_thread::sleep_for(900ms); // the first deadline has passed
    std::_Exit(4);
  });
  BOOST_CHECK_EQUAL(code, 4);
}

BOOST_AUTO_TEST_SUITE_END()
