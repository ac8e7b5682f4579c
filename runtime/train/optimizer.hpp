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

#include "runtime/train/optimizer_options.hpp"

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kbrl::train {

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
