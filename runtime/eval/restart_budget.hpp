#pragma once
// How often an evaluator slot may be restarted (eval.restart_limit restarts within
// eval.restart_window_s): a worker that keeps crashing, or a GPU that keeps failing, is not
// restarted forever; its slot is degraded, and after eval.degraded_backoff_s the budget starts
// over. Pure: the caller passes the time, so tests need no clock.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace kbrl::eval {

class restart_budget {
public:
  restart_budget() = default;
  restart_budget(uint32_t limit, std::chrono::milliseconds window)
    : limit_(limit), window_(window) {}

  /// Records a restart at `now_ms` and returns true if fewer than `limit` restarts happened in
  /// the window ending now; otherwise records nothing and returns false (the budget is spent).
  bool try_restart(int64_t now_ms);

  /// Restarts recorded in the window ending at the last try_restart().
  size_t in_window() const { return times_ms_.size(); }

  /// Forgets every restart: the back-off is over.
  void reset() { times_ms_.clear(); }

private:
  uint32_t limit_ = 5;
  std::chrono::milliseconds window_{60000};
  std::deque<int64_t> times_ms_;
};

} // namespace kbrl::eval
