// The trainer's settings: their spellings and checks (no torch: the node checks a config with them).
#include "runtime/train/trainer_options.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace kbrl::train {

const char* to_string(lora_compute_dtype d) {
  return d == lora_compute_dtype::base ? "base" : "float32";
}

caf::expected<lora_compute_dtype> parse_lora_compute_dtype(const std::string& name) {
  if (name == "base")
    return lora_compute_dtype::base;
  if (name == "float32")
    return lora_compute_dtype::float32;
  return make_error(errc::invalid_argument,
                    "lora_compute_dtype: expected base or float32, got \"" + name + "\"");
}


caf::expected<void> check_trainer_options(const trainer_options& o) {
  std::vector<std::string> bad;
  if (o.lora_r < 1)
    bad.push_back("lora_r must be >= 1, got " + std::to_string(o.lora_r));
  if (!(o.lora_alpha > 0) || !std::isfinite(o.lora_alpha))
    bad.push_back("lora_alpha must be > 0, got " + std::to_string(o.lora_alpha));
  if (!(o.lora_dropout >= 0 && o.lora_dropout < 1))
    bad.push_back("lora_dropout must be in [0, 1), got " + std::to_string(o.lora_dropout));
  if (o.target_modules.empty())
    bad.push_back("target_modules must name at least one module");
  if (!(o.clip_norm >= 0) || !std::isfinite(o.clip_norm))
    bad.push_back("clip_norm must be >= 0, got " + std::to_string(o.clip_norm));
  if (o.micro_batch_tokens < 1)
    bad.push_back("micro_batch_tokens must be > 0, got " + std::to_string(o.micro_batch_tokens));
  if (o.logprob_chunk < 1)
    bad.push_back("logprob_chunk must be > 0, got " + std::to_string(o.logprob_chunk));
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    bad.push_back("temperature must be >= 0, got " + std::to_string(o.temperature));
  if (auto ok = check_optimizer_options(o.adamw, o.schedule); !ok)
    bad.push_back(describe(ok.error()));
  if (auto ok = rl::check_policy_loss_options(o.loss); !ok)
    bad.push_back(describe(ok.error()));
  if (!bad.empty())
    return make_error(errc::invalid_argument, "trainer: " + join(bad, "\n"));
  return {};
}

} // namespace kbrl::train
