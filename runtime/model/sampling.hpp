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
#include <memory>
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

/// Tokens drawn on the logits' device, on their way to the host (draw_tokens).
class drawn_tokens {
public:
  drawn_tokens() = default;

  /// The drawn ids on the logits' device ([rows], float32 or float64, each an exact integer): a
  /// next decode step's input, usable before the host has them.
  at::Tensor ids_on_device() const { return packed_.select(0, 0); }

  /// The tokens on the host; on CUDA, waits for the copy (only this waits for the device).
  sampled_tokens wait();

private:
  friend drawn_tokens draw_tokens(const at::Tensor&, const std::vector<sampling_row>&);
  at::Tensor packed_;    ///< [2, rows] on the device: ids, then log-probabilities
  at::Tensor host_;      ///< packed_'s copy on the host (pinned on CUDA)
  std::shared_ptr<void> copied_; ///< CUDA: the event recorded after the copy, else null
};

/// Samples one token per row of `logits` (float32 [rows, vocab]) with `rows[i]` for row i, on
/// the logits' device, and starts the copy of the result to the host without waiting for it
/// (on CUDA the host is not held up by the device's queue: a caller can launch more work first).
/// Preconditions (TORCH_CHECK): rows.size() == logits.size(0); sampled rows have a generator.
drawn_tokens draw_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows);

/// draw_tokens(logits, rows).wait().
sampled_tokens sample_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows);

/// A random generator for `device` seeded with `seed`: the same seed gives the same stream.
at::Generator make_generator(uint64_t seed, at::Device device);

/// Checks the ranges of `params`: temperature >= 0 and finite, top_p in (0, 1], top_k >= 0,
/// max_new_tokens > 0, no empty stop string. Fails with errc::invalid_argument naming each bad
/// field and its value.
caf::expected<void> check_sampling_params(const sampling_params& params);

} // namespace kbrl::model
