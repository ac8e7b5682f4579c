// kbrl-model as a user runs it: a real process on a model directory written like a Hugging Face
// checkpoint (a tiny random Qwen2 with a byte tokenizer).

#include "cluster_fixture.hpp"
#include "model_fixture.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <sstream>

using namespace kbrl;

namespace {

const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-model";

struct model_dir_fixture {
  test::temp_dir dir;
  std::string model = dir / "tiny-qwen2";
  model::model_config config = model::tiny_model_config("qwen2");

  model_dir_fixture() {
    BOOST_REQUIRE(model::write_random_checkpoint(model, config, 3));
    dir.write("tiny-qwen2/tokenizer.json", test::byte_tokenizer_json());
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(model_tool, model_dir_fixture)

BOOST_AUTO_TEST_CASE(inspect_names_the_architecture_and_checks_the_weights) {
  auto r = test::run_command({tool, "inspect", model});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_MESSAGE(r.output.find("architecture qwen2: " + std::to_string(config.num_hidden_layers)
                                    + " layers") != std::string::npos,
                      r.output);
  BOOST_CHECK_MESSAGE(r.output.find("every tensor the config needs is there") != std::string::npos,
                      r.output);
  BOOST_CHECK_MESSAGE(r.output.find("tokenizer    256 tokens") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(tokenize_prints_the_tokenizers_ids) {
  auto r = test::run_command({tool, "tokenize", model, "ab c", "--json"});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_EQUAL(r.output, "[97, 98, 32, 99]\n"); // byte tokenizer: one id per byte
}

BOOST_AUTO_TEST_CASE(generate_greedy_prints_what_the_engine_generates) {
  auto r = test::run_command({tool, "generate", model, "--prompt", "kernel", "--raw", "--greedy",
                              "--max-new-tokens", "6"});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  // The same request straight through the engine.
  auto m = model::transformer::load(model);
  BOOST_REQUIRE(m);
  auto engine = model::generation_engine::create(*m, test::byte_tokenizer());
  BOOST_REQUIRE(engine);
  generation_request req;
  req.prompt_tokens = {'k', 'e', 'r', 'n', 'e', 'l'};
  req.params.temperature = 0;
  req.params.max_new_tokens = 6;
  auto expected = engine->generate({req}).front();
  BOOST_CHECK_MESSAGE(r.output.rfind(expected.completion_text + "\n", 0) == 0,
                      "output: " << r.output << "\nexpected text: " << expected.completion_text);
  BOOST_CHECK_MESSAGE(r.output.find(std::to_string(expected.completion_tokens.size())
                                    + " new tokens") != std::string::npos,
                      r.output);
}

BOOST_AUTO_TEST_CASE(inspect_of_a_folder_missing_tensors_prints_them_and_exits_1) {
  // the config asks for one layer more than the weights have
  auto bigger = config;
  bigger.num_hidden_layers += 1;
  auto text = model::render_model_config(bigger);
  dir.write("tiny-qwen2/config.json", text);
  auto r = test::run_command({tool, "inspect", model});
  BOOST_CHECK_EQUAL(r.code, 1);
  BOOST_CHECK_MESSAGE(r.output.find("PROBLEMS") != std::string::npos, r.output);
  BOOST_CHECK_MESSAGE(r.output.find("cannot be used") != std::string::npos, r.output);
  BOOST_CHECK_MESSAGE(r.output.find("tokenizer    256 tokens") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(broken_inputs_fail_with_the_file_named) {
  auto r = test::run_command({tool, "inspect", dir / "nowhere"});
  BOOST_CHECK_NE(r.code, 0);
  BOOST_CHECK_MESSAGE(r.output.find("nowhere") != std::string::npos, r.output);
  dir.write("tiny-qwen2/config.json", "{\"model_type\": \"mamba\"}");
  r = test::run_command({tool, "inspect", model});
  BOOST_CHECK_NE(r.code, 0);
  BOOST_CHECK_MESSAGE(r.output.find("mamba") != std::string::npos, r.output);
  BOOST_CHECK_MESSAGE(r.output.find("config.json") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_SUITE_END()
