#pragma once
// AdamW, the learning-rate schedule and gradient clipping, on flat tensors: the learner keeps all
// trainable parameters in one vector and their gradients in another (lora_parameters.hpp), so an
// optimiser step is a handful of vectorised operations and an all-reduce over data-parallel
// ranks would be one call on the gradient vector.
//
// AdamW is PyTorch's torch.optim.AdamW (decoupled weight decay, bias correction), step by step:
//
//   p   <- p * (1 - lr * weight_decay)
//   m   <- beta1 * m + (1 - beta1) * g
//   v   <- beta2 * v + (1 - beta2) * g^2
//   p   <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// The schedule scales the base learning rate by a factor of the optimiser step t = 1, 2, ...:
//   warm-up   t <= warmup_steps:  t / warmup_steps
//   constant  1 afterwards
//   cosine    min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2 afterwards, with
//             p = min(1, (t - warmup_steps) / (total_steps - warmup_steps))

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::train {

/// Hyper-parameters of AdamW (PyTorch's defaults apart from the learning rate).
struct adamw_options {
  double lr = 1e-5;           ///< base learning rate, > 0
  double beta1 = 0.9;         ///< in [0, 1)
  double beta2 = 0.999;       ///< in [0, 1)
  double eps = 1e-8;          ///< > 0
  double weight_decay = 0.0;  ///< decoupled, >= 0
};

/// The shape of the learning rate over steps (see above).
enum class lr_schedule_kind : uint8_t { constant, cosine };

/// "constant" or "cosine".
const char* to_string(lr_schedule_kind kind);
/// The kind spelled `name`; errc::invalid_argument otherwise.
caf::expected<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name);

/// Warm-up then constant or cosine decay.
struct lr_schedule {
  lr_schedule_kind kind = lr_schedule_kind::constant;
  int64_t warmup_steps = 0;   ///< >= 0
  int64_t total_steps = 1000; ///< cosine: the step at which the decay ends; > warmup_steps
  double min_ratio = 0.0;     ///< cosine: the factor reached at total_steps, in [0, 1]

  /// The factor of optimiser step `step` (1-based).
  double factor(int64_t step) const;
};

/// Checks the ranges of AdamW's options and the schedule; errc::invalid_argument naming each
/// bad field.
caf::expected<void> check_optimizer_options(const adamw_options& adamw,
                                            const lr_schedule& schedule);

/// AdamW over one flat parameter vector.
class adamw {
public:
  adamw() = default;
  /// Moments for `params` (zeros of its shape, dtype and device).
  adamw(const at::Tensor& params, adamw_options options);

  /// One step with learning rate `lr` on `params` (in place) from `grads` (same shape); both must
  /// be the tensors' storage the caller trains, not views that autograd tracks.
  void step(at::Tensor& params, const at::Tensor& grads, double lr);

  int64_t steps() const { return steps_; }
  const adamw_options& options() const { return options_; }
  const at::Tensor& exp_avg() const { return exp_avg_; }
  const at::Tensor& exp_avg_sq() const { return exp_avg_sq_; }

  /// Replaces the state (resume): the moments are copied into this optimiser's tensors.
  /// Precondition (TORCH_CHECK): shapes match.
  void restore(int64_t steps, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq);

private:
  adamw_options options_;
  int64_t steps_ = 0;
  at::Tensor exp_avg_, exp_avg_sq_;
};

/// The L2 norm of `grads` and, when max_norm > 0, `grads` scaled in place by
/// min(1, max_norm / (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_ does. Returns the norm
/// before clipping.
double clip_grad_norm(at::Tensor& grads, double max_norm);

} // namespace kbrl::train
