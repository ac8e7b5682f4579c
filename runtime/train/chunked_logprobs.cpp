#include "runtime/train/chunked_logprobs.hpp"

#include "runtime/model/logprob_gradient.hpp"
#include "runtime/model/token_logprobs.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace kbrl::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The model travels through the autograd context as an integer (the context holds IValues);
/// it outlives the graph by this file's contract.
int64_t as_integer(const model::transformer* m) { return reinterpret_cast<intptr_t>(m); }
const model::transformer* as_model(int64_t x) {
  return reinterpret_cast<const model::transformer*>(x);
}

struct logprob_function : torch::autograd::Function<logprob_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& targets, int64_t model, double temperature,
                            int64_t chunk) {
    const auto* m = as_model(model);
    const int64_t seq = hidden.size(1);
    auto out = at::empty({hidden.size(0), seq},
                         hidden.options().dtype(at::promote_types(hidden.scalar_type(),
                                                                  at::kFloat)));
    // d out[b, s] / d hidden[b, s], in hidden's dtype (what autograd would hand to the layers).
    auto per_position = at::empty_like(hidden);
    for (int64_t begin = 0; begin < seq; begin += chunk) {
      const int64_t n = std::min(chunk, seq - begin);
      // On CUDA, one kernel between two GEMMs (logprob_gradient.hpp); the composition elsewhere.
      if (const auto fused = model::fused_logprobs_and_gradient(
            *m, hidden.narrow(1, begin, n).detach(), targets.narrow(1, begin, n), temperature)) {
        out.narrow(1, begin, n).copy_(fused->logprobs);
        per_position.narrow(1, begin, n).copy_(fused->grad_hidden);
        continue;
      }
      auto h = hidden.narrow(1, begin, n).detach().requires_grad_(true);
      at::Tensor lp;
      {
        at::AutoGradMode grad_on(true);
        lp = model::token_logprobs(*m, h, targets.narrow(1, begin, n), temperature, n);
      }
      // Unit weights: position s's row of the result is the gradient of lp[s] alone, because no
      // other position's log-probability depends on hidden[s].
      auto g = torch::autograd::grad({lp}, {h}, {at::ones_like(lp)}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/false);
      out.narrow(1, begin, n).copy_(lp.detach());
      per_position.narrow(1, begin, n).copy_(g[0]);
    }
    ctx->save_for_backward({per_position});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto per_position = ctx->get_saved_variables()[0];
    const auto grad_hidden =
      (grad_outputs[0].unsqueeze(-1) * per_position).to(per_position.scalar_type());
    // hidden, then targets, model, temperature and chunk, which take no gradient.
    return {grad_hidden, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

} // namespace

at::Tensor chunked_token_logprobs(const model::transformer& model, const at::Tensor& hidden,
                                  const at::Tensor& targets, double temperature, int64_t chunk) {
  TORCH_CHECK(chunk > 0, "chunked_token_logprobs: chunk must be > 0, got ", chunk);
  if (!at::GradMode::is_enabled() || !hidden.requires_grad())
    return model::token_logprobs(model, hidden, targets, temperature, chunk);
  return logprob_function::apply(hidden, targets, as_integer(&model), temperature, chunk);
}

} // namespace kbrl::train
