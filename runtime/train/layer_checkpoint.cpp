#include "runtime/train/layer_checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

namespace kbrl::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The model travels through the autograd context as an integer: the context holds IValues,
/// and the model outlives the graph by this file's contract.
int64_t as_integer(const model::transformer* m) { return reinterpret_cast<intptr_t>(m); }
model::transformer* as_model(int64_t x) { return reinterpret_cast<model::transformer*>(x); }

/// The layer's linear layers that carry LoRA factors, in a fixed order.
std::vector<model::linear_layer*> adapted_layers(model::transformer& m, int64_t index) {
  std::vector<model::linear_layer*> out;
  const std::string layer = "model.layers." + std::to_string(index) + ".";
  for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                           "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    auto* l = m.find_linear(layer + name);
    if (l != nullptr && l->lora.defined())
      out.push_back(l);
  }
  return out;
}

/// Swaps the LoRA factors of `layers` for `factors` (A, B per layer) while alive.
class factor_swap {
public:
  factor_swap(const std::vector<model::linear_layer*>& layers, const variable_list& factors)
    : layers_(layers) {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      saved_.push_back(layers_[i]->lora);
      layers_[i]->lora.a = factors[2 * i];
      layers_[i]->lora.b = factors[2 * i + 1];
    }
  }
  ~factor_swap() {
    for (std::size_t i = 0; i < layers_.size(); ++i)
      layers_[i]->lora = saved_[i];
  }
  factor_swap(const factor_swap&) = delete;
  factor_swap& operator=(const factor_swap&) = delete;

private:
  std::vector<model::linear_layer*> layers_;
  std::vector<model::lora_factors> saved_;
};

/// Sets a generator to `state` while alive, then back to where it was.
class generator_rewind {
public:
  generator_rewind(at::Generator generator, const at::Tensor& state) : generator_(generator) {
    if (!generator_.defined() || !state.defined())
      return;
    std::lock_guard<std::mutex> lock(generator_.mutex());
    after_ = generator_.get_state();
    generator_.set_state(state);
  }
  ~generator_rewind() {
    if (!after_.defined())
      return;
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(after_);
  }
  generator_rewind(const generator_rewind&) = delete;
  generator_rewind& operator=(const generator_rewind&) = delete;

private:
  at::Generator generator_;
  at::Tensor after_;
};

struct layer_function : torch::autograd::Function<layer_function> {
  /// `factors` are the LoRA factors attached to the layer (A, B per adapted linear layer, in
  /// adapted_layers() order), passed so that autograd routes their gradients.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            at::TensorList factors, int64_t model, int64_t index,
                            const at::Tensor& cos, const at::Tensor& sin,
                            const at::Tensor& positions, const c10::optional<at::Tensor>& mask,
                            at::Generator generator) {
    if (generator.defined()) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      ctx->saved_data["generator_state"] = generator.get_state();
      ctx->saved_data["generator"] = generator;
    }
    auto out = as_model(model)->run_layer(index, hidden, {cos, sin}, positions,
                                          mask.value_or(at::Tensor()));
    variable_list saved{hidden};
    saved.insert(saved.end(), factors.begin(), factors.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["model"] = model;
    ctx->saved_data["index"] = index;
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["positions"] = positions;
    ctx->saved_data["mask"] = mask;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto& d = ctx->saved_data;
    auto* m = as_model(d["model"].toInt());
    const int64_t index = d["index"].toInt();
    const model::rotary_embedding rotary{d["cos"].toTensor(), d["sin"].toTensor()};
    const auto saved = ctx->get_saved_variables();
    variable_list inputs;
    inputs.reserve(saved.size());
    for (const auto& t : saved)
      inputs.push_back(t.detach().requires_grad_(true));
    const variable_list factors(inputs.begin() + 1, inputs.end());
    at::Tensor out;
    {
      factor_swap swap(adapted_layers(*m, index), factors);
      at::Generator generator;
      at::Tensor state;
      if (d.count("generator") != 0) {
        generator = d["generator"].toGenerator();
        state = d["generator_state"].toTensor();
      }
      generator_rewind rewind(generator, state);
      at::AutoGradMode grad_on(true);
      const auto& mask = d["mask"];
      out = m->run_layer(index, inputs[0], rotary, d["positions"].toTensor(),
                         mask.isNone() ? at::Tensor() : mask.toTensor());
    }
    auto grads = torch::autograd::grad({out}, inputs, {grad_outputs[0]},
                                       /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    // One entry per forward argument: none for model, index, the rotary tables, positions,
    // mask and generator, which take no gradient.
    for (int i = 0; i < 7; ++i)
      grads.emplace_back();
    return grads;
  }
};

} // namespace

at::Tensor checkpointed_layer(model::transformer& model, int64_t index, const at::Tensor& hidden,
                              const model::rotary_embedding& rotary, const at::Tensor& positions,
                              const at::Tensor& mask) {
  auto adapted = adapted_layers(model, index);
  variable_list factors;
  bool any_grad = hidden.requires_grad();
  for (auto* l : adapted) {
    factors.push_back(l->lora.a);
    factors.push_back(l->lora.b);
    any_grad = any_grad || l->lora.a.requires_grad() || l->lora.b.requires_grad();
  }
  if (!at::GradMode::is_enabled() || !any_grad)
    return model.run_layer(index, hidden, rotary, positions, mask);
  at::Generator generator; // the dropout generator, if any layer draws masks
  for (auto* l : adapted)
    if (l->lora.dropout > 0 && l->lora.dropout_generator.defined()) {
      generator = l->lora.dropout_generator;
      break;
    }
  // An undefined (causal) mask travels as an empty optional: autograd's custom functions take
  // no undefined tensor arguments.
  const auto optional_mask =
    mask.defined() ? c10::optional<at::Tensor>(mask) : c10::optional<at::Tensor>();
  return layer_function::apply(hidden, at::TensorList(factors), as_integer(&model), index,
                               rotary.cos, rotary.sin, positions, optional_mask, generator);
}

} // namespace kbrl::train
