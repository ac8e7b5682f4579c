#pragma once
// The prompts of an episode, in KernelBench's style: the first turn shows the problem, the
// target backend with an example answer, the precision and hardware notes, and the answer
// format; each later turn adds the model's previous answer (its reasoning dropped: only what
// follows the think block is kept) and the evaluator's feedback on it. When the conversation
// outgrows its token budget, the oldest earlier turns are dropped first (the first prompt and
// the latest turn always stay).

#include "messages/data.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kbrl::episode {

struct prompt_settings {
  answer_format format;
  std::string system_prompt = "You are an expert in writing fast, correct GPU kernels.";
  std::string hardware_notes;       ///< e.g. "NVIDIA H200 (Hopper, 141 GB HBM3e)"; "" to omit
  bool show_example = true;         ///< include the backend's example answer
  size_t history_token_budget = 12000; ///< whole conversation, counted with the tokenizer
  /// Retrieved demonstrations (RA-ICL) put before the problem; "" for none.
  std::string examples;
};

/// How a turn went, in the words later prompts use.
enum class outcome {
  format,      ///< no program could be taken from the answer
  compile,     ///< the program did not build or load
  runtime,     ///< it raised, crashed or timed out
  correctness, ///< it ran, and its output differed from the reference
  refused,     ///< the static checks refused it (forbidden construct or reward hack)
  slower,      ///< correct, not faster than the reference
  faster,      ///< correct and faster: the goal
};

const char* to_string(outcome o);

/// The outcome of a turn from its parsed answer and verdict (null when nothing was evaluated).
outcome classify(const parsed_answer& answer, const eval_result* verdict);

/// The feedback message a model reads about its previous turn: the outcome, the cleaned error
/// excerpt, per-trial results, timings, and what to try next.
std::string feedback_text(const parsed_answer& answer, const eval_result* verdict);

/// The first turn's user message for `p`.
std::string first_prompt(const problem& p, const prompt_settings& settings);

/// An earlier turn of the episode, as later prompts show it.
struct previous_turn {
  parsed_answer answer;
  std::string completion_text;  ///< used when the answer did not parse
  bool evaluated = false;
  eval_result verdict;
};

/// The conversation for the next turn: system, first prompt, then for each earlier turn the
/// assistant's visible answer and the feedback as the next user message. `count_tokens` sizes
/// messages for the budget.
std::vector<tok::chat_message> conversation(const problem& p,
                                            const std::vector<previous_turn>& history,
                                            const prompt_settings& settings,
                                            const std::function<size_t(const std::string&)>& count_tokens);

/// The token ids the policy continues from for the next turn: conversation() (messages sized
/// with `tok`) rendered by `chat` with the generation prompt, then encoded with `tok`. The
/// episode actor samples from these ids and the warm start (kbrl-warmstart) trains on them with
/// an empty history, so both see the same tokens. Fails with the renderer's error.
caf::expected<std::vector<int32_t>> prompt_tokens(const problem& p,
                                                  const std::vector<previous_turn>& history,
                                                  const prompt_settings& settings,
                                                  const tok::tokenizer& tok,
                                                  const tok::chat_format& chat);

} // namespace kbrl::episode
