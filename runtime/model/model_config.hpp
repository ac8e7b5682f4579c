#pragma once
// A model's shape as its Hugging Face config.json describes it, for the architectures kbrl runs:
//   qwen2  Qwen2 / Qwen2.5 (and Qwen2.5-Coder): bias on q/k/v projections, none on o_proj
//   qwen3  Qwen3: RMSNorm on each head of q and k (q_norm, k_norm), head_dim written explicitly
//   llama  Llama 3.x: optional "llama3" RoPE scaling (factor, low/high frequency factors)
// Anything else (another model_type, sliding-window attention, another activation, RoPE scaling
// other than "llama3") is refused by name with the list of what is supported, rather than run
// wrongly. generation_config.json (sampling defaults, end-of-sequence ids) is read here too, and
// expected_weights() names every tensor a checkpoint of a config must hold.

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::model {

/// The model_type values kbrl runs: "qwen2", "qwen3", "llama".
const std::vector<std::string>& supported_model_types();

/// The rope_scaling types kbrl runs: "default" (none) and "llama3".
const std::vector<std::string>& supported_rope_scaling_types();

/// Llama 3's RoPE frequency scaling (rope_scaling with rope_type "llama3"): wavelengths longer
/// than original_max_position_embeddings / low_freq_factor are divided by `factor`, shorter than
/// original_max_position_embeddings / high_freq_factor are kept, those between are interpolated.
struct llama3_rope_scaling {
  double factor = 8.0;                               ///< > 0
  double low_freq_factor = 1.0;                      ///< > 0
  double high_freq_factor = 4.0;                     ///< > low_freq_factor
  int64_t original_max_position_embeddings = 8192;   ///< > 0
};

/// The parts of config.json that shape the network. Field names are config.json's keys.
struct model_config {
  /// "qwen2", "qwen3" or "llama" (one of supported_model_types()).
  std::string model_type;
  int64_t vocab_size = 0;          ///< rows of the embedding and of lm_head
  int64_t hidden_size = 0;         ///< width of the residual stream
  int64_t intermediate_size = 0;   ///< width of the gated MLP
  int64_t num_hidden_layers = 0;   ///< decoder layers
  int64_t num_attention_heads = 0; ///< query heads
  /// Key/value heads (grouped-query attention); divides num_attention_heads. Default: the number
  /// of query heads.
  int64_t num_key_value_heads = 0;
  /// Width of one head, even (RoPE rotates pairs). Default: hidden_size / num_attention_heads.
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;             ///< epsilon of every RMSNorm; > 0. Default 1e-6.
  double rope_theta = 10000.0;            ///< RoPE base; > 0. Default 10000.
  int64_t max_position_embeddings = 0;    ///< longest sequence trained on; > 0. Required.
  /// lm_head shares the embedding matrix (no lm_head.weight needed). Default false.
  bool tie_word_embeddings = false;
  /// config.json's attention_bias (llama, qwen3): bias on q, k, v and o projections. Default
  /// false. Qwen2 has no such key: its q/k/v always have a bias and o_proj never (see qkv_bias()).
  bool attention_bias = false;
  /// config.json's mlp_bias (llama): bias on gate/up/down projections. Default false.
  bool mlp_bias = false;
  /// Parameter dtype of the published weights: "bfloat16", "float16", "float32" (torch_dtype,
  /// or dtype in newer files); empty if the file does not say.
  std::string torch_dtype;
  /// Llama 3 RoPE scaling; nullopt for none (absent, null or rope_type "default"). Read from
  /// rope_scaling, or from rope_parameters (with rope_theta inside) when a file has only that.
  std::optional<llama3_rope_scaling> rope_scaling;
  /// Beginning-of-sequence token; nullopt if absent or null.
  std::optional<int64_t> bos_token_id;
  /// End-of-sequence tokens (config.json allows one id or a list); empty if absent or null.
  std::vector<int64_t> eos_token_ids;

  /// q_proj, k_proj and v_proj carry a bias: qwen2 always, others if attention_bias.
  bool qkv_bias() const;
  /// o_proj carries a bias: never for qwen2, else if attention_bias.
  bool o_proj_bias() const;
  /// Per-head RMSNorm on q and k before RoPE (q_norm, k_norm): qwen3.
  bool qk_norm() const;
};

/// Parses config.json text; `path` names the file in errors. Fails with errc::invalid_config
/// listing every problem, one per line, as `path: key: what was expected, got what`; an
/// unsupported model_type or RoPE scaling is named with the supported ones.
caf::expected<model_config> parse_model_config(std::string_view json, const std::string& path);

/// Reads and parses the config.json at `path`; errc::io_failure if it cannot be read.
caf::expected<model_config> load_model_config(const std::filesystem::path& path);

/// The config as config.json text (with "architectures" and the keys above) that
/// parse_model_config() reads back to an equal config.
std::string render_model_config(const model_config& config);

/// Field-wise equality.
bool operator==(const model_config& a, const model_config& b);
bool operator!=(const model_config& a, const model_config& b);

/// Sampling defaults and stop tokens from generation_config.json. Every field is optional: a
/// missing key leaves it unset, and the sampler's own settings decide.
struct generation_config {
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  /// End-of-sequence tokens (one id or a list in the file); empty if absent.
  std::vector<int64_t> eos_token_ids;
  std::optional<bool> do_sample;
  std::optional<double> temperature;        ///< >= 0
  std::optional<double> top_p;              ///< in (0, 1]
  std::optional<int64_t> top_k;             ///< >= 0 (0: off)
  std::optional<double> repetition_penalty; ///< > 0
  std::optional<int64_t> max_new_tokens;    ///< > 0
};

/// Parses generation_config.json text; errors like parse_model_config().
caf::expected<generation_config> parse_generation_config(std::string_view json,
                                                         const std::string& path);

/// Reads and parses the generation_config.json at `path`.
caf::expected<generation_config> load_generation_config(const std::filesystem::path& path);

/// One tensor a checkpoint must hold.
struct weight_spec {
  std::string name;            ///< e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  ///< e.g. [num_attention_heads * head_dim, hidden_size]
};

/// Every tensor a checkpoint of `config` must hold, in the order of the network: the
/// embedding, then per layer input_layernorm, q/k/v/o projections (with biases and q/k norms as
/// the config says), post_attention_layernorm, gate/up/down projections, then model.norm and
/// lm_head (unless the embeddings are tied).
std::vector<weight_spec> expected_weights(const model_config& config);

/// The names of the linear layers LoRA can target, as PEFT's target_modules spells them
/// (defined with the transformer, which owns those layers).
const std::vector<std::string>& lora_module_names();

} // namespace kbrl::model
