#pragma once
// Retrieved examples as few-shot demonstrations in a prompt, within a token budget.
//
//   Here are PyTorch programs similar to yours, each with a faster CUDA implementation:
//
//   Example 1 (1.84x faster than PyTorch eager):
//   Reference:
//   ```python
//   ...
//   ```
//   CUDA implementation:
//   ```cpp
//   ...
//   ```
//
// Examples go in rank order; one whose text would pass the budget is left out whole (a cut
// kernel teaches wrong code) and the next, smaller ones still get their chance. Only examples of
// the run's backend are shown. Tokens are counted with the model's tokenizer when one is given,
// else estimated as characters / 4.

#include "messages/data.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::tok {
class tokenizer;
}

namespace kbrl::retrieval {

/// Counts the tokens of a text.
using token_counter = std::function<int64_t(std::string_view)>;

/// ceil(bytes / 4): the usual estimate for code when no tokenizer is at hand.
token_counter character_estimate();

/// Exact counts with `tokenizer` (copied; copies share the model).
token_counter tokenizer_count(const tok::tokenizer& tokenizer);

/// How demonstrations are chosen and written.
struct few_shot_options {
  /// Tokens the whole block may take, heading included; <= 0: no examples. Default 3000.
  int64_t max_tokens = 3000;
  /// The run's backend: examples of other backends are left out.
  kernel_backend backend = kernel_backend::cuda;
  /// Counts tokens; empty: character_estimate().
  token_counter count;
};

/// The demonstrations chosen.
struct few_shot_block {
  std::string text;                   ///< "" when no example fits
  std::vector<std::string> ids;       ///< ids of the examples shown, in order
  int64_t tokens = 0;                 ///< of `text`, as counted
  int32_t left_out_backend = 0;       ///< examples of another backend
  int32_t left_out_budget = 0;        ///< examples that did not fit
};

/// Writes the examples (best first) as demonstrations; see the file comment.
few_shot_block render_few_shot(const std::vector<retrieved_example>& examples,
                               const few_shot_options& options);

/// The prompt with the demonstrations in it: at the first "{examples}" in `prompt` when there
/// is one (the placeholder is removed when the block is empty), else before the prompt,
/// separated by a blank line.
std::string insert_few_shot(const std::string& prompt, const few_shot_block& block);

} // namespace kbrl::retrieval
