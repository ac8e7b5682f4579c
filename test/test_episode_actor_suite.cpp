// The episode actor over real evaluation: a multi-turn episode on a small CPU problem whose
// sampler answers from a script (no code, then a wrong kernel, then a correct one), judged by
// the real evaluator supervisor and worker; and an episode with the real built-in sampler on a
// tiny random model, whose answers never parse.

#include "actors/episode.hpp"
#include "actors/evaluator_supervisor.hpp"
#include "actors/retriever.hpp"
#include "actors/sampler.hpp"
#include "messages/type_ids.hpp"
#include "actor_doubles.hpp"
#include "tokenizer_fixture.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/retrieval_settings.hpp"
#include "cluster_fixture.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

std::string candidate(const std::string& name) {
  return test::read_file(std::string(KBRL_TEST_DATA) + "/candidates_runtime/" + name);
}

struct episode_fixture {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  problem task;

  episode_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    auto p = eval::load_problem_file(std::string(KBRL_TEST_DATA) + "/problems/1_small_relu.py");
    BOOST_REQUIRE(p);
    task = *p;
    task.backend = kernel_backend::torch;
  }

  evaluator_supervisor_actor evaluators() {
    evaluator_slot s;
    s.name = "test/evaluator.0";
    s.engine.worker.python = eval::resolve_python("auto");
    s.engine.worker.script = std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
    s.engine.worker.scratch_dir = dir / "scratch";
    s.engine.worker.extensions_dir = dir / "extensions";
    actor_stats stats;
    stats.name = "test/evaluator-supervisor";
    return sys->spawn(evaluator_supervisor, stats, supervisor_settings{},
                      std::vector<evaluator_slot>{s}, s.engine);
  }

  std::shared_ptr<episode_resources> resources(sampler_actor sampler, caf::actor sink) {
    auto r = std::make_shared<episode_resources>();
    r->samplers = {sampler};
    r->evaluators = {evaluators()};
    r->coordinator = sys->spawn(test::trajectory_sink, sink);
    r->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
    r->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
    return r;
  }

  episode_settings settings() {
    episode_settings s;
    s.success_speedup = 0; // correct ends it
    s.timing.perf_trials = 5;
    s.timing.warmup_runs = 1;
    return s;
  }

  trajectory run(caf::scoped_actor& self, episode_settings s,
                 std::shared_ptr<episode_resources> r) {
    actor_stats stats;
    stats.name = "test/episode.1";
    auto e = sys->spawn(run_episode, stats, s, std::shared_ptr<const episode_resources>(r), 7u);
    self->send(e, start_atom::value, task, uint64_t{3});
    trajectory out;
    self->receive([&](trajectory& t) { out = std::move(t); },
                  caf::after(std::chrono::seconds(240)) >> [] { BOOST_FAIL("no trajectory"); });
    for (auto& ev : r->evaluators)
      self->send_exit(ev, caf::exit_reason::user_shutdown);
    return out;
  }
};

std::string tagged(const std::string& code) {
  return "<think>plan</think>\n<KERNEL>\n" + code + "</KERNEL>";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(episode_actor_suite, episode_fixture)

BOOST_AUTO_TEST_CASE(a_multi_turn_episode_learns_from_feedback_until_it_succeeds) {
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto sampler = sys->spawn(test::scripted_sampler,
                            std::vector<std::string>{"I forgot the code.",
                                                     tagged(candidate("relu_wrong_offset.py")),
                                                     tagged(candidate("relu_correct_clamp.py"))},
                            prompts);
  auto s = settings();
  s.rewards = *episode::reward_preset("stage-correct");
  auto t = run(self, s, resources(sampler, caf::actor_cast<caf::actor>(self)));

  BOOST_CHECK_EQUAL(t.id, 7u);
  BOOST_CHECK_EQUAL(t.group_id, 3u);
  BOOST_CHECK_EQUAL(t.problem_id, task.id);
  BOOST_CHECK_EQUAL(t.end_reason, "success");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 3u);
  // Turn 1 did not parse (nothing evaluated), turn 2 ran wrong, turn 3 was correct.
  BOOST_CHECK(!t.turns[0].verdict.compiled);
  BOOST_CHECK(t.turns[1].verdict.compiled && !t.turns[1].verdict.correct);
  BOOST_CHECK(t.turns[2].verdict.correct);
  BOOST_CHECK_EQUAL(t.turns[0].score, 0.0);
  BOOST_CHECK_GT(t.turns[2].score, t.turns[1].score);
  // Returns: R_t = s_t + 0.4 R_{t+1}.
  BOOST_CHECK_CLOSE(t.turns[2].return_value, t.turns[2].score, 1e-9);
  BOOST_CHECK_CLOSE(t.turns[1].return_value, t.turns[1].score + 0.4 * t.turns[2].return_value, 1e-9);
  BOOST_CHECK(t.policy_versions == std::vector<uint64_t>{2});
  // The prompts carried the feedback of the turn before, and the tokens the learner will see.
  BOOST_REQUIRE_EQUAL(prompts->size(), 3u);
  auto text = [](const generation_request& r) { return std::string(r.prompt_tokens.begin(), r.prompt_tokens.end()); };
  BOOST_CHECK(text((*prompts)[1]).find("no program could be read") != std::string::npos);
  BOOST_CHECK(text((*prompts)[2]).find("differs from the reference") != std::string::npos);
  BOOST_CHECK(text((*prompts)[2]).find("<think>plan</think>") == std::string::npos); // reasoning dropped
  BOOST_CHECK(t.turns[2].prompt_tokens == (*prompts)[2].prompt_tokens);
}

BOOST_AUTO_TEST_CASE(a_lost_sampler_is_retried_on_the_next_one) {
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto good = sys->spawn(test::scripted_sampler,
                         std::vector<std::string>{tagged(candidate("relu_correct_clamp.py"))},
                         prompts);
  auto gone = sys->spawn(test::scripted_sampler, std::vector<std::string>{"x"}, prompts);
  caf::anon_send_exit(gone, caf::exit_reason::kill);
  auto r = resources(gone, caf::actor_cast<caf::actor>(self));
  r->samplers.push_back(good);
  auto t = run(self, settings(), r);
  BOOST_CHECK_EQUAL(t.end_reason, "success");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 1u);
  BOOST_CHECK_EQUAL(t.turns[0].retries, 1);
}

BOOST_AUTO_TEST_CASE(a_candidate_held_by_a_lost_evaluator_waits_for_one_that_joins) {
  // An RL run's evaluator node dies while it holds the candidate, and comes back a second later
  // (new handles on the worker board). The episode is told at once (it monitors whom it asked),
  // waits while the board has no evaluator, and sends the candidate to the new one.
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto sampler = sys->spawn(test::scripted_sampler,
                            std::vector<std::string>{tagged(candidate("relu_correct_clamp.py"))},
                            prompts);
  auto sink = caf::actor_cast<caf::actor>(self);
  auto doomed = sys->spawn(test::holding_evaluator, sink);
  auto board = std::make_shared<worker_board>();
  board->set({sampler}, {doomed});
  auto r = std::make_shared<episode_resources>();
  r->board = board;
  r->coordinator = sys->spawn(test::trajectory_sink, sink);
  r->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
  r->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
  auto s = settings();
  s.max_retries = 0; // a lost evaluator must not spend retries
  actor_stats stats;
  stats.name = "test/episode.1";
  auto e = sys->spawn(run_episode, stats, s, std::shared_ptr<const episode_resources>(r), 7u);
  self->send(e, start_atom::value, task, uint64_t{3});
  self->receive([](const std::string& what) { BOOST_CHECK_EQUAL(what, "held"); },
                caf::after(std::chrono::seconds(30)) >> [] { BOOST_FAIL("never evaluated"); });
  board->set({sampler}, {}); // the membership saw the node go
  self->send_exit(doomed, caf::exit_reason::kill);
  // While the board has no evaluator, the episode says what it waits for.
  BOOST_CHECK(test::eventually(
    [&] {
      std::string waits;
      self->request(e, std::chrono::seconds(5), status_atom::value)
        .receive(
          [&](actor_status& st) {
            for (auto& d : st.details)
              if (d.key == "waiting for")
                waits = d.value;
          },
                 [](caf::error&) {});
      return waits.find("no evaluator") != std::string::npos;
    },
    std::chrono::seconds(10)));
  auto back = evaluators();
  board->set({sampler}, {back}); // it came back
  trajectory t;
  self->receive([&](trajectory& got) { t = std::move(got); },
                caf::after(std::chrono::seconds(240)) >> [] { BOOST_FAIL("no trajectory"); });
  self->send_exit(back, caf::exit_reason::user_shutdown);
  BOOST_CHECK_EQUAL(t.end_reason, "success");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 1u);
  BOOST_CHECK(t.turns[0].verdict.correct);
  BOOST_CHECK_EQUAL(t.turns[0].retries, 1); // sent twice: to the lost one and the new one
}

BOOST_AUTO_TEST_CASE(a_prompt_held_by_a_lost_sampler_goes_to_another_at_once) {
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto sink = caf::actor_cast<caf::actor>(self);
  auto doomed = sys->spawn(test::holding_sampler, sink);
  auto good = sys->spawn(test::scripted_sampler, std::vector<std::string>{"no code here"},
                         prompts);
  auto r = resources(doomed, sink);
  auto board = std::make_shared<worker_board>();
  board->set({doomed, good}, r->evaluators);
  r->board = board;
  auto s = settings();
  s.max_turns = 1;
  s.max_retries = 0;
  actor_stats stats;
  stats.name = "test/episode.1";
  auto e = sys->spawn(run_episode, stats, s, std::shared_ptr<const episode_resources>(r), 7u);
  self->send(e, start_atom::value, task, uint64_t{3});
  self->receive([](const std::string& what) { BOOST_CHECK_EQUAL(what, "held"); },
                caf::after(std::chrono::seconds(30)) >> [] { BOOST_FAIL("never sampled"); });
  // The board still lists it (the membership has not noticed yet): it must not be asked again.
  self->send_exit(doomed, caf::exit_reason::kill);
  trajectory t;
  self->receive([&](trajectory& got) { t = std::move(got); },
                caf::after(std::chrono::seconds(30)) >> [] { BOOST_FAIL("no trajectory"); });
  for (auto& ev : r->evaluators)
    self->send_exit(ev, caf::exit_reason::user_shutdown);
  BOOST_CHECK_EQUAL(t.end_reason, "max_turns");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 1u);
  BOOST_CHECK_EQUAL(t.turns[0].completion_text, "no code here");
  BOOST_CHECK_EQUAL(prompts->size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_busy_sampler_is_asked_again_after_a_back_off_without_spending_retries) {
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto inner = sys->spawn(test::scripted_sampler,
                          std::vector<std::string>{tagged(candidate("relu_correct_clamp.py"))},
                          prompts);
  auto turned_away = std::make_shared<int>(0);
  // More busy answers than max_retries: a failure would end the episode, a wait must not.
  auto busy = sys->spawn(test::busy_sampler, 5, inner, turned_away);
  auto s = settings();
  s.max_retries = 1;
  s.busy_backoff_first = 10ms;
  s.busy_backoff_max = 40ms;
  const auto start = std::chrono::steady_clock::now();
  auto t = run(self, s, resources(busy, caf::actor_cast<caf::actor>(self)));
  BOOST_CHECK_EQUAL(*turned_away, 5);
  BOOST_CHECK_EQUAL(t.end_reason, "success");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 1u);
  BOOST_CHECK_EQUAL(t.turns[0].retries, 0);
  // Back-offs of 10, 20, 40, 40, 40 ms (plus a spread) passed before the sixth request.
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - start);
  BOOST_CHECK_GE(waited.count(), 150);
}

BOOST_AUTO_TEST_CASE(a_sampler_busy_for_longer_than_the_wait_limit_fails_the_episode) {
  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto inner = sys->spawn(test::scripted_sampler, std::vector<std::string>{"x"}, prompts);
  auto turned_away = std::make_shared<int>(0);
  auto busy = sys->spawn(test::busy_sampler, 1000, inner, turned_away);
  auto s = settings();
  s.max_retries = 0;
  s.busy_backoff_first = 10ms;
  s.busy_backoff_max = 10ms;
  s.busy_wait_limit = 50ms;
  auto t = run(self, s, resources(busy, caf::actor_cast<caf::actor>(self)));
  BOOST_CHECK(t.end_reason.find("failed: no sampler answered") == 0);
  BOOST_CHECK(t.end_reason.find("busy") != std::string::npos);
  BOOST_CHECK_GE(*turned_away, 5);
  BOOST_CHECK(prompts->empty());
}

BOOST_AUTO_TEST_CASE(a_real_tiny_policy_gets_format_failures_for_every_turn) {
  auto config = model::tiny_model_config("qwen2");
  BOOST_REQUIRE(model::write_random_checkpoint(dir / "model", config, 2));
  dir.write("model/tokenizer.json", test::byte_tokenizer_json());
  sampling::sampler_settings ss;
  ss.model = dir / "model";
  ss.dtype = "fp32";
  ss.slots = 2;
  ss.max_seq_len = 4096;
  actor_stats stats;
  stats.name = "test/sampler.0";
  auto sampler = sys->spawn<caf::detached>(kbrl::sampler, stats, ss);
  caf::scoped_actor self{*sys};
  auto s = settings();
  s.max_turns = 2;
  s.sampling.max_new_tokens = 16;
  s.prompts.show_example = false;
  auto t = run(self, s, resources(sampler, caf::actor_cast<caf::actor>(self)));
  BOOST_CHECK_EQUAL(t.end_reason, "max_turns");
  BOOST_REQUIRE_EQUAL(t.turns.size(), 2u);
  for (auto& turn : t.turns) {
    BOOST_CHECK(!turn.completion_tokens.empty());
    BOOST_CHECK_EQUAL(turn.logprobs.size(), turn.completion_tokens.size());
    BOOST_CHECK_EQUAL(turn.score, 0.0);
  }
  self->send_exit(sampler, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(the_first_prompt_carries_retrieved_examples) {
  // An index over the small Sakana-format corpus (CUDA kernels).
  retrieval::build_options o;
  o.corpus_path = std::string(KBRL_TEST_DATA) + "/retrieval/sakana_sample.jsonl";
  o.mapping = retrieval::sakana_mapping();
  o.output_dir = dir / "index";
  o.embedding.builtin_dimension = 128;
  auto built = retrieval::build_index(o);
  BOOST_REQUIRE_MESSAGE(built, test::why(built));
  retrieval::retrieval_settings rs;
  rs.index_dir = dir / "index";
  actor_stats rstats;
  rstats.name = "test/retriever";
  auto retriever = sys->spawn<caf::detached>(kbrl::retriever, rstats, rs,
                                             retrieval::retriever_options_from(rs));

  caf::scoped_actor self{*sys};
  auto prompts = std::make_shared<std::vector<generation_request>>();
  auto sampler = sys->spawn(test::scripted_sampler, std::vector<std::string>{"no code"}, prompts);
  auto r = resources(sampler, caf::actor_cast<caf::actor>(self));
  r->retriever = retriever;
  r->retrieval_k = 2;
  task.backend = kernel_backend::cuda;
  auto s = settings();
  s.max_turns = 1;
  auto t = run(self, s, r);
  BOOST_REQUIRE_EQUAL(prompts->size(), 1u);
  auto& ids = prompts->front().prompt_tokens;
  std::string first(ids.begin(), ids.end());
  BOOST_CHECK_MESSAGE(first.find("Example 1") != std::string::npos, first.substr(0, 2000));
  BOOST_CHECK(first.find("relu_gs") != std::string::npos); // the corpus's fastest ReLU kernel
  self->send_exit(retriever, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
