#pragma once
// Decodes a sequence while it is generated: token ids go in one at a time and only complete
// UTF-8 comes out. A character cut between two tokens (a CJK character or an emoji is often
// split over two or three byte-level tokens) is held back until its last byte arrives.
//
// The pieces returned by push() and finish() concatenate to exactly tokenizer::decode() of all
// the ids pushed, with the same skip_special setting: bytes that can never become a character
// turn into U+FFFD as soon as that is certain, the same U+FFFD decode() would write.

#include "runtime/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <string>

namespace kbrl::tok {

/// Incremental decoder for one sequence. Not thread-safe; one per sequence.
class stream_decoder {
public:
  /// Decodes with `tok` (copied: it shares the model). With `skip_special`, special tokens
  /// produce no text.
  explicit stream_decoder(tokenizer tok, bool skip_special = false)
    : tok_(std::move(tok)), skip_special_(skip_special) {}

  /// Adds one token; returns the text that is now complete (possibly "").
  std::string push(int32_t id);

  /// Ends the sequence: returns what is still held back, an incomplete character becoming
  /// U+FFFD. The decoder is empty afterwards and can start a new sequence.
  std::string finish();

  /// Bytes held back, waiting for the rest of a character (0 to 3).
  std::size_t pending_bytes() const { return pending_.size(); }

private:
  tokenizer tok_;
  bool skip_special_;
  std::string pending_;
};

} // namespace kbrl::tok
