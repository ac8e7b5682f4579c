#include "runtime/episode/rewards.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <algorithm>
#include <cmath>

namespace kbrl::episode {

const std::vector<std::string>& reward_preset_names() {
  static const std::vector<std::string> names{"correctness", "kevin",        "stage-format",
                                              "stage-compile", "stage-correct", "stage-speed"};
  return names;
}

caf::expected<reward_weights> reward_preset(const std::string& name) {
  reward_weights w;
  if (name == "correctness")
    return w;
  if (name == "kevin") {
    w.correct = 0.3;
    w.speed = 1;
    w.speed_kind = speed_form::linear;
    return w;
  }
  // The staged curriculum: each stage keeps the earlier goals at a smaller weight.
  w.correct = 0;
  w.format = 1;
  if (name == "stage-format")
    return w;
  w.format = 0.2;
  w.compiles = 1;
  if (name == "stage-compile")
    return w;
  w.compiles = 0.2;
  w.partial = 0.5;
  w.correct = 1;
  if (name == "stage-correct")
    return w;
  w.speed = 1;
  if (name == "stage-speed")
    return w;
  return make_error(errc::invalid_config, "reward preset \"" + name + "\": expected one of "
                                            + join(reward_preset_names()));
}

bool was_evaluated(const eval_result& v) {
  return v.compiled || v.error != eval_error::none || !v.trials.empty();
}

bool low_time_coverage(const eval_result& verdict) {
  return std::any_of(verdict.hack_flags.begin(), verdict.hack_flags.end(), [](auto& f) {
    return f == "own_kernels_idle" || f == "low_time_coverage";
  });
}

reward_breakdown score_turn(const parsed_answer& answer, const eval_result* verdict,
                            size_t completion_tokens, const reward_weights& w) {
  reward_breakdown r;
  if (verdict != nullptr && verdict->error == eval_error::static_check) {
    r.hack = true;
    return r; // a refused hack earns nothing, whatever else it did
  }
  if (verdict != nullptr && w.low_coverage == low_coverage_policy::zero
      && low_time_coverage(*verdict)) {
    r.hack = true;
    return r; // the work ran in torch's kernels, not the candidate's
  }
  r.format = answer.ok() ? 1 : 0;
  r.reasoning = answer.reasoning.find_first_not_of(" \t\r\n") != std::string::npos ? 1 : 0;
  r.length = -static_cast<double>(completion_tokens) / 1000.0;
  if (verdict != nullptr && answer.ok()) {
    r.compiles = verdict->compiled ? 1 : 0;
    if (verdict->trials_total > 0)
      r.partial = static_cast<double>(verdict->trials_passed) / verdict->trials_total;
    r.correct = verdict->correct ? 1 : 0;
    if (verdict->correct && verdict->speedup > 0) {
      auto s = std::min(verdict->speedup, w.speed_cap);
      r.speed = w.speed_kind == speed_form::log ? std::log(s) : s;
    }
  }
  r.total = w.format * r.format + w.compiles * r.compiles + w.partial * r.partial
            + w.correct * r.correct + w.speed * r.speed + w.reasoning * r.reasoning
            + w.length * r.length;
  return r;
}

std::vector<double> turn_returns(const std::vector<double>& scores, double gamma,
                                 return_aggregation aggregation) {
  std::vector<double> out(scores.size());
  double next = 0;
  for (size_t i = scores.size(); i-- > 0;) {
    bool last = i + 1 == scores.size();
    if (aggregation == return_aggregation::sum)
      out[i] = scores[i] + (last ? 0 : gamma * next);
    else
      out[i] = last ? scores[i] : std::max(scores[i], gamma * next);
    next = out[i];
  }
  return out;
}

} // namespace kbrl::episode
