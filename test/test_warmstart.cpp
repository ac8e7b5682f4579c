// The supervised warm start (runtime/warmstart, kbrl-warmstart): a short run on two of the
// quickstart's problems writes a model directory that the loader accepts and that generates,
// repeats byte for byte with the same seed, lowers the loss; its inputs' errors name file and
// line; the prompt.* keys reach the prompt settings.

#include "runtime/config/settings.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/warmstart/solutions.hpp"
#include "runtime/warmstart/warm_start.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kbrl;
using namespace kbrl::warmstart;

namespace {

namespace fs = std::filesystem;

const std::string quickstart = std::string(KBRL_SOURCE_DIR) + "/config/quickstart";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Two problems and their solutions, copied from the quickstart, in `dir`.
struct small_data {
  test::temp_dir dir;
  std::string root = dir / "problems";
  std::string solutions = dir / "solutions.jsonl";
  std::string config = dir / "run.toml";

  small_data() {
    fs::create_directories(root + "/level1");
    for (auto name : {"1_ReLU.py", "3_Sigmoid.py"})
      fs::copy_file(quickstart + "/problems/level1/" + name, root + "/level1/" + name);
    std::istringstream all(read(quickstart + "/solutions.jsonl"));
    std::string line, kept;
    while (std::getline(all, line))
      if (line.find("\"level1/1_ReLU\"") != std::string::npos
          || line.find("\"level1/3_Sigmoid\"") != std::string::npos)
        kept += line + "\n";
    dir.write("solutions.jsonl", kept);
    dir.write("run.toml", "[prompt]\nsystem = \"You write PyTorch programs.\"\n"
                          "show_example = false\n");
  }

  warm_start_options options(const std::string& out) const {
    warm_start_options o;
    o.problems_root = root;
    o.solutions_path = solutions;
    o.config_path = config;
    o.output = dir / out;
    o.vocab_size = 320;
    o.shape.hidden_size = 32;
    o.shape.intermediate_size = 64;
    o.shape.num_hidden_layers = 1;
    o.shape.num_attention_heads = 2;
    o.shape.num_key_value_heads = 1;
    o.training.epochs = 2;
    o.training.batch_sequences = 4;
    o.training.warmup_steps = 1;
    o.training.seed = 3;
    o.dtype = model::st_dtype::f32;
    o.command_line = "test";
    return o;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(warmstart)

BOOST_AUTO_TEST_CASE(a_short_warm_start_writes_a_policy_that_loads_and_generates) {
  small_data data;
  int steps_seen = 0;
  auto r = run_warm_start(data.options("policy"),
                          [&](const finetune_progress& p) { steps_seen = static_cast<int>(p.step); });
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_CHECK_EQUAL(r->problems, 2u);
  BOOST_CHECK_EQUAL(r->examples, 10u);
  BOOST_CHECK_EQUAL(steps_seen, 2 * 3); // 10 examples in batches of 4, 2 epochs
  BOOST_CHECK_LE(r->vocab_size, 320);
  BOOST_CHECK_LT(r->final_loss, r->initial_loss);
  const fs::path dir = data.dir / "policy";
  for (auto name : {"config.json", "generation_config.json", "tokenizer.json",
                    "tokenizer_config.json", "model.safetensors", "warmstart.json"})
    BOOST_CHECK_MESSAGE(fs::exists(dir / name), name << " missing");
  BOOST_CHECK(!fs::exists(dir / ".random-init"));

  auto tok = tok::tokenizer::load(dir);
  BOOST_REQUIRE_MESSAGE(tok, test::why(tok));
  BOOST_CHECK_EQUAL(tok->eos_token().value_or(""), "<|im_end|>");
  auto chat = tok::chat_format::for_tokenizer(*tok);
  BOOST_REQUIRE_MESSAGE(chat, test::why(chat));
  BOOST_CHECK_EQUAL(chat->name(), "chatml");
  auto m = model::transformer::load(dir);
  BOOST_REQUIRE_MESSAGE(m, test::why(m));
  BOOST_CHECK_EQUAL(m->config().vocab_size, tok->vocab_size());
  // config.json's <|im_end|> and generation_config.json's <|endoftext|>, sorted
  BOOST_CHECK(m->eos_token_ids()
              == (std::vector<int64_t>{*tok->token_id("<|endoftext|>"), *tok->token_id("<|im_end|>")}));

  auto engine = model::generation_engine::create(*m, *tok, {});
  BOOST_REQUIRE_MESSAGE(engine, test::why(engine));
  generation_request req;
  req.id = 1;
  req.prompt_tokens = tok->encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  req.params.temperature = 0;
  req.params.max_new_tokens = 8;
  auto out = engine->generate({req});
  BOOST_REQUIRE_EQUAL(out.size(), 1u);
  BOOST_CHECK(out[0].finish != finish_reason::error);
  BOOST_CHECK(!out[0].completion_tokens.empty());

  simdjson::dom::parser parser;
  auto record = parser.parse(read(dir / "warmstart.json"));
  BOOST_REQUIRE(!record.error());
  BOOST_CHECK_EQUAL(std::string(record["command"].get_string().value()), "test");
  BOOST_CHECK_EQUAL(record["seed"].get_uint64().value(), 3u);
  BOOST_CHECK_EQUAL(record["inputs"]["solutions_sha256"].get_string().value().size(), 64u);
  BOOST_CHECK_CLOSE(record["training"]["final_loss"].get_double().value(), r->final_loss, 1e-9);
}

BOOST_AUTO_TEST_CASE(the_same_seed_writes_the_same_bytes) {
  small_data data;
  auto a = run_warm_start(data.options("a"));
  auto b = run_warm_start(data.options("b"));
  BOOST_REQUIRE_MESSAGE(a, test::why(a));
  BOOST_REQUIRE_MESSAGE(b, test::why(b));
  for (auto name : {"model.safetensors", "tokenizer.json", "config.json", "warmstart.json"})
    BOOST_CHECK_MESSAGE(read(data.dir.path / "a" / name) == read(data.dir.path / "b" / name),
                        name << " differs between two runs with the same seed");
  auto other = data.options("c");
  other.training.seed = 4;
  BOOST_REQUIRE(run_warm_start(other));
  BOOST_CHECK(read(data.dir.path / "a" / "model.safetensors")
              != read(data.dir.path / "c" / "model.safetensors"));
}

BOOST_AUTO_TEST_CASE(bad_solution_lines_are_named_by_file_and_line) {
  auto check = [](const std::string& text, const std::string& expected) {
    auto s = parse_solutions(text, "s.jsonl");
    BOOST_REQUIRE(!s);
    auto what = describe(s.error());
    BOOST_CHECK_MESSAGE(what.find(expected) != std::string::npos, what);
  };
  const std::string good = R"({"problem": "level1/1_ReLU", "label": "correct", "completion": "x"})";
  check(good + "\n\n{not json\n", "s.jsonl:3: not valid JSON");
  check(good + "\n" + R"({"problem": "level1/1_ReLU", "label": "great", "completion": "x"})",
        "s.jsonl:2: unknown label \"great\" (expected one of correct, incorrect, compile, runtime, format)");
  check(R"({"problem": "level1/1_ReLU", "completion": "x"})", "s.jsonl:1: the key \"label\" is missing");
  check(R"({"problem": 7, "label": "correct", "completion": "x"})", "s.jsonl:1: \"problem\" must be a string");
  check(R"({"problem": "p", "label": "correct", "completion": ""})", "s.jsonl:1: the completion is empty");
  check("[1, 2]", "s.jsonl:1: expected a JSON object");
  check("\n\n", "s.jsonl: no examples");
  auto ok = parse_solutions(good + "\n", "s.jsonl");
  BOOST_REQUIRE_MESSAGE(ok, test::why(ok));
  BOOST_CHECK_EQUAL(ok->at(0).line, 1u);
}

BOOST_AUTO_TEST_CASE(a_solution_for_a_missing_problem_is_an_error_naming_the_line) {
  small_data data;
  data.dir.write("solutions.jsonl",
                 R"({"problem": "level1/1_ReLU", "label": "correct", "completion": "<KERNEL>x</KERNEL>"})"
                 "\n"
                 R"({"problem": "level1/99_Nope", "label": "correct", "completion": "x"})"
                 "\n");
  auto r = run_warm_start(data.options("policy"));
  BOOST_REQUIRE(!r);
  auto what = describe(r.error());
  BOOST_CHECK_MESSAGE(what.find(data.solutions + ":2: problem \"level1/99_Nope\" is not among the "
                                                 "2 problems")
                        != std::string::npos,
                      what);
  auto missing = data.options("policy");
  missing.problems_root = data.dir / "nowhere";
  BOOST_CHECK(!run_warm_start(missing));
}

BOOST_AUTO_TEST_CASE(prompt_keys_reach_the_prompt_settings) {
  auto defaults = episode::prompt_settings_from(config::run_config{});
  BOOST_REQUIRE_MESSAGE(defaults, test::why(defaults));
  episode::prompt_settings plain;
  BOOST_CHECK_EQUAL(defaults->system_prompt, plain.system_prompt);
  BOOST_CHECK_EQUAL(defaults->show_example, plain.show_example);
  BOOST_CHECK_EQUAL(defaults->history_token_budget, plain.history_token_budget);
  BOOST_CHECK_EQUAL(defaults->format.kernel_open, plain.format.kernel_open);
  BOOST_CHECK_EQUAL(defaults->format.allow_fenced, plain.format.allow_fenced);

  auto cfg = config::run_config::parse(R"([prompt]
system = ""
hardware_notes = "a laptop"
show_example = false
history_token_budget = 900
require_think = true
allow_fenced = false
kernel_open = "<CODE>"
kernel_close = "</CODE>"
)",
                                       "p.toml");
  BOOST_REQUIRE_MESSAGE(cfg, test::why(cfg));
  auto s = episode::prompt_settings_from(*cfg);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  BOOST_CHECK_EQUAL(s->system_prompt, "");
  BOOST_CHECK_EQUAL(s->hardware_notes, "a laptop");
  BOOST_CHECK(!s->show_example);
  BOOST_CHECK_EQUAL(s->history_token_budget, 900u);
  BOOST_CHECK(s->format.require_think);
  BOOST_CHECK(!s->format.allow_fenced);
  BOOST_CHECK_EQUAL(s->format.kernel_open, "<CODE>");
  BOOST_CHECK_EQUAL(s->format.kernel_close, "</CODE>");

  auto clash = config::run_config::parse("[prompt]\nkernel_open = \"<think>\"\n", "p.toml");
  BOOST_REQUIRE(clash);
  auto bad = episode::prompt_settings_from(*clash);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_NE(describe(bad.error()).find("prompt.kernel_open"), std::string::npos);
  auto empty = config::run_config::parse("[prompt]\nthink_close = \"\"\n", "p.toml");
  BOOST_REQUIRE(empty);
  BOOST_CHECK(!episode::prompt_settings_from(*empty));
}

BOOST_AUTO_TEST_SUITE_END()
