#pragma once
// Differentiable per-token log-probabilities whose memory does not grow with the vocabulary times
// the sequence. model::token_logprobs() computes the logits chunk by chunk, but under autograd
// every chunk's [chunk, vocab] logits (and softmax) stay alive for the backward pass: with a 150k
// vocabulary and 16k completion tokens that is ~10 GB in float32. Here at most one chunk's
// logits exist at any moment.
//
// Each position's log-probability depends on that position's hidden state alone, so its gradient
// is one vector per position, d logprob[s] / d hidden[s] ([batch, seq, hidden_size], the size of
// `hidden` itself). The forward computes it chunk by chunk right after the chunk's logits (a
// backward through the chunk with unit weights) and keeps it instead of the hidden states; the
// backward pass is then grad_out[s] * that vector, with no second logits matmul. (Recomputing the
// logits in the backward, as before, cost one more lm_head forward per token: a few per cent of
// a training step.)
//
// The numbers are token_logprobs()'s: log_softmax(logits / temperature)[target], the sampler's
// definition (temperature 0 counts as 1).

#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace kbrl::train {

/// token_logprobs(model, hidden, targets, temperature, chunk), float32 [batch, seq] (float64
/// for a float64 model), with each position's gradient computed chunk by chunk in the forward
/// (see above).
/// Gradients flow into `hidden`. With autograd off or `hidden` not requiring grad it is
/// token_logprobs() itself. The model must outlive the graph.
at::Tensor chunked_token_logprobs(const model::transformer& model, const at::Tensor& hidden,
                                  const at::Tensor& targets, double temperature, int64_t chunk);

} // namespace kbrl::train
