#pragma once
// Training samples of random tokens and lengths for the learner tests (test_trainer.cpp,
// test_data_parallel.cpp).

#include "runtime/train/training_sample.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <vector>

namespace kbrl::test {

/// `count` samples drawn from `seed`: prompts of 2 .. 1 + prompt_spread tokens, completions of
/// 1 .. completion_spread tokens, ids below `vocab`, sampler logprobs near the tiny models'
/// -log(256), advantages from a standard normal.
inline std::vector<train::training_sample> random_training_samples(uint64_t seed, int count,
                                                                   int64_t prompt_spread,
                                                                   int64_t completion_spread,
                                                                   int64_t vocab = 256) {
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<train::training_sample> out;
  for (int i = 0; i < count; ++i) {
    train::training_sample s;
    const int64_t p = 2 + at::randint(prompt_spread, {1}, gen).item<int64_t>();
    const int64_t c = 1 + at::randint(completion_spread, {1}, gen).item<int64_t>();
    auto ids = at::randint(vocab, {p + c}, gen);
    for (int64_t t = 0; t < p; ++t)
      s.prompt_tokens.push_back(static_cast<int32_t>(ids[t].item<int64_t>()));
    for (int64_t t = 0; t < c; ++t) {
      s.completion_tokens.push_back(static_cast<int32_t>(ids[p + t].item<int64_t>()));
      s.sampler_logprobs.push_back(
        static_cast<float>(-5.545 + 0.05 * at::randn({1}, gen).item<double>()));
    }
    s.advantage = at::randn({1}, gen).item<double>();
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace kbrl::test
