#pragma once
// A bound on the last step of a process's shutdown.
//
// When kbrl-node has stopped cleanly, every actor has terminated and written what it had to
// write; what is left is the destructor of CAF's actor system, which also waits for every
// detached actor (learner, samplers, evaluators) to be destroyed. CAF 0.17 keeps a message that
// is still in the middleman at shutdown alive forever, and with it a detached actor it names
// (an answer to, or a push towards, another node), so that wait can last forever. Armed once
// nothing else is left to do, the watchdog ends the process with the intended exit code if the
// destructor has not returned after the grace period, and says so in the log.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace kbrl {

class exit_watchdog {
public:
  exit_watchdog() = default;
  exit_watchdog(const exit_watchdog&) = delete;
  exit_watchdog& operator=(const exit_watchdog&) = delete;

  /// Disarms and waits for the watchdog's thread.
  ~exit_watchdog();

  /// From now on, the process ends with `exit_code` unless this watchdog is destroyed within
  /// `grace`; `what` names what was being waited for in the warning. Arming twice re-arms.
  void arm(std::chrono::milliseconds grace, int exit_code, std::string what);

private:
  void disarm();

  std::mutex mtx_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

} // namespace kbrl
