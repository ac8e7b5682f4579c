#include "runtime/tokenizer/jinja_renderer.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/line_process.hpp"
#include "runtime/io/tool_scripts.hpp"

#include <simdjson.h>

#include <chrono>
#include <mutex>

namespace kbrl::tok {

namespace {

std::string request_line(const std::string& chat_template, const std::vector<chat_message>& messages,
                         bool add_generation_prompt, const template_variables& variables) {
  json_writer w;
  w.begin_object().field("template", chat_template);
  w.key("messages").begin_array();
  for (auto& m : messages) {
    w.begin_object().field("role", m.role).field("content", m.content);
    if (m.reasoning_content)
      w.field("reasoning_content", *m.reasoning_content);
    w.end_object();
  }
  w.end_array().field("add_generation_prompt", add_generation_prompt);
  w.key("variables").begin_object();
  for (auto& [name, value] : variables.strings)
    w.field(name, value);
  for (auto& [name, value] : variables.flags)
    w.field(name, value);
  w.end_object().end_object();
  return w.str();
}

} // namespace

caf::expected<std::string> render_jinja(const std::string& chat_template,
                                        const std::vector<chat_message>& messages,
                                        bool add_generation_prompt,
                                        const template_variables& variables) {
  static std::mutex mutex;
  static io::line_process helper({"python3", io::tool_script("kbrl_chat_template.py")});
  std::string answer;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto got = helper.exchange(
      request_line(chat_template, messages, add_generation_prompt, variables),
      std::chrono::seconds(60));
    if (!got)
      return got.error();
    answer = std::move(*got);
  }
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(answer).get(obj))
    return make_error(errc::io_failure, "the chat-template helper answered something that is "
                                        "not JSON: " + answer.substr(0, 200));
  std::string_view text;
  if (!obj["text"].get(text))
    return std::string{text};
  std::string_view error;
  if (obj["error"].get(error))
    error = "no text and no error";
  bool missing = false;
  if (obj["missing"].get(missing))
    missing = false; // only the helper without python3-jinja2 says it
  return make_error(missing ? errc::not_supported : errc::invalid_argument, std::string{error});
}

} // namespace kbrl::tok
