#pragma once
// The decoder-only transformer of Qwen2/Qwen2.5, Qwen3 and Llama 3, in libtorch's C++ API,
// computing what transformers' Qwen2ForCausalLM / Qwen3ForCausalLM / LlamaForCausalLM compute:
//
//   h = embed_tokens[ids]
//   per layer:  x = rms_norm(h, input_layernorm)
//               q, k, v = q_proj(x), k_proj(x), v_proj(x)       (bias: qwen2 / attention_bias)
//               q, k = rms_norm per head (q_norm, k_norm)        (qwen3 only)
//               q, k = rope(q, positions), rope(k, positions)
//               h = h + o_proj(attention(q, k, v, mask))        (grouped-query heads)
//               x = rms_norm(h, post_attention_layernorm)
//               h = h + down_proj(silu(gate_proj(x)) * up_proj(x))
//   hidden = rms_norm(h, norm)
//   logits = hidden @ lm_head^T                                  (lm_head = embed_tokens if tied)
//
// forward() stops at `hidden`; logits() is separate so that a learner can compute per-token
// log-probabilities over chunks of the sequence instead of materialising [batch, seq, vocab].
// The pieces of forward() (embed, rotary, run_layer, final_norm) are public for the same reason:
// a learner can wrap run_layer() in gradient checkpointing.
//
// Every linear layer can carry a LoRA term added to its output (linear_layer::lora); adapters
// are attached and detached without touching the base weights (lora_adapter.hpp). The base
// weights are plain tensors without requires_grad, so autograd through forward() reaches only
// LoRA factors that require grad.
//
// Inference (c10::InferenceMode on a CUDA device, see inference_path) runs the same network
// through forward_inference(): residual add + RMSNorm, RoPE + kv-cache write and SwiGLU as single
// kernels, q|k|v and gate|up as single GEMMs over weights stacked at load (fused_ops.hpp), about
// a dozen kernels per layer instead of ~40; a decode step (one token per row, with a cache)
// attends through decode_attention(), whose kernel reads the positions rather than the mask
// (the cache_mask() forward() is given allows exactly those). run_layer() stays the reference
// and the training path; the two agree to rounding (bit for bit but for float32 sum order and
// GEMM shapes, and the decode attention's float32 softmax).
//
// A transformer is not thread-safe while an adapter is attached or detached; forward() itself
// only reads the weights (and writes the kv_cache it is given).

#include "runtime/model/kv_cache.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/rotary.hpp"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kbrl::model {

class safetensors_checkpoint;

/// Which computation forward() runs for inference. With autograd on, forward() always runs
/// run_layer().
enum class inference_path {
  /// `fused` inside c10::InferenceMode (the generation engine, its CUDA graphs, the retrieval
  /// embedder) on a CUDA device in float32 / float16 / bfloat16 where the fused kernels are
  /// compiled in (fused_ops.hpp); `unfused` elsewhere: the CPU, and a learner's passes under a
  /// mere NoGradGuard (KL reference, eval loss), which must compute exactly what its gradient
  /// passes compute.
  automatic,
  /// Always run_layer(), the reference composition.
  unfused,
  /// run_layer_inference() whenever autograd is off (GradMode disabled): the fused operations,
  /// each falling back to its libtorch composition where its kernel cannot run (how the CPU
  /// tests check the fused structure).
  fused,
};

/// Where and in which precision the model runs.
struct transformer_options {
  /// Device of the weights and activations. Default: the CPU.
  at::Device device = at::kCPU;
  /// Run dtype of weights and activations: at::kFloat, at::kBFloat16 or at::kHalf (at::kDouble
  /// too, for gradient checks against finite differences). RMSNorm and the attention softmax
  /// compute in float32 inside (float64 for a float64 model), as transformers does. Default
  /// float32.
  at::ScalarType dtype = at::kFloat;
  /// What forward() runs without autograd (see inference_path). Default automatic. Where the
  /// fused path may run (a CUDA device, or `fused`), from_checkpoint lays the q/k/v and the
  /// gate/up weights out side by side (attention_block::qkv_weight, mlp_block::gate_up_weight).
  inference_path inference = inference_path::automatic;
};

/// The LoRA term of one linear layer: y += scaling * (dropout(x) A^T) B^T. Undefined tensors:
/// no term.
struct lora_factors {
  at::Tensor a;        ///< [r, in_features]
  at::Tensor b;        ///< [out_features, r]
  double scaling = 0;  ///< lora_alpha / r, or lora_alpha / sqrt(r) with rsLoRA
  /// LoRA dropout while training, as PEFT's lora_dropout: each element of the term's input is
  /// zeroed with this probability and the rest scaled by 1 / (1 - dropout), the masks drawn from
  /// `dropout_generator` (on the model's device) so that a seeded run draws the same masks.
  /// 0 or an undefined generator: no dropout (inference; PEFT in eval mode).
  double dropout = 0;
  at::Generator dropout_generator;
  /// Where the term computes when the input's dtype differs from the factors' (float32 factors
  /// on a bfloat16 model): false casts the input to the factors' dtype, as PEFT does; true casts
  /// the factors to the input's dtype instead (autograd carries their gradients back through
  /// the cast), as torch.autocast would: the big activation is never widened and the matmuls
  /// run in bfloat16. Default false.
  bool compute_in_input_dtype = false;
  bool defined() const { return a.defined() && b.defined(); }
};

/// y = x W^T + bias (+ the LoRA term). The LoRA term is computed in the dtype of its factors
/// (the input is cast to it, the result cast back), as PEFT does, so float32 factors can train
/// on bfloat16 base weights; or in the input's dtype (lora_factors::compute_in_input_dtype).
struct linear_layer {
  at::Tensor weight;  ///< [out_features, in_features]
  at::Tensor bias;    ///< [out_features], or undefined
  lora_factors lora;

  at::Tensor forward(const at::Tensor& x) const;
  /// True when forward() draws LoRA dropout masks (a learner's model in training).
  bool draws_lora_dropout() const {
    return lora.defined() && lora.dropout > 0 && lora.dropout_generator.defined();
  }
  /// `input` with LoRA dropout applied when it is drawn (kept values scaled by 1 / (1 - p)).
  at::Tensor with_lora_dropout(const at::Tensor& input) const;
};

/// self_attn of one layer.
struct attention_block {
  linear_layer q_proj, k_proj, v_proj, o_proj;
  at::Tensor q_norm, k_norm; ///< [head_dim] (qwen3), else undefined
  /// q_proj, k_proj and v_proj's weights (biases) stacked in one tensor, [q + 2 kv rows, in],
  /// the three weights being narrow() views of it (no extra memory), so the inference path
  /// runs one GEMM. Undefined where the model was not laid out so (the CPU). Whoever replaces
  /// one of the three weights breaks the aliasing; the inference path checks it (rows_of) and
  /// then runs three GEMMs again.
  at::Tensor qkv_weight, qkv_bias;
};

/// mlp of one layer.
struct mlp_block {
  linear_layer gate_proj, up_proj, down_proj;
  /// gate_proj and up_proj's weights (biases) stacked, as attention_block::qkv_weight.
  at::Tensor gate_up_weight, gate_up_bias;
};

/// One decoder layer.
struct decoder_layer {
  at::Tensor input_layernorm;          ///< [hidden_size]
  attention_block self_attn;
  at::Tensor post_attention_layernorm; ///< [hidden_size]
  mlp_block mlp;
};

/// RMSNorm as transformers computes it: in float32 (float64 for float64 x), x * rsqrt(mean(x^2) +
/// eps), cast back to x's dtype, then times `weight`.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// A loaded model.
class transformer {
public:
  /// Loads the model directory `dir` (config.json, generation_config.json if present, and the
  /// safetensors weights): the weights are checked against the config (check_weights) and then
  /// converted to `options`' dtype and device (a CPU float32 checkpoint loaded as float32 stays
  /// a view of the mapped file). Fails with the errors of find_model_files(), the config
  /// parsers and check_weights(), and with errc::invalid_argument for an unsupported dtype.
  static caf::expected<transformer> load(const std::filesystem::path& dir,
                                         const transformer_options& options = {});

  /// A model from a parsed config and an opened checkpoint; `eos_token_ids` are the stop tokens
  /// the model ends its turns with (config.json's and generation_config.json's).
  static caf::expected<transformer> from_checkpoint(const model_config& config,
                                                    const safetensors_checkpoint& checkpoint,
                                                    std::vector<int64_t> eos_token_ids,
                                                    const transformer_options& options = {});

  const model_config& config() const { return config_; }
  const transformer_options& options() const { return options_; }

  /// The end-of-sequence tokens of config.json and generation_config.json, each once.
  const std::vector<int64_t>& eos_token_ids() const { return eos_token_ids_; }

  /// The hidden states after the final norm, [batch, seq, hidden_size] in the run dtype.
  ///   ids        [batch, seq] token ids (integer), on the model's device
  ///   positions  [batch, seq] RoPE positions (integer)
  ///   mask       bool [batch, 1, seq, keys]: causal_mask() without a cache, cache_mask() with one
  ///   cache      with a cache, the tokens' keys and values are stored there first and attention
  ///              reads cached positions [0, key_len) (see cache_span); without, attention runs
  ///              over the batch's own tokens (keys = seq).
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& positions, const at::Tensor& mask,
                     const cache_span& cache = {}) const;

  /// float32 logits of `hidden` ([..., hidden_size] -> [..., vocab_size]), computed in the run
  /// dtype and then widened, as transformers does (float64 for a float64 model).
  at::Tensor logits(const at::Tensor& hidden) const;

  /// The pieces of forward(), in order.
  at::Tensor embed(const at::Tensor& ids) const;
  /// cos and sin of `positions` ([batch, seq]) in the run dtype.
  rotary_embedding rotary(const at::Tensor& positions) const;
  /// Layer `index` applied to `hidden` (the residual stream, [batch, seq, hidden_size]); the
  /// other arguments are forward()'s, `rotary` made by rotary(positions); `mask` may also be
  /// folded for the head groups already (fold_attention_mask), as forward() passes it.
  at::Tensor run_layer(int64_t index, const at::Tensor& hidden, const rotary_embedding& rotary,
                       const at::Tensor& positions, const at::Tensor& mask,
                       const cache_span& cache = {}) const;
  at::Tensor final_norm(const at::Tensor& hidden) const;

  /// True when forward() would run the fused inference path now: the options' inference_path
  /// allows it in the current autograd mode (see there) and no LoRA term draws dropout masks.
  bool uses_fused_inference() const;
  /// True when some linear layer draws LoRA dropout masks: such a forward cannot be frozen into
  /// a CUDA graph, and keeps run_layer()'s order of draws.
  bool draws_lora_dropout() const;
  /// Switches what forward() runs without autograd (tests and benchmarks compare the paths on
  /// one model). The weight layout stays as loaded.
  void set_inference_path(inference_path path) { options_.inference = path; }

  /// The layers, for reading and for attaching LoRA factors.
  const std::vector<decoder_layer>& layers() const { return layers_; }

  /// The linear layer `module` names in PEFT's spelling, "model.layers.3.self_attn.q_proj", or
  /// nullptr if there is none (only the layers' projections are LoRA targets).
  linear_layer* find_linear(const std::string& module);
  const linear_layer* find_linear(const std::string& module) const;

  /// Every LoRA-capable linear layer with its module name, in network order.
  std::vector<std::pair<std::string, linear_layer*>> linear_layers();

  /// Removes every LoRA term (the base model again).
  void clear_lora();

  /// The output projection [vocab_size, hidden_size] (embed_tokens when tied).
  const at::Tensor& lm_head() const { return lm_head_; }

  /// The RoPE inverse frequencies in use (float32 [head_dim / 2] on the device).
  const at::Tensor& rope_inverse_frequencies() const { return inv_freq_; }

  /// Replaces the RoPE inverse frequencies (float32 [head_dim / 2], moved to the device), to
  /// reproduce a reference computed with other ones. Precondition (TORCH_CHECK): that shape.
  void set_rope_inverse_frequencies(const at::Tensor& inv_freq);

  /// Bytes held by the weights on the device (a tied lm_head counted once).
  int64_t weight_bytes() const;

private:
  /// forward() without autograd, through the fused operations (fused_ops.hpp).
  at::Tensor forward_inference(const at::Tensor& ids, const at::Tensor& positions,
                               const at::Tensor& mask, const cache_span& cache) const;
  /// Layer `index` on the inference path. The residual stream arrives as `residual` plus
  /// `pending` (the previous layer's MLP output, undefined before the first layer): the add is
  /// fused into this layer's first RMSNorm. Leaves the new residual in `residual` and this
  /// layer's MLP output in `pending`.
  void run_layer_inference(int64_t index, at::Tensor& residual, at::Tensor& pending,
                           const rotary_embedding& rotary, const at::Tensor& positions,
                           const at::Tensor& mask, const cache_span& cache) const;

  model_config config_;
  transformer_options options_;
  std::vector<int64_t> eos_token_ids_;
  at::Tensor embed_tokens_;
  std::vector<decoder_layer> layers_;
  at::Tensor norm_;
  at::Tensor lm_head_;   ///< shares embed_tokens_ when tied
  at::Tensor inv_freq_;  ///< RoPE inverse frequencies, float32 on the device
};

} // namespace kbrl::model
