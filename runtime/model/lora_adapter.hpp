#pragma once
// LoRA adapters in PEFT's on-disk format, the format the learner writes and samplers read:
//
//   <dir>/adapter_config.json        {"peft_type": "LORA", "r": 16, "lora_alpha": 32,
//                                     "target_modules": ["q_proj", "v_proj"], "use_rslora": false,
//                                     "fan_in_fan_out": false, "bias": "none", ...}
//   <dir>/adapter_model.safetensors  base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight
//                                    [r, in_features], ....lora_B.weight [out_features, r], ...
//
// A targeted linear layer computes y = W x + b + scaling * B (A x), scaling = lora_alpha / r
// (lora_alpha / sqrt(r) with use_rslora). target_modules is matched as PEFT matches it: a list
// entry matches a module whose name equals it or ends with "." + it; a string is a regular
// expression that must match the whole module name. layers_to_transform limits the layers.
//
// Only what kbrl computes exactly is accepted; everything else is refused by name: another
// peft_type, fan_in_fan_out, DoRA (use_dora), LoRA biases (bias other than "none", lora_bias),
// modules_to_save, rank_pattern/alpha_pattern, layer_replication, target_parameters,
// trainable_token_indices, exclude_modules, and targets other than the decoder layers'
// q/k/v/o/gate/up/down projections (embed_tokens, lm_head).
//
// An adapter is loaded for a model config: every tensor is checked (a module the model has, the
// config's rank, the layer's in/out features) and every module the config targets must have its
// two factors, so an adapter that does not belong to the model fails at load time with an error
// naming the file, the tensor and what was expected. Attaching replaces the LoRA factors of the
// model's layers without touching the base weights: swapping versions between batches costs only
// the adapter's own (small) tensors.

#include "runtime/model/model_config.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::model {

/// File names inside an adapter directory.
inline constexpr const char* lora_config_name = "adapter_config.json";
inline constexpr const char* lora_weights_name = "adapter_model.safetensors";

/// The parts of adapter_config.json that shape the computation.
struct lora_config {
  int64_t r = 0;             ///< rank, > 0
  double lora_alpha = 0;     ///< > 0
  /// Module names or suffixes ("q_proj", "self_attn.q_proj"); used when target_regex is empty.
  std::vector<std::string> target_modules;
  /// target_modules given as one string: a regular expression over whole module names.
  std::string target_regex;
  bool use_rslora = false;   ///< scaling lora_alpha / sqrt(r) instead of lora_alpha / r
  /// Layer indices the adapter applies to; nullopt: all.
  std::optional<std::vector<int64_t>> layers_to_transform;
  /// The base model's hub id or directory; PEFT's AutoPeftModel loads the base from it.
  std::string base_model_name_or_path;

  /// lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
  double scaling() const;

  /// Whether the config targets `module` ("model.layers.3.self_attn.q_proj") under PEFT's
  /// matching rules (see above).
  bool targets(const std::string& module) const;
};

/// Parses adapter_config.json text; `path` names the file in errors. Fails with
/// errc::invalid_config listing each problem as `path: key: what was expected, got what`, and
/// with errc::not_supported naming each refused feature (see above).
caf::expected<lora_config> parse_lora_config(std::string_view json, const std::string& path);

/// adapter_config.json text for `config` that PEFT's LoraConfig and parse_lora_config() read.
std::string render_lora_config(const lora_config& config);

/// A LoRA adapter, its factors keyed by module name ("model.layers.0.self_attn.q_proj").
struct lora_adapter {
  lora_config config;
  std::map<std::string, lora_factors> modules; ///< each with config.scaling()
};

/// The in and out features of the model's linear layer `module`, or nullopt if `config` has no
/// such LoRA-capable layer.
std::optional<std::pair<int64_t, int64_t>> lora_module_shape(const model_config& config,
                                                             const std::string& module);

/// Checks `adapter` against `config`: every module exists and is targeted by the adapter's
/// config, its factors have the adapter's rank and the layer's features, and every module the
/// config targets is there. Fails with errc::invalid_argument listing each problem.
caf::expected<void> check_lora_adapter(const lora_adapter& adapter, const model_config& config);

/// Loads the adapter in directory `dir` for a model of `config`, converting the factors to
/// `options` (the model's device; dtype float32 for a learner, the run dtype for a sampler).
/// Fails with errc::io_failure if a file is missing or unreadable, errc::invalid_config or
/// errc::not_supported for adapter_config.json (see parse_lora_config), and
/// errc::invalid_argument, naming the file and tensor, for a tensor that is not a LoRA factor
/// of this model (unknown module, wrong rank or shape, untargeted module, missing factor).
caf::expected<lora_adapter> load_lora_adapter(const std::filesystem::path& dir,
                                              const model_config& config,
                                              const at::TensorOptions& options);

/// Writes `adapter` into `dir` (created if missing) in PEFT's layout: adapter_config.json and
/// adapter_model.safetensors with PEFT's tensor names, each file atomically. Fails with
/// errc::io_failure if a file cannot be written.
caf::expected<void> write_lora_adapter(const std::filesystem::path& dir,
                                       const lora_adapter& adapter);

/// Replaces the LoRA factors of `model` with the adapter's (layers the adapter does not target
/// get none). Checks the adapter against the model first; on failure the model is unchanged.
caf::expected<void> attach_lora_adapter(transformer& model, const lora_adapter& adapter);

/// An adapter of `config` for `model` with factors drawn from N(0, std^2) by a generator seeded
/// with `seed` (float32, CPU); with `zero_b` every B is zero, so the adapter changes nothing
/// (PEFT's initialisation). For tests and for a learner's first version.
lora_adapter random_lora_adapter(const model_config& model, const lora_config& config,
                                 uint64_t seed, double std = 0.02, bool zero_b = false);

} // namespace kbrl::model
