#include "runtime/episode/step_summary.hpp"

#include "runtime/episode/rewards.hpp"
#include "runtime/io/clock.hpp"

#include <algorithm>
#include <cctype>
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

namespace {

/// The KernelBench level of a problem id "level<N>/...", or 0.
int level_of(const std::string& problem_id) {
  if (problem_id.rfind("level", 0) != 0)
    return 0;
  int level = 0;
  size_t i = 5;
  for (; i < problem_id.size() && std::isdigit(static_cast<unsigned char>(problem_id[i])); ++i)
    level = level * 10 + (problem_id[i] - '0');
  return i < problem_id.size() && problem_id[i] == '/' ? level : 0;
}

} // namespace

std::vector<metric_record> summarize_step(const std::vector<trajectory>& trajectories,
                                          uint64_t step, const std::string& source,
                                          std::optional<uint64_t> learner_version) {
  std::vector<double> rewards, speedups;
  size_t turns = 0, parsed = 0, compiled = 0, correct = 0, hacks = 0, fast = 0, failed = 0;
  size_t kernelbench_correct = 0, low_coverage = 0;
  size_t prompt_tokens = 0, completion_tokens = 0;
  uint64_t version_min = UINT64_MAX, version_max = 0;
  double staleness_sum = 0, staleness_max = 0;
  struct tally {
    size_t correct = 0, compiled = 0, parsed = 0, count = 0;
    double reward = 0;
  };
  size_t succeeded = 0;              // trajectories with a correct turn
  double nll_sum = 0;                // -logprob of the sampled completion tokens
  size_t nll_tokens = 0;
  std::map<int32_t, tally> by_turn;  // turn index -> correct turns, turns, summed returns
  std::map<int, tally> by_level;     // level -> correct turns, turns; rewards per trajectory
  // Where evaluation time went (issue 20): seconds summed over the step's evaluated turns, by
  // the worker's phases, plus the CPU builds ahead of it and the evaluator's total.
  std::map<std::string, double> eval_seconds;
  std::map<int, size_t> level_trajectories;
  for (auto& t : trajectories) {
    rewards.push_back(trajectory_reward(t));
    succeeded += std::any_of(t.turns.begin(), t.turns.end(),
                             [](const turn& u) { return u.verdict.correct; })
                   ? 1
                   : 0;
    failed += t.end_reason.rfind("failed", 0) == 0 ? 1 : 0;
    int level = level_of(t.problem_id);
    if (level > 0) {
      by_level[level].reward += trajectory_reward(t);
      ++level_trajectories[level];
    }
    for (auto& turn : t.turns) {
      ++turns;
      prompt_tokens += turn.prompt_tokens.size();
      completion_tokens += turn.completion_tokens.size();
      auto& v = turn.verdict;
      const bool evaluated = was_evaluated(v);
      parsed += evaluated ? 1 : 0;
      compiled += v.compiled ? 1 : 0;
      correct += v.correct ? 1 : 0;
      kernelbench_correct += evaluated && v.kernelbench_correct ? 1 : 0;
      low_coverage += evaluated && low_time_coverage(v) ? 1 : 0;
      if (evaluated) {
        eval_seconds["build"] += v.build_seconds;
        eval_seconds["total"] += v.total_seconds;
        for (auto& p : v.phases)
          eval_seconds["phase_" + p.phase] += p.seconds;
      }
      hacks += v.error == eval_error::static_check ? 1 : 0;
      fast += v.correct && v.speedup > 1 ? 1 : 0;
      if (v.correct && v.speedup > 0)
        speedups.push_back(v.speedup);
      for (float lp : turn.logprobs)
        nll_sum -= lp;
      nll_tokens += turn.logprobs.size();
      auto& slot = by_turn[turn.index];
      slot.correct += v.correct ? 1 : 0;
      slot.compiled += v.compiled ? 1 : 0;
      slot.parsed += evaluated ? 1 : 0;
      ++slot.count;
      slot.reward += turn.return_value;
      if (level > 0) {
        by_level[level].correct += v.correct ? 1 : 0;
        by_level[level].compiled += v.compiled ? 1 : 0;
        ++by_level[level].count;
      }
      version_min = std::min(version_min, turn.policy_version);
      version_max = std::max(version_max, turn.policy_version);
      if (learner_version) {
        double lag = *learner_version > turn.policy_version
                       ? static_cast<double>(*learner_version - turn.policy_version)
                       : 0.0;
        staleness_sum += lag;
        staleness_max = std::max(staleness_max, lag);
      }
    }
  }
  double m = mean(rewards), var = 0;
  for (auto r : rewards)
    var += (r - m) * (r - m);
  double sd = rewards.empty() ? 0 : std::sqrt(var / static_cast<double>(rewards.size()));
  auto rate = [&](size_t n) { return turns == 0 ? 0.0 : static_cast<double>(n) / turns; };
  auto per = [](double x, size_t n) { return n == 0 ? 0.0 : x / static_cast<double>(n); };
  auto now = now_unix_ms();
  std::vector<metric_record> out;
  auto add = [&](const std::string& name, double value) {
    out.push_back({step, name, value, now, source, {}});
  };
  add("reward/mean", m);
  add("reward/std", sd);
  add("reward/min", rewards.empty() ? 0 : *std::min_element(rewards.begin(), rewards.end()));
  add("reward/max", rewards.empty() ? 0 : *std::max_element(rewards.begin(), rewards.end()));
  add("rate/format", rate(parsed));
  add("rate/compiled", rate(compiled));
  add("rate/correct", rate(correct));
  add("rate/kernelbench_correct", rate(kernelbench_correct));
  add("rate/hack", rate(hacks));
  add("rate/low_coverage", rate(low_coverage));
  add("rate/fast_1", rate(fast));
  add("rate/failed", per(static_cast<double>(failed), trajectories.size()));
  add("speedup/mean", mean(speedups));
  add("speedup/median", median(speedups));
  add("speedup/min", speedups.empty() ? 0 : *std::min_element(speedups.begin(), speedups.end()));
  add("speedup/max", speedups.empty() ? 0 : *std::max_element(speedups.begin(), speedups.end()));
  add("episodes", static_cast<double>(trajectories.size()));
  add("turns", static_cast<double>(turns));
  add("turns/mean", per(static_cast<double>(turns), trajectories.size()));
  add("tokens", static_cast<double>(prompt_tokens + completion_tokens));
  add("tokens/prompt", static_cast<double>(prompt_tokens));
  add("tokens/completion", static_cast<double>(completion_tokens));
  add("tokens/completion_mean", per(static_cast<double>(completion_tokens), turns));
  for (auto& [what, seconds] : eval_seconds)
    add("eval_time/" + what + "_s", seconds);
  for (auto& [index, t] : by_turn) {
    add("rate/correct_turn" + std::to_string(index + 1), per(static_cast<double>(t.correct), t.count));
    add("turn" + std::to_string(index + 1) + "/reward_mean", per(t.reward, t.count));
  }
  // The multi-turn seeds' names (kernel-rl, kernelbench-tinker): success is a trajectory with a
  // correct turn; turn_N counts from 0 as theirs do.
  add("multiturn/success_rate", per(static_cast<double>(succeeded), trajectories.size()));
  add("multiturn/avg_turns", per(static_cast<double>(turns), trajectories.size()));
  for (auto& [index, t] : by_turn) {
    auto prefix = "multiturn/turn_" + std::to_string(index) + "/";
    add(prefix + "format_rate", per(static_cast<double>(t.parsed), t.count));
    add(prefix + "compile_rate", per(static_cast<double>(t.compiled), t.count));
    add(prefix + "correct_rate", per(static_cast<double>(t.correct), t.count));
  }
  for (auto& [level, t] : by_level) {
    auto prefix = "level" + std::to_string(level) + "/";
    add(prefix + "reward_mean", per(t.reward, level_trajectories[level]));
    add(prefix + "correct_rate", per(static_cast<double>(t.correct), t.count));
    add(prefix + "compile_rate", per(static_cast<double>(t.compiled), t.count));
  }
  // The policy's entropy per token, estimated by the mean negative log-probability of the tokens
  // it sampled (an unbiased estimate of the sampling distribution's entropy).
  if (nll_tokens > 0)
    add("policy/entropy", nll_sum / static_cast<double>(nll_tokens));
  if (turns > 0) {
    add("policy/version_min", static_cast<double>(version_min));
    add("policy/version_max", static_cast<double>(version_max));
    if (learner_version) {
      add("staleness/mean", staleness_sum / static_cast<double>(turns));
      add("staleness/max", staleness_max);
    }
  }
  out.push_back({step, "hist/reward", static_cast<double>(rewards.size()), now, source, rewards});
  if (!speedups.empty())
    out.push_back(
      {step, "hist/speedup", static_cast<double>(speedups.size()), now, source, speedups});
  return out;
}

} // namespace kbrl::episode
