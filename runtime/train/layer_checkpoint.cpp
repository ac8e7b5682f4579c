#include "runtime/train/layer_checkpoint.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

namespace kbrl::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// What the recomputation needs besides tensors that require grad, kept by the autograd node.
struct layer_call : torch::CustomClassHolder {
  model::transformer* model = nullptr;
  int64_t index = 0;
  model::rotary_embedding rotary;
  at::Tensor positions, mask;
  std::vector<model::linear_layer*> adapted; ///< layers with LoRA, in the order of the factors
  at::Generator generator;                   ///< the dropout generator, if any
  at::Tensor generator_state;                ///< its state before the forward
};

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
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            at::TensorList factors, c10::IValue call_value) {
    auto call = c10::static_intrusive_pointer_cast<layer_call>(call_value.toCapsule());
    if (call->generator.defined()) {
      std::lock_guard<std::mutex> lock(call->generator.mutex());
      call->generator_state = call->generator.get_state();
    }
    auto out = call->model->run_layer(call->index, hidden, call->rotary, call->positions,
                                      call->mask);
    variable_list saved{hidden};
    saved.insert(saved.end(), factors.begin(), factors.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["call"] = std::move(call_value);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto call = c10::static_intrusive_pointer_cast<layer_call>(
      ctx->saved_data["call"].toCapsule());
    const auto saved = ctx->get_saved_variables();
    variable_list inputs;
    inputs.reserve(saved.size());
    for (const auto& t : saved)
      inputs.push_back(t.detach().requires_grad_(true));
    const variable_list factors(inputs.begin() + 1, inputs.end());
    at::Tensor out;
    {
      factor_swap swap(call->adapted, factors);
      generator_rewind rewind(call->generator, call->generator_state);
      at::AutoGradMode grad_on(true);
      out = call->model->run_layer(call->index, inputs[0], call->rotary, call->positions,
                                   call->mask);
    }
    auto grads = torch::autograd::grad({out}, inputs, {grad_outputs[0]},
                                       /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    grads.emplace_back(); // for the call, which is not a tensor
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
  auto call = c10::make_intrusive<layer_call>();
  call->model = &model;
  call->index = index;
  call->rotary = rotary;
  call->positions = positions;
  call->mask = mask;
  call->adapted = std::move(adapted);
  for (auto* l : call->adapted)
    if (l->lora.dropout > 0 && l->lora.dropout_generator.defined()) {
      call->generator = l->lora.dropout_generator;
      break;
    }
  return layer_function::apply(hidden, at::TensorList(factors),
                               c10::IValue::make_capsule(std::move(call)));
}

} // namespace kbrl::train
