#pragma once
// Added tokens (<|im_start|>, <|begin_of_text|>, <think>, ...) are cut out of the text before
// anything else, so that normalization and pre-tokenization never see them. At each position
// the longest added token that starts there wins, scanning left to right (the reference
// splitter's rule). The flags of each token are honoured as Hugging Face defines them:
//   lstrip / rstrip  white space before / after the token is swallowed with it
//   single_word      the token only matches where no word character (letter, digit, '_')
//                    touches it on either side
//   normalized       the token is matched in the normalized text instead of the raw text
//                    (the tokenizer runs a second matcher after normalizing)

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::tok {

/// One entry of tokenizer.json's "added_tokens" (or tokenizer_config.json's
/// "added_tokens_decoder").
struct added_token {
  int32_t id = 0;
  std::string content;
  bool special = false;     ///< a control token: decode(skip_special) leaves it out
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

/// Finds added tokens in a text. Immutable after construction; thread-safe.
class added_token_matcher {
public:
  /// A cut of the text: either plain text or one added token.
  struct section {
    std::string_view text; ///< the plain text (empty for a token)
    int32_t token = -1;    ///< the token's id, or -1 for plain text
  };

  added_token_matcher() = default;

  /// Matches the `tokens` for which `take(token)` is true; `contents[i]` is the text matched for
  /// tokens[i] (its content, or its normalized content for the second matcher).
  template <class Pred>
  added_token_matcher(const std::vector<added_token>& tokens,
                      const std::vector<std::string>& contents, Pred take) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (take(tokens[i]) && !contents[i].empty())
        add(tokens[i], contents[i]);
  }

  /// True if there is nothing to match.
  bool empty() const { return entries_.empty(); }

  /// Appends the sections of `text` (well-formed UTF-8) to `out`. Plain-text sections are
  /// never empty; stripping can shorten them.
  void split(std::string_view text, std::vector<section>& out) const;

private:
  struct entry {
    std::string content;
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  /// A byte trie: node 0 is the root; `children` hold (byte, node) sorted by byte.
  struct node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t entry = -1; // the token ending here
  };
  void add(const added_token& token, const std::string& content);
  int32_t child(int32_t from, unsigned char byte) const;
  bool single_word_ok(std::string_view text, std::size_t begin, std::size_t end) const;

  std::vector<entry> entries_;
  std::vector<node> nodes_{node{}};
  bool first_byte_[256] = {};
};

} // namespace kbrl::tok
