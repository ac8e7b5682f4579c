#pragma once
// Where a policy starts: completions sampled from it on each problem's first-turn prompt (the
// episodes' prompt ids, episode::prompt_tokens) and scored by the real evaluator, as shares
// that parse, compile and are correct. A warm-started policy should land in between: 0% correct
// gives RL no signal, 100% leaves nothing to learn.

#include "messages/data.hpp"
#include "runtime/episode/prompts.hpp"
#include "runtime/eval/eval_engine.hpp"

#include <caf/expected.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kbrl::warmstart {

struct measure_options {
  int32_t samples_per_problem = 8; ///< > 0
  double temperature = 1.0;        ///< 0: greedy
  int32_t max_new_tokens = 320;
  uint64_t seed = 0;               ///< sample i of problem j is seeded with seed + 1000 j + i
  /// The evaluator (worker on the CPU unless worker.gpu says otherwise). Performance is not
  /// timed: only parse / compile / correct are counted.
  eval::engine_options engine;
};

/// One problem's counts.
struct problem_tally {
  std::string problem;
  int32_t samples = 0, parsed = 0, compiled = 0, correct = 0;
};

/// Samples and evaluates `options.samples_per_problem` completions per problem from the policy
/// in `policy_dir` (float32 on the CPU), calling `progress` after each problem. Fails with the
/// loader's errors, or errc::internal if generation fails.
caf::expected<std::vector<problem_tally>>
measure_starting_point(const std::filesystem::path& policy_dir, const std::vector<problem>& problems,
                       const episode::prompt_settings& prompts, const measure_options& options,
                       const std::function<void(const problem_tally&)>& progress = {});

} // namespace kbrl::warmstart
