// The coordinator's step pipeline (runtime/episode/step_pipeline.hpp) without actors: which
// rounds start in sync and async mode, which step trains, what is dropped, what a commit and a
// resume leave, when held-out rounds come and when the run fails. No threads, no clock.

#include "runtime/episode/step_pipeline.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

using pipeline = kbrl::episode::step_pipeline;

std::vector<problem> problems(size_t n, const std::string& prefix = "level1/p") {
  std::vector<problem> out;
  for (size_t i = 0; i < n; ++i) {
    problem p;
    p.id = prefix + std::to_string(i);
    p.name = "p" + std::to_string(i);
    out.push_back(p);
  }
  return out;
}

coordinator_settings settings(uint64_t steps, coordinator_mode mode = coordinator_mode::sync) {
  coordinator_settings s;
  s.steps = steps;
  s.problems_per_step = 2;
  s.group_size = 2;
  s.mode = mode;
  s.max_staleness = 1;
  s.max_failed_steps = 2;
  return s;
}

/// The k-th trajectory of `round`, sampled with `version`, with reward `reward`.
trajectory answer(const round_launch& round, uint64_t k, double reward, uint64_t version) {
  trajectory t;
  t.id = round.trajectory_id(k);
  t.group_id = round.group_id((k - 1) / round.group_size);
  t.problem_id = round.problems[(k - 1) / round.group_size].id;
  t.end_reason = "max_turns";
  turn u;
  u.policy_version = version;
  u.score = reward;
  u.return_value = reward;
  u.verdict.trials_total = 1;
  u.verdict.compiled = true;
  u.verdict.correct = reward > 0;
  t.turns.push_back(u);
  return t;
}

/// Every trajectory of `round`, rewards alternating 0 and 1 (each group has signal).
void complete(pipeline& p, const round_launch& round, uint64_t version,
              std::vector<arrival>* arrivals = nullptr) {
  auto n = round.problems.size() * round.group_size;
  for (uint64_t k = 1; k <= n; ++k) {
    auto a = p.add(answer(round, k, static_cast<double>(k % 2), version));
    if (arrivals)
      arrivals->push_back(a);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(step_pipeline)

BOOST_AUTO_TEST_CASE(nothing_launches_before_the_learner_said_its_version) {
  pipeline p(settings(3), problems(4), {});
  BOOST_CHECK(p.phase() == coordinator_phase::starting);
  BOOST_CHECK(p.launches().empty());
  p.begin(std::nullopt);
  auto rounds = p.launches();
  BOOST_REQUIRE_EQUAL(rounds.size(), 1u); // sync: one step at a time
  BOOST_CHECK_EQUAL(rounds[0].step, 1u);
  BOOST_CHECK_EQUAL(rounds[0].problems.size(), 2u);
  BOOST_CHECK_EQUAL(rounds[0].group_size, 2u);
  BOOST_CHECK(p.phase() == coordinator_phase::episodes);
  BOOST_CHECK(p.launches().empty()); // the window is full
}

BOOST_AUTO_TEST_CASE(a_sync_step_trains_publishes_and_commits_then_the_next_starts) {
  pipeline p(settings(2), problems(4), {});
  p.begin(std::nullopt);
  auto round = p.launches().at(0);
  std::vector<arrival> arrivals;
  complete(p, round, 0, &arrivals);
  BOOST_CHECK(arrivals.front() == arrival::waiting);
  BOOST_CHECK(arrivals.back() == arrival::step_complete);
  auto order = p.next_training("coordinator");
  BOOST_REQUIRE(order);
  BOOST_CHECK_EQUAL(order->key, 1u);
  BOOST_CHECK_EQUAL(order->batch.size(), 4u);
  BOOST_CHECK(p.phase() == coordinator_phase::training);
  BOOST_CHECK(!p.next_training("coordinator")); // the learner is busy
  BOOST_CHECK(p.launches().empty());
  p.trained(1);
  BOOST_CHECK(p.phase() == coordinator_phase::publishing);
  p.published();
  auto committed = p.commit(1);
  BOOST_REQUIRE(committed);
  BOOST_CHECK_EQUAL(committed->collected.size(), 4u);
  BOOST_CHECK_EQUAL(metric_value(committed->summary, "reward/mean"), 0.5);
  BOOST_CHECK_EQUAL(p.committed(), 1u);
  auto cp = p.checkpoint(committed->cursor_after);
  BOOST_CHECK_EQUAL(cp.step, 1u);
  BOOST_CHECK_EQUAL(cp.cursor, 2u);
  BOOST_CHECK_EQUAL(cp.policy_version, 1u);
  auto next = p.launches();
  BOOST_REQUIRE_EQUAL(next.size(), 1u);
  BOOST_CHECK_EQUAL(next[0].step, 2u);
  BOOST_CHECK_EQUAL(next[0].min_policy_version, 1u);
  complete(p, next[0], 1);
  p.next_training("coordinator");
  p.trained(2);
  p.published();
  p.commit(2);
  BOOST_CHECK(p.launches().empty());
  BOOST_CHECK(p.phase() == coordinator_phase::finished);
}

BOOST_AUTO_TEST_CASE(async_mode_runs_max_staleness_steps_ahead_and_trains_in_order) {
  pipeline p(settings(5, coordinator_mode::async), problems(10), {});
  p.begin(std::nullopt);
  auto rounds = p.launches();
  BOOST_REQUIRE_EQUAL(rounds.size(), 2u); // steps 1 and 2: committed (0) + 1 + K (1)
  // Step 2 completes first: it waits for step 1, which trains first.
  complete(p, rounds[1], 0);
  BOOST_CHECK(!p.next_training("c"));
  complete(p, rounds[0], 0);
  auto order = p.next_training("c");
  BOOST_REQUIRE(order);
  BOOST_CHECK_EQUAL(order->key, 1u);
  BOOST_CHECK_EQUAL(p.steps_in_flight_besides(1), 1u);
  p.trained(1);
  p.published();
  p.commit(1);
  auto more = p.launches();
  BOOST_REQUIRE_EQUAL(more.size(), 1u);
  BOOST_CHECK_EQUAL(more[0].step, 3u);
  auto second = p.next_training("c");
  BOOST_REQUIRE(second);
  BOOST_CHECK_EQUAL(second->key, 2u);
}

BOOST_AUTO_TEST_CASE(too_stale_trajectories_and_flat_groups_are_not_trained_on) {
  auto s = settings(5);
  s.max_staleness = 1;
  pipeline p(s, problems(4), {});
  p.resume({0, 0, 5}); // the learner is at version 5
  p.begin(5);
  auto round = p.launches().at(0);
  // Group 0: one member sampled at version 3 (stale): the other alone is no group either.
  p.add(answer(round, 1, 1.0, 3));
  p.add(answer(round, 2, 0.0, 5));
  // Group 1: equal rewards (flat).
  p.add(answer(round, 3, 1.0, 5));
  p.add(answer(round, 4, 1.0, 4));
  auto order = p.next_training("c");
  BOOST_REQUIRE(order);
  BOOST_CHECK(order->batch.empty()); // nothing to learn from: commit at once
  BOOST_CHECK_EQUAL(order->stale_dropped, 2u);
  BOOST_CHECK_EQUAL(order->flat_groups_dropped, 1u);
  BOOST_CHECK(p.phase() != coordinator_phase::training);
  auto r = p.commit(order->key);
  BOOST_REQUIRE(r);
  BOOST_CHECK_EQUAL(metric_value(r->summary, "trajectories/dropped_stale"), 2.0);
  BOOST_CHECK_EQUAL(metric_value(r->summary, "groups/dropped_flat"), 1.0);
  BOOST_CHECK_EQUAL(p.stale_dropped(), 2u);
  BOOST_CHECK_EQUAL(p.groups_dropped(), 1u);
}

BOOST_AUTO_TEST_CASE(a_resume_continues_after_the_checkpoint_with_the_same_problems) {
  pipeline first(settings(4), problems(6), {});
  first.begin(std::nullopt);
  auto r1 = first.launches().at(0);
  complete(first, r1, 0);
  first.next_training("c");
  first.trained(1);
  first.published();
  auto c1 = first.commit(1);
  auto step2 = first.launches().at(0);

  pipeline again(settings(4), problems(6), {});
  again.resume(first.checkpoint(c1->cursor_after));
  BOOST_CHECK(again.resumed());
  auto start = again.begin(1);
  BOOST_CHECK(start.kind == start_kind::as_recorded);
  auto redone = again.launches().at(0);
  BOOST_CHECK_EQUAL(redone.step, 2u);
  BOOST_CHECK_EQUAL(redone.key, step2.key);
  BOOST_REQUIRE_EQUAL(redone.problems.size(), step2.problems.size());
  for (size_t i = 0; i < redone.problems.size(); ++i)
    BOOST_CHECK_EQUAL(redone.problems[i].id, step2.problems[i].id);
  BOOST_CHECK_EQUAL(redone.trajectory_id(1), step2.trajectory_id(1));
}

BOOST_AUTO_TEST_CASE(a_learner_one_version_ahead_means_its_step_counts_as_done) {
  pipeline p(settings(4), problems(6), {});
  p.resume({2, 4, 2});
  auto start = p.begin(3);
  BOOST_CHECK(start.kind == start_kind::learner_trained_next_step);
  BOOST_CHECK(start.checkpoint_changed);
  BOOST_CHECK_EQUAL(p.committed(), 3u);
  BOOST_CHECK_EQUAL(p.cursor(), 6u); // step 3's problems are skipped, not trained twice
  BOOST_CHECK_EQUAL(p.launches().at(0).step, 4u);

  pipeline q(settings(4), problems(6), {});
  q.resume({2, 4, 2});
  auto other = q.begin(7);
  BOOST_CHECK(other.kind == start_kind::learner_version_differs);
  BOOST_CHECK_EQUAL(other.recorded_version, 2u);
  BOOST_CHECK_EQUAL(q.policy_version(), 7u);
  BOOST_CHECK_EQUAL(q.committed(), 2u);
}

BOOST_AUTO_TEST_CASE(held_out_rounds_come_every_eval_every_steps_and_hold_sync_steps) {
  auto s = settings(4);
  s.eval_every = 1;
  pipeline p(s, problems(4), problems(3, "level2/h"));
  p.begin(std::nullopt);
  auto round = p.launches().at(0);
  complete(p, round, 0);
  p.next_training("c");
  p.trained(1);
  p.published();
  p.commit(1);
  BOOST_REQUIRE(p.held_out_due());
  auto held = p.held_out();
  BOOST_CHECK(held.eval);
  BOOST_CHECK_EQUAL(held.key, held_out_round_base + 1);
  BOOST_CHECK_EQUAL(held.group_size, 1u);
  BOOST_CHECK_EQUAL(held.problems.size(), 3u);
  BOOST_CHECK(held.group_id(0) != round.group_id(0));
  BOOST_CHECK_EQUAL(p.episode_settings_for(held).sampling.temperature, 0.0);
  BOOST_CHECK(p.launches().empty()); // sync: the next step waits for the held-out round
  BOOST_CHECK(p.phase() == coordinator_phase::evaluating);
  std::vector<arrival> arrivals;
  complete(p, held, 1, &arrivals);
  BOOST_CHECK(arrivals.back() == arrival::held_out_complete);
  auto done = p.finish_held_out(held.key);
  BOOST_REQUIRE(done);
  BOOST_CHECK(done->eval);
  BOOST_CHECK_EQUAL(p.launches().at(0).step, 2u);
}

BOOST_AUTO_TEST_CASE(trajectories_of_no_round_under_way_are_ignored) {
  pipeline p(settings(2), problems(4), {});
  p.begin(std::nullopt);
  auto round = p.launches().at(0);
  trajectory stray = answer(round, 1, 1.0, 0);
  stray.id = 7 * trajectory_id_stride + 1;
  BOOST_CHECK(p.add(stray) == arrival::unknown_round);
  BOOST_CHECK(!p.commit(7));
}

BOOST_AUTO_TEST_CASE(pause_holds_new_steps_and_resume_releases_them) {
  pipeline p(settings(3), problems(4), {});
  p.begin(std::nullopt);
  p.pause();
  BOOST_CHECK(p.launches().empty());
  BOOST_CHECK(p.phase() == coordinator_phase::paused);
  BOOST_CHECK(p.resume_launching());
  BOOST_CHECK(!p.resume_launching()); // not paused any more
  BOOST_CHECK_EQUAL(p.launches().size(), 1u);
}

BOOST_AUTO_TEST_CASE(steps_whose_episodes_all_fail_stop_the_run_after_the_limit) {
  pipeline p(settings(5), problems(4), {});
  p.begin(std::nullopt);
  step_health failed_all;
  failed_all.episodes = 4;
  failed_all.failed = 4;
  failed_all.reasons = "4 x the sampler could not generate: token 300";
  step_health fine;
  fine.episodes = 4;
  BOOST_CHECK(!p.record_health(failed_all, 1));
  BOOST_CHECK(!p.record_health(fine, 2)); // the count starts again
  BOOST_CHECK(!p.record_health(failed_all, 3));
  auto stop = p.record_health(failed_all, 4);
  BOOST_REQUIRE(stop);
  BOOST_CHECK_NE(stop->find("last 2 steps failed"), std::string::npos);
  BOOST_CHECK_NE(stop->find("token 300"), std::string::npos);
  BOOST_CHECK(p.phase() == coordinator_phase::failed);
  BOOST_CHECK(p.launches().empty());
}

BOOST_AUTO_TEST_CASE(a_failed_learner_commits_the_step_without_a_new_version) {
  pipeline p(settings(3), problems(4), {});
  p.begin(std::nullopt);
  complete(p, p.launches().at(0), 0);
  p.next_training("c");
  p.training_failed();
  BOOST_CHECK(!p.publishing());
  auto r = p.commit(1);
  BOOST_REQUIRE(r);
  BOOST_CHECK_EQUAL(p.policy_version(), 0u);
  BOOST_CHECK_EQUAL(p.launches().at(0).step, 2u);
}

BOOST_AUTO_TEST_SUITE_END()
