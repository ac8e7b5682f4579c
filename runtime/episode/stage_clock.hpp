#pragma once
// How long each stage of the RL loop was busy: the clock behind the coordinator's per-step
// timeline.
//
// Whoever starts a piece of work of a stage (an episode sending a generation request or a
// candidate, the coordinator sending a batch to the learner) calls begin(stage, round) and, when
// the answer is in, end(stage, round); `round` is the coordinator step the work belongs to. From
// these the clock integrates, per stage and per (stage, round):
//   summed   the sum of the durations of the pieces of work (8 requests of 2 s: 16 s)
//   busy     the time during which at least one piece was under way (8 parallel requests of 2 s:
//            2 s); busy over a window is busy(end) - busy(start), so the coordinator samples
//            busy_seconds() at each step boundary and needs no list of intervals.
// Thread-safe: episodes of any thread report to one clock. The time source is injected so tests
// drive it by hand.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace kbrl::episode {

enum class stage : uint8_t { sampling, evaluating, training, publishing };
constexpr size_t stage_count = 4;
const char* to_string(stage s);

class stage_clock {
public:
  /// Seconds on a monotonic clock.
  using time_source = std::function<double()>;

  /// A steady_clock-based source.
  static double steady_seconds();

  explicit stage_clock(time_source now = steady_seconds);

  /// A piece of work of `s` for `round` starts now.
  void begin(stage s, uint64_t round);
  /// One piece of work of `s` for `round` ended now (an end without a begin is ignored).
  void end(stage s, uint64_t round);

  /// Seconds since the clock was made during which some work of `s` was under way.
  double busy_seconds(stage s) const;

  struct usage {
    double summed_s = 0; ///< sum of the durations of the round's pieces of work
    double busy_s = 0;   ///< time during which at least one of them ran
    uint64_t pieces = 0; ///< pieces begun
  };
  /// What `round` used of `s` so far (work under way counted up to now).
  usage round_usage(stage s, uint64_t round) const;

  /// Drops what is kept about `round` (after its timeline was taken).
  void forget(uint64_t round);

  /// The time source's now.
  double now() const { return now_(); }

private:
  /// Integrates a count of pieces under way: summed += count * dt, busy += (count > 0) * dt.
  struct tracker {
    uint64_t active = 0;
    uint64_t pieces = 0;
    double last = 0;
    double summed = 0;
    double busy = 0;
    void advance(double t);
    tracker at(double t) const;
  };

  time_source now_;
  mutable std::mutex mutex_;
  tracker stages_[stage_count];
  std::map<std::pair<uint64_t, int>, tracker> rounds_; ///< (round, stage) -> tracker
};

} // namespace kbrl::episode
