// The single-turn prompt and the extraction of a program from a model's answer: which block is
// taken when there are several, <KERNEL> tags, reasoning skipped, and each kind of format
// failure with its reason.

#include "runtime/eval/answer_parsing.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::eval;

namespace {

const std::string model_new = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";

std::string extracted(std::string_view answer, const std::string& how) {
  auto r = extract_kernel_code(answer);
  BOOST_REQUIRE_MESSAGE(r, "no code found: " << test::why(r) << "\nin: " << answer);
  BOOST_CHECK_EQUAL(r->how, how);
  return r->code;
}

std::string failure(std::string_view answer) {
  auto r = extract_kernel_code(answer);
  BOOST_REQUIRE_MESSAGE(!r, "code found where none should be: " << (r ? r->code : ""));
  return describe(r.error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(answer_parsing)

BOOST_AUTO_TEST_CASE(a_python_block_is_taken_as_it_is) {
  auto answer = "Here is a faster version.\n\n```python\n" + model_new + "```\nIt fuses ops.";
  BOOST_CHECK_EQUAL(extracted(answer, "python_block"), model_new);
  // ```py and an indented fence work too.
  BOOST_CHECK_EQUAL(extracted("  ```py\n" + model_new + "  ```\n", "python_block"), model_new);
}

BOOST_AUTO_TEST_CASE(the_last_block_defining_model_new_wins) {
  auto answer = "First try:\n```python\nclass ModelNew: # draft\n    x = 1\n```\n"
                "A helper:\n```python\ndef helper(): pass\n```\n"
                "Final:\n```python\n" + model_new + "```\n"
                "Usage:\n```python\nm = ModelNew()\n```\n";
  BOOST_CHECK_EQUAL(extracted(answer, "python_block"), model_new);
  // Without ModelNew anywhere, the last python block.
  BOOST_CHECK_EQUAL(extracted("```python\na = 1\n```\n```python\nb = 2\n```\n", "python_block"),
                    "b = 2\n");
  // A bare fence counts when it defines ModelNew; a cpp block never does.
  BOOST_CHECK_EQUAL(extracted("```cpp\n__global__ void k() {}\n```\n```\n" + model_new + "```",
                              "code_block"),
                    model_new);
}

BOOST_AUTO_TEST_CASE(kernel_tags_come_first_and_may_hold_a_fence) {
  auto answer = "```python\nclass ModelNew: pass\n```\n<KERNEL>\n" + model_new + "</KERNEL>";
  BOOST_CHECK_EQUAL(extracted(answer, "kernel_tag"), model_new);
  auto fenced = "<KERNEL>\n```python\n" + model_new + "```\n</KERNEL>";
  BOOST_CHECK_EQUAL(extracted(fenced, "kernel_tag"), model_new);
  // Two pairs: the last one.
  auto two = "<KERNEL>old = 1</KERNEL> then <KERNEL>\n" + model_new + "</KERNEL>";
  BOOST_CHECK_EQUAL(extracted(two, "kernel_tag"), model_new);
}

BOOST_AUTO_TEST_CASE(reasoning_before_think_end_is_skipped) {
  auto answer = "<think>Maybe:\n```python\nclass ModelNew: # idea\n```\n</think>\n```python\n"
                + model_new + "```";
  BOOST_CHECK_EQUAL(extracted(answer, "python_block"), model_new);
  // Code only inside the reasoning is not an answer.
  auto only = "<think>\n```python\n" + model_new + "```\n</think>\nI could not finish.";
  BOOST_CHECK_MESSAGE(failure(only).find("no ```python code block") != std::string::npos,
                      failure(only));
}

BOOST_AUTO_TEST_CASE(format_failures_say_why) {
  BOOST_CHECK_MESSAGE(failure("I think you should use CUDA.").find("no <KERNEL>") != std::string::npos,
                      failure("I think you should use CUDA."));
  auto cut = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(";
  BOOST_CHECK_MESSAGE(failure(cut).find("not closed") != std::string::npos, failure(cut));
  auto cpp_only = "```cpp\nint main() {}\n```";
  BOOST_CHECK_MESSAGE(failure(cpp_only).find("other languages") != std::string::npos,
                      failure(cpp_only));
  BOOST_CHECK(failure("<KERNEL>   \n</KERNEL>").find("holds no code") != std::string::npos);
  BOOST_CHECK(failure("```python\n\n```").find("empty") != std::string::npos);
  BOOST_CHECK(!extract_kernel_code(""));
  // Random bytes (a tiny random model's answer) are a format failure, not a crash.
  std::string noise;
  for (int i = 0; i < 2000; ++i)
    noise += static_cast<char>((i * 7919 + 13) % 256);
  BOOST_CHECK(!extract_kernel_code(noise));
}

BOOST_AUTO_TEST_CASE(the_prompt_holds_the_problem_the_example_and_the_format) {
  problem p;
  p.name = "19_ReLU";
  p.reference_source = "import torch\nclass Model(torch.nn.Module):\n    pass  # RELU_MARKER\n";
  p.backend = kernel_backend::cuda;
  auto prompt = single_turn_prompt(p);
  BOOST_CHECK(prompt.find("RELU_MARKER") != std::string::npos);
  BOOST_CHECK(prompt.find("19_ReLU") != std::string::npos);
  BOOST_CHECK(prompt.find("load_inline") != std::string::npos);
  BOOST_CHECK(prompt.find("__global__") != std::string::npos); // the CUDA example
  BOOST_CHECK(prompt.find("ModelNew") != std::string::npos);
  BOOST_CHECK(prompt.find("<KERNEL>") != std::string::npos);
  p.backend = kernel_backend::triton;
  BOOST_CHECK(single_turn_prompt(p).find("@triton.jit") != std::string::npos);
  p.backend = kernel_backend::torch;
  auto cpu = single_turn_prompt(p);
  BOOST_CHECK(cpu.find("__global__") == std::string::npos);
  BOOST_CHECK(cpu.find("cpp_sources") != std::string::npos);
  // The example answer of every backend is itself a valid answer to the parser.
  for (auto b : {kernel_backend::cuda, kernel_backend::triton, kernel_backend::torch}) {
    auto& ex = example_for(b);
    auto code = extracted("```python\n" + ex.answer + "```", "python_block");
    BOOST_CHECK_EQUAL(code, ex.answer);
    BOOST_CHECK(ex.reference.find("class Model(") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
