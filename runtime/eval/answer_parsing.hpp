#pragma once
// The single-turn contract between kbrl and a model: the prompt that asks for a faster ModelNew
// (KernelBench's style: the problem's source and one worked example of the expected answer),
// and how the program is taken out of the model's answer. The two belong together: the prompt
// names the answer format the parser reads.
//
// Used by kbrl-eval (generation and `--generations` completions). The RL loop may reuse it as the
// first turn of an episode or replace it with its own prompt builder; whatever replaces it must
// keep extract_kernel_code()'s rules, or old completion folders stop parsing the same way.
//
// Where the code is in an answer (extract_kernel_code), in order:
//   1. Reasoning is skipped: text up to the last "</think>" is ignored.
//   2. <KERNEL>...</KERNEL>: the last complete pair; inside it, a fenced block if there is one,
//      else the text between the tags.
//   3. Fenced blocks (```python, ```py, ```python3 or a bare ```): the last one that defines
//      `class ModelNew`; else the last python-tagged one. A block left open at the end (the
//      model ran out of tokens) does not count.
//   4. Nothing found, or only whitespace: a format failure, with the reason.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <string>
#include <string_view>

namespace kbrl::eval {

/// A worked example shown in the prompt: a reference program and an answer for it.
struct answer_example {
  std::string reference; ///< a small Model with get_inputs / get_init_inputs
  std::string answer;    ///< its ModelNew written for the backend
};

/// The example for `backend`: cuda and hip (load_inline with a __global__ kernel), triton
/// (@triton.jit), torch (a C++ CPU extension through load_inline); the other backends are shown
/// the cuda example.
const answer_example& example_for(kernel_backend backend);

/// The user message asking for a faster ModelNew for `p` written for p.backend: what to do, the
/// example, the problem's source, and the answer format (one ```python block, or the program
/// between <KERNEL> and </KERNEL>).
std::string single_turn_prompt(const problem& p);

/// The program found in an answer, and where it was found.
struct extracted_code {
  std::string code;
  std::string how; ///< "kernel_tag", "python_block" or "code_block"
};

/// The program in a model's answer (rules in the header comment). Fails with
/// errc::invalid_argument and a one-line reason ("no ```python block and no <KERNEL> tag in the
/// answer", "the last ```python block is not closed", ...): the caller records a format failure.
caf::expected<extracted_code> extract_kernel_code(std::string_view answer);

} // namespace kbrl::eval
