#pragma once
// The parts of a loaded tokenizer, shared by the loader (tokenizer_json.cpp) and the encoder
// (tokenizer.cpp). Not for use outside runtime/tokenizer/.

#include "runtime/tokenizer/added_tokens.hpp"
#include "runtime/tokenizer/bpe.hpp"
#include "runtime/tokenizer/pre_tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kbrl::tok {

/// Everything a tokenizer knows; immutable once loaded.
struct tokenizer_model {
  std::string source;                      ///< the tokenizer.json path, for messages
  bpe_model bpe;                           ///< vocabulary and merges
  std::vector<added_token> added;          ///< by increasing id
  std::unordered_map<std::string, int32_t> added_by_content;
  added_token_matcher raw_matcher;         ///< added tokens with normalized == false
  added_token_matcher normalized_matcher;  ///< added tokens with normalized == true
  std::vector<normal_form> normalizers;    ///< applied in order; empty: none
  pre_tokenizer pre;
  std::vector<int32_t> prefix_ids;         ///< post-processor tokens before the text
  std::vector<int32_t> suffix_ids;         ///< post-processor tokens after the text
  int32_t vocab_size = 0;
  std::vector<int32_t> added_index;        ///< per id: index into `added`, or -1
  std::vector<bool> special;               ///< per id: dropped by decode(skip_special)
  std::optional<std::string> bos_token, eos_token, pad_token;
  std::optional<int32_t> bos_id, eos_id, pad_id;
  std::string chat_template;

  /// `text` after every normalizer.
  std::string normalize(std::string_view text) const;

  /// The id of a token as tokenizer.json writes it: an added token's content, or a vocabulary
  /// entry in the byte-level alphabet.
  std::optional<int32_t> find_token(std::string_view token) const;
};

/// Reads the tokenizer from the texts of its files. `chat_template_file` is the content of a
/// chat_template.jinja beside them (empty if none); it wins over the config's chat_template.
caf::expected<std::shared_ptr<tokenizer_model>>
read_tokenizer_model(std::string_view tokenizer_json, const std::string& json_name,
                     std::string_view tokenizer_config_json, const std::string& config_name,
                     std::string chat_template_file);

} // namespace kbrl::tok
