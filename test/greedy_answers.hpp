#pragma once
// A shipped quickstart policy's greedy answers to its problems' real first-turn prompts
// (test_quickstart_data, test_gpu_quickstart_data).

#include "runtime/episode/prompt_config.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <vector>

namespace kbrl::test {

/// One greedy completion per problem, in the problems' order, all generated together.
template <class Model>
std::vector<generation_result> greedy_answers(Model& model, const tok::tokenizer& tok,
                                              const tok::chat_format& chat,
                                              const episode::prompt_settings& prompts,
                                              const std::vector<problem>& problems,
                                              int64_t max_sequence_length,
                                              int32_t max_new_tokens) {
  model::generation_engine_options go;
  go.slots = static_cast<int64_t>(problems.size());
  go.max_sequence_length = max_sequence_length;
  auto engine = model::generation_engine::create(model, tok, go);
  BOOST_REQUIRE_MESSAGE(engine, why(engine));
  std::vector<generation_request> requests;
  for (auto& p : problems) {
    auto ids = episode::prompt_tokens(p, {}, prompts, tok, chat);
    BOOST_REQUIRE_MESSAGE(ids, why(ids));
    generation_request req;
    req.id = requests.size() + 1;
    req.prompt_tokens = *ids;
    req.params.temperature = 0;
    req.params.max_new_tokens = max_new_tokens;
    requests.push_back(std::move(req));
  }
  auto out = engine->generate(std::move(requests));
  BOOST_REQUIRE_EQUAL(out.size(), problems.size());
  return out;
}

} // namespace kbrl::test
