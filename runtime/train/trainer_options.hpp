#pragma once
// What a LoRA trainer is set up with (trainer.hpp trains), without torch, so that the learner's
// settings and the run config can carry it.

#include "runtime/model/model_config.hpp"
#include "runtime/rl/policy_loss_options.hpp"
#include "runtime/train/optimizer_options.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::train {

/// Where the LoRA terms of a model whose weights are bfloat16 or float16 compute (float32 and
/// float64 models compute everything in their own dtype either way).
enum class lora_compute_dtype {
  /// In the model's dtype, as torch.autocast would: the float32 factors are cast to it in each
  /// forward (their gradients flow back through the cast and accumulate in float32), the layer
  /// input is used as it is. Cheaper: no float32 copy of each activation, bfloat16 matmuls.
  base,
  /// In float32, as PEFT does (it casts the layer input to the factors' dtype): the input is
  /// widened, the term computed in float32 and cast back.
  float32,
};

const char* to_string(lora_compute_dtype d);
/// "base" or "float32"; errc::invalid_argument otherwise.
caf::expected<lora_compute_dtype> parse_lora_compute_dtype(const std::string& name);

/// The dtype of the LoRA factors, their gradients and the optimiser's moments.
enum class factor_dtype : uint8_t { float32, float64 };

/// Everything a trainer is set up with; the defaults are the run config's.
struct trainer_options {
  // -- the adapter (ignored when the trainer starts from an existing adapter) --
  int64_t lora_r = 16;
  double lora_alpha = 32;
  bool use_rslora = false;
  /// Module names or suffixes, as PEFT's target_modules.
  std::vector<std::string> target_modules = model::lora_module_names();
  /// Probability of LoRA dropout during training steps, in [0, 1).
  double lora_dropout = 0.0;
  /// float32; float64 only for gradient checks.
  factor_dtype param_dtype = factor_dtype::float32;
  /// The base model's Hugging Face id or directory, as the run config names it: written as the
  /// adapter's base_model_name_or_path (PEFT loads the base from it). "": the adapter's own.
  std::string base_model;
  /// Seeds the initialisation of A and the dropout generator.
  uint64_t seed = 0;
  /// Where the LoRA terms compute on a bfloat16/float16 model (see lora_compute_dtype).
  lora_compute_dtype lora_compute = lora_compute_dtype::base;

  // -- optimisation --
  adamw_options adamw;
  lr_schedule schedule;
  /// Global L2 norm the gradient is clipped to; 0: no clipping.
  double clip_norm = 1.0;

  // -- batching and memory --
  /// Padded tokens (sequences x longest sequence) per micro-batch, > 0.
  int64_t micro_batch_tokens = 16384;
  /// Recompute each decoder layer in the backward pass instead of keeping its activations.
  bool gradient_checkpointing = true;
  /// Positions per logits computation (chunked_token_logprobs), > 0.
  int64_t logprob_chunk = 1024;
  /// Attention through the explicit boolean mask of model::causal_mask() (the older path, which
  /// keeps the fused kernels off their flash path; kept to measure against) instead of causal
  /// attention without a mask tensor (attention.hpp). The results agree up to rounding.
  bool explicit_attention_mask = false;

  // -- the loss --
  rl::policy_loss_options loss;
  rl::loss_aggregation aggregation = rl::loss_aggregation::token;
  /// The sampler's temperature, which defines the log-probabilities (0 counts as 1).
  double temperature = 1.0;
};

/// Checks the ranges of `options`; errc::invalid_argument naming each bad field.
caf::expected<void> check_trainer_options(const trainer_options& options);

} // namespace kbrl::train
