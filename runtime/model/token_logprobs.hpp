#pragma once
// Per-token log-probabilities of given tokens, the quantity the sampler reports with each token
// (sampling.hpp) and a learner recomputes for importance ratios, computed over a sequence in
// chunks so that [batch, seq, vocab] logits never exist at once.

#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace kbrl::model {

/// log_softmax(logits(hidden) / temperature)[targets], float32 [batch, seq] (float64 for a
/// float64 model).
///   hidden       [batch, seq, hidden_size], from transformer::forward()
///   targets      [batch, seq] token ids: position s scores targets[:, s] (for next-token
///                log-probabilities pass the ids shifted left by one)
///   temperature  > 0 divides the logits; 0 counts as 1, as the sampler's greedy rows do
///   chunk        positions per logits computation (> 0)
/// Differentiable: gradients flow into `hidden` (and on into LoRA factors). Under autograd each
/// chunk's logits stay alive for the backward pass unless the caller checkpoints.
at::Tensor token_logprobs(const transformer& model, const at::Tensor& hidden,
                          const at::Tensor& targets, double temperature = 1.0,
                          int64_t chunk = 256);

} // namespace kbrl::model
