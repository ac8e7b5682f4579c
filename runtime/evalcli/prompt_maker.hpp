#pragma once
// How a kbrl-eval --model run turns a problem into generation requests.
//
//   one turn     eval::single_turn_prompt (KernelBench's style) as one user message, rendered in
//                the chat format (or sent raw with --chat-format none, or to a chat endpoint
//                that applies the server's template).
//   T turns      the training episodes' prompts (runtime/episode/prompts.hpp): system prompt,
//                first prompt, then per earlier turn the visible answer and the evaluator's
//                feedback_text(), trimmed to the history budget - exactly what an episode actor
//                of the RL loop would send for that history. A conversation needs a chat
//                format kbrl renders itself: a remote chat endpoint (which takes one user
//                message here) and --chat-format none are refused with --turns > 1.
//
// Seeds: one per (problem, sample) for one turn, one per (problem, sample, turn) for several,
// so a continued run draws what the first one would have.

#include "messages/data.hpp"
#include "runtime/episode/prompts.hpp"
#include "runtime/evalcli/eval_options.hpp"
#include "runtime/report/results_json.hpp"
#include "runtime/sampler/sampler_settings.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kbrl::evalcli {

struct prompt_maker {
  std::optional<tok::tokenizer> tokenizer; ///< encodes rendered prompts (built-in sampler)
  std::optional<tok::chat_format> chat;    ///< renders the messages; none: the prompt goes raw
  bool send_text = false;                  ///< remote: send prompt_text too
  sampling_params params;
  uint64_t seed = 0;
  episode::prompt_settings episode;        ///< the RL loop's prompts ([prompt] keys of --config)
  /// Single-turn samples get the RL loop's first prompt (system prompt, `episode` settings)
  /// instead of KernelBench's: what a policy trained by kbrl was trained on.
  bool episode_style = false;

  /// The single-turn request for sample `sample` of `p`.
  generation_request make(const problem& p, int32_t sample, uint64_t id) const;

  /// The request for turn history.size() of sample `sample` of `p`, after the turns in
  /// `history`. Fails with errc::invalid_argument when the conversation cannot be rendered
  /// (the text says why) - the turn is then a generation failure.
  caf::expected<generation_request> make_turn(const problem& p, int32_t sample,
                                              const std::vector<episode::previous_turn>& history,
                                              uint64_t id) const;

  /// Tokens of `text` for the history budget: the tokenizer's count, else bytes / 4.
  size_t count_tokens(const std::string& text) const;
};

/// Sets up `pm` for --model from the command line and the sampler's settings (tokenizer, chat
/// format, sampling parameters) and describes it in info.prompt and info.sampling. Fails with
/// errc::invalid_argument saying which option to give (e.g. --chat-format when the format cannot
/// be recognised, or a remote chat endpoint with --turns > 1).
caf::error setup_prompts(const eval_options& o, const sampling::sampler_settings& s,
                         prompt_maker& pm, report::run_info& info);

} // namespace kbrl::evalcli
