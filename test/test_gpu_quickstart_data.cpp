// The GPU quickstart's bundled data (config/gpu_quickstart), what can be checked without a GPU:
// the problems and held-out problems load as CUDA problems and pair up, every problem has correct
// and wrong example answers, the run config is valid and names the shipped policy, and that
// policy answers the real prompts of the training and held-out problems with load_inline CUDA
// programs. Every label against the real evaluator, on a GPU: config/gpu_quickstart/
// check_labels.py (bench/gpu_quickstart/gpu_run.sh's first stage).

#include "runtime/config/settings.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/node/node_plan.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/warmstart/solutions.hpp"
#include "runtime/warmstart/warm_start.hpp"
#include "greedy_answers.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

using namespace kbrl;

namespace {

const std::string gpu_quickstart = std::string(KBRL_SOURCE_DIR) + "/config/gpu_quickstart";

std::vector<problem> problems_in(const std::string& folder) {
  auto p = warmstart::load_problem_folder(gpu_quickstart + "/" + folder, kernel_backend::cuda,
                                          kernel_precision::fp32);
  BOOST_REQUIRE_MESSAGE(p, test::why(p));
  return *p;
}

config::run_config run_config() {
  auto cfg = config::run_config::load(gpu_quickstart + "/run.toml");
  BOOST_REQUIRE_MESSAGE(cfg, test::why(cfg));
  return *cfg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_quickstart_data)

BOOST_AUTO_TEST_CASE(problems_held_out_shapes_and_answers_fit_together) {
  auto problems = problems_in("problems");
  auto heldout = problems_in("heldout");
  BOOST_CHECK_EQUAL(problems.size(), 9u);
  BOOST_REQUIRE_EQUAL(heldout.size(), problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    BOOST_CHECK_EQUAL(heldout[i].id, problems[i].id); // the same operation...
    BOOST_CHECK_NE(heldout[i].reference_source, problems[i].reference_source); // ...other shapes
  }
  auto solutions = warmstart::load_solutions(gpu_quickstart + "/solutions.jsonl");
  BOOST_REQUIRE_MESSAGE(solutions, test::why(solutions));
  auto ok = warmstart::check_problems_exist(*solutions, problems, "solutions.jsonl", "problems");
  BOOST_REQUIRE_MESSAGE(ok, test::why(ok));
  std::map<std::string, std::map<std::string, int>> labels;
  for (auto& s : *solutions) {
    ++labels[s.problem][s.label];
    // every answer is a CUDA kernel built with load_inline
    BOOST_CHECK_MESSAGE(s.completion.find("load_inline(") != std::string::npos
                          && s.completion.find("__global__") != std::string::npos,
                        s.problem << ": an answer without a load_inline CUDA kernel");
  }
  for (auto& p : problems)
    BOOST_TEST_CONTEXT(p.id) {
      BOOST_CHECK_GE(labels[p.id]["correct"], 2); // a fast one and a slow one to choose between
      BOOST_CHECK_GE(labels[p.id]["incorrect"] + labels[p.id]["compile"], 1);
    }
}

BOOST_AUTO_TEST_CASE(the_run_config_is_valid_and_names_the_shipped_policy) {
  auto cfg = run_config();
  BOOST_CHECK_EQUAL(cfg.get_string("sampler.model"), "config/gpu_quickstart/policy");
  BOOST_CHECK_EQUAL(cfg.get_string("problems.backend"), "cuda");
  BOOST_CHECK_EQUAL(cfg.get_string("problems.root"), "config/gpu_quickstart/problems");
  // what kbrl-node checks before a run (rl.temperature and learner.temperature agree, ...),
  // with the paths as kbrl-node sees them from the repository root
  for (auto key : {"sampler.model", "problems.root"})
    BOOST_REQUIRE(!cfg.apply_override(std::string(key) + "=" + KBRL_SOURCE_DIR + "/"
                                      + cfg.get_string(key)));
  auto rl = rl_run_settings_from(cfg, "/tmp/kbrl-gpu-quickstart-check", nullptr);
  BOOST_CHECK_MESSAGE(rl, test::why(rl));
}

BOOST_AUTO_TEST_CASE(the_shipped_policy_answers_with_cuda_programs) {
  const std::string policy = gpu_quickstart + "/policy";
  auto tok = tok::tokenizer::load(policy);
  BOOST_REQUIRE_MESSAGE(tok, test::why(tok));
  auto chat = tok::chat_format::for_tokenizer(*tok);
  BOOST_REQUIRE_MESSAGE(chat, test::why(chat));
  auto model = model::transformer::load(policy);
  BOOST_REQUIRE_MESSAGE(model, test::why(model));
  auto cfg = run_config();
  auto prompts = episode::prompt_settings_from(cfg);
  BOOST_REQUIRE_MESSAGE(prompts, test::why(prompts));

  auto problems = problems_in("problems");
  for (auto& p : problems_in("heldout"))
    problems.push_back(p);
  auto out = test::greedy_answers(*model, *tok, *chat, *prompts, problems,
                                  cfg.get_int("sampler.max_seq_len"),
                                  static_cast<int32_t>(cfg.get_int("rl.max_new_tokens")));
  size_t cuda = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    auto answer = episode::parse_answer(out[i].completion_text, prompts->format);
    if (answer.ok() && answer.code.find("class ModelNew") != std::string::npos
        && answer.code.find("load_inline(") != std::string::npos)
      ++cuda;
    else
      BOOST_TEST_MESSAGE(problems[i].id << ": the greedy answer is not a load_inline program ("
                                        << episode::to_string(answer.failure) << ")");
  }
  BOOST_TEST_MESSAGE(cuda << " of " << problems.size() << " greedy answers are CUDA programs");
  // greedy may pick the branch without a closing tag; most answers must be programs
  BOOST_CHECK_GE(cuda * 2, problems.size());
}

BOOST_AUTO_TEST_SUITE_END()
