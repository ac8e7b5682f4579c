#pragma once
// Chat rendering: a conversation as the text a chat model was trained on. kbrl renders the
// template families it knows in C++, each equal to its model's template for the features listed
// (test/test_chat_format.cpp renders the real templates with @huggingface/jinja and compares),
// and every other template with the engine transformers uses (jinja_renderer.hpp:
// python3-jinja2 in a helper process; test/test_chat_template.cpp compares it on Llama 3.1, QwQ,
// DeepSeek-R1 distill, Qwen2.5 and Qwen3 templates):
//
//   chatml  Qwen2 / Qwen2.5:  <|im_start|>role\n...<|im_end|>\n per message; when the first
//           message is not a system message, the template's default system prompt (Qwen2.5:
//           "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") if it has
//           one; tool messages grouped into one user turn of <tool_response> blocks.
//   qwen3   Qwen3: ChatML without a default system prompt; assistant turns after the last user
//           query keep their <think> reasoning (from reasoning_content or a <think>...</think>
//           prefix of the content), earlier ones lose it; enable_thinking = false adds the
//           empty "<think>\n\n</think>\n\n" after the generation prompt.
//   llama3  Llama 3: <|begin_of_text|> then <|start_header_id|>role<|end_header_id|>\n\n
//           content (trimmed) <|eot_id|> per message.
//
//   jinja   the model's own template, rendered by python3-jinja2 as transformers does: its
//           bos/eos/pad tokens as variables, enable_thinking passed when it is false.
//
// Tool definitions and assistant tool_calls are not rendered by the C++ families. The family is
// recognised from the tokenizer's chat template by its markers, or forced by name:
//   <|im_start|> + <|im_end|>, with enable_thinking or reasoning_content   -> qwen3
//   <|im_start|> + <|im_end|>, without <think>                             -> chatml
//   <|start_header_id|> + <|end_header_id|> + <|eot_id|>, no 3.1 date line -> llama3
//   anything else (QwQ's and the R1 distills' <think> rules, Llama 3.1+'s "Cutting Knowledge
//   Date" template, Mistral, Gemma, ...)                                     -> jinja

#include "runtime/tokenizer/chat_message.hpp"
#include "runtime/tokenizer/jinja_renderer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/expected.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::tok {

/// The template families kbrl renders.
enum class chat_family { chatml, qwen3, llama3, jinja };

/// The tokenizer's special tokens a template may print (tokenizer_config.json).
struct template_tokens {
  std::optional<std::string> bos, eos, pad;
};

/// How a chat_format renders; chosen by chat_format::for_tokenizer and friends.
struct chat_format_settings {
  chat_family family = chat_family::chatml;
  /// chatml: the system prompt used when the first message is not a system message; nullopt
  /// (the default) renders no system turn then.
  std::optional<std::string> default_system_prompt;
  /// llama3: the text before the first message. Default "<|begin_of_text|>".
  std::string bos_token = "<|begin_of_text|>";
  /// llama3: render the assistant header even without add_generation_prompt, as the first
  /// Llama 3 Instruct template did. Default false.
  bool always_add_generation_prompt = false;
  /// qwen3: false renders the template's enable_thinking=false form (an empty think block after
  /// the generation prompt); jinja: false is passed to the template as enable_thinking=false.
  /// Default true (the templates' default).
  bool enable_thinking = true;
  /// jinja: the template, the variables it sees (bos_token, eos_token, pad_token, and any set
  /// here such as date_string), and the text that ends a turn (the eos token).
  std::string jinja_template;
  template_variables jinja_variables;
  std::string jinja_end_of_turn;
};

/// Renders conversations of one template family. Immutable; thread-safe.
class chat_format {
public:
  /// The names a renderer can be forced by: "chatml", "qwen3", "llama3", "jinja" (the
  /// tokenizer's own template, rendered by python3-jinja2).
  static const std::vector<std::string>& names();

  /// The renderer for `tok`: the one called `name` if it is not empty (see names()), else the
  /// one recognised from tok.chat_template(). Settings come from the tokenizer where the
  /// template implies them (chatml's default system prompt, llama3's bos token, jinja's special
  /// tokens). Fails with errc::invalid_argument for an unknown name, errc::not_supported when
  /// the tokenizer has no chat template (the text lists the renderers and how to force one).
  static caf::expected<chat_format> for_tokenizer(const tokenizer& tok, std::string_view name = {});

  /// The renderer recognised from the Jinja text `chat_template` (jinja for any template no C++
  /// family matches); `tokens` are the tokenizer's. `source` names where the template came from
  /// in errors.
  static caf::expected<chat_format> from_template(std::string_view chat_template,
                                                  const template_tokens& tokens,
                                                  const std::string& source = "the chat template");

  /// The jinja renderer of `chat_template` with `tokens` as its variables.
  static chat_format jinja(std::string_view chat_template, const template_tokens& tokens);

  /// The renderer called `name` with default settings ("jinja" needs a template: for_tokenizer).
  static caf::expected<chat_format> by_name(std::string_view name);

  explicit chat_format(chat_format_settings settings) : settings_(std::move(settings)) {}

  /// The conversation as text; with `add_generation_prompt` it ends with the opening of an
  /// assistant turn. Fails with errc::invalid_argument for an empty conversation, a role
  /// outside system/user/assistant/tool, or text that is not valid UTF-8; jinja also with the
  /// template's own errors (render_jinja).
  caf::expected<std::string> render(const std::vector<chat_message>& messages,
                                    bool add_generation_prompt) const;

  /// This renderer's name (one of names()).
  const std::string& name() const;

  /// The text that closes a turn ("<|im_end|>", "<|eot_id|>", a jinja template's eos token;
  /// "" when a jinja tokenizer has none): generation stops there.
  std::string end_of_turn() const;

  /// How it renders.
  const chat_format_settings& settings() const { return settings_; }

private:
  std::string render_chatml(const std::vector<chat_message>& messages, bool generation) const;
  std::string render_qwen3(const std::vector<chat_message>& messages, bool generation) const;
  std::string render_llama3(const std::vector<chat_message>& messages, bool generation) const;

  chat_format_settings settings_;
};

/// The default system prompt a ChatML template writes when the conversation has none: the
/// text of a Jinja string literal '<|im_start|>system\n...<|im_end|>' in `chat_template`, or
/// nullopt if it has no such literal.
std::optional<std::string> chatml_default_system_prompt(std::string_view chat_template);

} // namespace kbrl::tok
