#include "runtime/train/learner_settings.hpp"

#include "messages/errors.hpp"
#include "runtime/config/settings.hpp"

namespace kbrl::train {

int primary_gpu(const learner_settings& s) {
  return s.gpus.empty() ? -1 : s.gpus.front();
}

std::string describe_devices(const learner_settings& s) {
  if (s.gpus.empty())
    return s.cpu_ranks > 1 ? "cpu x" + std::to_string(s.cpu_ranks) : "cpu";
  std::string out = "cuda:";
  for (std::size_t i = 0; i < s.gpus.size(); ++i)
    out += (i ? "," : "") + std::to_string(s.gpus[i]);
  return out;
}

caf::expected<learner_settings> learner_settings_from(const config::run_config& run, int gpu,
                                                      const std::string& run_dir) {
  learner_settings s;
  s.model = run.get_string("learner.model");
  if (s.model.empty())
    s.model = run.get_string("sampler.model");
  s.dtype = run.get_string("learner.dtype");
  if (gpu >= 0)
    s.gpus = {gpu};
  s.cpu_ranks = static_cast<int>(run.get_int("learner.data_parallel_ranks"));
  s.collective_timeout_s = run.get_real("learner.data_parallel_timeout_s");
  s.run_dir = run_dir;

  auto& t = s.trainer;
  t.lora_r = run.get_int("learner.lora_r");
  t.lora_alpha = run.get_real("learner.lora_alpha");
  t.use_rslora = run.get_bool("learner.use_rslora");
  t.target_modules = run.get_string_list("learner.target_modules");
  t.lora_dropout = run.get_real("learner.lora_dropout");
  t.seed = static_cast<uint64_t>(run.get_int("run.seed"));
  t.adamw.lr = run.get_real("learner.lr");
  t.adamw.weight_decay = run.get_real("learner.weight_decay");
  t.adamw.beta1 = run.get_real("learner.adam_beta1");
  t.adamw.beta2 = run.get_real("learner.adam_beta2");
  t.adamw.eps = run.get_real("learner.adam_eps");
  // The table allows only the spellings below, so the parsers cannot fail here.
  t.schedule.kind = *parse_lr_schedule_kind(run.get_string("learner.schedule"));
  t.schedule.warmup_steps = run.get_int("learner.warmup_steps");
  t.schedule.total_steps = run.get_int("learner.total_steps");
  t.schedule.min_ratio = run.get_real("learner.min_lr_ratio");
  t.clip_norm = run.get_real("learner.clip_norm");
  t.micro_batch_tokens = run.get_int("learner.micro_batch_tokens");
  t.gradient_checkpointing = run.get_bool("learner.gradient_checkpointing");
  t.logprob_chunk = run.get_int("learner.logprob_chunk");
  t.lora_compute = *parse_lora_compute_dtype(run.get_string("learner.lora_compute_dtype"));
  t.loss.kind = *rl::parse_policy_loss_kind(run.get_string("learner.loss"));
  t.loss.eps_low = run.get_real("learner.eps_low");
  t.loss.eps_high = run.get_real("learner.eps_high");
  t.loss.kl_coef = run.get_real("learner.kl_coef");
  t.aggregation = *rl::parse_loss_aggregation(run.get_string("learner.aggregation"));
  t.temperature = run.get_real("learner.temperature");

  s.advantage.kind = *rl::parse_advantage_kind(run.get_string("learner.advantage"));
  s.advantage.gamma = run.get_real("learner.gamma");
  s.max_staleness = static_cast<uint64_t>(run.get_int("learner.max_staleness"));
  s.checkpoint_every = run.get_int("learner.checkpoint_every");
  s.keep_checkpoints = run.get_int("learner.keep_checkpoints");
  s.resume = run.get_bool("learner.resume");
  s.publish_bytes = run.get_bool("learner.publish_bytes");

  if (t.schedule.kind == lr_schedule_kind::cosine
      && t.schedule.total_steps <= t.schedule.warmup_steps)
    return make_error(errc::invalid_config,
                      "learner.total_steps (" + std::to_string(t.schedule.total_steps)
                        + ") must exceed learner.warmup_steps ("
                        + std::to_string(t.schedule.warmup_steps)
                        + ") with learner.schedule = \"cosine\"");
  if (t.target_modules.empty())
    return make_error(errc::invalid_config,
                      "learner.target_modules is empty: name at least one linear layer");
  if (auto ok = check_trainer_options(t); !ok)
    return make_error(errc::invalid_config, "learner.*: " + describe(ok.error()));
  return s;
}

} // namespace kbrl::train
