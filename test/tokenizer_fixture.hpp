#pragma once
// Test pieces around the tiny random models that need no torch: a byte tokenizer that decodes
// their 256-entry vocabulary, and token-level generation requests. Writing a tiny model
// (model::write_random_checkpoint) needs no torch in the test either; loading one does
// (model_fixture.hpp).

#include "messages/data.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"
#include "test_support.hpp"

#include <sstream>
#include <string>
#include <vector>

namespace kbrl::test {

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
