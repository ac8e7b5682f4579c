#include "runtime/evalcli/prompt_maker.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/answer_parsing.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/hub/resolve_model.hpp"

#include <cstdio>
#include <filesystem>

namespace kbrl::evalcli {

namespace {

namespace fs = std::filesystem;

/// A seed of its own for each label ("<problem>#<sample>", "...#turn<T>"), mixed into --sampling-seed.
uint64_t seed_for(uint64_t base, const std::string& label) {
  return base ^ std::stoull(eval::source_hash(label), nullptr, 16);
}

} // namespace

generation_request prompt_maker::make(const problem& p, int32_t sample, uint64_t id) const {
  // Episode style: the conversation of a first turn. Only a conversation that cannot be
  // rendered (invalid UTF-8 in the problem file) falls through to the KernelBench prompt.
  if (episode_style && chat)
    if (auto first = make_turn(p, sample, {}, id))
      return *first;
  generation_request req;
  req.id = id;
  auto user = eval::single_turn_prompt(p);
  std::string text = user;
  if (chat) {
    // A rendering failure (invalid UTF-8 in a problem file) falls back to the raw message.
    if (auto rendered = chat->render({{"user", user, std::nullopt}}, true))
      text = *rendered;
  }
  if (tokenizer)
    req.prompt_tokens = tokenizer->encode(text);
  if (send_text || !tokenizer)
    req.prompt_text = text;
  req.params = params;
  if (chat)
    req.params.stop_strings.push_back(chat->end_of_turn());
  req.params.seed = seed_for(seed, p.id + "#" + std::to_string(sample));
  req.trace = p.id + " sample " + std::to_string(sample);
  return req;
}

caf::expected<generation_request>
prompt_maker::make_turn(const problem& p, int32_t sample,
                        const std::vector<episode::previous_turn>& history, uint64_t id) const {
  if (!chat)
    return make_error(errc::invalid_argument, "multi-turn prompts need a chat format");
  auto messages = episode::conversation(p, history, episode,
                                        [this](const std::string& t) { return count_tokens(t); });
  auto rendered = chat->render(messages, true);
  if (!rendered)
    return make_error(errc::invalid_argument,
                      "the conversation could not be rendered: " + describe(rendered.error()));
  auto turn = static_cast<int32_t>(history.size());
  generation_request req;
  req.id = id;
  if (tokenizer)
    req.prompt_tokens = tokenizer->encode(*rendered);
  if (send_text || !tokenizer)
    req.prompt_text = std::move(*rendered);
  req.params = params;
  req.params.stop_strings.push_back(chat->end_of_turn());
  req.params.seed =
    seed_for(seed, p.id + "#" + std::to_string(sample) + "#turn" + std::to_string(turn));
  req.trace = p.id + " sample " + std::to_string(sample) + " turn " + std::to_string(turn);
  return req;
}

size_t prompt_maker::count_tokens(const std::string& text) const {
  return tokenizer ? tokenizer->encode(text).size() : text.size() / 4;
}

namespace {

/// The tokenizer for prompts: --tokenizer, else the model's (built-in sampler only).
caf::expected<std::optional<tok::tokenizer>> prompt_tokenizer(const eval_options& o,
                                                              bool builtin) {
  std::string ref = !o.tokenizer.empty() ? o.tokenizer : builtin ? o.model : "";
  if (ref.empty())
    return std::optional<tok::tokenizer>{};
  std::error_code ec;
  fs::path dir;
  if (fs::is_directory(ref, ec)) {
    dir = ref;
  } else {
    auto resolved = hub::resolve_model(ref, hub::hub_options_from_environment());
    if (!resolved)
      return resolved.error();
    dir = *resolved;
  }
  auto t = tok::tokenizer::load(dir);
  if (!t)
    return t.error();
  return std::optional<tok::tokenizer>{std::move(*t)};
}

} // namespace

caf::error setup_prompts(const eval_options& o, const sampling::sampler_settings& s,
                         prompt_maker& pm, report::run_info& info) {
  bool builtin = s.backend == "builtin";
  bool chat_api = !builtin && s.remote.api == remote::remote_api::chat;
  bool multi_turn = o.turns > 1;
  if (multi_turn && chat_api)
    return make_error(errc::invalid_argument,
                      "--turns " + std::to_string(o.turns)
                        + ": a multi-turn conversation cannot go to the chat endpoint (kbrl sends "
                          "it one user message); use sampler.remote_api=completions with "
                          "--tokenizer PATH|ID or --chat-format chatml|qwen3|llama3");
  if (multi_turn && o.chat_format == "none")
    return make_error(errc::invalid_argument,
                      "--turns " + std::to_string(o.turns)
                        + ": a multi-turn conversation needs a chat format to be rendered in "
                          "(--chat-format auto|chatml|qwen3|llama3, not none)");
  auto tokenizer = prompt_tokenizer(o, builtin);
  if (!tokenizer)
    return tokenizer.error();
  pm.tokenizer = std::move(*tokenizer);
  std::string how = multi_turn ? "multi-turn episode prompts (the RL loop's: problem, previous "
                                 "answers, evaluator feedback), "
                                   + std::to_string(o.turns) + " turns"
                               : "single-turn KernelBench-style prompt";
  if (chat_api) {
    // The server applies the model's chat template to the one user message.
    pm.tokenizer.reset();
    how += ", chat endpoint (the server's template)";
  } else if (o.chat_format == "none") {
    how += ", sent as raw text";
  } else if (o.chat_format == "auto") {
    if (!pm.tokenizer)
      return make_error(errc::invalid_argument,
                        "the remote completions endpoint needs the prompt rendered in the "
                        "model's chat format: pass --tokenizer PATH|ID (its chat template is "
                        "recognised), --chat-format chatml|qwen3|llama3, --chat-format none, or "
                        "use sampler.remote_api=chat");
    auto chat = tok::chat_format::for_tokenizer(*pm.tokenizer);
    if (!chat)
      return make_error(errc::invalid_argument,
                        describe(chat.error())
                          + " (kbrl-eval: force one with --chat-format NAME, or --chat-format "
                            "none to send the prompt as it is)");
    pm.chat = std::move(*chat);
    how += ", chat format " + pm.chat->name();
  } else {
    auto chat = pm.tokenizer ? tok::chat_format::for_tokenizer(*pm.tokenizer, o.chat_format)
                             : tok::chat_format::by_name(o.chat_format);
    if (!chat)
      return make_error(errc::invalid_argument, "--chat-format " + o.chat_format + ": "
                                                  + describe(chat.error()));
    pm.chat = std::move(*chat);
    how += ", chat format " + pm.chat->name();
  }
  pm.send_text = !builtin;
  if (!builtin && pm.tokenizer && !s.remote.use_token_prompts)
    pm.tokenizer.reset();
  pm.params.temperature = o.temperature >= 0 ? o.temperature : (o.samples > 1 ? 0.7 : 0.0);
  pm.params.top_p = o.top_p;
  pm.params.top_k = o.top_k;
  pm.params.max_new_tokens = o.max_new_tokens;
  pm.seed = o.sampling_seed;
  char buf[160];
  std::snprintf(buf, sizeof buf, "temperature %g, top_p %g, top_k %d, max_new_tokens %d, seed %llu",
                pm.params.temperature, pm.params.top_p, pm.params.top_k, pm.params.max_new_tokens,
                static_cast<unsigned long long>(pm.seed));
  info.sampling = buf;
  info.prompt = how;
  return {};
}

} // namespace kbrl::evalcli
