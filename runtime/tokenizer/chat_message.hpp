#pragma once
// A message of a conversation, as chat templates take it.

#include <optional>
#include <string>

namespace kbrl::tok {

/// One message of a conversation.
struct chat_message {
  std::string role;    ///< "system", "user", "assistant" or "tool"
  std::string content; ///< the text, as is
  /// An assistant's reasoning kept apart from `content`, for qwen3 and the templates that read
  /// it (nullopt: not given; qwen3 then takes a leading <think>...</think> of `content`, as its
  /// template does).
  std::optional<std::string> reasoning_content;
};

} // namespace kbrl::tok
