#pragma once
// Drawing the next token from a row of logits: temperature, top-k, top-p, greedy, each row with
// its own random generator.
//
// For a row with temperature T > 0:
//   logp   = log_softmax(logits / T)                      over the whole vocabulary
//   keep   = the top_k most likely tokens (top_k > 0), then of those the smallest set, most
//            likely first, whose probability mass reaches top_p (top_p < 1; the most likely
//            token is always kept). Ties at the top-k boundary keep the lower ids.
//   token  ~ softmax(logp restricted to keep), drawn with the row's generator as
//            argmax(logp - log(E)) over kept tokens with E ~ Exponential(1) per token
//            (the "exponential race", equivalent to sampling from the restricted softmax).
// For temperature 0 (greedy): token = argmax(logits) (the lowest id among equal maxima).
//
// The log-probability returned with each token is logp[token]: the log-softmax of
// logits / temperature over the whole vocabulary, BEFORE top-k/top-p truncation, and
// log_softmax(logits) (temperature 1) for greedy rows. That is what a learner recomputes from
// its own logits for importance ratios; it is not the probability under the truncated
// distribution the token was actually drawn from.
//
// Reproducibility: a row's result depends only on its logits and its generator, never on the
// other rows of the batch: each row draws its noise (one Exponential(1) per vocabulary entry per
// step) from its own generator. A request seeded the same way draws the same tokens however the
// requests around it are batched, as long as its logits are the same.
//
// On CUDA, when no row truncates (top-k / top-p), two kernels do all of it
// (cuda/sample_kernel.cuh): the noise comes from the row generator's Philox stream at an offset
// reserved for the call, computed where it is used instead of stored. The same rule and the same
// reproducibility, but other numbers than exponential_ would draw: a seed's tokens on CUDA
// differ from those of the composition (which the CPU and truncating rows keep, and every row
// with KBRL_SAMPLING=composition).

#include "messages/data.hpp"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <vector>

namespace kbrl::model {

/// The settings of one row of a sampling call.
struct sampling_row {
  double temperature = 1.0;         ///< >= 0; 0: greedy
  double top_p = 1.0;               ///< (0, 1]; 1: off
  int32_t top_k = 0;                ///< >= 0; 0: off
  at::Generator* generator = nullptr; ///< on the logits' device; unused (may be null) if greedy
};

/// The sampled tokens of a batch, on the CPU.
struct sampled_tokens {
  std::vector<int32_t> ids;
  std::vector<float> logprobs; ///< see the header comment for which distribution
};

/// Samples one token per row of `logits` (float32 [rows, vocab]) with `rows[i]` for row i.
/// Preconditions (TORCH_CHECK): rows.size() == logits.size(0); sampled rows have a generator.
sampled_tokens sample_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows);

/// A random generator for `device` seeded with `seed`: the same seed gives the same stream.
at::Generator make_generator(uint64_t seed, at::Device device);

/// Checks the ranges of `params`: temperature >= 0 and finite, top_p in (0, 1], top_k >= 0,
/// max_new_tokens > 0, no empty stop string. Fails with errc::invalid_argument naming each bad
/// field and its value.
caf::expected<void> check_sampling_params(const sampling_params& params);

} // namespace kbrl::model
