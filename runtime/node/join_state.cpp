#include "runtime/node/join_state.hpp"

#include "runtime/io/backoff.hpp"

namespace kbrl {

join_state::retry join_state::failed(const std::string& why) {
  ++attempts_;
  retry r;
  r.log = attempts_ == 1 || why != last_error_ || attempts_ % 10 == 0;
  r.delay = io::backoff(std::chrono::seconds(1), std::chrono::seconds(5),
                        static_cast<int>(attempts_));
  last_error_ = why;
  return r;
}

uint32_t join_state::succeeded() {
  auto before = attempts_;
  joined_ = true;
  ++joins_;
  attempts_ = 0;
  last_error_.clear();
  return before;
}

bool join_state::stop() {
  if (stopping_)
    return false;
  stopping_ = true;
  return true;
}

bool join_state::schedule_join() {
  if (join_pending_ || stopping_)
    return false;
  join_pending_ = true;
  return true;
}

bool join_state::schedule_heartbeat() {
  if (heartbeat_pending_ || stopping_)
    return false;
  heartbeat_pending_ = true;
  return true;
}

std::string join_state::state_text(bool is_coordinator) const {
  if (is_coordinator)
    return "coordinating";
  if (joined_)
    return "joined";
  return "joining (attempt " + std::to_string(attempts_ + 1)
         + (last_error_.empty() ? ")" : ": " + last_error_ + ")");
}

} // namespace kbrl
