#include "runtime/tokenizer/stream_decoder.hpp"

#include "runtime/tokenizer/unicode.hpp"

namespace kbrl::tok {

std::string stream_decoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id))
    return {};
  pending_ += tok_.token_bytes(id);
  std::string out;
  // decode_utf8 stops only before a truncated sequence at the very end; everything before it
  // is decided the way a decoder of the whole text decides it.
  const std::size_t used = decode_utf8(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string stream_decoder::finish() {
  std::string out;
  decode_utf8(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

} // namespace kbrl::tok
