#pragma once
// What a model's answer must look like, and the strict parser that takes the kernel out of it.
//
// Default format (configurable): reasoning inside <think>...</think>, then the complete program
// inside <KERNEL>...</KERNEL>. A fenced block (```python ... ```) is accepted instead of the
// tags when `allow_fenced` is set. Anything else is a format failure with a category, so the RL
// loop can reward and report format problems separately from kernel problems.

#include <string>
#include <string_view>

namespace kbrl::episode {

struct answer_format {
  std::string think_open = "<think>";
  std::string think_close = "</think>";
  std::string kernel_open = "<KERNEL>";
  std::string kernel_close = "</KERNEL>";
  bool require_think = false; ///< an answer without a reasoning block is a format failure
  bool allow_fenced = true;   ///< a ```python (or ```) block counts when the tags are absent
};

/// Why an answer could not be used.
enum class format_failure {
  none,
  unterminated_think,   ///< <think> opened and never closed (often: ran out of tokens)
  missing_think,        ///< require_think and no reasoning block
  no_code,              ///< neither the kernel tags nor a fenced block
  unterminated_code,    ///< <KERNEL> or ``` opened and never closed
  several_code_blocks,  ///< more than one candidate program: which one is meant is unclear
  empty_code,           ///< the block holds nothing but whitespace
  no_model_new,         ///< the program defines no class ModelNew
};

const char* to_string(format_failure f);

struct parsed_answer {
  format_failure failure = format_failure::none;
  std::string code;         ///< the program, when failure == none
  std::string reasoning;    ///< inside the think block ("" without one)
  std::string visible;      ///< the answer after the think block: what later turns keep
  bool ok() const { return failure == format_failure::none; }
};

/// Parses `text` strictly (see the file comment). The think block must come first if present;
/// code inside the reasoning is not taken.
parsed_answer parse_answer(std::string_view text, const answer_format& format = {});

} // namespace kbrl::episode
