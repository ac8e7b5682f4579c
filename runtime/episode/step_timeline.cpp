#include "runtime/episode/step_timeline.hpp"

#include "runtime/report/metrics_jsonl.hpp"

#include <algorithm>
#include <cstdio>

namespace kbrl::episode {

namespace {

std::string seconds(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x < 10 ? "%.2f" : "%.1f", x);
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * x);
  return buf;
}

} // namespace

double slowest_stage_s(const step_timeline& t) {
  return std::max({t.sampling_wall_s, t.evaluating_wall_s, t.training_s + t.publishing_s});
}

std::vector<metric_record> timeline_metrics(const step_timeline& t, int64_t unix_ms,
                                            const std::string& source) {
  std::vector<metric_record> out;
  auto add = [&](const char* name, double value) {
    out.push_back({t.step, std::string("step_timeline/") + name, value, unix_ms, source, {}});
  };
  add("wall_s", t.wall_s);
  add("sampling_s", t.sampling_s);
  add("sampling_wall_s", t.sampling_wall_s);
  add("evaluating_s", t.evaluating_s);
  add("evaluating_wall_s", t.evaluating_wall_s);
  add("training_s", t.training_s);
  add("publishing_s", t.publishing_s);
  add("sampler_busy", t.sampler_busy);
  add("evaluator_busy", t.evaluator_busy);
  add("learner_busy", t.learner_busy);
  add("slowest_stage_s", slowest_stage_s(t));
  add("steps_in_flight", static_cast<double>(t.steps_in_flight));
  add("stale_dropped", static_cast<double>(t.stale_dropped));
  // The seeds' timing names (tinker-cookbook's time/*): the step's wall time, its training, and
  // the rest (episodes: sampling and evaluating).
  out.push_back({t.step, "time/total", t.wall_s, unix_ms, source, {}});
  out.push_back({t.step, "time/train", t.training_s, unix_ms, source, {}});
  out.push_back({t.step, "time/rollout", std::max(0.0, t.wall_s - t.training_s - t.publishing_s),
                 unix_ms, source, {}});
  return out;
}

std::vector<metric_record> commit_records(
  std::vector<metric_record> summary, const step_timeline& t, uint64_t steps, int64_t unix_ms,
  const std::string& source, const std::vector<trajectory>& trajectories,
  const std::function<reward_breakdown(const turn&)>& reward) {
  auto timeline = timeline_metrics(t, unix_ms, source);
  summary.insert(summary.end(), timeline.begin(), timeline.end());
  auto terms = reward_terms(trajectories, reward, t.step, unix_ms, source);
  summary.insert(summary.end(), terms.begin(), terms.end());
  summary.push_back(report::commit_record(t.step, steps, unix_ms, source));
  return summary;
}

std::vector<metric_record> reward_terms(const std::vector<trajectory>& trajectories,
                                        const std::function<reward_breakdown(const turn&)>& reward,
                                        uint64_t step, int64_t unix_ms, const std::string& source) {
  std::vector<metric_record> out;
  if (!reward)
    return out;
  reward_breakdown sum;
  size_t turns = 0;
  for (auto& t : trajectories)
    for (auto& u : t.turns) {
      auto r = reward(u);
      sum.format += r.format;
      sum.compiles += r.compiles;
      sum.partial += r.partial;
      sum.correct += r.correct;
      sum.speed += r.speed;
      sum.reasoning += r.reasoning;
      sum.length += r.length;
      ++turns;
    }
  if (turns == 0)
    return out;
  const double n = static_cast<double>(turns);
  for (auto [name, value] : {std::pair{"format", sum.format}, std::pair{"compiles", sum.compiles},
                             std::pair{"partial", sum.partial}, std::pair{"correct", sum.correct},
                             std::pair{"speed", sum.speed}, std::pair{"reasoning", sum.reasoning},
                             std::pair{"length", sum.length}})
    out.push_back({step, std::string("reward_terms/") + name, value / n, unix_ms, source, {}});
  return out;
}

std::string render_timeline_table(const std::vector<step_timeline>& steps) {
  if (steps.empty())
    return "no step finished yet\n";
  const std::vector<std::string> header{"STEP",  "WALL S", "SAMPLING S (SUM)", "EVALUATING S (SUM)",
                                        "TRAIN S", "PUBLISH S", "BUSY S/E/L",  "WALL/SLOWEST",
                                        "IN FLIGHT"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : steps) {
    double slowest = slowest_stage_s(t);
    rows.push_back({std::to_string(t.step), seconds(t.wall_s),
                    seconds(t.sampling_wall_s) + " (" + seconds(t.sampling_s) + ")",
                    seconds(t.evaluating_wall_s) + " (" + seconds(t.evaluating_s) + ")",
                    seconds(t.training_s), seconds(t.publishing_s),
                    percent(t.sampler_busy) + "/" + percent(t.evaluator_busy) + "/"
                      + percent(t.learner_busy),
                    slowest > 0 ? seconds(t.wall_s / slowest) : "-",
                    std::to_string(t.steps_in_flight)});
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& r : rows)
      width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      out += cells[i];
      if (i + 1 < cells.size())
        out += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  for (const auto& r : rows)
    line(r);
  return out;
}

void timeline_book::start(const stage_clock& clock) {
  last_commit_s_ = clock.now();
  for (size_t i = 0; i < stage_count; ++i)
    busy_at_last_commit_[i] = clock.busy_seconds(static_cast<stage>(i));
}

const step_timeline& timeline_book::take(const stage_clock& clock, uint64_t key, uint64_t step,
                                         uint64_t steps_in_flight, uint64_t stale_dropped) {
  step_timeline t;
  t.step = step;
  double now = clock.now();
  t.wall_s = now - last_commit_s_;
  auto sampling = clock.round_usage(stage::sampling, key);
  auto evaluating = clock.round_usage(stage::evaluating, key);
  t.sampling_s = sampling.summed_s;
  t.sampling_wall_s = sampling.busy_s;
  t.evaluating_s = evaluating.summed_s;
  t.evaluating_wall_s = evaluating.busy_s;
  t.training_s = clock.round_usage(stage::training, key).summed_s;
  t.publishing_s = clock.round_usage(stage::publishing, key).summed_s;
  double busy[stage_count];
  for (size_t i = 0; i < stage_count; ++i)
    busy[i] = clock.busy_seconds(static_cast<stage>(i));
  auto fraction = [&](stage s) {
    auto i = static_cast<size_t>(s);
    return t.wall_s > 0 ? std::min(1.0, (busy[i] - busy_at_last_commit_[i]) / t.wall_s) : 0.0;
  };
  t.sampler_busy = fraction(stage::sampling);
  t.evaluator_busy = fraction(stage::evaluating);
  t.learner_busy = fraction(stage::training);
  t.steps_in_flight = steps_in_flight;
  t.stale_dropped = stale_dropped;
  last_commit_s_ = now;
  std::copy(std::begin(busy), std::end(busy), std::begin(busy_at_last_commit_));
  recent_.push_back(t);
  while (recent_.size() > keep_)
    recent_.pop_front();
  return recent_.back();
}

std::string last_timeline_text(const std::deque<step_timeline>& recent) {
  if (recent.empty())
    return "-";
  const auto& t = recent.back();
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "step %llu: wall %.2f s, sampling %.2f s, evaluating %.2f s, training %.2f s, "
                "publishing %.2f s; busy sampler %.0f%%, evaluator %.0f%%, learner %.0f%%",
                static_cast<unsigned long long>(t.step), t.wall_s, t.sampling_wall_s,
                t.evaluating_wall_s, t.training_s, t.publishing_s, 100 * t.sampler_busy,
                100 * t.evaluator_busy, 100 * t.learner_busy);
  return buf;
}

} // namespace kbrl::episode
