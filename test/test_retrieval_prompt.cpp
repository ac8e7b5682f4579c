// Few-shot demonstrations in prompts: rank order, only the run's backend, whole examples within
// a token budget counted with a tokenizer (the byte tokenizer of the model tests: one token per
// byte) or estimated as characters / 4, and where the block goes in a prompt. Also the
// retrieval.* run-config keys.

#include "tokenizer_fixture.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/retrieval/few_shot.hpp"
#include "runtime/retrieval/retrieval_settings.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::retrieval;
using kbrl::test::contains;

namespace {

retrieved_example example(const std::string& id, kernel_backend backend, size_t kernel_bytes,
                          double speedup = 0) {
  retrieved_example x;
  x.id = id;
  x.backend = backend;
  x.reference_source = "class Model(nn.Module):\n    def forward(self, x):\n        return x\n";
  x.kernel_source = "#include <torch/extension.h>\n" + std::string(kernel_bytes, 'k') + "\n";
  x.speedup = speedup;
  return x;
}

} // namespace

BOOST_AUTO_TEST_SUITE(retrieval_prompt)

BOOST_AUTO_TEST_CASE(examples_are_shown_in_order_with_their_speedups) {
  std::vector<retrieved_example> xs{example("a", kernel_backend::cuda, 10, 1.84),
                                    example("b", kernel_backend::triton, 10),
                                    example("c", kernel_backend::cuda, 10)};
  xs[2].kernel_source = "import triton\n";
  few_shot_options o;
  o.backend = kernel_backend::cuda;
  auto block = render_few_shot(xs, o);
  BOOST_CHECK((block.ids == std::vector<std::string>{"a", "c"}));
  BOOST_CHECK_EQUAL(block.left_out_backend, 1);
  BOOST_CHECK_EQUAL(block.left_out_budget, 0);
  const auto& t = block.text;
  BOOST_CHECK_MESSAGE(t.rfind("Here are PyTorch programs similar to yours, each with a faster "
                              "CUDA implementation:\n", 0) == 0, t);
  BOOST_CHECK_MESSAGE(contains(t, "Example 1 (1.84x faster than PyTorch eager):\nReference:\n"
                                  "```python\nclass Model"), t);
  BOOST_CHECK_MESSAGE(contains(t, "CUDA implementation:\n```cpp\n#include <torch/extension.h>"), t);
  BOOST_CHECK_MESSAGE(contains(t, "Example 2:\nReference:"), t); // no speedup label: none shown
  BOOST_CHECK_MESSAGE(contains(t, "```python\nimport triton\n```"), t);
  BOOST_CHECK_LT(t.find("Example 1"), t.find("Example 2"));
  BOOST_CHECK_EQUAL(block.tokens, static_cast<int64_t>((t.size() + 3) / 4));
}

BOOST_AUTO_TEST_CASE(the_budget_leaves_out_whole_examples_counted_by_the_tokenizer) {
  const auto tokenizer = test::byte_tokenizer(); // one token per byte
  std::vector<retrieved_example> xs{example("small", kernel_backend::cuda, 100),
                                    example("huge", kernel_backend::cuda, 5000),
                                    example("medium", kernel_backend::cuda, 300)};
  few_shot_options o;
  o.backend = kernel_backend::cuda;
  o.count = tokenizer_count(tokenizer);
  o.max_tokens = 1200;
  auto block = render_few_shot(xs, o);
  BOOST_CHECK((block.ids == std::vector<std::string>{"small", "medium"}));
  BOOST_CHECK_EQUAL(block.left_out_budget, 1);
  BOOST_CHECK_EQUAL(block.tokens, static_cast<int64_t>(block.text.size())); // bytes = tokens
  BOOST_CHECK_LE(block.tokens, 1200);
  BOOST_CHECK(!contains(block.text, std::string(400, 'k')));
  BOOST_CHECK_MESSAGE(contains(block.text, "Example 2:"), block.text); // renumbered

  o.max_tokens = 50; // not even the first fits
  auto none = render_few_shot(xs, o);
  BOOST_CHECK(none.text.empty());
  BOOST_CHECK_EQUAL(none.left_out_budget, 3);
  o.max_tokens = 0;
  BOOST_CHECK(render_few_shot(xs, o).text.empty());

  // The estimate counts a quarter as many tokens as bytes: all three (about 6000 bytes) fit
  // in 2000.
  o.count = {};
  o.max_tokens = 2000;
  auto estimated = render_few_shot(xs, o);
  BOOST_CHECK((estimated.ids == std::vector<std::string>{"small", "huge", "medium"}));
}

BOOST_AUTO_TEST_CASE(the_block_goes_at_the_placeholder_or_first) {
  few_shot_block block;
  block.text = "EXAMPLES\n";
  BOOST_CHECK_EQUAL(insert_few_shot("Task:\n{examples}\nWrite it.", block),
                    "Task:\nEXAMPLES\n\nWrite it.");
  BOOST_CHECK_EQUAL(insert_few_shot("Write it.", block), "EXAMPLES\n\nWrite it.");
  few_shot_block empty;
  BOOST_CHECK_EQUAL(insert_few_shot("Task:\n{examples}\nWrite it.", empty), "Task:\n\nWrite it.");
  BOOST_CHECK_EQUAL(insert_few_shot("Write it.", empty), "Write it.");
}

BOOST_AUTO_TEST_CASE(run_config_keys_are_read) {
  auto defaults = retrieval_settings_from(config::run_config{});
  BOOST_CHECK(!defaults.enabled());
  BOOST_CHECK_EQUAL(defaults.k, 3);
  BOOST_CHECK_EQUAL(defaults.token_budget, 3000);
  BOOST_CHECK_EQUAL(defaults.embedder, "");
  auto c = config::run_config::parse("[retrieval]\nindex_dir = \"/idx\"\nk = 5\n"
                                     "token_budget = 800\nembedder = \"http:http://h:80\"\n",
                                     "run.toml");
  BOOST_REQUIRE_MESSAGE(c, test::why(c));
  auto s = retrieval_settings_from(*c);
  BOOST_CHECK(s.enabled());
  BOOST_CHECK_EQUAL(s.index_dir, "/idx");
  BOOST_CHECK_EQUAL(s.k, 5);
  BOOST_CHECK_EQUAL(s.token_budget, 800);
  auto o = retriever_options_from(s);
  BOOST_CHECK_EQUAL(o.index_dir, "/idx");
  BOOST_CHECK_EQUAL(o.embedder_spec, "http:http://h:80");
  auto bad = config::run_config::parse("[retrieval]\nk = 0\n", "run.toml");
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_MESSAGE(contains(describe(bad.error()), "run.toml:2: retrieval.k: expected an integer from 1 to 32"),
                      describe(bad.error()));
}

BOOST_AUTO_TEST_SUITE_END()
