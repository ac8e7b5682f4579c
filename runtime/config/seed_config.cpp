#include "runtime/config/seed_config.hpp"

#include "messages/error_codes.hpp"
#include "messages/errors.hpp"
#include "runtime/config/config_error.hpp"
#include "runtime/config/settings.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

namespace kbrl::config {

namespace {

// -- reading YAML ---------------------------------------------------------------------------------

caf::error yaml_error(const std::string& source, int line, const std::string& what) {
  return make_error(errc::invalid_config,
                    source + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + what);
}

caf::error flatten(const YAML::Node& node, const std::string& prefix, seed_values& out,
                   const std::string& source) {
  for (const auto& item : node) {
    const std::string name = item.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Node& value = item.second;
    if (value.IsNull())
      continue; // the seeds drop nulls: "keep the default"
    if (value.IsMap()) {
      if (auto err = flatten(value, key, out, source))
        return err;
    } else if (value.IsSequence()) {
      auto& list = out.lists[key];
      for (const auto& element : value) {
        if (!element.IsScalar())
          return yaml_error(source, element.Mark().line,
                            key + ": expected a list of plain values (numbers, strings)");
        list.push_back(element.Scalar());
      }
    } else {
      out.scalars[key] = value.Scalar();
    }
  }
  return {};
}

// -- the key table --------------------------------------------------------------------------------

/// A seed key and what it is in kbrl: the kbrl keys it sets, or why there is none.
struct seed_key {
  const char* name;   ///< as flattened ("dataset_builder.batch_size")
  const char* kbrl;   ///< the kbrl key(s) it becomes, "" when none
  const char* why;    ///< for keys without an equivalent: why; else how it converts, or ""
};

// T: kernelbench-tinker, R: kernel-rl. Both also accept multiturn_dataset_builder.* (R) with
// the keys of dataset_builder.*.
const std::vector<seed_key>& seed_keys() {
  static const std::vector<seed_key> keys{
    {"model_name", "sampler.model", "the learner trains an adapter for the same model"},
    {"lora_rank", "learner.lora_r", ""},
    {"learning_rate", "learner.lr", ""},
    {"max_tokens", "rl.max_new_tokens", ""},
    {"temperature", "rl.temperature, learner.temperature", "kbrl's log-probabilities use it too"},
    {"kl_penalty_coef", "learner.kl_coef", ""},
    {"remove_constant_reward_groups", "rl.drop_flat_groups", ""},
    {"save_every", "learner.checkpoint_every", ""},
    {"eval_every", "rl.eval_every", ""},
    {"log_path", "run.dir, run.name", "the folder's parent and name"},
    {"loss_fn", "learner.loss", "importance_sampling is pg, ppo is ppo"},
    {"loss_fn_config.clip_low_threshold", "learner.eps_low", ""},
    {"loss_fn_config.clip_high_threshold", "learner.eps_high", ""},
    {"mode", "rl.max_turns", "single_turn: 1; multi_turn: max_turns"},
    {"max_turns", "rl.max_turns", ""},
    {"gamma", "rl.gamma", "Kevin's discount of later turns' scores"},
    {"multiturn.enabled", "rl.max_turns", "false: 1; true: multiturn.max_turns"},
    {"multiturn.max_turns", "rl.max_turns", ""},
    {"multiturn.n", "rl.max_turns", ""},
    {"multiturn.gamma", "rl.gamma", ""},
    {"multiturn.aggregation", "rl.return_aggregation", ""},
    {"multiturn.early_stop_on_correct", "rl.success_speedup", "stop at a correct turn at least "
                                                               "speedup_threshold fast (0: any)"},
    {"multiturn.speedup_threshold", "rl.success_speedup", ""},
    {"multiturn.temperature", "rl.temperature, learner.temperature", ""},
    {"multiturn.top_p", "rl.top_p", ""},
    {"multiturn.seed", "run.seed", ""},
    {"multiturn.loss_fn", "learner.loss", ""},
    {"multiturn.max_grad_norm", "learner.clip_norm", ""},
    {"multiturn.warmup_ratio", "learner.warmup_steps", "the ratio of rl.steps"},
    {"multiturn.clip_epsilon_low", "learner.eps_low", ""},
    {"multiturn.clip_epsilon_high", "learner.eps_high", ""},
    {"dataset_builder.level", "problems.levels", ""},
    {"dataset_builder.levels", "problems.levels", ""},
    {"dataset_builder.start_problem", "problems.numbers", ""},
    {"dataset_builder.end_problem", "problems.numbers", ""},
    {"dataset_builder.backend", "problems.backend", ""},
    {"dataset_builder.precision", "problems.precision", ""},
    {"dataset_builder.batch_size", "rl.problems_per_step", ""},
    {"dataset_builder.group_size", "rl.group_size", ""},
    {"dataset_builder.num_epochs", "rl.steps, learner.total_steps",
     "epochs x steps per epoch over the training problems"},
    {"dataset_builder.test_fraction", "rl.eval_fraction", ""},
    {"dataset_builder.renderer_name", "rl.chat_format", ""},
    {"dataset_builder.prompt_option", "prompt.show_example, retrieval.index_dir",
     "zero_shot: no example; one_shot and few_shot: kbrl's one example; raicl: retrieval"},
    {"dataset_builder.rag_index_path", "retrieval.index_dir", "an index built by kbrl-index"},
    {"dataset_builder.raicl_k", "retrieval.k", ""},
    {"dataset_builder.num_correct_trials", "rl.correctness_trials", ""},
    {"dataset_builder.num_perf_trials", "rl.perf_trials",
     "the most: kbrl stops earlier once the mean is known to rl.timing_precision (0.01); 0 "
     "times exactly this many"},
    {"dataset_builder.excessive_speedup_threshold", "eval.suspicious_speedup", ""},
    {"dataset_builder.reward_format_weight", "reward.format", ""},
    {"dataset_builder.reward_compile_weight", "reward.compiles", ""},
    {"dataset_builder.reward_correctness_weight", "reward.correct", ""},
    {"dataset_builder.reward_speed_weight", "reward.speed, reward.speed_kind", "linear speedup"},
    {"dataset_builder.reward_speed_max_reward", "reward.speed_cap", ""},
    {"dataset_builder.reward_length_weight", "reward.length",
     "kbrl's length term is minus completion tokens / 1000"},
    {"dataset_builder.reward_thinking_weight", "reward.reasoning", ""},
    // No equivalent.
    {"num_substeps", "", "kbrl takes one optimiser step per batch"},
    {"kl_discount_factor", "", "declared by the seeds, never used"},
    {"wandb_project", "", "kbrl writes TensorBoard event files: `wandb sync --sync-tensorboard "
                          "RUN/tensorboard` uploads them (README, Metrics)"},
    {"wandb_name", "", "see wandb_project"},
    {"tensorboard_enabled", "", "TensorBoard is always written (RUN/tensorboard)"},
    {"tensorboard_log_histograms_every", "", "histograms are written every step"},
    {"tensorboard_log_per_level", "", "per-level scalars are always written"},
    {"base_url", "", "kbrl trains on your GPUs, not a Tinker service"},
    {"load_checkpoint_path", "", "continue a run with kbrl-node --resume RUN_DIR; start from an "
                                 "adapter with kbrl-warmstart"},
    {"resume_from_batch", "", "kbrl-node --resume continues at the step after the last one "
                              "committed"},
    {"start_batch", "", "see resume_from_batch"},
    {"dataset_builder.dataset_src", "", "problems come from a KernelBench checkout: "
                                        "problems.root or $KERNELBENCH_ROOT"},
    {"dataset_builder.shuffle", "", "kbrl draws problems in an order seeded by run.seed"},
    {"dataset_builder.measure_performance", "", "kbrl times every correct candidate "
                                                "(rl.perf_trials)"},
    {"dataset_builder.timing_method", "", "kbrl times with CUDA events in its own worker"},
    {"dataset_builder.check_for_excessive_speedup", "", "kbrl always flags speedups above "
                                                        "eval.suspicious_speedup"},
    {"dataset_builder.modal_gpu_type", "", "kbrl evaluates on your own GPUs (kbrl-node --role "
                                           "evaluator --gpu N)"},
    {"dataset_builder.modal_timeout", "", "see rl.eval_timeout_s"},
    {"dataset_builder.use_modal", "", "kbrl evaluates on your own GPUs"},
    {"dataset_builder.reward_clip_min", "", "kbrl's reward terms are bounded by their weights and "
                                            "reward.speed_cap"},
    {"dataset_builder.reward_clip_max", "", "see reward_clip_min"},
    {"dataset_builder.reward_enable_static_checker", "", "kbrl's static checks always run; "
                                                         "eval.rules_off|warn|error tune them"},
    {"dataset_builder.reward_static_checker_backend", "", "the checks follow problems.backend"},
    {"dataset_builder.reward_static_checker_precision", "", "the checks follow "
                                                            "problems.precision"},
    {"dataset_builder.reward_static_checker_strict", "", "eval.rules_error"},
    {"dataset_builder.reward_static_checker_warnings", "", "eval.rules_warn"},
    {"dataset_builder.prompt_precision", "", "prompts state problems.precision"},
    {"dataset_builder.prompt_include_hardware", "", "prompt.hardware_notes"},
    {"dataset_builder.prompt_gpu_name", "", "prompt.hardware_notes"},
    {"dataset_builder.prompt_max_tokens", "", "prompt.history_token_budget bounds the "
                                              "conversation"},
    {"dataset_builder.inject_think_token", "", "prompt.require_think asks for a think block"},
    {"dataset_builder.holdout_indices", "", "held-out problems are chosen by rl.eval_fraction"},
    {"multiturn.max_tokens_extended", "", "one rl.max_new_tokens for the whole run"},
    {"multiturn.max_tokens_extend_after_step", "", "see max_tokens_extended"},
    {"multiturn.constant_length_norm", "", "learner.aggregation (token or sequence)"},
    {"dataset_builder.early_stop_on_correct", "rl.success_speedup", ""},
    {"dataset_builder.speedup_threshold", "rl.success_speedup", ""},
  };
  return keys;
}

/// The table entry of `key` (dataset_builder.* also as multiturn_dataset_builder.*).
const seed_key* find_seed_key(const std::string& key) {
  std::string k = key;
  const std::string mt = "multiturn_dataset_builder.";
  if (k.rfind(mt, 0) == 0)
    k = "dataset_builder." + k.substr(mt.size());
  for (const auto& s : seed_keys())
    if (k == s.name)
      return &s;
  return nullptr;
}

// -- conversion -----------------------------------------------------------------------------------

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::optional<double> parse_number(const std::string& text) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v))
      return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<bool> parse_bool(const std::string& text) {
  if (text == "true" || text == "True" || text == "TRUE" || text == "yes")
    return true;
  if (text == "false" || text == "False" || text == "FALSE" || text == "no")
    return false;
  return std::nullopt;
}

/// Builds the conversion: reads seed keys (marking them used) and writes kbrl settings.
class converter {
public:
  explicit converter(const seed_values& seed) : seed_(seed) {}

  /// The scalar of `key` (dataset_builder.* falls back to multiturn_dataset_builder.* when the
  /// run is multi-turn and only that is set), marked as used.
  std::optional<std::string> take(const std::string& key) {
    used_.insert(key);
    if (auto it = seed_.scalars.find(key); it != seed_.scalars.end())
      return it->second;
    const std::string db = "dataset_builder.";
    if (key.rfind(db, 0) == 0) {
      const std::string alt = "multiturn_dataset_builder." + key.substr(db.size());
      used_.insert(alt);
      if (auto it = seed_.scalars.find(alt); it != seed_.scalars.end())
        return it->second;
    }
    return std::nullopt;
  }

  std::optional<std::vector<std::string>> take_list(const std::string& key) {
    used_.insert(key);
    if (auto it = seed_.lists.find(key); it != seed_.lists.end())
      return it->second;
    return std::nullopt;
  }

  /// Writes kbrl `key` with the seed scalar `text` converted to the key's kind.
  void set(const std::string& key, const std::string& text, const std::string& from) {
    const setting* s = find_setting(key);
    if (s == nullptr) {
      errors_.push_back(from + ": no kbrl setting " + key + " (a bug in the converter)");
      return;
    }
    std::string value;
    switch (s->kind) {
      case setting_kind::string: value = toml_quote(text); break;
      case setting_kind::boolean: {
        auto b = parse_bool(text);
        if (!b)
          return fail(from, "expected true or false");
        value = *b ? "true" : "false";
        break;
      }
      case setting_kind::integer: {
        auto v = parse_number(text);
        if (!v || std::floor(*v) != *v)
          return fail(from, "expected a whole number");
        value = std::to_string(static_cast<long long>(*v));
        break;
      }
      case setting_kind::real: {
        auto v = parse_number(text);
        if (!v)
          return fail(from, "expected a number");
        value = number_text(*v);
        break;
      }
      default: value = text; break; // lists are given as TOML by the caller
    }
    put(key, value, from);
  }

  void put(const std::string& key, const std::string& toml_value, const std::string& from) {
    for (auto& c : out_.settings)
      if (c.key == key) { // a later, more specific seed key wins (multiturn.* over top level)
        c = {key, toml_value, from};
        return;
      }
    out_.settings.push_back({key, toml_value, from});
  }

  void fail(const std::string& from, const std::string& what) {
    errors_.push_back(from + ": " + what);
  }

  void assume(const std::string& what) { out_.assumptions.push_back(what); }

  /// Lists every seed key not read, with why it has no equivalent.
  void list_the_rest() {
    auto note = [&](const std::string& key, const std::string& shown) {
      if (used_.count(key))
        return;
      const seed_key* s = find_seed_key(key);
      out_.no_equivalent.push_back(shown + ": "
                                   + (s != nullptr && *s->why ? std::string(s->why)
                                      : s != nullptr         ? "not used by this config's mode"
                                                             : "not a key kbrl knows"));
    };
    for (auto& [k, v] : seed_.scalars)
      note(k, k + ": " + v);
    for (auto& [k, v] : seed_.lists)
      note(k, k + ": [list]");
  }

  caf::expected<seed_conversion> result() {
    // Every value through kbrl's own checks: the config must load.
    run_config check;
    for (auto& c : out_.settings)
      if (auto err = check.apply_override(c.key + "=" + c.toml_value))
        errors_.push_back(c.from + " -> " + c.key + ": " + error_text(err));
    if (!errors_.empty()) {
      std::string text = "the seed config cannot be converted:";
      for (auto& e : errors_)
        text += "\n  " + e;
      return make_error(errc::invalid_config, text);
    }
    return std::move(out_);
  }

  const seed_values& seed() const { return seed_; }

private:
  const seed_values& seed_;
  std::set<std::string> used_;
  seed_conversion out_;
  std::vector<std::string> errors_;
};

std::string from_text(const std::string& key, const std::string& value) {
  return key + ": " + value;
}

/// Renames: seed key -> kbrl key, same value.
void renames(converter& c) {
  static const std::vector<std::pair<const char*, const char*>> simple{
    {"model_name", "sampler.model"},
    {"lora_rank", "learner.lora_r"},
    {"learning_rate", "learner.lr"},
    {"max_tokens", "rl.max_new_tokens"},
    {"kl_penalty_coef", "learner.kl_coef"},
    {"remove_constant_reward_groups", "rl.drop_flat_groups"},
    {"save_every", "learner.checkpoint_every"},
    {"eval_every", "rl.eval_every"},
    {"loss_fn_config.clip_low_threshold", "learner.eps_low"},
    {"loss_fn_config.clip_high_threshold", "learner.eps_high"},
    {"dataset_builder.group_size", "rl.group_size"},
    {"dataset_builder.batch_size", "rl.problems_per_step"},
    {"dataset_builder.test_fraction", "rl.eval_fraction"},
    {"dataset_builder.num_correct_trials", "rl.correctness_trials"},
    {"dataset_builder.num_perf_trials", "rl.perf_trials"},
    {"dataset_builder.precision", "problems.precision"},
    {"dataset_builder.excessive_speedup_threshold", "eval.suspicious_speedup"},
    {"dataset_builder.reward_format_weight", "reward.format"},
    {"dataset_builder.reward_compile_weight", "reward.compiles"},
    {"dataset_builder.reward_correctness_weight", "reward.correct"},
    {"dataset_builder.reward_length_weight", "reward.length"},
    {"dataset_builder.reward_thinking_weight", "reward.reasoning"},
    {"dataset_builder.reward_speed_max_reward", "reward.speed_cap"},
  };
  for (auto [seed_key, kbrl_key] : simple)
    if (auto v = c.take(seed_key))
      c.set(kbrl_key, *v, from_text(seed_key, *v));
  if (auto v = c.take("dataset_builder.reward_speed_weight")) {
    c.set("reward.speed", *v, from_text("dataset_builder.reward_speed_weight", *v));
    c.put("reward.speed_kind", "\"linear\"",
          "dataset_builder.reward_speed_weight (the seeds' speed term is the speedup)");
  }
  if (auto v = c.take("temperature")) {
    c.set("rl.temperature", *v, from_text("temperature", *v));
    c.set("learner.temperature", *v, "temperature (the learner's log-probabilities use it)");
  }
}

std::string loss_of(const std::string& seed_loss) {
  return seed_loss == "importance_sampling" ? "pg" : seed_loss == "ppo" ? "ppo" : "";
}

void loss(converter& c, bool multi_turn_section) {
  auto set_loss = [&](const std::string& key) {
    if (auto v = c.take(key)) {
      auto kbrl = loss_of(*v);
      if (kbrl.empty())
        return c.fail(from_text(key, *v), "expected importance_sampling or ppo");
      c.set("learner.loss", kbrl, from_text(key, *v));
    }
  };
  set_loss("loss_fn");
  if (!multi_turn_section)
    return;
  set_loss("multiturn.loss_fn");
  for (auto [seed_key, kbrl_key] : {std::pair{"multiturn.clip_epsilon_low", "learner.eps_low"},
                                    std::pair{"multiturn.clip_epsilon_high", "learner.eps_high"},
                                    std::pair{"multiturn.max_grad_norm", "learner.clip_norm"},
                                    std::pair{"multiturn.top_p", "rl.top_p"},
                                    std::pair{"multiturn.seed", "run.seed"}})
    if (auto v = c.take(seed_key))
      c.set(kbrl_key, *v, from_text(seed_key, *v));
  if (auto v = c.take("multiturn.temperature")) {
    c.set("rl.temperature", *v, from_text("multiturn.temperature", *v));
    c.set("learner.temperature", *v, "multiturn.temperature (the learner's log-probabilities)");
  }
}

/// Turns: kernel-rl's mode/max_turns/gamma, kernelbench-tinker's multiturn section. True when
/// the run is multi-turn.
bool turns(converter& c) {
  bool multi = false;
  if (auto mode = c.take("mode")) {
    if (*mode != "single_turn" && *mode != "multi_turn")
      c.fail(from_text("mode", *mode), "expected single_turn or multi_turn");
    multi = *mode == "multi_turn";
    auto n = c.take("max_turns");
    c.set("rl.max_turns", multi ? n.value_or("4") : "1",
          "mode: " + *mode + (multi && n ? ", max_turns: " + *n : ""));
    if (auto g = c.take("gamma"))
      c.set("rl.gamma", *g, from_text("gamma", *g));
  }
  if (auto enabled = c.take("multiturn.enabled")) {
    multi = parse_bool(*enabled).value_or(false);
    auto n = c.take("multiturn.max_turns");
    if (!n)
      n = c.take("multiturn.n");
    c.set("rl.max_turns", multi ? n.value_or("4") : "1",
          "multiturn.enabled: " + *enabled + (multi && n ? ", max_turns: " + *n : ""));
    if (multi) {
      if (auto g = c.take("multiturn.gamma"))
        c.set("rl.gamma", *g, from_text("multiturn.gamma", *g));
      if (auto a = c.take("multiturn.aggregation"))
        c.set("rl.return_aggregation", *a, from_text("multiturn.aggregation", *a));
    }
  }
  // Early stop: a correct turn at least speedup_threshold fast ends the episode.
  for (const std::string section : {"multiturn.", "dataset_builder."}) {
    auto stop = c.take(section + "early_stop_on_correct");
    auto threshold = c.take(section + "speedup_threshold");
    if (!multi)
      continue;
    if (stop && parse_bool(*stop).value_or(false))
      c.set("rl.success_speedup", threshold.value_or("0"),
            section + "early_stop_on_correct: true"
              + (threshold ? ", speedup_threshold: " + *threshold : ""));
  }
  return multi;
}

void problems(converter& c) {
  if (auto levels = c.take_list("dataset_builder.levels")) {
    std::string list;
    for (auto& l : *levels)
      list += (list.empty() ? "" : ", ") + l;
    c.put("problems.levels", "[" + list + "]", "dataset_builder.levels: [" + list + "]");
  } else if (auto level = c.take("dataset_builder.level")) {
    c.put("problems.levels", "[" + *level + "]", from_text("dataset_builder.level", *level));
  }
  auto start = c.take("dataset_builder.start_problem");
  auto end = c.take("dataset_builder.end_problem");
  if (start || end) {
    auto range = start.value_or("1") + "-" + end.value_or("999");
    c.set("problems.numbers", range,
          "dataset_builder.start_problem/end_problem: " + start.value_or("-") + "/"
            + end.value_or("-"));
  }
  if (auto backend = c.take("dataset_builder.backend")) {
    if (*backend == "cuda" || *backend == "triton")
      c.set("problems.backend", *backend, from_text("dataset_builder.backend", *backend));
    else
      c.fail(from_text("dataset_builder.backend", *backend),
             "kbrl trains on cuda or triton candidates (kbrl-eval evaluates the other backends)");
  }
}

/// KernelBench's problem counts per level (the seeds' dataset).
int problems_in_level(int level) {
  switch (level) {
    case 1: return 100;
    case 2: return 100;
    case 3: return 50;
    case 4: return 20;
    default: return 0;
  }
}

void steps(converter& c) {
  auto epochs = c.take("dataset_builder.num_epochs");
  if (!epochs)
    return;
  auto e = parse_number(*epochs);
  if (!e || *e < 1)
    return c.fail(from_text("dataset_builder.num_epochs", *epochs), "expected a number >= 1");
  // Training problems: the levels' problems (or the start..end range) less the held-out share.
  int total = 0;
  auto levels = c.seed().lists.count("dataset_builder.levels")
                  ? c.seed().lists.at("dataset_builder.levels")
                  : std::vector<std::string>{c.seed().scalars.count("dataset_builder.level")
                                               ? c.seed().scalars.at("dataset_builder.level")
                                               : "1"};
  for (auto& l : levels)
    total += problems_in_level(static_cast<int>(parse_number(l).value_or(0)));
  auto start = parse_number(c.seed().scalars.count("dataset_builder.start_problem")
                              ? c.seed().scalars.at("dataset_builder.start_problem")
                              : "");
  auto end = parse_number(c.seed().scalars.count("dataset_builder.end_problem")
                            ? c.seed().scalars.at("dataset_builder.end_problem")
                            : "");
  if (start || end)
    total = std::min(total, static_cast<int>(end.value_or(total) - start.value_or(1) + 1));
  const double held_out = parse_number(c.seed().scalars.count("dataset_builder.test_fraction")
                                         ? c.seed().scalars.at("dataset_builder.test_fraction")
                                         : "0")
                            .value_or(0);
  const int train = std::max(1, static_cast<int>(std::lround(total * (1 - held_out))));
  const int per_step = static_cast<int>(
    parse_number(c.seed().scalars.count("dataset_builder.batch_size")
                   ? c.seed().scalars.at("dataset_builder.batch_size")
                   : "4")
      .value_or(4));
  const int steps_per_epoch = (train + std::max(per_step, 1) - 1) / std::max(per_step, 1);
  const int steps = static_cast<int>(*e) * steps_per_epoch;
  c.set("rl.steps", std::to_string(steps), from_text("dataset_builder.num_epochs", *epochs));
  c.set("learner.total_steps", std::to_string(steps), "rl.steps (the schedule spans the run)");
  c.assume("rl.steps = " + std::to_string(steps) + ": " + *epochs + " epoch(s) of "
           + std::to_string(steps_per_epoch) + " steps (" + std::to_string(train)
           + " training problems of KernelBench's levels, " + std::to_string(per_step)
           + " per step)");
  if (auto ratio = c.take("multiturn.warmup_ratio"))
    if (auto r = parse_number(*ratio)) {
      c.set("learner.warmup_steps", std::to_string(std::lround(*r * steps)),
            from_text("multiturn.warmup_ratio", *ratio) + " of " + std::to_string(steps));
      c.put("learner.schedule", "\"cosine\"", "multiturn.warmup_ratio (warm-up, then cosine)");
    }
}

void prompts(converter& c) {
  if (auto r = c.take("dataset_builder.renderer_name")) {
    if (*r == "qwen3" || *r == "llama3")
      c.set("rl.chat_format", *r, from_text("dataset_builder.renderer_name", *r));
    else {
      c.set("rl.chat_format", "auto", from_text("dataset_builder.renderer_name", *r));
      c.assume("renderer_name " + *r + ": rl.chat_format auto renders the model's own template");
    }
  }
  auto option = c.take("dataset_builder.prompt_option");
  auto index = c.take("dataset_builder.rag_index_path");
  auto k = c.take("dataset_builder.raicl_k");
  if (!option)
    return;
  const std::string from = from_text("dataset_builder.prompt_option", *option);
  if (*option == "zero_shot") {
    c.set("prompt.show_example", "false", from);
  } else if (*option == "one_shot" || *option == "few_shot") {
    c.set("prompt.show_example", "true", from);
    if (*option == "few_shot")
      c.assume("prompt_option few_shot: kbrl shows one example (retrieval gives more)");
  } else if (*option == "raicl") {
    if (!index)
      return c.fail(from, "raicl needs dataset_builder.rag_index_path");
    c.set("retrieval.index_dir", *index, from + ", rag_index_path: " + *index);
    if (k)
      c.set("retrieval.k", *k, from_text("dataset_builder.raicl_k", *k));
    c.assume("retrieval.index_dir " + *index + ": build it with kbrl-index build (the seeds' "
             "RAG index is not read by kbrl)");
  } else {
    c.fail(from, "expected zero_shot, one_shot, few_shot or raicl");
  }
}

void run_folder(converter& c) {
  auto path = c.take("log_path");
  if (!path)
    return;
  std::string p = *path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  const auto slash = p.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : p.substr(0, slash);
  const std::string name = slash == std::string::npos ? p : p.substr(slash + 1);
  c.set("run.dir", dir.empty() ? "/" : dir, from_text("log_path", *path));
  c.set("run.name", name, from_text("log_path", *path));
}

} // namespace

caf::expected<seed_values> read_seed_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return yaml_error(source, e.mark.line, e.msg);
  }
  if (root.IsNull())
    return seed_values{};
  if (!root.IsMap())
    return yaml_error(source, -1, "expected a mapping of settings at the top");
  seed_values out;
  try {
    if (auto err = flatten(root, "", out, source))
      return err;
  } catch (const YAML::Exception& e) {
    return yaml_error(source, e.mark.line, e.msg);
  }
  return out;
}

caf::expected<seed_conversion> convert_seed(const seed_values& seed) {
  converter c(seed);
  c.put("rl.enabled", "true", "a seed training config: kbrl-node runs the RL loop");
  renames(c);
  const bool multi = turns(c);
  loss(c, multi);
  problems(c);
  steps(c);
  prompts(c);
  run_folder(c);
  c.list_the_rest();
  return c.result();
}

std::string seed_conversion::toml(const std::string& source) const {
  std::ostringstream out;
  out << "# kbrl run config converted from " << source << " by kbrl-config from-yaml.\n"
      << "# Each setting names the seed key it came from; what has no equivalent is listed at\n"
      << "# the end. MIGRATING.md explains the names.\n";
  std::map<std::string, std::vector<const converted_setting*>> by_section;
  for (auto& s : settings)
    by_section[s.key.substr(0, s.key.find('.'))].push_back(&s);
  for (auto& [section, list] : by_section) {
    out << "\n[" << section << "]\n";
    for (auto* s : list)
      out << s->key.substr(s->key.find('.') + 1) << " = " << s->toml_value << "  # " << s->from
          << "\n";
  }
  if (!assumptions.empty()) {
    out << "\n# Decided by the conversion:\n";
    for (auto& a : assumptions)
      out << "#   " << a << "\n";
  }
  if (!no_equivalent.empty()) {
    out << "\n# No kbrl equivalent (left out):\n";
    for (auto& n : no_equivalent)
      out << "#   " << n << "\n";
  }
  return out.str();
}

std::vector<std::string> seed_key_names() {
  std::vector<std::string> out;
  for (const auto& s : seed_keys())
    out.push_back(s.name);
  return out;
}

std::string seed_key_hint(const std::string& key) {
  const seed_key* s = find_seed_key(key);
  if (s == nullptr) {
    const auto dot = key.rfind('.');
    if (dot == std::string::npos)
      return "";
    for (const std::string prefix : {"", "dataset_builder.", "multiturn."}) {
      s = find_seed_key(prefix + key.substr(dot + 1));
      if (s != nullptr)
        break;
    }
    if (s == nullptr)
      return "";
  }
  std::string hint = " (" + std::string(s->name) + " is a kernelbench-tinker / kernel-rl key; ";
  hint += *s->kbrl ? "kbrl's is " + std::string(s->kbrl)
                    : "kbrl has no equivalent: " + std::string(s->why);
  return hint + "; kbrl-config from-yaml converts a seed config)";
}

} // namespace kbrl::config
