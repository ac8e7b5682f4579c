#include "runtime/tokenizer/chat_format.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"
#include "runtime/tokenizer/unicode.hpp"

namespace kbrl::tok {

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n'), which the Qwen3 template calls.
std::string_view lstrip_newlines(std::string_view s) {
  const std::size_t b = s.find_first_not_of('\n');
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}

std::string_view rstrip_newlines(std::string_view s) {
  const std::size_t e = s.find_last_not_of('\n');
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

std::string_view strip_newlines(std::string_view s) {
  return rstrip_newlines(lstrip_newlines(s));
}

/// Jinja's `trim` filter as @huggingface/jinja implements it (String.prototype.trim).
std::string_view trim(std::string_view s) {
  return trim_js_whitespace_end(trim_js_whitespace_start(s));
}

/// Python's s.split(sep)[-1] and s.split(sep)[0].
std::string_view after_last(std::string_view s, std::string_view sep) {
  const std::size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

std::string_view before_first(std::string_view s, std::string_view sep) {
  return s.substr(0, s.find(sep));
}

const std::vector<std::string> known_roles{"system", "user", "assistant", "tool"};

caf::error check_messages(const std::vector<chat_message>& messages) {
  if (messages.empty())
    return make_error(errc::invalid_argument, "cannot render an empty conversation");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    bool known = false;
    for (const auto& r : known_roles)
      known = known || r == role;
    if (!known)
      return make_error(errc::invalid_argument,
                        "message " + std::to_string(i) + " has role \"" + role
                          + "\"; expected one of " + join(known_roles, ", "));
    if (!is_valid_utf8(messages[i].content)
        || (messages[i].reasoning_content && !is_valid_utf8(*messages[i].reasoning_content)))
      return make_error(errc::invalid_argument, "message " + std::to_string(i) + " (" + role
                                                  + ") is not valid UTF-8");
  }
  return {};
}

std::string renderers_hint() {
  return "kbrl renders \"chatml\" (Qwen2/Qwen2.5 ChatML), \"qwen3\" (ChatML with <think>), "
         "\"llama3\" and \"jinja\" (a tokenizer's own template); force one by giving its name "
         "instead of recognising the template";
}

} // namespace

std::optional<std::string> chatml_default_system_prompt(std::string_view t) {
  const std::string_view marker = "<|im_start|>system";
  for (std::size_t at = t.find(marker); at != std::string_view::npos;
       at = t.find(marker, at + 1)) {
    if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"'))
      continue; // not the start of a string literal
    const char quote = t[at - 1];
    std::size_t pos = at + marker.size();
    if (starts_with(t.substr(pos), "\\n"))
      pos += 2;
    else if (starts_with(t.substr(pos), "\n"))
      pos += 1;
    else
      continue;
    // Read the rest of the literal up to <|im_end|>, undoing Jinja's escapes.
    std::string prompt;
    bool closed = false;
    while (pos < t.size()) {
      if (starts_with(t.substr(pos), "<|im_end|>")) {
        closed = true;
        break;
      }
      const char c = t[pos];
      if (c == quote)
        break; // the literal ended before <|im_end|>: the content is spliced in, no default
      if (c == '\\' && pos + 1 < t.size()) {
        const char e = t[pos + 1];
        prompt += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        pos += 2;
        continue;
      }
      prompt += c;
      ++pos;
    }
    if (closed && !prompt.empty())
      return prompt;
  }
  return std::nullopt;
}

const std::vector<std::string>& chat_format::names() {
  static const std::vector<std::string> all{"chatml", "qwen3", "llama3", "jinja"};
  return all;
}

caf::expected<chat_format> chat_format::by_name(std::string_view name) {
  chat_format_settings s;
  if (name == "chatml")
    s.family = chat_family::chatml;
  else if (name == "qwen3")
    s.family = chat_family::qwen3;
  else if (name == "llama3")
    s.family = chat_family::llama3;
  else if (name == "jinja")
    s.family = chat_family::jinja;
  else
    return make_error(errc::invalid_argument, "unknown chat format \"" + std::string{name}
                                                + "\"; expected one of " + join(names(), ", "));
  return chat_format{std::move(s)};
}

chat_format chat_format::jinja(std::string_view chat_template, const template_tokens& tokens) {
  chat_format_settings s;
  s.family = chat_family::jinja;
  s.jinja_template = std::string{chat_template};
  for (auto& [name, value] : {std::pair{"bos_token", tokens.bos}, std::pair{"eos_token", tokens.eos},
                              std::pair{"pad_token", tokens.pad}})
    if (value)
      s.jinja_variables.strings[name] = *value;
  s.jinja_end_of_turn = tokens.eos.value_or("");
  if (tokens.bos)
    s.bos_token = *tokens.bos;
  return chat_format{std::move(s)};
}

caf::expected<chat_format> chat_format::from_template(std::string_view t,
                                                      const template_tokens& tokens,
                                                      const std::string& source) {
  if (trim(t).empty())
    return make_error(errc::not_supported,
                      source + " is empty, so no renderer can be recognised; " + renderers_hint());
  chat_format_settings s;
  if (tokens.bos)
    s.bos_token = *tokens.bos;
  if (contains(t, "<|im_start|>") && contains(t, "<|im_end|>")) {
    if (contains(t, "enable_thinking") || contains(t, "reasoning_content")) {
      s.family = chat_family::qwen3;
    } else if (contains(t, "<think>")) {
      // QwQ and other reasoning models have their own rules for <think>: their own template.
      return jinja(t, tokens);
    } else {
      s.family = chat_family::chatml;
      s.default_system_prompt = chatml_default_system_prompt(t);
    }
    return chat_format{std::move(s)};
  }
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")
      && contains(t, "<|eot_id|>")) {
    if (contains(t, "Cutting Knowledge Date")) // Llama 3.1+: date header, tool calls
      return jinja(t, tokens);
    s.family = chat_family::llama3;
    // The first Llama 3 Instruct template wrote the assistant header unconditionally.
    s.always_add_generation_prompt = !contains(t, "add_generation_prompt");
    return chat_format{std::move(s)};
  }
  return jinja(t, tokens);
}

caf::expected<chat_format> chat_format::for_tokenizer(const tokenizer& tok, std::string_view name) {
  const template_tokens tokens{tok.bos_token(), tok.eos_token(), tok.pad_token()};
  if (name.empty())
    return from_template(tok.chat_template(), tokens, "the chat template of " + tok.source());
  if (name == "jinja") {
    if (trim(tok.chat_template()).empty())
      return make_error(errc::not_supported, "chat format jinja: " + tok.source()
                                               + " has no chat template; " + renderers_hint());
    return jinja(tok.chat_template(), tokens);
  }
  auto forced = by_name(name);
  if (!forced)
    return forced;
  chat_format_settings s = forced->settings();
  if (s.family == chat_family::llama3 && tok.bos_token())
    s.bos_token = *tok.bos_token();
  if (s.family == chat_family::chatml)
    s.default_system_prompt = chatml_default_system_prompt(tok.chat_template());
  return chat_format{std::move(s)};
}

const std::string& chat_format::name() const {
  return names()[static_cast<std::size_t>(settings_.family)];
}

std::string chat_format::end_of_turn() const {
  switch (settings_.family) {
    case chat_family::llama3: return "<|eot_id|>";
    case chat_family::jinja: return settings_.jinja_end_of_turn;
    default: return "<|im_end|>";
  }
}

caf::expected<std::string> chat_format::render(const std::vector<chat_message>& messages,
                                               bool add_generation_prompt) const {
  if (auto err = check_messages(messages))
    return err;
  switch (settings_.family) {
    case chat_family::chatml: return render_chatml(messages, add_generation_prompt);
    case chat_family::qwen3: return render_qwen3(messages, add_generation_prompt);
    case chat_family::llama3: return render_llama3(messages, add_generation_prompt);
    case chat_family::jinja: {
      if (settings_.jinja_template.empty())
        return make_error(errc::invalid_argument,
                          "chat format jinja: no template (choose it with the tokenizer)");
      auto variables = settings_.jinja_variables;
      if (!settings_.enable_thinking)
        variables.flags["enable_thinking"] = false;
      return render_jinja(settings_.jinja_template, messages, add_generation_prompt, variables);
    }
  }
  return make_error(errc::internal, "chat_format::render: unknown family");
}

namespace {

/// A "tool" message: consecutive tool results share one user turn (both Qwen templates).
void render_tool_result(const std::vector<chat_message>& messages, std::size_t i,
                        std::string& out) {
  if (i == 0 || messages[i - 1].role != "tool")
    out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += messages[i].content;
  out += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool")
    out += "<|im_end|>\n";
}

void render_turn(std::string_view role, std::string_view content, std::string& out) {
  out += "<|im_start|>";
  out += role;
  out += '\n';
  out += content;
  out += "<|im_end|>\n";
}

} // namespace

std::string chat_format::render_chatml(const std::vector<chat_message>& messages,
                                       bool generation) const {
  std::string out;
  if (messages.front().role == "system")
    render_turn("system", messages.front().content, out);
  else if (settings_.default_system_prompt)
    render_turn("system", *settings_.default_system_prompt, out);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const chat_message& m = messages[i];
    if (m.role == "tool")
      render_tool_result(messages, i, out);
    else if (!(i == 0 && m.role == "system"))
      render_turn(m.role, m.content, out);
  }
  if (generation)
    out += "<|im_start|>assistant\n";
  return out;
}

std::string chat_format::render_qwen3(const std::vector<chat_message>& messages,
                                      bool generation) const {
  std::string out;
  if (messages.front().role == "system")
    render_turn("system", messages.front().content, out);
  // The last user message that is not a wrapped tool response: reasoning is kept only for
  // assistant turns after it (the current multi-step answer).
  std::size_t last_query = messages.size() - 1;
  for (std::size_t k = messages.size(); k-- > 0;) {
    const chat_message& m = messages[k];
    if (m.role == "user"
        && !(starts_with(m.content, "<tool_response>")
             && ends_with(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const chat_message& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      render_turn(m.role, m.content, out);
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (contains(m.content, "</think>")) {
        content = lstrip_newlines(after_last(m.content, "</think>"));
        reasoning = lstrip_newlines(
          after_last(rstrip_newlines(before_first(m.content, "</think>")), "<think>"));
      }
      out += "<|im_start|>assistant\n";
      const bool last = i + 1 == messages.size();
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
      } else {
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      render_tool_result(messages, i, out);
    }
  }
  if (generation) {
    out += "<|im_start|>assistant\n";
    if (!settings_.enable_thinking)
      out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string chat_format::render_llama3(const std::vector<chat_message>& messages,
                                       bool generation) const {
  std::string out = settings_.bos_token;
  for (const chat_message& m : messages) {
    out += "<|start_header_id|>";
    out += m.role;
    out += "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (generation || settings_.always_add_generation_prompt)
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

} // namespace kbrl::tok
