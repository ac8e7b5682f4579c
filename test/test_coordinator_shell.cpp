// The coordinator actor as a protocol shell, run by CAF's deterministic test coordinator: its
// peers are the doubles of test/pipeline_doubles.hpp, every message is delivered by
// sched.run(), nothing waits on a clock. The same scenarios run with real threads in
// coordinator_pipeline; the decisions themselves are tested without actors in step_pipeline.

#include "actors/coordinator.hpp"
#include "actors/metrics.hpp"
#include "deterministic_system.hpp"
#include "pipeline_doubles.hpp"
#include "runtime/episode/coordinator_checkpoint.hpp"
#include "test_support.hpp"
#include "tokenizer_fixture.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

struct shell_fixture : test::deterministic_system {
  test::temp_dir dir;
  std::shared_ptr<test::pipeline_log> log = std::make_shared<test::pipeline_log>();

  coordinator_actor start(uint64_t steps, coordinator_mode mode, const learner_actor& learner) {
    coordinator_settings s;
    s.steps = steps;
    s.problems_per_step = 1;
    s.group_size = 2;
    s.run_dir = dir.path.string();
    s.mode = mode;
    s.max_staleness = 1;
    s.episodes.max_turns = 1;
    auto r = std::make_shared<episode_resources>();
    r->samplers = {keep(sys.spawn(test::versioned_sampler, log))};
    r->evaluators = {keep(sys.spawn(test::verdict_evaluator, log))};
    r->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
    r->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
    actor_stats m;
    m.name = "test/metrics";
    auto metrics = keep(sys.spawn(metrics_sink, m, dir / "metrics.jsonl", std::string()));
    actor_stats stats;
    stats.name = "test/coordinator";
    stats.node = "test";
    std::vector<problem> problems{test::pipeline_problem(1), test::pipeline_problem(2),
                                  test::pipeline_problem(3)};
    auto c = keep(sys.spawn(coordinator, stats, s, r, learner, metrics, problems,
                            std::vector<problem>{}));
    sched.run();
    return c;
  }

  std::string phase(const coordinator_actor& c) {
    auto st = ask<actor_status>(c, status_atom::value);
    return st ? st->state : describe(st.error());
  }

  void release(const learner_actor& learner) {
    auto said = ask<std::string>(learner, control_atom::value, std::string("release"),
                                 std::vector<std::string>{});
    BOOST_REQUIRE(said);
  }

  long at(const std::string& event) { return log->position(event); }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(coordinator_shell, shell_fixture)

BOOST_AUTO_TEST_CASE(sync_steps_run_one_after_another_and_commit_once) {
  log->gated_steps = {2};
  auto learner = keep(sys.spawn(test::gated_learner, log));
  auto c = start(3, coordinator_mode::sync, learner);
  // Everything that can happen has happened: step 2 is with the learner, step 3 not begun.
  BOOST_CHECK_EQUAL(phase(c), "training");
  BOOST_CHECK_GE(at("train begin 2"), 0);
  BOOST_CHECK_EQUAL(at("generate 3000001"), -1);
  release(learner);
  BOOST_CHECK_EQUAL(phase(c), "finished");
  BOOST_CHECK_LT(at("train end 1"), at("generate 2000001"));
  BOOST_CHECK_LT(at("train end 2"), at("generate 3000001"));
  auto cp = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 3u);
  auto traces = test::lines_of(test::read_file(dir / "traces.jsonl"));
  BOOST_CHECK_EQUAL(traces.size(), 6u); // 3 steps x 1 problem x 2 samples, each once
  BOOST_CHECK_EQUAL(log->batches.size(), 3u);
}

BOOST_AUTO_TEST_CASE(async_runs_the_next_step_while_one_trains_and_never_two_ahead) {
  log->gated_steps = {2};
  auto learner = keep(sys.spawn(test::gated_learner, log));
  auto c = start(4, coordinator_mode::async, learner);
  BOOST_CHECK_EQUAL(phase(c), "training");
  BOOST_CHECK_GE(at("evaluate 3000001"), 0); // step 3 ran while step 2 trains
  BOOST_CHECK_GE(at("evaluate 3000002"), 0);
  BOOST_CHECK_EQUAL(at("generate 4000001"), -1); // two ahead: waits for step 2's commit
  release(learner);
  BOOST_CHECK_EQUAL(phase(c), "finished");
  for (auto s : log->staleness)
    BOOST_CHECK_LE(s, 1u);
  auto cp = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 4u);
  BOOST_CHECK_EQUAL(test::lines_of(test::read_file(dir / "traces.jsonl")).size(), 8u);
}

BOOST_AUTO_TEST_SUITE_END()
