// The coordinator over real episodes and the real CPU evaluator: steps of B problems x G
// samples, flat groups dropped, the learner fed, metrics and traces written, and a resumed
// coordinator continuing where the first stopped. The sampler answers from a script and the
// learner records its batches (both are tested on their own elsewhere).

#include "actor_doubles.hpp"
#include "actors/coordinator.hpp"
#include "actors/evaluator_supervisor.hpp"
#include "actors/metrics.hpp"
#include "cluster_fixture.hpp"
#include "tokenizer_fixture.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/python_probe.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

std::string tagged(const std::string& candidate_file) {
  return "<think>plan</think><KERNEL>\n"
         + test::read_file(std::string(KBRL_TEST_DATA) + "/candidates_runtime/" + candidate_file) + "</KERNEL>";
}

size_t count_lines(const std::string& text, const std::string& containing) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    n += line.find(containing) != std::string::npos ? 1 : 0;
  return n;
}

struct coordinator_fixture {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  problem relu;

  coordinator_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    auto p = eval::load_problem_file(std::string(KBRL_TEST_DATA) + "/problems/1_small_relu.py");
    BOOST_REQUIRE(p);
    relu = *p;
    relu.id = "level1/1_small_relu";
    relu.backend = kernel_backend::torch;
  }

  std::shared_ptr<episode_resources> resources(std::vector<std::string> script) {
    evaluator_slot s;
    s.name = "test/evaluator.0";
    s.engine.worker.python = eval::resolve_python("auto");
    s.engine.worker.script = std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
    s.engine.worker.scratch_dir = dir / "scratch";
    s.engine.worker.extensions_dir = dir / "extensions";
    actor_stats stats;
    stats.name = "test/evaluator-supervisor";
    auto r = std::make_shared<episode_resources>();
    r->evaluators = {sys->spawn(evaluator_supervisor, stats, supervisor_settings{},
                                std::vector<evaluator_slot>{s}, s.engine)};
    r->samplers = {sys->spawn(test::scripted_sampler, std::move(script),
                              std::make_shared<std::vector<generation_request>>())};
    r->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
    r->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
    return r;
  }

  coordinator_settings settings(uint64_t steps) {
    coordinator_settings s;
    s.steps = steps;
    s.problems_per_step = 1;
    s.group_size = 2;
    s.run_dir = dir.path.string();
    s.episodes.max_turns = 1;
    s.episodes.timing.perf_trials = 5;
    s.episodes.timing.warmup_runs = 1;
    return s;
  }

  metrics_actor metrics() {
    actor_stats stats;
    stats.name = "test/metrics";
    return sys->spawn(metrics_sink, stats, dir / "metrics.jsonl", std::string());
  }

  /// Polls the coordinator until its phase is `phase`.
  bool reaches(const coordinator_actor& c, const std::string& phase) {
    caf::scoped_actor self{*sys};
    return test::eventually(
      [&] {
        std::string now;
        self->request(c, 5s, status_atom::value).receive([&](actor_status& st) { now = st.state; },
                                                         [](caf::error&) {});
        return now == phase;
      },
      180s);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(coordinator_suite, coordinator_fixture)

BOOST_AUTO_TEST_CASE(steps_feed_the_learner_drop_flat_groups_and_resume) {
  // Step 1: one sample right, one wrong (a signal). Step 2: both right (flat: not trained on).
  auto res = resources({tagged("relu_correct_clamp.py"), tagged("relu_wrong_offset.py"),
                        tagged("relu_correct_clamp.py")});
  auto batches = std::make_shared<std::vector<trajectory_batch>>();
  auto learner = sys->spawn(test::recording_learner, batches);
  actor_stats stats;
  stats.name = "test/coordinator";
  stats.node = "test";
  auto c = sys->spawn(coordinator, stats, settings(2), res, learner, metrics(),
                      std::vector<problem>{relu}, std::vector<problem>{});
  BOOST_REQUIRE(reaches(c, "finished"));
  BOOST_REQUIRE_EQUAL(batches->size(), 1u);
  BOOST_CHECK_EQUAL(batches->front().trajectories.size(), 2u);
  BOOST_CHECK_EQUAL(batches->front().coordinator_step, 1u);

  auto checkpoint = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(checkpoint);
  BOOST_CHECK_EQUAL(checkpoint->step, 2u);
  BOOST_CHECK_EQUAL(checkpoint->cursor, 2u);
  BOOST_CHECK_EQUAL(checkpoint->policy_version, 1u);
  auto traces = test::read_file(dir / "traces.jsonl");
  BOOST_CHECK_EQUAL(count_lines(traces, "\"problem\":\"level1/1_small_relu\""), 4u);
  // The metrics reach the file through the metrics actor: poll for the second step's lines.
  BOOST_CHECK(test::eventually(
    [&] { return count_lines(test::read_file(dir / "metrics.jsonl"), "groups/dropped_flat") == 2; }, 10s));
  auto metrics_text = test::read_file(dir / "metrics.jsonl");
  BOOST_CHECK_EQUAL(count_lines(metrics_text, "reward/mean"), 2u);
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);

  // A coordinator on the same run directory continues with step 3.
  auto c2 = sys->spawn(coordinator, stats, settings(3), res, learner, metrics(),
                       std::vector<problem>{relu}, std::vector<problem>{});
  BOOST_REQUIRE(reaches(c2, "finished"));
  auto after = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(after);
  BOOST_CHECK_EQUAL(after->step, 3u);
  BOOST_CHECK_EQUAL(after->cursor, 3u);
  BOOST_CHECK_EQUAL(count_lines(test::read_file(dir / "traces.jsonl"), "\"step\":3"), 2u);
  caf::anon_send_exit(c2, caf::exit_reason::user_shutdown);
  for (auto& e : res->evaluators)
    caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(pause_stops_new_steps_and_resume_continues) {
  auto res = resources({tagged("relu_correct_clamp.py"), tagged("relu_wrong_offset.py")});
  auto batches = std::make_shared<std::vector<trajectory_batch>>();
  auto learner = sys->spawn(test::recording_learner, batches);
  actor_stats stats;
  stats.name = "test/coordinator";
  stats.node = "test";
  auto c = sys->spawn(coordinator, stats, settings(0), res, learner, metrics(),
                      std::vector<problem>{relu}, std::vector<problem>{});
  caf::scoped_actor self{*sys};
  std::string answer;
  self->request(c, 5s, control_atom::value, std::string("pause"), std::vector<std::string>{})
    .receive([&](std::string& a) { answer = a; }, [](caf::error&) {});
  BOOST_CHECK(answer.find("pausing") != std::string::npos);
  BOOST_REQUIRE(reaches(c, "paused"));
  auto steps = read_coordinator_checkpoint(dir.path.string())->step;
  BOOST_CHECK_LE(steps, 1u); // the step under way when it paused finishes, no new one starts
  self->send(c, resume_atom::value);
  BOOST_CHECK(test::eventually(
    [&] { return read_coordinator_checkpoint(dir.path.string())->step > steps; }, 180s));
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  for (auto& e : res->evaluators)
    caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
