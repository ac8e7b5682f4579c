#include "runtime/node/rl_settings.hpp"

#include "messages/errors.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/policy_dir.hpp"
#include "runtime/train/learner_settings.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace kbrl {

namespace {

std::chrono::milliseconds seconds_key(const config::run_config& run, const std::string& key) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(run.get_real(key) * 1000)));
}

kernel_backend backend_named(const std::string& name) {
  // The table allows only these spellings.
  if (name == "triton")
    return kernel_backend::triton;
  if (name == "torch")
    return kernel_backend::torch;
  return kernel_backend::cuda;
}

kernel_precision precision_named(const std::string& name) {
  if (name == "fp16")
    return kernel_precision::fp16;
  if (name == "bf16")
    return kernel_precision::bf16;
  return kernel_precision::fp32;
}

/// The preset's weights with the [reward] overrides applied; -1 keeps the preset's value.
caf::expected<episode::reward_weights> reward_weights_from(const config::run_config& run) {
  auto preset = run.get_string("reward.preset");
  auto w = episode::reward_preset(preset);
  if (!w)
    return make_error(errc::invalid_config, "reward.preset: " + describe(w.error()));
  auto weight = [&](const char* key, double& field) -> caf::error {
    double x = run.get_real(key);
    if (x == -1)
      return {};
    if (x < 0)
      return make_error(errc::invalid_config,
                        fmt::format("{}: expected -1 (the preset's weight) or a weight >= 0, got "
                                    "{}",
                                    key, x));
    field = x;
    return {};
  };
  for (auto [key, field] : {std::pair{"reward.format", &w->format},
                            std::pair{"reward.compiles", &w->compiles},
                            std::pair{"reward.partial", &w->partial},
                            std::pair{"reward.correct", &w->correct},
                            std::pair{"reward.speed", &w->speed},
                            std::pair{"reward.reasoning", &w->reasoning},
                            std::pair{"reward.length", &w->length}})
    if (auto err = weight(key, *field))
      return err;
  auto kind = run.get_string("reward.speed_kind");
  if (kind == "log")
    w->speed_kind = episode::speed_form::log;
  else if (kind == "linear")
    w->speed_kind = episode::speed_form::linear;
  // The table allows only "zero" and "keep".
  w->low_coverage = run.get_string("reward.low_coverage") == "keep"
                      ? episode::low_coverage_policy::keep
                      : episode::low_coverage_policy::zero;
  double cap = run.get_real("reward.speed_cap");
  if (cap != -1) {
    if (cap <= 0)
      return make_error(errc::invalid_config,
                        fmt::format("reward.speed_cap: expected -1 (the preset's cap) or a cap "
                                    "> 0, got {}",
                                    cap));
    w->speed_cap = cap;
  }
  return *w;
}

/// Temperature as the learner reads it: 0 (greedy) counts as 1.
double logprob_temperature(double t) {
  return t == 0 ? 1.0 : t;
}

} // namespace

caf::expected<rl_run_settings> rl_run_settings_from(const config::run_config& run,
                                                    const std::string& run_dir,
                                                    const char* kernelbench_root_env) {
  rl_run_settings s;
  s.enabled = run.get_bool("rl.enabled");
  if (!s.enabled)
    return s;

  auto& c = s.coordinator;
  c.steps = static_cast<uint64_t>(run.get_int("rl.steps"));
  c.problems_per_step = static_cast<size_t>(run.get_int("rl.problems_per_step"));
  c.group_size = static_cast<size_t>(run.get_int("rl.group_size"));
  c.eval_every = static_cast<uint64_t>(run.get_int("rl.eval_every"));
  c.drop_flat_groups = run.get_bool("rl.drop_flat_groups");
  c.learner_timeout = seconds_key(run, "rl.learner_timeout_s");
  c.run_dir = run_dir;
  c.traces_max_bytes = static_cast<uint64_t>(run.get_int("rl.traces_max_mb")) << 20;
  c.traces_tokens = run.get_bool("rl.traces_tokens");
  if (auto kind = rl::parse_advantage_kind(run.get_string("learner.advantage"))) {
    rl::advantage_options a;
    a.kind = *kind;
    a.gamma = run.get_real("learner.gamma");
    c.trace_advantage = a;
  }
  c.seed = static_cast<uint64_t>(run.get_int("run.seed"));

  auto& e = c.episodes;
  e.max_turns = static_cast<int32_t>(run.get_int("rl.max_turns"));
  e.gamma = run.get_real("rl.gamma");
  e.aggregation = run.get_string("rl.return_aggregation") == "max"
                    ? episode::return_aggregation::max
                    : episode::return_aggregation::sum;
  auto weights = reward_weights_from(run);
  if (!weights)
    return weights.error();
  e.rewards = *weights;
  e.sampling.temperature = run.get_real("rl.temperature");
  e.sampling.top_p = run.get_real("rl.top_p");
  e.sampling.top_k = static_cast<int32_t>(run.get_int("rl.top_k"));
  e.sampling.max_new_tokens = static_cast<int32_t>(run.get_int("rl.max_new_tokens"));
  e.sampling.seed = c.seed;
  e.timing.correctness_trials = static_cast<int32_t>(run.get_int("rl.correctness_trials"));
  e.timing.perf_trials = static_cast<int32_t>(run.get_int("rl.perf_trials"));
  e.timing.timing_precision = run.get_real("rl.timing_precision");
  e.timing.timeout_s = run.get_real("rl.eval_timeout_s");
  e.success_speedup = run.get_real("rl.success_speedup");
  e.max_retries = static_cast<int32_t>(run.get_int("rl.max_retries"));
  c.max_failed_steps = static_cast<uint64_t>(run.get_int("rl.max_failed_steps"));
  e.sampler_timeout = seconds_key(run, "rl.sampler_timeout_s");
  e.evaluator_timeout = seconds_key(run, "rl.evaluator_timeout_s");
  auto prompts = episode::prompt_settings_from(run);
  if (!prompts)
    return prompts.error();
  e.prompts = std::move(*prompts);

  s.mode = run.get_string("rl.mode");
  s.max_staleness = static_cast<uint64_t>(run.get_int("rl.max_staleness"));
  // The table allows only "sync" and "async".
  c.mode = *parse_coordinator_mode(s.mode);
  c.max_staleness = s.max_staleness;
  auto learner_staleness = static_cast<uint64_t>(run.get_int("learner.max_staleness"));
  if (s.mode == "async" && s.max_staleness > learner_staleness)
    return make_error(errc::invalid_config,
                      fmt::format("rl.max_staleness = {} exceeds learner.max_staleness = {}: the "
                                  "learner would refuse the batches the episodes produce; lower "
                                  "rl.max_staleness or raise learner.max_staleness",
                                  s.max_staleness, learner_staleness));
  double learner_t = run.get_real("learner.temperature");
  if (logprob_temperature(e.sampling.temperature) != logprob_temperature(learner_t))
    return make_error(errc::invalid_config,
                      fmt::format("rl.temperature = {} but learner.temperature = {}: the learner "
                                  "must compute log-probabilities at the temperature the "
                                  "episodes sample with (0, greedy, counts as 1); set both",
                                  e.sampling.temperature, learner_t));

  s.eval_fraction = run.get_real("rl.eval_fraction");
  if (c.eval_every > 0 && s.eval_fraction <= 0)
    return make_error(errc::invalid_config,
                      "rl.eval_every = " + std::to_string(c.eval_every)
                        + " needs held-out problems: set rl.eval_fraction > 0 (or "
                          "rl.eval_every = 0)");

  auto& p = s.problems;
  p.root = run.get_string("problems.root");
  if (p.root.empty()) {
    if (kernelbench_root_env == nullptr || *kernelbench_root_env == '\0')
      return make_error(errc::invalid_config,
                        "problems.root is empty and $KERNELBENCH_ROOT is not set: say where the "
                        "problems are (a KernelBench checkout or a folder with level<N>/ "
                        "folders) with problems.root=DIR or KERNELBENCH_ROOT=DIR");
    p.root = kernelbench_root_env;
  }
  p.levels.clear();
  for (auto level : run.get_int_list("problems.levels"))
    p.levels.push_back(static_cast<int32_t>(level));
  if (p.levels.empty())
    return make_error(errc::invalid_config, "problems.levels is empty: name at least one level");
  auto numbers = episode::parse_number_ranges(run.get_string("problems.numbers"));
  if (!numbers)
    return make_error(errc::invalid_config, "problems.numbers: " + describe(numbers.error()));
  p.numbers = std::move(*numbers);
  p.backend = backend_named(run.get_string("problems.backend"));
  p.precision = precision_named(run.get_string("problems.precision"));

  s.retrieval_k = static_cast<int32_t>(run.get_int("retrieval.k"));
  s.retrieval_token_budget = run.get_int("retrieval.token_budget");
  s.chat_format = run.get_string("rl.chat_format");
  s.policy_model = run.get_string("learner.model");
  if (s.policy_model.empty())
    s.policy_model = run.get_string("sampler.model");
  if (s.policy_model.empty())
    return make_error(errc::invalid_config,
                      "rl.enabled needs the policy model: set sampler.model (and learner.model if "
                      "the learner reads it from elsewhere) to a model directory or hub id");
  return s;
}

void apply_rl_to_learner(const config::run_config& run, train::learner_settings& learner) {
  if (run.get_bool("rl.enabled"))
    learner.advantage.gamma = run.get_real("rl.gamma");
}

caf::expected<rl_run_inputs> load_rl_inputs(const rl_run_settings& settings) {
  rl_run_inputs in;
  in.settings = settings;
  auto problems = episode::load_problem_set(settings.problems);
  if (!problems)
    return problems.error();
  auto split = episode::split_problems(*problems, settings.eval_fraction, settings.coordinator.seed);
  in.train = std::move(split.train);
  in.eval = std::move(split.eval);
  if (settings.coordinator.eval_every > 0 && in.eval.empty())
    return make_error(errc::invalid_config,
                      fmt::format("rl.eval_fraction = {} held out none of the {} selected "
                                  "problems: raise it or set rl.eval_every = 0",
                                  settings.eval_fraction, problems->size()));

  auto dir = model::resolve_policy_dir(settings.policy_model);
  if (!dir)
    return make_error(errc::invalid_config, "the policy model " + settings.policy_model + ": "
                                              + describe(dir.error()));
  auto tokenizer = tok::tokenizer::load(*dir);
  if (!tokenizer)
    return make_error(errc::invalid_config, "the policy model's tokenizer (" + dir->string()
                                              + "): " + describe(tokenizer.error()));
  auto chat = tok::chat_format::for_tokenizer(
    *tokenizer, settings.chat_format == "auto" ? std::string_view{} : settings.chat_format);
  if (!chat)
    return make_error(errc::invalid_config,
                      "the policy model's chat format (" + dir->string() + "): "
                        + describe(chat.error()) + " (set rl.chat_format to chatml, qwen3, "
                        "llama3 or jinja to force one)");
  in.tokenizer = std::make_shared<const tok::tokenizer>(std::move(*tokenizer));
  in.chat = std::make_shared<const tok::chat_format>(std::move(*chat));
  return in;
}

} // namespace kbrl
