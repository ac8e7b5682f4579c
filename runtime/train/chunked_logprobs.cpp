#include "runtime/train/chunked_logprobs.hpp"

#include "runtime/model/token_logprobs.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace kbrl::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct logprob_call : torch::CustomClassHolder {
  const model::transformer* model = nullptr;
  double temperature = 1.0;
  int64_t chunk = 1;
};

struct logprob_function : torch::autograd::Function<logprob_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& targets, c10::IValue call_value) {
    auto call = c10::static_intrusive_pointer_cast<logprob_call>(call_value.toCapsule());
    auto out = model::token_logprobs(*call->model, hidden, targets, call->temperature,
                                     call->chunk);
    ctx->save_for_backward({hidden, targets});
    ctx->saved_data["call"] = std::move(call_value);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto call = c10::static_intrusive_pointer_cast<logprob_call>(
      ctx->saved_data["call"].toCapsule());
    const auto saved = ctx->get_saved_variables();
    const auto& hidden = saved[0];
    const auto& targets = saved[1];
    const auto& grad_out = grad_outputs[0];
    auto grad_hidden = at::zeros_like(hidden);
    const int64_t seq = hidden.size(1);
    for (int64_t begin = 0; begin < seq; begin += call->chunk) {
      const int64_t n = std::min(call->chunk, seq - begin);
      auto h = hidden.narrow(1, begin, n).detach().requires_grad_(true);
      at::Tensor lp;
      {
        at::AutoGradMode grad_on(true);
        lp = model::token_logprobs(*call->model, h, targets.narrow(1, begin, n),
                                   call->temperature, n);
      }
      auto g = torch::autograd::grad({lp}, {h}, {grad_out.narrow(1, begin, n)},
                                     /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/false);
      grad_hidden.narrow(1, begin, n).copy_(g[0]);
    }
    return {grad_hidden, at::Tensor(), at::Tensor()};
  }
};

} // namespace

at::Tensor chunked_token_logprobs(const model::transformer& model, const at::Tensor& hidden,
                                  const at::Tensor& targets, double temperature, int64_t chunk) {
  TORCH_CHECK(chunk > 0, "chunked_token_logprobs: chunk must be > 0, got ", chunk);
  if (!at::GradMode::is_enabled() || !hidden.requires_grad())
    return model::token_logprobs(model, hidden, targets, temperature, chunk);
  auto call = c10::make_intrusive<logprob_call>();
  call->model = &model;
  call->temperature = temperature;
  call->chunk = chunk;
  return logprob_function::apply(hidden, targets, c10::IValue::make_capsule(std::move(call)));
}

} // namespace kbrl::train
