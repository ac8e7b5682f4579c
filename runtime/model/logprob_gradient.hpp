#pragma once
// The learner's per-token log-probabilities together with their gradient with respect to the
// hidden states, on CUDA: one GEMM for the logits, one kernel that turns each row of logits into
// its log-probability and, in place, its gradient (cuda/logprob_kernel.cuh), one GEMM back. It
// replaces, for train::chunked_token_logprobs, the composition's float32 copy of the logits,
// log_softmax, gather and their autograd backward (about 38 bytes moved per logit against 6).
// On a Qwen2-1.5B 8 x 2048 step that composition was about 8 % of the device time.

#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <optional>

namespace kbrl::model {

struct logprobs_and_gradient {
  at::Tensor logprobs;    ///< float32 [batch, n]
  at::Tensor grad_hidden; ///< [batch, n, hidden_size] in hidden's dtype: d logprobs[b, s] / d hidden[b, s]
};

/// token_logprobs(model, hidden, targets, temperature) of one chunk, and the gradient of each
/// position's log-probability with respect to its own hidden row (no other position's depends on
/// it), rounded to hidden's dtype as autograd through the composition hands it on. nullopt where
/// the kernel cannot run: not on CUDA, float64, the fused kernels not compiled in, or
/// KBRL_TRAIN_KERNELS=composition (train_kernels_wanted). A target outside the vocabulary gives
/// a NaN log-probability.
std::optional<logprobs_and_gradient> fused_logprobs_and_gradient(const transformer& model,
                                                                 const at::Tensor& hidden,
                                                                 const at::Tensor& targets,
                                                                 double temperature);

} // namespace kbrl::model
