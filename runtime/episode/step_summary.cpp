#include "runtime/episode/step_summary.hpp"

#include "runtime/node/clock.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace kbrl::episode {

double trajectory_reward(const trajectory& t) {
  return t.turns.empty() ? 0.0 : t.turns.front().return_value;
}

group_filter_result drop_flat_groups(std::vector<trajectory> trajectories, double tolerance) {
  std::map<uint64_t, std::vector<trajectory>> groups;
  for (auto& t : trajectories)
    groups[t.group_id].push_back(std::move(t));
  group_filter_result out;
  for (auto& [id, members] : groups) {
    auto [lo, hi] = std::minmax_element(members.begin(), members.end(),
                                        [](const trajectory& a, const trajectory& b) {
                                          return trajectory_reward(a) < trajectory_reward(b);
                                        });
    if (trajectory_reward(*hi) - trajectory_reward(*lo) <= tolerance) {
      ++out.groups_dropped;
      continue;
    }
    ++out.groups_kept;
    for (auto& t : members)
      out.kept.push_back(std::move(t));
  }
  return out;
}

namespace {

double mean(const std::vector<double>& xs) {
  double s = 0;
  for (auto x : xs)
    s += x;
  return xs.empty() ? 0 : s / static_cast<double>(xs.size());
}

double median(std::vector<double> xs) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

} // namespace

std::vector<metric_record> summarize_step(const std::vector<trajectory>& trajectories,
                                          uint64_t step, const std::string& source) {
  std::vector<double> rewards, speedups;
  size_t turns = 0, parsed = 0, compiled = 0, correct = 0, hacks = 0, tokens = 0;
  std::map<int32_t, std::pair<size_t, size_t>> by_turn; // index -> (correct, count)
  for (auto& t : trajectories) {
    rewards.push_back(trajectory_reward(t));
    for (auto& turn : t.turns) {
      ++turns;
      tokens += turn.prompt_tokens.size() + turn.completion_tokens.size();
      auto& v = turn.verdict;
      bool evaluated = v.compiled || v.error != eval_error::none || !v.trials.empty();
      parsed += evaluated ? 1 : 0;
      compiled += v.compiled ? 1 : 0;
      correct += v.correct ? 1 : 0;
      hacks += v.error == eval_error::static_check ? 1 : 0;
      if (v.correct && v.speedup > 0)
        speedups.push_back(v.speedup);
      auto& slot = by_turn[turn.index];
      slot.first += v.correct ? 1 : 0;
      ++slot.second;
    }
  }
  double m = mean(rewards), var = 0;
  for (auto r : rewards)
    var += (r - m) * (r - m);
  double sd = rewards.empty() ? 0 : std::sqrt(var / static_cast<double>(rewards.size()));
  auto rate = [&](size_t n) { return turns == 0 ? 0.0 : static_cast<double>(n) / turns; };
  auto now = now_unix_ms();
  std::vector<metric_record> out;
  auto add = [&](const std::string& name, double value) {
    out.push_back({step, name, value, now, source});
  };
  add("reward/mean", m);
  add("reward/std", sd);
  add("reward/min", rewards.empty() ? 0 : *std::min_element(rewards.begin(), rewards.end()));
  add("reward/max", rewards.empty() ? 0 : *std::max_element(rewards.begin(), rewards.end()));
  add("rate/format", rate(parsed));
  add("rate/compiled", rate(compiled));
  add("rate/correct", rate(correct));
  add("rate/hack", rate(hacks));
  add("speedup/mean", mean(speedups));
  add("speedup/median", median(speedups));
  add("speedup/max", speedups.empty() ? 0 : *std::max_element(speedups.begin(), speedups.end()));
  add("episodes", static_cast<double>(trajectories.size()));
  add("turns", static_cast<double>(turns));
  add("tokens", static_cast<double>(tokens));
  for (auto& [index, cc] : by_turn)
    add("rate/correct_turn" + std::to_string(index + 1),
        static_cast<double>(cc.first) / static_cast<double>(cc.second));
  return out;
}

} // namespace kbrl::episode
