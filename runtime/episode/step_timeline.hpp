#pragma once
// The per-stage timeline of one training step, as the coordinator records it when the step is
// committed (its policy published), and how it is logged and shown.
//
// A step's wall time is the time between the commit of the previous step (or the start of the
// run) and its own: in synchronous mode that is sampling + evaluating + training + publishing,
// in asynchronous mode later steps' episodes run while a step trains, so it approaches the
// slowest stage. Stage times of the step are those of its own work (summed over requests, and
// the wall time during which any of it ran); busy fractions are those of the whole stage (any
// step's work) within the step's wall time, so 1 - busy is the stage's idle fraction.

#include "messages/data.hpp"
#include "runtime/episode/rewards.hpp"
#include "runtime/episode/stage_clock.hpp"

#include <cstdint>
#include <algorithm>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace kbrl::episode {

struct step_timeline {
  uint64_t step = 0;
  double wall_s = 0;              ///< previous commit (or run start) to this commit
  double sampling_s = 0;          ///< this step's generation requests, summed
  double sampling_wall_s = 0;     ///< time during which any of them was under way
  double evaluating_s = 0;        ///< this step's evaluation requests, summed
  double evaluating_wall_s = 0;
  double training_s = 0;          ///< the learner's train request, sent to answered
  double publishing_s = 0;        ///< the new policy sent to every sampler, to all applied
  double sampler_busy = 0;        ///< fraction of wall_s any sampling ran (any step's)
  double evaluator_busy = 0;      ///< fraction of wall_s any evaluation ran
  double learner_busy = 0;        ///< fraction of wall_s the learner trained
  uint64_t steps_in_flight = 0;   ///< steps whose episodes were under way at the commit (async)
  uint64_t stale_dropped = 0;     ///< trajectories not sent to the learner: too stale
};

/// The stage that took longest for the step: sampling wall, evaluating wall, or training +
/// publishing (what one learner does per step). 0 for an empty timeline.
double slowest_stage_s(const step_timeline& t);

/// What the coordinator sends the metrics sink when it commits a step: the step's `summary`,
/// its timeline and the commit mark that has the sink write the step's line (metrics_jsonl.hpp;
/// `steps`: the run's length, 0 without an end) and, with `reward`, the reward terms of its
/// `trajectories` (reward_terms).
std::vector<metric_record> commit_records(
  std::vector<metric_record> summary, const step_timeline& t, uint64_t steps, int64_t unix_ms,
  const std::string& source, const std::vector<trajectory>& trajectories = {},
  const std::function<reward_breakdown(const turn&)>& reward = {});

/// The mean over the turns of `trajectories` of each reward term as it counts in the total
/// (`reward`: weight x term per turn): reward_terms/format, compiles, partial, correct, speed,
/// reasoning, length. None without turns or without `reward`.
std::vector<metric_record> reward_terms(const std::vector<trajectory>& trajectories,
                                        const std::function<reward_breakdown(const turn&)>& reward,
                                        uint64_t step, int64_t unix_ms, const std::string& source);

/// The records "step_timeline/wall_s", "step_timeline/sampling_s", ... and the seeds' time/total,
/// time/train, time/rollout (wall time not training or publishing) for the metrics actor.
std::vector<metric_record> timeline_metrics(const step_timeline& t, int64_t unix_ms,
                                            const std::string& source);

/// A small table, one row per step: wall, each stage's wall (summed in brackets), busy
/// fractions, and wall / slowest stage.
std::string render_timeline_table(const std::vector<step_timeline>& steps);

/// The timelines of the last steps, taken from a stage clock at each commit.
class timeline_book {
public:
  /// Keeps the last `keep` timelines (at least one).
  explicit timeline_book(size_t keep) : keep_(std::max<size_t>(1, keep)) {}

  /// The run (re)starts now: the first step's wall time counts from here.
  void start(const stage_clock& clock);

  /// The timeline of round `key` (step `step`) committed now; kept among the last ones. The
  /// clock's record of the round is left for the caller to forget.
  const step_timeline& take(const stage_clock& clock, uint64_t key, uint64_t step,
                            uint64_t steps_in_flight, uint64_t stale_dropped);

  const std::deque<step_timeline>& recent() const { return recent_; }

private:
  size_t keep_;
  double last_commit_s_ = 0;                  ///< clock time of the previous commit
  double busy_at_last_commit_[stage_count] = {};
  std::deque<step_timeline> recent_;
};

/// The status line of the newest timeline ("-" when none).
std::string last_timeline_text(const std::deque<step_timeline>& recent);

} // namespace kbrl::episode
