#pragma once
// The per-token losses of policy-gradient training, on flat vectors of completion tokens (the
// concatenation of every sequence's completion tokens in a micro-batch), independent of the model.
//
// With lp the learner's log-probability of a sampled token (differentiable), lp_old the sampler's,
// ratio = exp(lp - lp_old) and A the token's advantage (its sequence's):
//
//   policy_gradient   l = -ratio * A                        importance-sampled policy gradient:
//                                                           its gradient is -ratio * A * grad lp,
//                                                           REINFORCE when the data is on-policy
//   ppo_clip          l = -min(ratio * A,                   PPO's clipped surrogate with separate
//                              clip(ratio, 1 - eps_low,     low and high epsilons (DAPO's
//                                   1 + eps_high) * A)      "clip-higher": 0.2 / 0.28)
//   supervised        l = -lp                               cross-entropy on the completion
//
// plus, with kl_coef > 0, kl_coef * k3 where k3 = exp(lp_base - lp) - (lp_base - lp) - 1 is the
// non-negative, unbiased estimator of KL(policy || base) that GRPO uses, lp_base the base
// model's log-probability (the adapter switched off).
//
// The loss of a micro-batch is sum_t w_t * l_t, with aggregation weights w that sum to 1 over
// the whole optimisation step (not the micro-batch), so gradients accumulated over micro-batches
// equal the gradient of the step's loss:
//
//   token      w_t = 1 / (completion tokens in the step)         every token counts the same
//   sequence   w_t = 1 / (sequences in the step * its length)    every sequence counts the same

#include "runtime/rl/policy_loss_options.hpp"

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::rl {

/// The per-token inputs of one micro-batch, all [N] on one device.
struct token_inputs {
  at::Tensor logprobs;         ///< learner log-probabilities (differentiable), float
  at::Tensor sampler_logprobs; ///< needed by policy_gradient and ppo_clip
  at::Tensor advantages;       ///< needed by policy_gradient and ppo_clip
  at::Tensor weights;          ///< aggregation weights (aggregation_weights())
  at::Tensor base_logprobs;    ///< needed when kl_coef > 0
};

/// The loss of a micro-batch and its parts, each already weighted by w (so sums over the
/// micro-batches of a step give the step's figures). Scalars on the inputs' device.
struct policy_loss_terms {
  at::Tensor loss;           ///< differentiable: policy term + kl_coef * kl
  at::Tensor policy;         ///< detached: sum w * l (without the KL term)
  at::Tensor kl;             ///< detached: sum w * k3 (0 without base log-probabilities)
  at::Tensor clipped;        ///< detached: sum w over tokens whose ratio was clipped (ppo_clip)
  at::Tensor ratio;          ///< detached: sum w * ratio
  at::Tensor max_ratio;      ///< detached: max ratio (0 for supervised)
};

/// The loss terms of `inputs` (see the header comment). Preconditions (TORCH_CHECK): the tensors
/// a kind needs are defined and all have the same shape [N].
policy_loss_terms compute_policy_loss(const token_inputs& inputs,
                                      const policy_loss_options& options);

/// The aggregation weights of a step whose sequences have `lengths` completion tokens (in order),
/// as one float64 vector over all their tokens. Lengths of 0 contribute no tokens (and, for
/// `sequence`, are not counted as sequences).
std::vector<double> aggregation_weights(const std::vector<int64_t>& lengths,
                                        loss_aggregation aggregation);

} // namespace kbrl::rl
