#include "runtime/train/optimizer.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

namespace kbrl::train {

const char* to_string(lr_schedule_kind kind) {
  return kind == lr_schedule_kind::constant ? "constant" : "cosine";
}

caf::expected<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name) {
  if (name == "constant")
    return lr_schedule_kind::constant;
  if (name == "cosine")
    return lr_schedule_kind::cosine;
  return make_error(errc::invalid_argument,
                    "schedule: expected constant or cosine, got \"" + name + "\"");
}

double lr_schedule::factor(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps)
    return static_cast<double>(step) / static_cast<double>(warmup_steps);
  if (kind == lr_schedule_kind::constant)
    return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

caf::expected<void> check_optimizer_options(const adamw_options& a, const lr_schedule& s) {
  std::vector<std::string> bad;
  auto finite = [](double x) { return std::isfinite(x); };
  if (!(a.lr > 0) || !finite(a.lr))
    bad.push_back("lr must be > 0, got " + std::to_string(a.lr));
  if (!(a.beta1 >= 0 && a.beta1 < 1))
    bad.push_back("adam_beta1 must be in [0, 1), got " + std::to_string(a.beta1));
  if (!(a.beta2 >= 0 && a.beta2 < 1))
    bad.push_back("adam_beta2 must be in [0, 1), got " + std::to_string(a.beta2));
  if (!(a.eps > 0) || !finite(a.eps))
    bad.push_back("adam_eps must be > 0, got " + std::to_string(a.eps));
  if (!(a.weight_decay >= 0) || !finite(a.weight_decay))
    bad.push_back("weight_decay must be >= 0, got " + std::to_string(a.weight_decay));
  if (s.warmup_steps < 0)
    bad.push_back("warmup_steps must be >= 0, got " + std::to_string(s.warmup_steps));
  if (s.kind == lr_schedule_kind::cosine && s.total_steps <= s.warmup_steps)
    bad.push_back("total_steps (" + std::to_string(s.total_steps)
                  + ") must exceed warmup_steps (" + std::to_string(s.warmup_steps)
                  + ") for the cosine schedule");
  if (!(s.min_ratio >= 0 && s.min_ratio <= 1))
    bad.push_back("min_lr_ratio must be in [0, 1], got " + std::to_string(s.min_ratio));
  if (!bad.empty())
    return make_error(errc::invalid_argument, "optimizer: " + join(bad, "; "));
  return {};
}

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
