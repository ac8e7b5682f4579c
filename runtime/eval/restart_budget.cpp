#include "runtime/eval/restart_budget.hpp"

namespace kbrl::eval {

bool restart_budget::try_restart(int64_t now_ms) {
  while (!times_ms_.empty() && now_ms - times_ms_.front() > window_.count())
    times_ms_.pop_front();
  if (times_ms_.size() >= limit_)
    return false;
  times_ms_.push_back(now_ms);
  return true;
}

} // namespace kbrl::eval
