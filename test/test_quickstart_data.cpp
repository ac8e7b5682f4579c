// The quickstart's bundled data (config/quickstart): the problems load and are small, every
// example answer's label is what the real evaluator (the Python worker, torch backend, on the
// CPU) says of it, the shipped policy loads, round-trips text through its tokenizer, fits the
// problems' prompts in its budget and answers a real prompt greedily with a ModelNew program.

#include "runtime/config/settings.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/warmstart/solutions.hpp"
#include "runtime/warmstart/warm_start.hpp"
#include "greedy_answers.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>

using namespace kbrl;

namespace {

namespace fs = std::filesystem;

const std::string quickstart = std::string(KBRL_SOURCE_DIR) + "/config/quickstart";

std::vector<problem> quickstart_problems() {
  auto p = warmstart::load_problem_folder(quickstart + "/problems", kernel_backend::torch,
                                          kernel_precision::fp32);
  BOOST_REQUIRE_MESSAGE(p, test::why(p));
  return *p;
}

episode::prompt_settings quickstart_prompts() {
  auto cfg = config::run_config::load(quickstart + "/run.toml");
  BOOST_REQUIRE_MESSAGE(cfg, test::why(cfg));
  auto s = episode::prompt_settings_from(*cfg);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  return *s;
}

/// What the evaluator's verdict means in the labels of solutions.hpp.
std::string label_of(const eval_result& v) {
  if (v.correct)
    return "correct";
  switch (v.error) {
    case eval_error::mismatch: return "incorrect";
    case eval_error::compile: return "compile";
    case eval_error::runtime: return "runtime";
    default: return std::string("evaluator error ") + to_string(v.error);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(quickstart_data)

BOOST_AUTO_TEST_CASE(the_problems_and_solutions_fit_together) {
  auto problems = quickstart_problems();
  BOOST_CHECK_GE(problems.size(), 10u);
  BOOST_CHECK_LE(problems.size(), 12u);
  auto solutions = warmstart::load_solutions(quickstart + "/solutions.jsonl");
  BOOST_REQUIRE_MESSAGE(solutions, test::why(solutions));
  auto ok = warmstart::check_problems_exist(*solutions, problems, "solutions.jsonl", "problems");
  BOOST_REQUIRE_MESSAGE(ok, test::why(ok));
  std::map<std::string, std::map<std::string, int>> labels; // problem -> label -> count
  for (auto& s : *solutions)
    ++labels[s.problem][s.label];
  size_t correct = 0;
  for (auto& p : problems) {
    auto& l = labels[p.id];
    int all = 0;
    for (auto& [label, n] : l)
      all += n;
    BOOST_TEST_CONTEXT(p.id) {
      BOOST_CHECK_GE(all, 4);
      BOOST_CHECK_LE(all, 6);
      // both kinds for every problem: RL needs something to choose between
      BOOST_CHECK_GE(l["correct"], 1);
      BOOST_CHECK_GE(all - l["correct"], 1);
    }
    correct += l["correct"];
  }
  // roughly half correct overall
  BOOST_CHECK_GE(correct * 10, solutions->size() * 3);
  BOOST_CHECK_LE(correct * 10, solutions->size() * 6);
}

BOOST_AUTO_TEST_CASE(every_label_is_what_the_evaluator_says) {
  auto problems = quickstart_problems();
  std::map<std::string, problem> by_id;
  for (auto& p : problems)
    by_id[p.id] = p;
  auto solutions = warmstart::load_solutions(quickstart + "/solutions.jsonl");
  BOOST_REQUIRE_MESSAGE(solutions, test::why(solutions));
  auto prompts = quickstart_prompts();
  test::temp_dir dir;
  eval::engine_options o;
  o.worker.python = eval::resolve_python("auto");
  o.worker.script = std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
  o.worker.scratch_dir = dir / "scratch";
  o.worker.extensions_dir = dir / "extensions";
  o.worker.gpu = -1;
  eval::eval_engine engine{o};
  uint64_t id = 1;
  for (auto& s : *solutions) {
    BOOST_TEST_CONTEXT("solutions.jsonl:" << s.line << " (" << s.problem << ", " << s.label << ")") {
      auto answer = episode::parse_answer(s.completion, prompts.format);
      if (s.label == "format") {
        BOOST_CHECK_MESSAGE(!answer.ok(), "labelled format, but the answer parses");
        continue;
      }
      BOOST_REQUIRE_MESSAGE(answer.ok(), "does not parse: " << episode::to_string(answer.failure));
      eval_request req;
      req.id = id++;
      req.candidate_source = answer.code;
      req.task = by_id.at(s.problem);
      req.timing.measure_performance = false;
      req.timing.perf_trials = 0;
      req.timing.timeout_s = 60;
      auto v = engine.evaluate(req);
      BOOST_CHECK_MESSAGE(label_of(v) == s.label,
                          "the evaluator says " << label_of(v) << ": "
                                                << v.error_excerpt.substr(0, 300));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_run_config_names_the_shipped_policy) {
  auto cfg = config::run_config::load(quickstart + "/run.toml");
  BOOST_REQUIRE_MESSAGE(cfg, test::why(cfg));
  BOOST_CHECK_EQUAL(cfg->get_string("sampler.model"), "config/quickstart/policy");
  BOOST_CHECK(fs::is_directory(std::string(KBRL_SOURCE_DIR) + "/" + cfg->get_string("sampler.model")));
  BOOST_CHECK(!cfg->get_bool("prompt.show_example"));
}

BOOST_AUTO_TEST_CASE(the_shipped_policy_loads_and_answers_a_real_prompt) {
  const fs::path policy = quickstart + "/policy";
  uintmax_t bytes = 0;
  for (auto& e : fs::directory_iterator(policy))
    bytes += e.is_regular_file() ? e.file_size() : 0;
  BOOST_TEST_MESSAGE("the shipped policy takes " << bytes << " bytes");
  BOOST_CHECK_LE(bytes, 8u * 1024 * 1024 + 512 * 1024);

  auto tok = tok::tokenizer::load(policy);
  BOOST_REQUIRE_MESSAGE(tok, test::why(tok));
  for (const std::string& text : {std::string("import torch\nclass ModelNew(nn.Module):\n    pass\n"),
                                 std::string("Größe → ∞ 日本語 🙂 \t\n  x")})
    BOOST_CHECK_EQUAL(tok->decode(tok->encode(text)), text);
  auto chat = tok::chat_format::for_tokenizer(*tok);
  BOOST_REQUIRE_MESSAGE(chat, test::why(chat));
  auto model = model::transformer::load(policy);
  BOOST_REQUIRE_MESSAGE(model, test::why(model));

  auto problems = quickstart_problems();
  auto prompts = quickstart_prompts();
  size_t longest = 0;
  for (auto& p : problems) {
    auto ids = episode::prompt_tokens(p, {}, prompts, *tok, *chat);
    BOOST_REQUIRE_MESSAGE(ids, test::why(ids));
    longest = std::max(longest, ids->size());
  }
  BOOST_TEST_MESSAGE("the longest quickstart prompt has " << longest << " tokens");
  BOOST_CHECK_LE(longest, 400u);

  // Greedy answers to every problem's real prompt: the policy learned the answer format (most
  // parse into a ModelNew program; greedy may pick a wrong branch, e.g. the unclosed tag).
  auto out = test::greedy_answers(*model, *tok, *chat, prompts, problems, 1024, 320);
  size_t parsed = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    BOOST_CHECK_MESSAGE(out[i].finish == finish_reason::stop_token,
                        problems[i].id << ": the answer did not end with <|im_end|>");
    auto answer = episode::parse_answer(out[i].completion_text, prompts.format);
    if (answer.ok() && answer.code.find("class ModelNew") != std::string::npos)
      ++parsed;
    else
      BOOST_TEST_MESSAGE(problems[i].id << ": greedy answer does not parse ("
                                        << episode::to_string(answer.failure) << ")");
  }
  BOOST_TEST_MESSAGE(parsed << " of " << problems.size() << " greedy answers parse");
  BOOST_CHECK_GE(parsed * 2, problems.size());
}

BOOST_AUTO_TEST_SUITE_END()
