#pragma once
// Shared pieces of the model tests (test_transformer.cpp, test_generation.cpp): tiny random
// checkpoints loaded as transformers, a byte tokenizer that decodes the tiny vocabulary, and
// tensor comparisons that say where they differ.

#include "messages/data.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>

#include <sstream>
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

/// A tokenizer.json whose token i is byte i (the byte-level BPE alphabet, no merges): it decodes
/// every id of the tiny models' 256-entry vocabulary.
inline std::string byte_tokenizer_json() {
  std::ostringstream vocab;
  vocab << "{";
  for (int b = 0; b < 256; ++b) {
    std::string key;
    for (char c : tok::bytes_to_byte_level(std::string(1, static_cast<char>(b)))) {
      if (c == '"' || c == '\\')
        key += '\\';
      key += c;
    }
    vocab << (b ? ", " : "") << "\"" << key << "\": " << b;
  }
  vocab << "}";
  return R"({"version": "1.0", "added_tokens": [], "normalizer": null, )"
         R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, )"
         R"("post_processor": null, "decoder": {"type": "ByteLevel"}, )"
         R"("model": {"type": "BPE", "vocab": )"
         + vocab.str() + R"(, "merges": []}})";
}

inline tok::tokenizer byte_tokenizer() {
  auto t = tok::tokenizer::parse(byte_tokenizer_json(), "", "byte tokenizer.json");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  return *t;
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

/// A generation request of `prompt` token ids (temperature 0: greedy).
inline generation_request token_request(uint64_t id, std::vector<int32_t> prompt,
                                        double temperature, int32_t max_new, uint64_t seed = 0) {
  generation_request r;
  r.id = id;
  r.prompt_tokens = std::move(prompt);
  r.params.temperature = temperature;
  r.params.max_new_tokens = max_new;
  r.params.seed = seed;
  return r;
}

} // namespace kbrl::test
