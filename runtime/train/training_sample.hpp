#pragma once
// What one optimisation step trains on: sequences of prompt + completion tokens, the sampler's
// log-probabilities of the completion tokens and the sequence's advantage. Each turn of a scored
// trajectory becomes one sample (a multi-turn episode's later prompts hold the earlier turns).

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kbrl::train {

/// One sequence to train on; the loss covers the completion tokens only.
struct training_sample {
  std::vector<int32_t> prompt_tokens;     ///< non-empty: the first completion token needs context
  std::vector<int32_t> completion_tokens;
  /// The sampler's log-probability of each completion token (the importance-sampling
  /// denominator); one per completion token, or empty for the supervised loss.
  std::vector<float> sampler_logprobs;
  double advantage = 0;
  uint64_t policy_version = 0;            ///< the weights that sampled it
};

/// One sample per turn with a completion, in order, carrying the turn's advantage (fill it with
/// rl::compute_advantages first). Fails with errc::invalid_argument naming the trajectory and
/// turn for a turn without prompt tokens or whose logprobs do not match its completion tokens
/// (when `need_logprobs`).
caf::expected<std::vector<training_sample>>
training_samples_from(const std::vector<trajectory>& trajectories, bool need_logprobs);

/// Checks samples before a step: prompt non-empty, every token in [0, vocab_size), finite
/// advantages, and (with `need_logprobs`) one finite, non-positive sampler log-probability per
/// completion token. Fails with errc::invalid_argument naming the sample index and what is wrong.
caf::expected<void> check_training_samples(const std::vector<training_sample>& samples,
                                           int64_t vocab_size, bool need_logprobs);

/// As above for the samples at the indices `which` only (one replica's shard of a step); errors
/// name the index in `samples`, and an index past the end.
caf::expected<void> check_training_samples(const std::vector<training_sample>& samples,
                                           const std::vector<std::size_t>& which,
                                           int64_t vocab_size, bool need_logprobs);

} // namespace kbrl::train
