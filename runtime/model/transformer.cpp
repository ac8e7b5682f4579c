#include "runtime/model/transformer.hpp"

#include "messages/errors.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/decode_linear.hpp"
#include "runtime/model/fused_ops.hpp"
#include "runtime/model/model_files.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"
#include "runtime/model/train_ops.hpp"
#include "runtime/model/train_projection.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cctype>

namespace kbrl::model {

namespace {

bool supported_run_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

/// Reads the tensors of one checkpoint, converted to the run dtype and device. The checkpoint
/// was checked against the config before, so a missing tensor here is a bug.
class weight_reader {
public:
  weight_reader(const safetensors_checkpoint& checkpoint, const transformer_options& options)
    : checkpoint_(checkpoint), options_(options) {}

  caf::error error;

  at::Tensor get(const std::string& name) {
    auto t = checkpoint_.tensor(name, tensor_access::view);
    if (!t) {
      if (!error)
        error = t.error();
      return {};
    }
    return t->to(options_.device, options_.dtype);
  }

  at::Tensor get_if(bool present, const std::string& name) {
    return present ? get(name) : at::Tensor{};
  }

  /// The linear layer `module` ("model.layers.0.mlp.up_proj"): its weight, and its bias if it has
  /// one.
  linear_layer linear(const std::string& module, bool has_bias) {
    linear_layer l;
    l.weight = get(module + ".weight");
    l.bias = get_if(has_bias, module + ".bias");
    return l;
  }

private:
  const safetensors_checkpoint& checkpoint_;
  const transformer_options& options_;
};

/// Whether from_checkpoint stacks the q/k/v and gate/up weights for the fused inference path:
/// wherever that path may run. A CPU model stays as the checkpoint has it (a float32 one a view
/// of the mapped file).
bool lay_out_for_fused_inference(const transformer_options& o) {
  return o.inference == inference_path::fused
         || (o.inference == inference_path::automatic && o.device.is_cuda());
}

int64_t bytes_of(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

int64_t bytes_of(const linear_layer& l) { return bytes_of(l.weight) + bytes_of(l.bias); }

/// l.forward(x) on the inference path: without LoRA through decode_linear (a decode step's GEMV
/// kernel where it applies).
at::Tensor inference_projection(const linear_layer& l, const at::Tensor& x) {
  return l.lora.defined() ? l.forward(x) : decode_linear(x, l.weight, l.bias);
}

} // namespace

// ---- building blocks -----------------------------------------------------------------------------

at::Tensor linear_layer::with_lora_dropout(const at::Tensor& input) const {
  if (!draws_lora_dropout())
    return input;
  const auto keep = at::empty_like(input).bernoulli_(1.0 - lora.dropout, lora.dropout_generator);
  return input * keep / (1.0 - lora.dropout);
}

at::Tensor linear_layer::forward(const at::Tensor& x) const {
  if (!lora.defined())
    return at::linear(x, weight, bias);
  const auto dtype = x.scalar_type();
  if (lora.compute_in_input_dtype && lora.a.scalar_type() != dtype) {
    // The term in x's dtype: the factors are cast (r x in and out x r values, not the
    // activation), and it is added by the GEMM that computes it (addmm_ with beta 1) instead of
    // as a separate scaled copy. In place on the base output is safe for autograd: no backward
    // formula reads it.
    const int64_t in = x.size(-1), out = weight.size(0);
    const auto rows = x.reshape({-1, in});
    const auto input = with_lora_dropout(rows);
    auto y = at::linear(rows, weight, bias);
    y.addmm_(at::linear(input, lora.a.to(dtype)), lora.b.to(dtype).t(), /*beta=*/1,
             /*alpha=*/lora.scaling);
    auto shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }
  auto y = at::linear(x, weight, bias);
  const auto input = with_lora_dropout(x.to(lora.a.scalar_type()));
  const auto delta = at::linear(at::linear(input, lora.a), lora.b);
  return y + (delta * lora.scaling).to(y.scalar_type());
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const auto wide = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  const auto normed = wide * at::rsqrt(wide.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

// ---- loading -------------------------------------------------------------------------------------

caf::expected<transformer> transformer::load(const std::filesystem::path& dir,
                                             const transformer_options& options) {
  auto files = find_model_files(dir);
  if (!files)
    return files.error();
  auto config = load_model_config(files->config);
  if (!config)
    return config.error();
  std::vector<int64_t> eos = config->eos_token_ids;
  if (files->generation_config) {
    auto generation = load_generation_config(*files->generation_config);
    if (!generation)
      return generation.error();
    eos.insert(eos.end(), generation->eos_token_ids.begin(), generation->eos_token_ids.end());
  }
  auto checkpoint = safetensors_checkpoint::open_dir(dir);
  if (!checkpoint)
    return checkpoint.error();
  return from_checkpoint(*config, *checkpoint, std::move(eos), options);
}

caf::expected<transformer> transformer::from_checkpoint(const model_config& config,
                                                        const safetensors_checkpoint& checkpoint,
                                                        std::vector<int64_t> eos_token_ids,
                                                        const transformer_options& options) {
  if (!supported_run_dtype(options.dtype))
    return make_error(errc::invalid_argument,
                      std::string("the model runs in float32, bfloat16 or float16 (float64 for "
                                  "gradient checks), not ")
                        + c10::toString(options.dtype));
  if (auto ok = check_weights(config, checkpoint); !ok)
    return ok.error();

  transformer m;
  m.config_ = config;
  m.options_ = options;
  std::sort(eos_token_ids.begin(), eos_token_ids.end());
  eos_token_ids.erase(std::unique(eos_token_ids.begin(), eos_token_ids.end()),
                      eos_token_ids.end());
  m.eos_token_ids_ = std::move(eos_token_ids);

  weight_reader r(checkpoint, options);
  m.embed_tokens_ = r.get("model.embed_tokens.weight");
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    const std::string attn = layer + "self_attn.";
    const std::string mlp = layer + "mlp.";
    decoder_layer d;
    d.input_layernorm = r.get(layer + "input_layernorm.weight");
    auto& a = d.self_attn;
    a.q_proj = r.linear(attn + "q_proj", config.qkv_bias());
    a.k_proj = r.linear(attn + "k_proj", config.qkv_bias());
    a.v_proj = r.linear(attn + "v_proj", config.qkv_bias());
    a.o_proj = r.linear(attn + "o_proj", config.o_proj_bias());
    a.q_norm = r.get_if(config.qk_norm(), attn + "q_norm.weight");
    a.k_norm = r.get_if(config.qk_norm(), attn + "k_norm.weight");
    d.post_attention_layernorm = r.get(layer + "post_attention_layernorm.weight");
    d.mlp.gate_proj = r.linear(mlp + "gate_proj", config.mlp_bias);
    d.mlp.up_proj = r.linear(mlp + "up_proj", config.mlp_bias);
    d.mlp.down_proj = r.linear(mlp + "down_proj", config.mlp_bias);
    if (!r.error && lay_out_for_fused_inference(options)) {
      // One allocation each, the separate weights views into it: no memory is added.
      a.qkv_weight = fuse_rows({&a.q_proj.weight, &a.k_proj.weight, &a.v_proj.weight});
      a.qkv_bias = fuse_rows({&a.q_proj.bias, &a.k_proj.bias, &a.v_proj.bias});
      d.mlp.gate_up_weight = fuse_rows({&d.mlp.gate_proj.weight, &d.mlp.up_proj.weight});
      d.mlp.gate_up_bias = fuse_rows({&d.mlp.gate_proj.bias, &d.mlp.up_proj.bias});
    }
    m.layers_.push_back(std::move(d));
  }
  m.norm_ = r.get("model.norm.weight");
  m.lm_head_ = config.tie_word_embeddings ? m.embed_tokens_ : r.get("lm_head.weight");
  if (r.error)
    return r.error;
  m.inv_freq_ = kbrl::model::rope_inverse_frequencies(config).to(options.device);
  return m;
}

// ---- forward -------------------------------------------------------------------------------------

at::Tensor transformer::embed(const at::Tensor& ids) const {
  return at::embedding(embed_tokens_, ids);
}

rotary_embedding transformer::rotary(const at::Tensor& positions) const {
  return make_rotary_embedding(inv_freq_, positions, options_.dtype);
}

at::Tensor transformer::run_layer(int64_t index, const at::Tensor& hidden,
                                  const rotary_embedding& rotary, const at::Tensor& positions,
                                  const at::Tensor& mask, const cache_span& cache) const {
  const auto& layer = layers_.at(index);
  const auto& attn = layer.self_attn;
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  const int64_t heads = config_.num_attention_heads, kv_heads = config_.num_key_value_heads;
  const int64_t dim = config_.head_dim;
  const double eps = config_.rms_norm_eps;

  const auto x = train_rms_norm(hidden, layer.input_layernorm, eps);
  // One GEMM and one autograd node for q|k|v where the weights are stacked (train_projection.hpp).
  const auto qkv = train_projections(x, attn.qkv_weight, attn.qkv_bias,
                                     {&attn.q_proj, &attn.k_proj, &attn.v_proj});
  auto q = qkv[0].view({batch, seq, heads, dim});
  auto k = qkv[1].view({batch, seq, kv_heads, dim});
  auto v = qkv[2].view({batch, seq, kv_heads, dim});
  if (attn.q_norm.defined()) {
    q = train_rms_norm(q, attn.q_norm, eps);
    k = train_rms_norm(k, attn.k_norm, eps);
  }
  q = train_rotary(q.transpose(1, 2), rotary); // [batch, heads, seq, dim]
  k = train_rotary(k.transpose(1, 2), rotary); // [batch, kv_heads, seq, dim]
  v = v.transpose(1, 2);

  at::Tensor keys = k, values = v;
  if (cache.cache != nullptr) {
    auto cached_k = cache.cache->keys(index).narrow(0, cache.first_slot, batch);
    auto cached_v = cache.cache->values(index).narrow(0, cache.first_slot, batch);
    // Row b's token s goes to [b, :, positions[b, s], :]: a scatter along the position
    // dimension, whose index is a view of the positions (no kernel, unlike the index tensors
    // of index_put_ with advanced indexing).
    const auto where = positions.to(at::kLong)
                         .reshape({batch, 1, seq, 1})
                         .expand({batch, kv_heads, seq, dim});
    cached_k.scatter_(2, where, k);
    cached_v.scatter_(2, where, v);
    keys = cached_k.narrow(2, 0, cache.key_len);
    values = cached_v.narrow(2, 0, cache.key_len);
  }
  const auto out = grouped_attention(q, keys, values, mask) // [batch, heads, seq, dim]
                     .transpose(1, 2)
                     .reshape({batch, seq, heads * dim});
  const auto& o = attn.o_proj;
  auto h = hidden + train_projections(out, o.weight, o.bias, {&o})[0];

  const auto y = train_rms_norm(h, layer.post_attention_layernorm, eps);
  const auto& mlp = layer.mlp;
  const auto gate_up = train_stacked_projection(y, mlp.gate_up_weight, mlp.gate_up_bias,
                                                {&mlp.gate_proj, &mlp.up_proj});
  const auto& down = mlp.down_proj;
  return h + train_projections(train_swiglu_stacked(gate_up), down.weight, down.bias, {&down})[0];
}

at::Tensor transformer::final_norm(const at::Tensor& hidden) const {
  return rms_norm(hidden, norm_, config_.rms_norm_eps);
}

at::Tensor transformer::forward(const at::Tensor& ids, const at::Tensor& positions,
                                const at::Tensor& mask, const cache_span& cache) const {
  TORCH_CHECK(ids.dim() == 2, "transformer::forward: ids must be [batch, seq], got ", ids.sizes());
  TORCH_CHECK(positions.sizes() == ids.sizes(), "transformer::forward: positions ",
              positions.sizes(), " do not match ids ", ids.sizes());
  if (cache.cache != nullptr) {
    TORCH_CHECK(cache.first_slot >= 0 && cache.first_slot + ids.size(0) <= cache.cache->slots(),
                "transformer::forward: slots [", cache.first_slot, ", ",
                cache.first_slot + ids.size(0), ") outside the cache's ", cache.cache->slots());
    TORCH_CHECK(cache.key_len > 0 && cache.key_len <= cache.cache->max_len(),
                "transformer::forward: key_len ", cache.key_len, " outside [1, ",
                cache.cache->max_len(), "]");
  }
  if (uses_fused_inference())
    return forward_inference(ids, positions, mask, cache);
  auto h = embed(ids);
  const auto rot = rotary(positions);
  // Every layer attends with the same mask: fold it for the head groups once, not per layer.
  const auto folded = fold_attention_mask(
    mask, config_.num_attention_heads / config_.num_key_value_heads);
  for (int64_t i = 0; i < static_cast<int64_t>(layers_.size()); ++i)
    h = run_layer(i, h, rot, positions, folded, cache);
  return final_norm(h);
}

// ---- the inference path ------------------------------------------------------------------------

bool transformer::uses_fused_inference() const {
  switch (options_.inference) {
  case inference_path::unfused:
    return false;
  case inference_path::automatic:
    // InferenceMode, not a mere NoGradGuard: a learner's no-grad passes (KL reference, eval
    // loss) must compute exactly what its gradient passes compute.
    if (!c10::InferenceMode::is_enabled() || !options_.device.is_cuda()
        || !fused_kernels_compiled_in() || options_.dtype == at::kDouble)
      return false;
    break;
  case inference_path::fused:
    if (at::GradMode::is_enabled())
      return false;
    break;
  }
  // Dropout masks are drawn in run_layer()'s order from the layer's generator: keep that path.
  return !draws_lora_dropout();
}

bool transformer::draws_lora_dropout() const {
  for (const auto& l : layers_)
    for (const auto* p : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj,
                          &l.self_attn.o_proj, &l.mlp.gate_proj, &l.mlp.up_proj,
                          &l.mlp.down_proj})
      if (p->draws_lora_dropout())
        return true;
  return false;
}

at::Tensor transformer::forward_inference(const at::Tensor& ids, const at::Tensor& positions,
                                          const at::Tensor& mask, const cache_span& cache) const {
  at::Tensor residual = embed(ids), pending;
  const auto rot = rotary(positions);
  auto folded = fold_attention_mask(
    mask, config_.num_attention_heads / config_.num_key_value_heads);
  // The fused attention kernel adds a float mask; converted here once, not in every layer.
  if (folded.defined() && fused_attention_available())
    folded = additive_attention_mask(folded, options_.dtype);
  for (int64_t i = 0; i < static_cast<int64_t>(layers_.size()); ++i)
    run_layer_inference(i, residual, pending, rot, positions, folded, cache);
  // The last layer's MLP output joins the residual inside the final norm.
  return add_rms_norm(residual, pending, norm_, config_.rms_norm_eps).normed;
}

void transformer::run_layer_inference(int64_t index, at::Tensor& residual, at::Tensor& pending,
                                      const rotary_embedding& rotary,
                                      const at::Tensor& positions, const at::Tensor& mask,
                                      const cache_span& cache) const {
  const auto& layer = layers_.at(index);
  const auto& attn = layer.self_attn;
  const int64_t batch = residual.size(0), seq = residual.size(1);
  const int64_t heads = config_.num_attention_heads, dim = config_.head_dim;
  const double eps = config_.rms_norm_eps;

  // One sequence's decode step: the residual adds and norms can fold into the GEMVs
  // (decode_linear.hpp). Each delta is then added into the residual where it is made, so
  // `pending` stays undefined, and the GEMV after a norm normalises the residual row itself.
  const bool one_sequence_step = cache.cache != nullptr && batch == 1 && seq == 1;
  const norm_folds folds = one_sequence_step ? decode_norms_fold() : norm_folds::none;
  const bool fold_norms = folds != norm_folds::none;
  const std::vector<const linear_layer*> qkv_parts{&attn.q_proj, &attn.k_proj, &attn.v_proj};
  const qkv_layout layout{heads, config_.num_key_value_heads, dim};
  at::Tensor cache_keys, cache_values;
  if (cache.cache != nullptr) {
    cache_keys = cache.cache->keys(index).narrow(0, cache.first_slot, batch);
    cache_values = cache.cache->values(index).narrow(0, cache.first_slot, batch);
  }
  // A decode step of one sequence: the projection and RoPE + the cache write in one kernel
  // where it applies (decode_linear.hpp), with the input norm too where nothing is pending;
  // else the norm, the projection and RoPE.
  std::optional<attention_inputs> folded_in;
  at::Tensor h = residual, x;
  const bool rope_folds = one_sequence_step && !attn.q_norm.defined();
  if (rope_folds && fold_norms && !pending.defined())
    folded_in = decode_rope_qkv(residual, attn.qkv_weight, attn.qkv_bias, qkv_parts, layout,
                                rotary, positions, cache_keys, cache_values,
                                layer.input_layernorm, eps);
  if (!folded_in) {
    auto added = add_rms_norm(residual, pending, layer.input_layernorm, eps);
    h = added.residual;
    x = added.normed;
    if (rope_folds)
      folded_in = decode_rope_qkv(x, attn.qkv_weight, attn.qkv_bias, qkv_parts, layout, rotary,
                                  positions, cache_keys, cache_values);
  }
  auto in = folded_in ? *folded_in
                      : rope_qkv(fused_projection(x, attn.qkv_weight, attn.qkv_bias, qkv_parts),
                                 layout, rotary, attn.q_norm, attn.k_norm, eps, positions,
                                 cache_keys, cache_values);
  if (cache.cache != nullptr) {
    in.keys = in.keys.narrow(2, 0, cache.key_len);
    in.values = in.values.narrow(2, 0, cache.key_len);
  }
  const auto attended = cache.cache != nullptr && seq == 1
                          ? decode_attention(in.q, in.keys, in.values, positions, mask)
                          : grouped_attention(in.q, in.keys, in.values, mask);
  const auto out = attended.transpose(1, 2).reshape({batch, seq, heads * dim});
  // h is this forward's own tensor (the embedding's output or an add's result): the folded
  // adds may write it in place.
  const auto& mlp = layer.mlp;
  const std::vector<const linear_layer*> gate_up_parts{&mlp.gate_proj, &mlp.up_proj};
  std::optional<at::Tensor> gate_up;
  if (folds == norm_folds::all && !attn.o_proj.lora.defined()
      && fused_without_lora(mlp.gate_up_weight, mlp.gate_up_bias, gate_up_parts)
      && decode_linear_add_to(h, out, /*swiglu_input=*/false, attn.o_proj.weight,
                              attn.o_proj.bias)) {
    gate_up = decode_linear_normed(h, layer.post_attention_layernorm, eps, mlp.gate_up_weight,
                                   mlp.gate_up_bias);
    if (!gate_up)
      gate_up = fused_projection(add_rms_norm(h, {}, layer.post_attention_layernorm, eps).normed,
                                 mlp.gate_up_weight, mlp.gate_up_bias, gate_up_parts);
  } else {
    auto [h2, y] = add_rms_norm(h, inference_projection(attn.o_proj, out),
                                layer.post_attention_layernorm, eps);
    h = h2;
    gate_up = fused_projection(y, mlp.gate_up_weight, mlp.gate_up_bias, gate_up_parts);
  }
  // Without LoRA the SwiGLU and the down projection can be one kernel (decode_linear.hpp), which
  // can also add its result into the residual.
  const auto& down = mlp.down_proj;
  if (fold_norms && !down.lora.defined()
      && decode_linear_add_to(h, *gate_up, /*swiglu_input=*/true, down.weight, down.bias))
    pending = at::Tensor();
  else
    pending = down.lora.defined() ? down.forward(swiglu(*gate_up))
                                  : swiglu_linear(*gate_up, down.weight, down.bias);
  residual = h;
}

at::Tensor transformer::logits(const at::Tensor& hidden) const {
  return at::linear(hidden, lm_head_).to(at::promote_types(options_.dtype, at::kFloat));
}

// ---- LoRA targets --------------------------------------------------------------------------------

const linear_layer* transformer::find_linear(const std::string& module) const {
  // "model.layers.<n>.self_attn.<q|k|v|o>_proj" or "model.layers.<n>.mlp.<gate|up|down>_proj"
  const std::string prefix = "model.layers.";
  if (module.compare(0, prefix.size(), prefix) != 0)
    return nullptr;
  std::size_t pos = prefix.size(), end = pos;
  while (end < module.size() && std::isdigit(static_cast<unsigned char>(module[end])))
    ++end;
  if (end == pos || end - pos > 9 || end >= module.size() || module[end] != '.'
      || (module[pos] == '0' && end - pos > 1))
    return nullptr;
  const int64_t index = std::stoll(module.substr(pos, end - pos));
  if (index >= static_cast<int64_t>(layers_.size()))
    return nullptr;
  const auto rest = module.substr(end + 1);
  const auto& l = layers_[index];
  if (rest == "self_attn.q_proj") return &l.self_attn.q_proj;
  if (rest == "self_attn.k_proj") return &l.self_attn.k_proj;
  if (rest == "self_attn.v_proj") return &l.self_attn.v_proj;
  if (rest == "self_attn.o_proj") return &l.self_attn.o_proj;
  if (rest == "mlp.gate_proj") return &l.mlp.gate_proj;
  if (rest == "mlp.up_proj") return &l.mlp.up_proj;
  if (rest == "mlp.down_proj") return &l.mlp.down_proj;
  return nullptr;
}

linear_layer* transformer::find_linear(const std::string& module) {
  return const_cast<linear_layer*>(static_cast<const transformer*>(this)->find_linear(module));
}

std::vector<std::pair<std::string, linear_layer*>> transformer::linear_layers() {
  std::vector<std::pair<std::string, linear_layer*>> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    auto& l = layers_[i];
    out.emplace_back(layer + "self_attn.q_proj", &l.self_attn.q_proj);
    out.emplace_back(layer + "self_attn.k_proj", &l.self_attn.k_proj);
    out.emplace_back(layer + "self_attn.v_proj", &l.self_attn.v_proj);
    out.emplace_back(layer + "self_attn.o_proj", &l.self_attn.o_proj);
    out.emplace_back(layer + "mlp.gate_proj", &l.mlp.gate_proj);
    out.emplace_back(layer + "mlp.up_proj", &l.mlp.up_proj);
    out.emplace_back(layer + "mlp.down_proj", &l.mlp.down_proj);
  }
  return out;
}

void transformer::clear_lora() {
  for (auto& [name, layer] : linear_layers())
    layer->lora = {};
}

void transformer::set_rope_inverse_frequencies(const at::Tensor& inv_freq) {
  TORCH_CHECK(inv_freq.dim() == 1 && inv_freq.size(0) == config_.head_dim / 2,
              "set_rope_inverse_frequencies: expected [", config_.head_dim / 2, "], got ",
              inv_freq.sizes());
  inv_freq_ = inv_freq.to(options_.device, at::kFloat);
}

int64_t transformer::weight_bytes() const {
  int64_t total = bytes_of(embed_tokens_) + bytes_of(norm_);
  if (!config_.tie_word_embeddings)
    total += bytes_of(lm_head_);
  for (const auto& l : layers_) {
    total += bytes_of(l.input_layernorm) + bytes_of(l.post_attention_layernorm);
    total += bytes_of(l.self_attn.q_proj) + bytes_of(l.self_attn.k_proj)
             + bytes_of(l.self_attn.v_proj) + bytes_of(l.self_attn.o_proj);
    total += bytes_of(l.self_attn.q_norm) + bytes_of(l.self_attn.k_norm);
    total += bytes_of(l.mlp.gate_proj) + bytes_of(l.mlp.up_proj) + bytes_of(l.mlp.down_proj);
  }
  return total;
}

} // namespace kbrl::model
