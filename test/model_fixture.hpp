#pragma once
// Shared pieces of the model tests (test_transformer.cpp, test_generation.cpp): tiny random
// checkpoints loaded as transformers and tensor comparisons that say where they differ, plus
// everything of tokenizer_fixture.hpp (tests that need no torch include only that one).

#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/transformer.hpp"
#include "test_support.hpp"
#include "tokenizer_fixture.hpp"

#include <ATen/ATen.h>

#include <string>

namespace kbrl::test {

/// Writes a random checkpoint of `config` (seed `seed`) into `dir` and loads it.
inline model::transformer tiny_transformer(const temp_dir& dir, const model::model_config& config,
                                           uint64_t seed = 7,
                                           const model::transformer_options& options = {}) {
  const auto path = dir / (config.model_type + "-" + std::to_string(seed));
  auto written = model::write_random_checkpoint(path, config, seed);
  BOOST_REQUIRE_MESSAGE(written, why(written));
  auto m = model::transformer::load(path, options);
  BOOST_REQUIRE_MESSAGE(m, why(m));
  return std::move(*m);
}

/// The largest absolute difference of two tensors (as float64 on the CPU).
inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  BOOST_REQUIRE_MESSAGE(a.sizes() == b.sizes(), "shapes differ");
  return (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

/// Checks |a - b| <= atol everywhere, naming `what` and the difference.
inline void check_close(const at::Tensor& a, const at::Tensor& b, double atol,
                        const std::string& what) {
  const double d = max_abs_diff(a, b);
  BOOST_CHECK_MESSAGE(d <= atol, what << ": max |difference| " << d << " > atol " << atol);
}

} // namespace kbrl::test
