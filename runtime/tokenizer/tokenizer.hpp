#pragma once
// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) with a byte-level BPE model,
// the kind Qwen2/2.5, Qwen3 and Llama 3 ship. Encoding follows the tokenizer.json pipeline:
//
//   text -> repair ill-formed UTF-8 (U+FFFD) -> cut out added tokens -> normalize (NFC...)
//        -> pre-tokenize (Split regex, ByteLevel) -> BPE per piece -> post-process (bos...)
//
// and gives the same ids as the transformers.js encoders it is tested against
// (test/test_tokenizer.cpp). Decoding is the exact inverse: decode(encode(x)) == x for every
// well-formed x. (tokenizer_config.json's clean_up_tokenization_spaces is deliberately not
// applied: it rewrites " ," to "," and would break that round trip.)
//
// What is read, and what is refused with a clear error (file, JSON key, what was expected):
//   model          BPE with vocab + merges ("a b" strings or ["a", "b"] pairs), ignore_merges;
//                  WordPiece, Unigram, WordLevel, byte_fallback, dropout, subword affixes: no
//   normalizer     null, NFC, NFD, NFKC, NFKD, Sequence of those
//   pre_tokenizer  Split (Isolated/Removed), ByteLevel, Sequence; see pre_tokenizer.hpp
//   post_processor null, ByteLevel, TemplateProcessing (single sequence), Sequence
//   decoder        ByteLevel (or a Sequence holding only it)
//   added_tokens   with lstrip/rstrip/single_word/normalized/special; see added_tokens.hpp
//   tokenizer_config.json (optional, next to tokenizer.json): bos/eos/pad/unk_token (a string
//                  or {"content": ...}), added_tokens_decoder, additional_special_tokens,
//                  chat_template (a string or a list of {name, template}); or chat_template.jinja
//
// A tokenizer is cheap to copy (copies share one immutable model) and safe to use from several
// threads at once; the piece cache inside is locked.

#include "runtime/tokenizer/added_tokens.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::tok {

struct tokenizer_model;

/// A loaded byte-level BPE tokenizer.
class tokenizer {
public:
  /// Loads `path`: a model directory holding tokenizer.json (and optionally
  /// tokenizer_config.json, chat_template.jinja), or a tokenizer.json file whose directory may
  /// hold the other two. Fails with errc::io_failure if a file cannot be read,
  /// errc::invalid_config if one is malformed, errc::not_supported for a model or component
  /// kbrl does not implement; the text names the file and the JSON key.
  static caf::expected<tokenizer> load(const std::filesystem::path& path);

  /// Builds a tokenizer from the texts of tokenizer.json and tokenizer_config.json (empty: no
  /// config). `json_name` and `config_name` name them in errors.
  static caf::expected<tokenizer> parse(std::string_view tokenizer_json,
                                        std::string_view tokenizer_config_json,
                                        const std::string& json_name = "tokenizer.json",
                                        const std::string& config_name = "tokenizer_config.json");

  /// The ids of `text`. Added tokens written in the text (e.g. "<|im_start|>") become their
  /// ids. With `add_special_tokens` the post-processor's tokens are added (Llama 3's
  /// TemplateProcessing puts <|begin_of_text|> first; Qwen's ByteLevel adds nothing).
  /// Ill-formed UTF-8 is encoded as if each bad subpart were U+FFFD.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  /// Like encode(), but added tokens are not recognised: "<|im_start|>" in `text` is encoded
  /// as the plain characters it is made of. For text that must not inject control tokens.
  std::vector<int32_t> encode_ordinary(std::string_view text) const;

  /// The text of `ids`. Added tokens contribute their content, other tokens their bytes;
  /// `skip_special` leaves special tokens out. Ids that name no token are skipped (a model's
  /// embedding is often larger than the vocabulary). Bytes that do not form UTF-8 (an id
  /// sequence cut inside a character) become U+FFFD, one per maximal ill-formed subpart.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  /// The bytes `id` decodes to (possibly part of a UTF-8 character), or "" for an unknown id.
  std::string_view token_bytes(int32_t id) const;

  /// True if `id` is a special added token (decode(skip_special) drops it).
  bool is_special(int32_t id) const;

  /// The id of a token written as tokenizer.json writes it: an added token's content
  /// ("<|im_end|>") or a vocabulary entry in the byte-level alphabet ("Ġthe").
  std::optional<int32_t> token_id(std::string_view token) const;

  /// The token `id` as tokenizer.json writes it (inverse of token_id), or nullopt.
  std::optional<std::string> token(int32_t id) const;

  /// One more than the largest token id (vocabulary and added tokens).
  int32_t vocab_size() const;

  /// The added tokens, by increasing id.
  const std::vector<added_token>& added_tokens() const;

  /// tokenizer_config.json's bos_token / eos_token / pad_token and their ids; nullopt where the
  /// config has none (or there is no config).
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

  /// The Jinja chat template of tokenizer_config.json (or chat_template.jinja); "" if none.
  const std::string& chat_template() const;

  /// Where the tokenizer came from (the tokenizer.json path or `json_name`).
  const std::string& source() const;

  /// Pieces whose ids are cached right now.
  std::size_t cached_pieces() const;

  /// Empties the piece cache (for measuring the uncached path).
  void clear_cache() const;

private:
  explicit tokenizer(std::shared_ptr<const tokenizer_model> model) : model_(std::move(model)) {}
  std::vector<int32_t> encode_impl(std::string_view text, bool add_special_tokens,
                                   bool match_added) const;

  std::shared_ptr<const tokenizer_model> model_;
};

} // namespace kbrl::tok
