#pragma once
// A turn's reward from its parsed answer and verdict, and the returns over an episode's turns.
//
// The reward is a weighted sum of components, each in [0, 1] except speed:
//   format     the answer parsed (a program came out of it)
//   compiles   the candidate built and loaded
//   partial    share of correctness trials passed (partial credit)
//   correct    all trials passed
//   speed      for a correct candidate: log(speedup) or speedup, capped at speed_cap
//   reasoning  the answer had a non-empty reasoning block
//   length     minus completion tokens / 1000 (a penalty when its weight is positive)
// A candidate refused by the static checks (a reward hack or forbidden construct) gets 0 in total
// and is counted as a hack, whatever the weights say. So does, under the default low-coverage
// policy (reward.low_coverage = "zero"), a candidate the worker flagged own_kernels_idle (none of
// its own kernels ran on the GPU: the work was left to torch) or low_time_coverage (they took less
// than eval.min_time_coverage of its GPU time).

#include "messages/data.hpp"
#include "runtime/episode/answer_format.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::episode {

enum class speed_form { log, linear };

/// What a verdict flagged own_kernels_idle or low_time_coverage earns (reward.low_coverage).
enum class low_coverage_policy {
  zero, ///< 0 in total, counted as a hack (the default)
  keep, ///< scored as any other verdict
};

/// True when the evaluator saw the turn; false for the empty verdict of an answer in which no
/// program was found (it was never evaluated).
bool was_evaluated(const eval_result& verdict);

/// True when `verdict` carries own_kernels_idle or low_time_coverage.
bool low_time_coverage(const eval_result& verdict);

struct reward_weights {
  double format = 0;
  double compiles = 0;
  double partial = 0;
  double correct = 1;
  double speed = 0;
  speed_form speed_kind = speed_form::log;
  double speed_cap = 10;
  double reasoning = 0;
  double length = 0;
  low_coverage_policy low_coverage = low_coverage_policy::zero;
};

/// Named weight sets: "correctness" (1 x correct, the default), "kevin" (0.3 x correct +
/// speedup, as Kevin-32B), and the staged curriculum "stage-format", "stage-compile",
/// "stage-correct", "stage-speed" (each adds the next goal while keeping the earlier ones).
caf::expected<reward_weights> reward_preset(const std::string& name);
const std::vector<std::string>& reward_preset_names();

struct reward_breakdown {
  double total = 0;
  double format = 0, compiles = 0, partial = 0, correct = 0, speed = 0, reasoning = 0, length = 0;
  bool hack = false; ///< refused by the static checks, or zeroed for low time coverage
};

/// The reward of one turn. `verdict` is null when the answer did not parse (nothing evaluated).
reward_breakdown score_turn(const parsed_answer& answer, const eval_result* verdict,
                            size_t completion_tokens, const reward_weights& w);

/// How later turns' scores flow back to earlier ones.
enum class return_aggregation {
  sum, ///< R_t = s_t + gamma * R_{t+1} (discounted sum, Kevin's choice with gamma 0.4)
  max, ///< R_t = max(s_t, gamma * R_{t+1})
};

/// The return of every turn from the turns' scores.
std::vector<double> turn_returns(const std::vector<double>& scores, double gamma,
                                 return_aggregation aggregation);

} // namespace kbrl::episode
