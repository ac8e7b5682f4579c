#pragma once
// Trains a byte-level BPE tokenizer from texts and writes it as a tokenizer.json in the layout of
// Qwen2's (which tok::tokenizer and Hugging Face `tokenizers` both load):
//
//   text -> special tokens cut out -> NFC -> pieces of the pre-tokenizer regex (Qwen2's by
//   default) -> each distinct piece counted, as a sequence of byte symbols
//   repeat: merge the most frequent adjacent pair of symbols (summed over pieces, weighted by
//           each piece's count) into a new symbol, until the vocabulary has the size asked for
//           or no pair occurs min_frequency times
//
// Ties between pairs of equal count go to the pair whose (left bytes, right bytes) sort first,
// so the result depends only on the texts and the options, never on hash-table order.
//
// Ids: the 256 single bytes first, in the order of their characters in GPT-2's byte-level
// alphabet ('!' is 0, as in GPT-2's and Qwen's vocabularies), then one id per new token in the
// order the merges made it, then the special tokens (added tokens, in the order given).

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl::tok {

/// The pre-tokenizer pattern of Qwen2/Qwen2.5's tokenizer.json.
const char* qwen2_pretokenizer_pattern();

/// How a tokenizer is trained.
struct bpe_trainer_options {
  /// Ids in all: the 256 bytes, the merged tokens and the special tokens; >= 256 + specials.
  int32_t vocab_size = 4096;
  /// A pair merges only if it occurs at least this often; >= 1. Training stops early (with a
  /// smaller vocabulary) when no pair does.
  int64_t min_frequency = 2;
  /// Added tokens (special: decoding can skip them), given the last ids. Occurrences in the
  /// texts are cut out before training, so they never take part in merges.
  std::vector<std::string> special_tokens{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  /// The pre-tokenizer regex (JavaScript/Oniguruma syntax, as tokenizer.json writes it).
  std::string pattern = qwen2_pretokenizer_pattern();
};

/// A trained vocabulary.
struct bpe_vocabulary {
  /// Raw bytes of each token by id: [0, 256) the single bytes, then the merged tokens.
  std::vector<std::string> tokens;
  /// The merges by rank, as (left id, right id).
  std::vector<std::pair<int32_t, int32_t>> merges;
  /// The special tokens; token i has id tokens.size() + i.
  std::vector<std::string> special_tokens;
  std::string pattern;

  /// Ids in all (tokens and special tokens).
  int32_t size() const { return static_cast<int32_t>(tokens.size() + special_tokens.size()); }
  /// The id of special token `content`, or -1.
  int32_t special_id(std::string_view content) const;
};

/// Trains on `texts` (see the file comment). Fails with errc::invalid_argument for options out
/// of range (naming the field), an empty or repeated special token, or a pattern that does not
/// compile.
caf::expected<bpe_vocabulary> train_bpe(const std::vector<std::string>& texts,
                                        const bpe_trainer_options& options = {});

/// The vocabulary as tokenizer.json text: Qwen2's layout (NFC normalizer, Split + ByteLevel
/// pre-tokenizer, ByteLevel post-processor and decoder, BPE model with "left right" merges, the
/// special tokens as added tokens).
std::string render_tokenizer_json(const bpe_vocabulary& vocabulary);

} // namespace kbrl::tok
