#pragma once
// The conversations of test/data/tokenizer/chats.json, for the chat-format and chat-template
// suites: each with its messages, whether it asks for the generation prompt, and (Qwen3) the
// enable_thinking it is rendered with.

#include "runtime/tokenizer/chat_message.hpp"

#include <simdjson.h>

#include <optional>
#include <string>
#include <vector>

namespace kbrl::test {

/// A conversation of chats.json.
struct chat_case {
  std::string name;
  std::vector<tok::chat_message> messages;
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;
};

inline std::string json_text(simdjson::dom::element e) {
  return std::string{std::string_view(e)};
}

/// The conversations of `path`; empty when it cannot be read (the caller checks the count).
inline std::vector<chat_case> load_chat_cases(const std::string& path) {
  std::vector<chat_case> out;
  simdjson::dom::parser parser;
  simdjson::dom::element chats;
  if (parser.load(path).get(chats))
    return out;
  for (simdjson::dom::element c : chats.get_array()) {
    chat_case cc;
    cc.name = json_text(c["name"]);
    cc.add_generation_prompt = bool(c["add_generation_prompt"]);
    bool thinking = true;
    if (!c["enable_thinking"].get(thinking))
      cc.enable_thinking = thinking;
    for (simdjson::dom::element m : c["messages"].get_array()) {
      tok::chat_message msg{json_text(m["role"]), json_text(m["content"]), std::nullopt};
      std::string_view reasoning;
      if (!m["reasoning_content"].get(reasoning))
        msg.reasoning_content = std::string{reasoning};
      cc.messages.push_back(std::move(msg));
    }
    out.push_back(std::move(cc));
  }
  return out;
}

} // namespace kbrl::test
