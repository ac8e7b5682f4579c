#include "runtime/episode/step_health.hpp"

#include <algorithm>
#include <map>

namespace kbrl::episode {

namespace {

constexpr size_t reason_chars = 300; ///< a reason is cut here (error excerpts can be long)
constexpr size_t reasons_listed = 3;

} // namespace

bool episode_failed(const trajectory& t, std::string* why) {
  const std::string prefix = "failed: ";
  if (t.end_reason.rfind("failed", 0) == 0) {
    if (why)
      *why = t.end_reason.rfind(prefix, 0) == 0 ? t.end_reason.substr(prefix.size())
                                                 : t.end_reason;
    return true;
  }
  bool judged = false, all_infrastructure = true;
  for (auto& u : t.turns) {
    if (u.verdict.error == eval_error::none && !u.verdict.compiled && u.verdict.trials_total == 0)
      continue; // not evaluated (no program in the answer)
    judged = true;
    if (u.verdict.error != eval_error::infrastructure)
      all_infrastructure = false;
  }
  if (judged && all_infrastructure) {
    if (why)
      *why = "the evaluator failed: " + t.turns.back().verdict.error_excerpt;
    return true;
  }
  return false;
}

step_health check_step(const std::vector<trajectory>& trajectories) {
  step_health h;
  std::map<std::string, size_t> counts;
  for (auto& t : trajectories) {
    ++h.episodes;
    std::string why;
    if (!episode_failed(t, &why))
      continue;
    ++h.failed;
    ++counts[why.substr(0, reason_chars)];
  }
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto& a, auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < sorted.size() && i < reasons_listed; ++i)
    h.reasons += (i ? "; " : "") + std::to_string(sorted[i].second) + " x " + sorted[i].first;
  if (sorted.size() > reasons_listed)
    h.reasons += "; and " + std::to_string(sorted.size() - reasons_listed) + " other reason(s)";
  return h;
}

bool failed_step_counter::record(const step_health& h) {
  in_a_row_ = h.all_failed() ? in_a_row_ + 1 : 0;
  return limit_ > 0 && in_a_row_ >= limit_;
}

} // namespace kbrl::episode
