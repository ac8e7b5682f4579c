// The coordinator's pipeline with its peers replaced by doubles (test/pipeline_doubles.hpp):
// asynchronous mode runs the next step's episodes while a step trains, never sends the learner
// data more than max_staleness versions old, and a stop/resume commits every step exactly once;
// the per-step timeline reaches the metrics and the shell views render. Assertions are on the
// order of events, never on how long anything took.

#include "actors/coordinator.hpp"
#include "actors/metrics.hpp"
#include "cluster_fixture.hpp"
#include "tokenizer_fixture.hpp"
#include "pipeline_doubles.hpp"
#include "rl_run_files.hpp"
#include "runtime/episode/problem_set.hpp"
#include "runtime/episode/stage_clock.hpp"
#include "runtime/episode/step_timeline.hpp"
#include "runtime/episode/trajectory_view.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace kbrl;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> lines_with(const std::string& text, const std::string& containing) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(containing) != std::string::npos)
      out.push_back(line);
  return out;
}

/// The unsigned number after "key": in a JSON line.
uint64_t field(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  BOOST_REQUIRE(at != std::string::npos);
  return std::stoull(line.substr(at + key.size() + 3));
}

struct pipeline_fixture {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<test::pipeline_log> log = std::make_shared<test::pipeline_log>();
  std::vector<problem> problems{test::pipeline_problem(1), test::pipeline_problem(2), test::pipeline_problem(3)};
  actor_stats stats;

  pipeline_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    stats.name = "test/coordinator";
    stats.node = "test";
  }

  std::shared_ptr<episode_resources> resources() {
    auto r = std::make_shared<episode_resources>();
    r->samplers = {sys->spawn(test::versioned_sampler, log)};
    r->evaluators = {sys->spawn(test::verdict_evaluator, log)};
    r->tokenizer = std::make_shared<tok::tokenizer>(test::byte_tokenizer());
    r->chat = std::make_shared<tok::chat_format>(*tok::chat_format::by_name("chatml"));
    return r;
  }

  coordinator_settings settings(uint64_t steps, coordinator_mode mode, uint64_t k = 1) {
    coordinator_settings s;
    s.steps = steps;
    s.problems_per_step = 1;
    s.group_size = 2;
    s.run_dir = dir.path.string();
    s.mode = mode;
    s.max_staleness = k;
    s.episodes.max_turns = 1;
    s.learner_timeout = 60s;
    return s;
  }

  metrics_actor metrics() {
    actor_stats m;
    m.name = "test/metrics";
    return sys->spawn(metrics_sink, m, dir / "metrics.jsonl", std::string());
  }

  coordinator_actor start(const coordinator_settings& s, const learner_actor& learner) {
    return sys->spawn(coordinator, stats, s, resources(), learner, metrics(), problems,
                      std::vector<problem>{});
  }

  std::string phase(const coordinator_actor& c) {
    caf::scoped_actor self{*sys};
    std::string now;
    self->request(c, 5s, status_atom::value).receive([&](actor_status& st) { now = st.state; },
                                                     [](caf::error&) {});
    return now;
  }

  bool reaches(const coordinator_actor& c, const std::string& want) {
    return test::eventually([&] { return phase(c) == want; }, 30s);
  }

  bool seen(const std::string& event) {
    return test::eventually([&] { return log->position(event) >= 0; }, 30s);
  }

  template <class Handle>
  caf::expected<std::string> control(const Handle& a, const std::string& verb,
                                     std::vector<std::string> args = {}) {
    caf::scoped_actor self{*sys};
    caf::expected<std::string> out{std::string{}};
    self->request(caf::actor_cast<status_actor>(a), 5s, control_atom::value, verb, args)
      .receive([&](std::string& text) { out = std::move(text); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  /// Kills an actor and waits until it is gone.
  template <class Handle>
  void stop(const Handle& a) {
    caf::scoped_actor self{*sys};
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }

  std::vector<uint64_t> trained_steps() {
    std::lock_guard<std::mutex> lock(log->mutex);
    std::vector<uint64_t> out;
    for (auto& b : log->batches)
      out.push_back(b.coordinator_step);
    return out;
  }

  /// The problems the seeded order hands out for steps 1..n (one per step).
  std::vector<std::string> expected_problems(size_t n) {
    episode::problem_order order(problems, 0);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(order.next(1).front().id);
    return out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(coordinator_pipeline, pipeline_fixture)

BOOST_AUTO_TEST_CASE(async_runs_the_next_steps_episodes_while_a_step_trains) {
  log->gated_steps = {2};
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(4, coordinator_mode::async, /*k=*/1), learner);
  // Step 2 is held by the learner. With K = 1, step 3's episodes start when step 1 commits
  // and run to their verdicts while step 2 is still training.
  BOOST_REQUIRE(seen("train begin 2"));
  BOOST_REQUIRE(seen("evaluate 3000001"));
  BOOST_REQUIRE(seen("evaluate 3000002"));
  BOOST_REQUIRE(reaches(c, "training"));
  BOOST_CHECK_EQUAL(log->position("train end 2"), -1);
  // Step 4 would be two steps ahead of the one training: it waits for step 2's commit.
  BOOST_CHECK_EQUAL(log->position("generate 4000001"), -1);
  BOOST_CHECK(control(learner, "release"));
  BOOST_REQUIRE(reaches(c, "finished"));
  BOOST_CHECK((trained_steps() == std::vector<uint64_t>{1, 2, 3, 4}));
  BOOST_CHECK_LT(log->position("train end 1"), log->position("generate 3000001"));
  BOOST_CHECK_LT(log->position("generate 3000001"), log->position("train end 2"));
  BOOST_CHECK_LT(log->position("train end 2"), log->position("generate 4000001"));
  // Staleness of what the learner received never exceeds K; steps after the first sampled
  // from at least the version published when they started.
  BOOST_REQUIRE_EQUAL(log->staleness.size(), 4u);
  for (auto s : log->staleness)
    BOOST_CHECK_LE(s, 1u);
  for (size_t i = 2; i < log->batches.size(); ++i)
    for (auto& t : log->batches[i].trajectories)
      for (auto& u : t.turns)
        BOOST_CHECK_GE(u.policy_version, i - 1);
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(sync_mode_starts_a_step_after_the_previous_policy_is_published) {
  log->gated_steps = {2};
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(3, coordinator_mode::sync), learner);
  BOOST_REQUIRE(seen("train begin 2"));
  BOOST_REQUIRE(reaches(c, "training")); // a status round trip: the coordinator is waiting
  BOOST_CHECK_EQUAL(log->position("generate 3000001"), -1);
  BOOST_CHECK(control(learner, "release"));
  BOOST_REQUIRE(reaches(c, "finished"));
  BOOST_CHECK_LT(log->position("train end 2"), log->position("generate 3000001"));
  BOOST_CHECK_LT(log->position("train end 1"), log->position("generate 2000001"));
  for (auto s : log->staleness)
    BOOST_CHECK_EQUAL(s, 0u);
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(async_stop_and_resume_commit_every_step_and_trajectory_once) {
  // First run: step 2 stays with the learner while step 3's episodes finish; then the whole
  // "process" stops (coordinator and learner; the learner resumes at the version it had).
  log->gated_steps = {2};
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(4, coordinator_mode::async, /*k=*/1), learner);
  BOOST_REQUIRE(seen("train begin 2"));
  BOOST_REQUIRE(seen("evaluate 3000001"));
  BOOST_REQUIRE(seen("evaluate 3000002"));
  stop(c);
  stop(learner);
  auto first = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(first);
  BOOST_CHECK_EQUAL(first->step, 1u);
  BOOST_CHECK_EQUAL(first->cursor, 1u); // step 2's and 3's problems are handed out again
  {
    std::lock_guard<std::mutex> lock(log->mutex);
    log->gated_steps.clear();
  }
  // Second run on the same run directory.
  auto learner2 = sys->spawn(test::gated_learner, log);
  auto c2 = start(settings(4, coordinator_mode::async, 1), learner2);
  BOOST_REQUIRE(reaches(c2, "finished"));
  BOOST_CHECK((trained_steps() == std::vector<uint64_t>{1, 2, 3, 4}));
  auto want = expected_problems(4);
  for (size_t i = 0; i < log->batches.size() && i < want.size(); ++i)
    BOOST_CHECK_EQUAL(log->batches[i].trajectories.front().problem_id, want[i]);
  auto done = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(done);
  BOOST_CHECK_EQUAL(done->step, 4u);
  BOOST_CHECK_EQUAL(done->cursor, 4u);
  BOOST_CHECK_EQUAL(done->policy_version, 4u);
  // Traces: every trajectory of every step once.
  auto traces = lines_with(test::read_file(dir / "traces.jsonl"), "\"eval\":false");
  std::multiset<uint64_t> ids;
  for (auto& line : traces)
    ids.insert(field(line, "trajectory"));
  BOOST_CHECK((ids == std::multiset<uint64_t>{1000001, 1000002, 2000001, 2000002, 3000001,
                                              3000002, 4000001, 4000002}));
  // Metrics: one line per step, with its summary and its timeline.
  BOOST_REQUIRE(test::eventually(
    [&] { return test::steps_of(dir / "metrics.jsonl", "step_timeline/wall_s").size() == 4; },
    10s));
  BOOST_CHECK((test::steps_of(dir / "metrics.jsonl", "reward/mean")
               == std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  BOOST_CHECK((test::steps_of(dir / "metrics.jsonl", "step_timeline/wall_s")
               == std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  caf::anon_send_exit(c2, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_step_the_learner_trained_before_a_stop_is_not_trained_again) {
  log->gated_steps = {2};
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(3, coordinator_mode::sync), learner);
  BOOST_REQUIRE(seen("train begin 2"));
  stop(c); // the coordinator stops while the learner trains step 2 ...
  BOOST_CHECK(control(learner, "release")); // ... which the learner then finishes (v2)
  BOOST_REQUIRE(seen("train end 2"));
  auto c2 = start(settings(3, coordinator_mode::sync), learner);
  BOOST_REQUIRE(reaches(c2, "finished"));
  BOOST_CHECK((trained_steps() == std::vector<uint64_t>{1, 2, 3}));
  auto cp = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 3u);
  BOOST_CHECK_EQUAL(cp->cursor, 3u);
  BOOST_CHECK_EQUAL(cp->policy_version, 3u);
  caf::anon_send_exit(c2, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(pause_in_async_mode_lets_the_steps_under_way_finish) {
  log->gated_steps = {1};
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(0, coordinator_mode::async, /*k=*/1), learner);
  BOOST_REQUIRE(seen("train begin 1"));
  auto answer = control(c, "pause");
  BOOST_REQUIRE(answer);
  BOOST_CHECK(answer->find("pausing") != std::string::npos);
  BOOST_CHECK(control(learner, "release"));
  BOOST_REQUIRE(reaches(c, "paused"));
  auto paused_at = read_coordinator_checkpoint(dir.path.string())->step;
  BOOST_CHECK_EQUAL(paused_at, 2u); // steps 1 and 2 were under way; 3 never started
  BOOST_CHECK_EQUAL(log->position("generate 3000001"), -1);
  BOOST_CHECK(control(c, "resume"));
  BOOST_CHECK(test::eventually(
    [&] { return read_coordinator_checkpoint(dir.path.string())->step >= 4; }, 30s));
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(timeline_metrics_and_shell_views) {
  auto learner = sys->spawn(test::gated_learner, log);
  auto c = start(settings(2, coordinator_mode::async, 1), learner);
  BOOST_REQUIRE(reaches(c, "finished"));
  BOOST_REQUIRE(test::eventually(
    [&] { return test::steps_of(dir / "metrics.jsonl", "step_timeline/wall_s").size() == 2; },
    10s));
  for (std::string name : {"wall_s", "sampling_s", "sampling_wall_s", "evaluating_s",
                           "evaluating_wall_s", "training_s", "publishing_s", "sampler_busy",
                           "evaluator_busy", "learner_busy", "slowest_stage_s", "steps_in_flight",
                           "stale_dropped"})
    BOOST_CHECK_MESSAGE(test::steps_of(dir / "metrics.jsonl", "step_timeline/" + name).size() == 2,
                        name);
  for (std::string name : {"time/total", "time/train", "time/rollout", "progress/done_frac",
                           "reward_terms/correct", "reward_terms/length"})
    BOOST_CHECK_MESSAGE(test::steps_of(dir / "metrics.jsonl", name).size() == 2, name);
  auto table = control(c, "timeline");
  BOOST_REQUIRE_MESSAGE(table, test::why(table));
  BOOST_CHECK(table->find("async mode") != std::string::npos);
  BOOST_CHECK(table->find("WALL/SLOWEST") != std::string::npos);
  BOOST_CHECK_EQUAL(lines_with(*table, "%/").size(), 2u); // one row per step
  auto one = control(c, "timeline", {"1"});
  BOOST_REQUIRE(one);
  BOOST_CHECK_EQUAL(lines_with(*one, "%/").size(), 1u);
  BOOST_CHECK(!control(c, "timeline", {"many"}));

  auto last = expected_problems(2).back();
  auto view = control(c, "trajectory", {last.substr(last.find('/') + 1)}); // by name
  BOOST_REQUIRE_MESSAGE(view, test::why(view));
  BOOST_CHECK(view->find("of " + last) != std::string::npos);
  BOOST_CHECK(view->find("prompt (excerpt):") != std::string::npos);
  BOOST_CHECK(view->find("<|im_start|>") != std::string::npos); // decoded from the token ids
  BOOST_CHECK(view->find("parsed kernel:\n") != std::string::npos);
  BOOST_CHECK(view->find("class ModelNew:") != std::string::npos);
  BOOST_CHECK(view->find("verdict: ") != std::string::npos);
  BOOST_CHECK(view->find("reward: score ") != std::string::npos);
  auto missing = control(c, "trajectory", {"level9/nothing"});
  BOOST_REQUIRE(!missing);
  BOOST_CHECK(test::why(missing).find("problems seen: ") != std::string::npos);

  caf::scoped_actor self{*sys};
  actor_status status;
  self->request(c, 5s, status_atom::value).receive([&](actor_status& s) { status = s; },
                                                   [](caf::error&) {});
  std::map<std::string, std::string> details;
  for (auto& d : status.details)
    details[d.key] = d.value;
  BOOST_CHECK(details["last step timeline"].find("step 2: wall ") == 0);
  BOOST_CHECK(details["mode"].find("async") == 0);
  BOOST_CHECK((status.commands == std::vector<std::string>{"pause", "resume", "timeline",
                                                           "trajectory"}));
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

// -- the runtime pieces, without actors ------------------------------------------------------

BOOST_AUTO_TEST_CASE(stage_clock_sums_work_and_measures_busy_time) {
  double now = 0;
  episode::stage_clock clock([&] { return now; });
  using episode::stage;
  clock.begin(stage::sampling, 1);  // [0, 2]
  now = 1;
  clock.begin(stage::sampling, 1);  // [1, 3]
  now = 2;
  clock.end(stage::sampling, 1);
  now = 3;
  clock.end(stage::sampling, 1);
  now = 5;
  clock.begin(stage::sampling, 2);  // [5, 6] of another round
  now = 6;
  clock.end(stage::sampling, 2);
  auto r1 = clock.round_usage(stage::sampling, 1);
  BOOST_CHECK_CLOSE(r1.summed_s, 4.0, /*tol %=*/1e-9);
  BOOST_CHECK_CLOSE(r1.busy_s, 3.0, 1e-9);
  BOOST_CHECK_EQUAL(r1.pieces, 2u);
  BOOST_CHECK_CLOSE(clock.busy_seconds(stage::sampling), 4.0, 1e-9); // [0, 3] and [5, 6]
  BOOST_CHECK_EQUAL(clock.busy_seconds(stage::training), 0.0);
  // Work under way counts up to now; forgetting its round stops it counting.
  clock.begin(stage::evaluating, 3);
  now = 8;
  BOOST_CHECK_CLOSE(clock.round_usage(stage::evaluating, 3).summed_s, 2.0, 1e-9);
  clock.forget(3);
  now = 10;
  clock.end(stage::evaluating, 3); // ignored
  BOOST_CHECK_CLOSE(clock.busy_seconds(stage::evaluating), 2.0, 1e-9);
  BOOST_CHECK_EQUAL(clock.round_usage(stage::evaluating, 3).pieces, 0u);
}

BOOST_AUTO_TEST_CASE(timeline_records_and_table) {
  episode::step_timeline t;
  t.step = 7;
  t.wall_s = 10;
  t.sampling_wall_s = 6;
  t.sampling_s = 40;
  t.evaluating_wall_s = 8;
  t.training_s = 3;
  t.publishing_s = 1;
  t.sampler_busy = 0.6;
  BOOST_CHECK_EQUAL(episode::slowest_stage_s(t), 8.0);
  auto records = episode::timeline_metrics(t, 123, "test");
  BOOST_REQUIRE_EQUAL(records.size(), 16u); // 13 stages and the seeds' time/total|train|rollout
  BOOST_CHECK_EQUAL(records.front().name, "step_timeline/wall_s");
  BOOST_CHECK_EQUAL(records.front().step, 7u);
  BOOST_CHECK_EQUAL(records.front().value, 10.0);
  auto table = episode::render_timeline_table({t});
  BOOST_CHECK(table.find("6.00 (40.0)") != std::string::npos);
  BOOST_CHECK(table.find("60%/0%/0%") != std::string::npos);
  BOOST_CHECK(table.find("1.25") != std::string::npos); // wall / slowest = 10 / 8
  BOOST_CHECK_EQUAL(episode::render_timeline_table({}), "no step finished yet\n");
}

BOOST_AUTO_TEST_CASE(trajectory_view_shows_each_turn) {
  trajectory t;
  t.id = 2000001;
  t.problem_id = "level1/19_ReLU";
  t.end_reason = "max_turns";
  turn a;
  a.index = 0;
  a.prompt_tokens = {1, 2, 3};
  a.completion_text = "<think>try</think><KERNEL>\nclass ModelNew:\n    pass\n</KERNEL>";
  a.verdict.compiled = true;
  a.verdict.error = eval_error::mismatch;
  a.verdict.error_excerpt = "max difference 3.5";
  a.score = -0.25;
  turn b;
  b.index = 1;
  b.completion_text = "no code here";
  t.turns = {a, b};
  auto text = episode::render_trajectory(t, 2, [](const std::vector<int32_t>& ids) {
    return std::string(ids.size() * 1000, 'p');
  });
  BOOST_CHECK(text.find("trajectory 2000001 of level1/19_ReLU") != std::string::npos);
  BOOST_CHECK(text.find("step 2") != std::string::npos);
  BOOST_CHECK(text.find("[... 2200 characters ...]") != std::string::npos); // 3000 - 2 x 400
  BOOST_CHECK(text.find("verdict: compiled, not correct, error mismatch") != std::string::npos);
  BOOST_CHECK(text.find("max difference 3.5") != std::string::npos);
  BOOST_CHECK(text.find("reward: score -0.250") != std::string::npos);
  BOOST_CHECK(text.find("-- turn 2") != std::string::npos);
  BOOST_CHECK(text.find("parsed kernel: none (") != std::string::npos);
  BOOST_CHECK(text.find("not evaluated") != std::string::npos);
  BOOST_CHECK_EQUAL(episode::excerpt("abcdef", 2, 2), "ab\n[... 2 characters ...]\nef");
  BOOST_CHECK_EQUAL(episode::excerpt("abcd", 2, 2), "abcd");
}

BOOST_AUTO_TEST_CASE(coordinator_modes_parse) {
  BOOST_CHECK(parse_coordinator_mode("async") == coordinator_mode::async);
  BOOST_CHECK(parse_coordinator_mode("sync") == coordinator_mode::sync);
  BOOST_CHECK(!parse_coordinator_mode("asynchronous"));
  BOOST_CHECK_EQUAL(to_string(coordinator_mode::async), std::string("async"));
}

BOOST_AUTO_TEST_SUITE_END()
