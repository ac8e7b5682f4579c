#pragma once
// A model's own Jinja chat template rendered as transformers' apply_chat_template renders it:
// by python3-jinja2 in a helper process (tools/kbrl_chat_template.py, same sandboxed
// environment, filters and globals), for the templates chat_format has no C++ renderer for.
// One helper per process, started on first use; thread-safe (one render at a time).

#include "runtime/tokenizer/chat_message.hpp"

#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace kbrl::tok {

/// What a template sees besides `messages` and `add_generation_prompt`.
struct template_variables {
  std::map<std::string, std::string> strings; ///< bos_token, eos_token, date_string, ...
  std::map<std::string, bool> flags;          ///< enable_thinking, ...
};

/// Renders `chat_template` over `messages`. Fails with errc::not_supported when python3 or
/// python3-jinja2 is missing, errc::invalid_argument with the template's own message when it
/// raises (raise_exception) or does not parse, errc::io_failure when the helper dies.
caf::expected<std::string> render_jinja(const std::string& chat_template,
                                        const std::vector<chat_message>& messages,
                                        bool add_generation_prompt,
                                        const template_variables& variables);

} // namespace kbrl::tok
