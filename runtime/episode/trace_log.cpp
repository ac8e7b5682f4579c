#include "runtime/episode/trace_log.hpp"

#include "messages/errors.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/episode/rewards.hpp"
#include "runtime/io/json_writer.hpp"

#include <algorithm>
#include <map>

namespace kbrl::episode {

namespace {

template <class T>
void write_list(json_writer& w, const char* key, const std::vector<T>& values) {
  w.key(key).begin_array();
  for (auto v : values)
    w.value(v);
  w.end_array();
}

} // namespace

std::string trace_line(const trajectory& t, uint64_t step, bool eval,
                       const trace_options& options) {
  json_writer w;
  w.begin_object()
    .field("step", step)
    .field("eval", eval)
    .field("trajectory", t.id)
    .field("group", t.group_id)
    .field("problem", t.problem_id)
    .field("end", t.end_reason);
  w.key("turns").begin_array();
  for (auto& u : t.turns) {
    const auto& v = u.verdict;
    // No program found in the answer: the evaluator never saw it.
    const bool evaluated = was_evaluated(v);
    w.begin_object().field("index", u.index).field("policy_version", u.policy_version);
    if (options.prompt_text)
      w.field("prompt", options.prompt_text(u.prompt_tokens));
    w.field("prompt_tokens", static_cast<uint64_t>(u.prompt_tokens.size()))
      .field("completion", u.completion_text)
      .field("completion_tokens", static_cast<uint64_t>(u.completion_tokens.size()));
    if (options.kernel)
      w.field("kernel", options.kernel(u));
    w.field("compiled", v.compiled)
      .field("correct", v.correct)
      .field("kernelbench_correct", v.kernelbench_correct)
      .field("trials_passed", v.trials_passed)
      .field("trials_total", v.trials_total)
      .field("kernelbench_trials_passed", v.kernelbench_trials_passed)
      .field("time_coverage", v.time_coverage)
      .field("error", evaluated ? to_string(v.error) : "format")
      .field("error_excerpt", v.error_excerpt)
      .field("speedup", v.speedup);
    write_list(w, "hack_flags", v.hack_flags);
    if (evaluated) {
      // Where the evaluation's time went: the CPU build ahead of the GPU, the worker's phases
      // in the order it ran them, and the evaluator's total from request to verdict.
      w.key("eval_seconds").begin_object().field("build", v.build_seconds);
      for (auto& p : v.phases)
        w.field(p.phase, p.seconds);
      w.field("total", v.total_seconds).end_object();
    }
    w.field("score", u.score).field("return", u.return_value).field("retries", u.retries);
    if (options.reward) {
      const auto r = options.reward(u);
      w.key("reward").begin_object()
        .field("total", r.total)
        .field("format", r.format)
        .field("compiles", r.compiles)
        .field("partial", r.partial)
        .field("correct", r.correct)
        .field("speed", r.speed)
        .field("reasoning", r.reasoning)
        .field("length", r.length)
        .field("zeroed", r.hack)
        .end_object();
    }
    if (options.advantage)
      w.field("advantage", u.advantage);
    if (options.token_ids) {
      write_list(w, "prompt_token_ids", u.prompt_tokens);
      write_list(w, "completion_token_ids", u.completion_tokens);
      write_list(w, "logprobs", u.logprobs);
    }
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

trace_options trace_options_for(const episode_settings& episodes,
                                std::shared_ptr<const tok::tokenizer> tokenizer, bool token_ids,
                                std::optional<rl::advantage_options> advantage) {
  trace_options o;
  o.token_ids = token_ids;
  o.advantage = advantage;
  if (tokenizer)
    o.prompt_text = [tokenizer](const std::vector<int32_t>& ids) { return tokenizer->decode(ids); };
  // As the episode scored the turn (actors/episode.cpp): its parsed answer, the verdict when
  // there was one, its length.
  o.kernel = [format = episodes.prompts.format](const turn& u) {
    return parse_answer(u.completion_text, format).code;
  };
  // Each term as it counts in the total (weight x term), so the components add up to it.
  o.reward = [w = episodes.rewards, format = episodes.prompts.format](const turn& u) {
    const auto& v = u.verdict;
    const bool evaluated = was_evaluated(v);
    auto r = score_turn(parse_answer(u.completion_text, format), evaluated ? &v : nullptr,
                        u.completion_tokens.size(), w);
    r.format *= w.format;
    r.compiles *= w.compiles;
    r.partial *= w.partial;
    r.correct *= w.correct;
    r.speed *= w.speed;
    r.reasoning *= w.reasoning;
    r.length *= w.length;
    return r;
  };
  return o;
}

trace_log::trace_log(std::shared_ptr<io::file_store> files, uint64_t max_bytes,
                     trace_options options)
  : files_(std::move(files)), max_bytes_(max_bytes), options_(std::move(options)) {}

trace_log::trace_log(const std::string& run_dir, uint64_t max_bytes, trace_options options)
  : trace_log(io::directory_store(run_dir), max_bytes, std::move(options)) {}

caf::expected<void> trace_log::append(std::vector<trajectory> round, uint64_t step, bool eval) {
  if (files_->size(file_name) > max_bytes_) {
    // keep one older file; a failed rename leaves the log growing, which is no reason to stop
    (void)files_->rename(file_name, older_file_name);
  }
  std::sort(round.begin(), round.end(),
            [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
  if (options_.advantage) {
    // The learner's estimate on a copy (it drops groups without signal: their turns keep 0).
    auto copy = round;
    std::map<std::pair<uint64_t, int32_t>, double> advantages;
    if (rl::compute_advantages(copy, *options_.advantage))
      for (auto& t : copy)
        for (auto& u : t.turns)
          advantages[{t.id, u.index}] = u.advantage;
    for (auto& t : round)
      for (auto& u : t.turns) {
        auto it = advantages.find({t.id, u.index});
        u.advantage = it == advantages.end() ? 0.0 : it->second;
      }
  }
  std::string lines;
  for (auto& t : round)
    lines += trace_line(t, step, eval, options_) + "\n";
  return files_->append(file_name, lines);
}

} // namespace kbrl::episode
