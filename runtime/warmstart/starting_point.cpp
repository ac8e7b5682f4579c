#include "runtime/warmstart/starting_point.hpp"

#include "messages/errors.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace kbrl::warmstart {

caf::expected<std::vector<problem_tally>>
measure_starting_point(const std::filesystem::path& policy_dir, const std::vector<problem>& problems,
                       const episode::prompt_settings& prompts, const measure_options& o,
                       const std::function<void(const problem_tally&)>& progress) {
  if (o.samples_per_problem <= 0)
    return make_error(errc::invalid_argument, "samples per problem must be > 0");
  auto tokenizer = tok::tokenizer::load(policy_dir);
  if (!tokenizer)
    return tokenizer.error();
  auto chat = tok::chat_format::for_tokenizer(*tokenizer);
  if (!chat)
    return chat.error();
  auto model = model::transformer::load(policy_dir, {at::kCPU, at::kFloat});
  if (!model)
    return model.error();
  model::generation_engine_options go;
  go.slots = o.samples_per_problem;
  go.max_sequence_length = std::min<int64_t>(model->config().max_position_embeddings, 2048);
  auto engine = model::generation_engine::create(*model, *tokenizer, go);
  if (!engine)
    return engine.error();
  eval::eval_engine evaluator{o.engine};
  std::vector<problem_tally> out;
  uint64_t request_id = 1;
  for (size_t j = 0; j < problems.size(); ++j) {
    auto& p = problems[j];
    auto ids = episode::prompt_tokens(p, {}, prompts, *tokenizer, *chat);
    if (!ids)
      return ids.error();
    std::vector<generation_request> requests;
    for (int32_t i = 0; i < o.samples_per_problem; ++i) {
      generation_request r;
      r.id = request_id++;
      r.prompt_tokens = *ids;
      r.params.temperature = o.temperature;
      r.params.max_new_tokens = o.max_new_tokens;
      r.params.seed = o.seed + 1000 * j + static_cast<uint64_t>(i);
      requests.push_back(std::move(r));
    }
    problem_tally t;
    t.problem = p.id;
    for (auto& result : engine->generate(std::move(requests))) {
      if (result.finish == finish_reason::error)
        return make_error(errc::internal, p.id + ": generation failed: " + result.error);
      ++t.samples;
      auto answer = episode::parse_answer(result.completion_text, prompts.format);
      if (!answer.ok())
        continue;
      ++t.parsed;
      eval_request req;
      req.id = request_id++;
      req.candidate_source = answer.code;
      req.task = p;
      req.timing.measure_performance = false;
      req.timing.perf_trials = 0;
      req.timing.timeout_s = 60;
      req.trace = p.id + " sample " + std::to_string(t.samples);
      auto verdict = evaluator.evaluate(req);
      if (verdict.error == eval_error::infrastructure)
        return make_error(errc::internal, p.id + ": the evaluator failed: " + verdict.error_excerpt);
      t.compiled += verdict.compiled ? 1 : 0;
      t.correct += verdict.correct ? 1 : 0;
    }
    if (progress)
      progress(t);
    out.push_back(t);
  }
  return out;
}

} // namespace kbrl::warmstart
