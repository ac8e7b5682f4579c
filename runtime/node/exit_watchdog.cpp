#include "runtime/node/exit_watchdog.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

namespace kbrl {

exit_watchdog::~exit_watchdog() {
  disarm();
}

void exit_watchdog::disarm() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    disarmed_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void exit_watchdog::arm(std::chrono::milliseconds grace, int exit_code, std::string what) {
  disarm();
  disarmed_ = false;
  thread_ = std::thread([this, grace, exit_code, what = std::move(what)] {
    std::unique_lock<std::mutex> guard{mtx_};
    if (cv_.wait_for(guard, grace, [this] { return disarmed_; }))
      return;
    spdlog::warn("{} did not finish within {:.0f} s; exiting with code {} anyway (everything "
                 "was already stopped and written)",
                 what, std::chrono::duration<double>(grace).count(), exit_code);
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(exit_code);
  });
}

} // namespace kbrl
