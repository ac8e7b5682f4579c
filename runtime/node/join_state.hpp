#pragma once
// Where a node stands with its coordinator (actors/node.hpp draws the states): joined or not,
// which delayed join or heartbeat is pending, failed attempts and the last reason, stopping.
// The node actor asks this class what to do and sends; tests drive it directly (test
// node_join_state).

#include <chrono>
#include <cstdint>
#include <string>

namespace kbrl {

class join_state {
public:
  /// What to do after a failed attempt: say so (the first failure, a new reason, every 10th
  /// attempt: enough to see what is wrong without flooding the log while a coordinator is
  /// still starting) and try again after `delay` (1 s doubling to 5 s).
  struct retry {
    bool log = false;
    std::chrono::milliseconds delay{0};
  };
  retry failed(const std::string& why);

  /// Registered with the membership; answers the failed attempts before it (for the log).
  uint32_t succeeded();
  /// The membership was lost, or no longer lists this node: join again.
  void lost() { joined_ = false; }
  /// The node stops; false when it already was stopping.
  bool stop();

  /// Whether a join should be scheduled now (none pending, not stopping); marks it pending.
  bool schedule_join();
  void join_fired() { join_pending_ = false; }
  /// The same for the next heartbeat.
  bool schedule_heartbeat();
  void heartbeat_fired() { heartbeat_pending_ = false; }
  /// Whether an attempt to join makes sense now.
  bool may_join() const { return !joined_ && !stopping_; }

  bool joined() const { return joined_; }
  bool stopping() const { return stopping_; }
  uint32_t attempts() const { return attempts_; }
  uint64_t joins() const { return joins_; }
  const std::string& last_error() const { return last_error_; }

  /// The node's state word: "coordinating", "joined" or "joining (attempt 3: why)".
  std::string state_text(bool is_coordinator) const;

private:
  bool joined_ = false;
  bool join_pending_ = false;
  bool heartbeat_pending_ = false;
  bool stopping_ = false;
  uint32_t attempts_ = 0;  ///< failed attempts since the last successful join
  uint64_t joins_ = 0;
  std::string last_error_;
};

} // namespace kbrl
