#include "runtime/train/optimizer.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

namespace kbrl::train {

adamw::adamw(const at::Tensor& params, adamw_options options)
  : options_(options), exp_avg_(at::zeros_like(params)), exp_avg_sq_(at::zeros_like(params)) {
}

void adamw::step(at::Tensor& params, const at::Tensor& grads, double lr) {
  TORCH_CHECK(params.sizes() == grads.sizes() && params.sizes() == exp_avg_.sizes(),
              "adamw::step: params ", params.sizes(), ", grads ", grads.sizes(), ", state ",
              exp_avg_.sizes());
  ++steps_;
  const auto& o = options_;
  const double t = static_cast<double>(steps_);
  params.mul_(1.0 - lr * o.weight_decay);
  exp_avg_.lerp_(grads, 1.0 - o.beta1);
  exp_avg_sq_.mul_(o.beta2).addcmul_(grads, grads, 1.0 - o.beta2);
  const double bias_correction1 = 1.0 - std::pow(o.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(o.beta2, t);
  const double step_size = lr / bias_correction1;
  const auto denom = (exp_avg_sq_.sqrt() / std::sqrt(bias_correction2)).add_(o.eps);
  params.addcdiv_(exp_avg_, denom, -step_size);
}

void adamw::restore(int64_t steps, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq) {
  TORCH_CHECK(exp_avg.sizes() == exp_avg_.sizes() && exp_avg_sq.sizes() == exp_avg_sq_.sizes(),
              "adamw::restore: moments ", exp_avg.sizes(), " and ", exp_avg_sq.sizes(),
              " do not match ", exp_avg_.sizes());
  steps_ = steps;
  exp_avg_.copy_(exp_avg);
  exp_avg_sq_.copy_(exp_avg_sq);
}

double clip_grad_norm(at::Tensor& grads, double max_norm) {
  const auto norm = grads.norm(2);
  const double value = norm.item<double>();
  if (max_norm > 0) {
    const auto coef = at::clamp_max(at::full_like(norm, max_norm) / (norm + 1e-6), 1.0);
    grads.mul_(coef);
  }
  return value;
}

} // namespace kbrl::train
