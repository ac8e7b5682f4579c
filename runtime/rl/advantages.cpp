#include "runtime/rl/advantages.hpp"

#include "messages/errors.hpp"

#include <cmath>
#include <map>

namespace kbrl::rl {

const char* to_string(advantage_kind kind) {
  switch (kind) {
    case advantage_kind::grpo: return "grpo";
    case advantage_kind::dr_grpo: return "dr_grpo";
  }
  return "?";
}

caf::expected<advantage_kind> parse_advantage_kind(const std::string& name) {
  if (name == "grpo")
    return advantage_kind::grpo;
  if (name == "dr_grpo")
    return advantage_kind::dr_grpo;
  return make_error(errc::invalid_argument,
                    "advantage: expected grpo or dr_grpo, got \"" + name + "\"");
}

std::vector<double> discounted_returns(const std::vector<double>& scores, double gamma) {
  std::vector<double> out(scores.size());
  double next = 0;
  for (std::size_t i = scores.size(); i-- > 0;) {
    next = scores[i] + gamma * next;
    out[i] = next;
  }
  return out;
}

caf::expected<advantage_report> compute_advantages(std::vector<trajectory>& trajectories,
                                                   const advantage_options& options) {
  if (!(options.gamma >= 0 && options.gamma <= 1))
    return make_error(errc::invalid_argument,
                      "advantages: gamma must be in [0, 1], got " + std::to_string(options.gamma));
  if (!(options.std_epsilon > 0) || !std::isfinite(options.std_epsilon))
    return make_error(errc::invalid_argument, "advantages: std_epsilon must be > 0, got "
                                                + std::to_string(options.std_epsilon));
  double score_sum = 0;
  std::size_t score_count = 0;
  for (const auto& t : trajectories)
    for (const auto& u : t.turns) {
      if (!std::isfinite(u.score))
        return make_error(errc::invalid_argument,
                          "advantages: trajectory " + std::to_string(t.id) + " turn "
                            + std::to_string(u.index) + " has a score that is not finite ("
                            + std::to_string(u.score) + ")");
      score_sum += u.score;
      ++score_count;
    }

  advantage_report report;
  report.mean_score = score_count ? score_sum / static_cast<double>(score_count) : 0;

  // Returns first, for every trajectory.
  for (auto& t : trajectories) {
    std::vector<double> scores;
    for (const auto& u : t.turns)
      scores.push_back(u.score);
    const auto returns = discounted_returns(scores, options.gamma);
    for (std::size_t i = 0; i < t.turns.size(); ++i)
      t.turns[i].return_value = returns[i];
  }

  // Groups in order of first appearance.
  std::map<uint64_t, std::vector<std::size_t>> members;
  std::vector<uint64_t> order;
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    if (trajectories[i].turns.empty())
      continue;
    auto& m = members[trajectories[i].group_id];
    if (m.empty())
      order.push_back(trajectories[i].group_id);
    m.push_back(i);
  }
  report.groups = order.size();

  std::vector<bool> keep(trajectories.size(), false);
  for (auto group : order) {
    const auto& m = members[group];
    std::size_t longest = 0;
    for (auto i : m)
      longest = std::max(longest, trajectories[i].turns.size());
    bool signal = false;
    for (std::size_t turn = 0; turn < longest; ++turn) {
      std::vector<std::size_t> at; // trajectories that reached this turn
      for (auto i : m)
        if (turn < trajectories[i].turns.size())
          at.push_back(i);
      const double n = static_cast<double>(at.size());
      // Equal returns are tested directly: their floating-point mean need not equal them.
      const double first = trajectories[at[0]].turns[turn].return_value;
      for (auto i : at)
        if (trajectories[i].turns[turn].return_value != first)
          signal = true;
      double mean = 0;
      for (auto i : at)
        mean += trajectories[i].turns[turn].return_value;
      mean /= n;
      double squares = 0;
      for (auto i : at) {
        const double d = trajectories[i].turns[turn].return_value - mean;
        squares += d * d;
      }
      const double sd = at.size() > 1 ? std::sqrt(squares / (n - 1)) : 0;
      for (auto i : at) {
        auto& u = trajectories[i].turns[turn];
        if (at.size() < 2) {
          u.advantage = 0;
          continue;
        }
        const double centred = u.return_value - mean;
        u.advantage = options.kind == advantage_kind::grpo ? centred / (sd + options.std_epsilon)
                                                           : centred;
      }
    }
    if (!signal || m.size() < 2) {
      report.dropped_groups.push_back(group);
      continue;
    }
    ++report.groups_kept;
    for (auto i : m)
      keep[i] = true;
  }

  std::vector<trajectory> kept;
  kept.reserve(trajectories.size());
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    if (keep[i]) {
      report.turns_kept += trajectories[i].turns.size();
      kept.push_back(std::move(trajectories[i]));
    } else {
      ++report.trajectories_dropped;
    }
  }
  report.trajectories_kept = kept.size();
  trajectories = std::move(kept);
  return report;
}

} // namespace kbrl::rl
