#pragma once
// An RL run as the run config describes it: the [rl], [problems] and [reward] keys turned into
// the coordinator's settings, the problem selection and the split (settings.cpp documents every
// key), and the inputs the coordinator node loads before it starts: the problems, the policy's
// tokenizer and chat format.
//
//   run config --rl_run_settings_from--> rl_run_settings   (checked by plan_node: exit 2)
//              --load_rl_inputs-------> rl_run_inputs     (files read by run_node: exit 1)

#include "runtime/episode/coordinator_settings.hpp"
#include "runtime/episode/problem_set.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kbrl::config {
class run_config;
}

namespace kbrl::train {
struct learner_settings;
}

namespace kbrl {

/// What the run config says about an RL run.
struct rl_run_settings {
  bool enabled = false;                ///< rl.enabled
  coordinator_settings coordinator;    ///< steps, B, G, episodes (sampling, rewards, timeouts)
  episode::problem_selection problems; ///< root resolved ($KERNELBENCH_ROOT when empty)
  double eval_fraction = 0;            ///< held-out share of the selected problems
  /// rl.mode ("sync" or "async") and rl.max_staleness: checked here and passed on to the
  /// coordinator, which implements the asynchronous mode.
  std::string mode = "sync";
  uint64_t max_staleness = 1;
  std::string chat_format = "auto";    ///< rl.chat_format
  std::string policy_model;            ///< learner.model, else sampler.model
  int32_t retrieval_k = 3;             ///< retrieval.k, when a retriever is up
  int64_t retrieval_token_budget = 3000; ///< retrieval.token_budget
};

/// Reads and checks the RL keys of `run` for a coordinator writing under `run_dir`.
/// `kernelbench_root_env` is $KERNELBENCH_ROOT (null when unset), used when problems.root is
/// empty. With rl.enabled false only `enabled` is filled in and nothing is checked. Fails with
/// errc::invalid_config naming the key(s) at fault: problems.root empty with no
/// $KERNELBENCH_ROOT, a bad problems.numbers, a reward weight between -1 and 0, rl.temperature
/// not matching learner.temperature, rl.max_staleness above learner.max_staleness,
/// rl.eval_every without held-out problems, no policy model.
caf::expected<rl_run_settings> rl_run_settings_from(const config::run_config& run,
                                                    const std::string& run_dir,
                                                    const char* kernelbench_root_env);

/// In an RL run the learner discounts returns as the episodes do: rl.gamma replaces
/// learner.gamma (no-op without rl.enabled).
void apply_rl_to_learner(const config::run_config& run, train::learner_settings& learner);

/// What the coordinator node loads before the run starts.
struct rl_run_inputs {
  rl_run_settings settings;
  std::vector<problem> train, eval;
  std::shared_ptr<const tok::tokenizer> tokenizer;
  std::shared_ptr<const tok::chat_format> chat;
};

/// Loads the problems (and splits them with run.seed), the policy's tokenizer and chat format.
/// Errors name the problems root and level, or the model and what is missing from it.
caf::expected<rl_run_inputs> load_rl_inputs(const rl_run_settings& settings);

} // namespace kbrl
