// Which episodes of a step failed (nothing sampled or judged) and when a run of such steps
// stops the RL run: pure logic, no actors.

#include "runtime/episode/step_health.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

trajectory ended(const std::string& reason) {
  trajectory t;
  t.end_reason = reason;
  return t;
}

/// An episode of one evaluated turn with verdict error `e`.
trajectory judged(eval_error e, const std::string& excerpt = "") {
  trajectory t;
  t.end_reason = "max_turns";
  turn u;
  u.verdict.error = e;
  u.verdict.error_excerpt = excerpt;
  u.verdict.trials_total = 2;
  u.verdict.compiled = e != eval_error::compile;
  t.turns.push_back(u);
  return t;
}

} // namespace

BOOST_AUTO_TEST_SUITE(step_health)

BOOST_AUTO_TEST_CASE(failed_episodes_are_those_nothing_could_serve) {
  std::string why;
  BOOST_CHECK(episode_failed(ended("failed: the sampler could not generate: token 300"), &why));
  BOOST_CHECK_EQUAL(why, "the sampler could not generate: token 300");
  BOOST_CHECK(episode_failed(judged(eval_error::infrastructure, "no worker"), &why));
  BOOST_CHECK_EQUAL(why, "the evaluator failed: no worker");
  // The policy's own failures are answers, not failures of the run.
  BOOST_CHECK(!episode_failed(judged(eval_error::compile)));
  BOOST_CHECK(!episode_failed(judged(eval_error::mismatch)));
  BOOST_CHECK(!episode_failed(judged(eval_error::timeout)));
  trajectory unparsed = ended("max_turns");
  unparsed.turns.push_back(turn{}); // no program in the answer: not evaluated
  BOOST_CHECK(!episode_failed(unparsed));
  // One infrastructure verdict among real ones: the episode was judged.
  auto mixed = judged(eval_error::infrastructure);
  mixed.turns.push_back(judged(eval_error::none).turns[0]);
  BOOST_CHECK(!episode_failed(mixed));
}

BOOST_AUTO_TEST_CASE(the_reasons_are_counted_most_frequent_first) {
  auto h = check_step({ended("failed: no evaluator answered after 4 tries: timeout"),
                       ended("failed: the sampler could not generate: token 300"),
                       ended("failed: the sampler could not generate: token 300"),
                       judged(eval_error::none)});
  BOOST_CHECK_EQUAL(h.episodes, 4u);
  BOOST_CHECK_EQUAL(h.failed, 3u);
  BOOST_CHECK(!h.all_failed());
  BOOST_CHECK_EQUAL(h.reasons, "2 x the sampler could not generate: token 300; 1 x no evaluator "
                               "answered after 4 tries: timeout");
  BOOST_CHECK(check_step({ended("failed: x")}).all_failed());
  BOOST_CHECK(!check_step({}).all_failed());
}

BOOST_AUTO_TEST_CASE(the_run_stops_after_the_limit_of_failed_steps_in_a_row) {
  const auto bad = check_step({ended("failed: x"), ended("failed: y")});
  const auto good = check_step({ended("failed: x"), judged(eval_error::mismatch)});
  failed_step_counter c{3};
  BOOST_CHECK(!c.record(bad));
  BOOST_CHECK(!c.record(bad));
  BOOST_CHECK(!c.record(good)); // one step that worked starts the count again
  BOOST_CHECK_EQUAL(c.in_a_row(), 0u);
  BOOST_CHECK(!c.record(bad));
  BOOST_CHECK(!c.record(bad));
  BOOST_CHECK(c.record(bad));
  BOOST_CHECK_EQUAL(c.in_a_row(), 3u);
  failed_step_counter never{0};
  for (int i = 0; i < 10; ++i)
    BOOST_CHECK(!never.record(bad));
}

BOOST_AUTO_TEST_SUITE_END()
