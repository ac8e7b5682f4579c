// The prompts of an episode: first turn, feedback, and the multi-turn conversation.

#include "runtime/episode/prompts.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

problem relu_problem() {
  problem p;
  p.id = "level1/19_ReLU";
  p.reference_source = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
  p.backend = kernel_backend::cuda;
  return p;
}

size_t words(const std::string& text) {
  size_t n = 0;
  bool in = false;
  for (char c : text) {
    bool space = c == ' ' || c == '\n' || c == '\t';
    n += !space && !in;
    in = !space;
  }
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(episode_prompts)

BOOST_AUTO_TEST_CASE(the_first_prompt_shows_problem_backend_example_and_format) {
  prompt_settings s;
  s.hardware_notes = "an NVIDIA H200";
  auto text = first_prompt(relu_problem(), s);
  for (auto part : {"return torch.relu(x)", "cuda backend", "fp32", "an NVIDIA H200", "__global__",
                    "<think>", "<KERNEL>", "class ModelNew"})
    BOOST_CHECK_MESSAGE(text.find(part) != std::string::npos, "missing " << part);
  s.show_example = false;
  BOOST_CHECK(first_prompt(relu_problem(), s).find("__global__") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(feedback_names_the_outcome_and_carries_the_evidence) {
  auto good = parse_answer("<KERNEL>class ModelNew: pass</KERNEL>");
  eval_result v;
  v.compiled = false;
  v.error = eval_error::compile;
  v.error_excerpt = "kernel.cu(3): error: identifier \"threadIdx\" is undefined";
  BOOST_CHECK(classify(good, &v) == outcome::compile);
  BOOST_CHECK(feedback_text(good, &v).find("threadIdx") != std::string::npos);
  v.compiled = true;
  v.error = eval_error::mismatch;
  v.trials_total = 5;
  v.trials_passed = 2;
  v.trials = {{true, 0, 0, ""}, {false, 0.5, 0.1, "values differ"}};
  auto text = feedback_text(good, &v);
  BOOST_CHECK(classify(good, &v) == outcome::correctness);
  BOOST_CHECK_MESSAGE(text.find("3 of 5 trials") != std::string::npos, text);
  BOOST_CHECK_MESSAGE(text.find("trial 2: FAIL") != std::string::npos, text);
  v.error = eval_error::none;
  v.correct = true;
  v.speedup = 1.5;
  v.kernel_runtime.mean_ms = 2;
  v.reference_runtime.mean_ms = 3;
  BOOST_CHECK(classify(good, &v) == outcome::faster);
  BOOST_CHECK_MESSAGE(feedback_text(good, &v).find("1.5x") != std::string::npos, feedback_text(good, &v));
  v.speedup = 0.8;
  BOOST_CHECK(classify(good, &v) == outcome::slower);
  v.error = eval_error::static_check;
  BOOST_CHECK(classify(good, &v) == outcome::refused);
  BOOST_CHECK(classify(parse_answer("nothing"), nullptr) == outcome::format);
}

BOOST_AUTO_TEST_CASE(later_turns_drop_reasoning_and_the_oldest_turns_over_budget) {
  std::vector<previous_turn> history;
  for (int i = 0; i < 4; ++i) {
    previous_turn t;
    t.answer = parse_answer("<think>secret reasoning " + std::to_string(i) + "</think>attempt "
                            + std::to_string(i) + " <KERNEL>class ModelNew: pass</KERNEL>");
    t.evaluated = true;
    t.verdict.compiled = true;
    t.verdict.error = eval_error::mismatch;
    t.verdict.trials_total = 5;
    history.push_back(t);
  }
  prompt_settings s;
  auto all = conversation(relu_problem(), history, s, words);
  BOOST_REQUIRE_EQUAL(all.size(), 2u + 2 * 4);
  BOOST_CHECK_EQUAL(all[2].role, "assistant");
  BOOST_CHECK(all[2].content.find("attempt 0") != std::string::npos);
  for (auto& m : all)
    BOOST_CHECK(m.content.find("secret reasoning") == std::string::npos);
  // A budget that fits the head and about two turns keeps the newest two.
  size_t head = words(all[0].content) + words(all[1].content);
  size_t turn = words(all[2].content) + words(all[3].content);
  s.history_token_budget = head + 2 * turn + turn / 2;
  auto trimmed = conversation(relu_problem(), history, s, words);
  BOOST_REQUIRE_EQUAL(trimmed.size(), 2u + 2 * 2);
  BOOST_CHECK(trimmed[2].content.find("attempt 2") != std::string::npos);
  BOOST_CHECK(trimmed[1].content.find("2 earlier attempt(s) left out") != std::string::npos);
  s.history_token_budget = 1; // the latest turn stays whatever the budget
  BOOST_CHECK_EQUAL(conversation(relu_problem(), history, s, words).size(), 4u);
}

BOOST_AUTO_TEST_SUITE_END()
