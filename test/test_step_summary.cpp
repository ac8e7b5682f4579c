// A step's trajectories: flat groups dropped, scalars for metrics.jsonl.

#include "runtime/episode/step_summary.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

trajectory traj(uint64_t group, double reward, bool correct, double speedup = 0) {
  trajectory t;
  t.group_id = group;
  turn u;
  u.return_value = reward;
  u.verdict.compiled = true;
  u.verdict.correct = correct;
  u.verdict.error = correct ? eval_error::none : eval_error::mismatch;
  u.verdict.speedup = speedup;
  u.prompt_tokens = {1, 2, 3};
  u.completion_tokens = {4, 5};
  t.turns.push_back(u);
  return t;
}

std::map<std::string, double> by_name(const std::vector<metric_record>& records) {
  std::map<std::string, double> out;
  for (auto& r : records)
    out[r.name] = r.value;
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(step_summary)

BOOST_AUTO_TEST_CASE(groups_whose_rewards_are_all_equal_are_dropped) {
  auto r = drop_flat_groups({traj(1, 0, false), traj(1, 0, false), traj(2, 0, false),
                             traj(2, 1, true)});
  BOOST_CHECK_EQUAL(r.groups_dropped, 1u);
  BOOST_CHECK_EQUAL(r.groups_kept, 1u);
  BOOST_REQUIRE_EQUAL(r.kept.size(), 2u);
  BOOST_CHECK_EQUAL(r.kept[0].group_id, 2u);
}

BOOST_AUTO_TEST_CASE(the_step_scalars_follow_the_trajectories) {
  auto m = by_name(summarize_step({traj(1, 0, false), traj(1, 1.3, true, 2.0),
                                   traj(2, 1.3, true, 4.0), traj(2, 0.5, false)},
                                  7, "test"));
  BOOST_CHECK_CLOSE(m["reward/mean"], 0.775, 1e-9);
  BOOST_CHECK_CLOSE(m["reward/max"], 1.3, 1e-9);
  BOOST_CHECK_CLOSE(m["rate/correct"], 0.5, 1e-9);
  BOOST_CHECK_CLOSE(m["rate/compiled"], 1.0, 1e-9);
  BOOST_CHECK_CLOSE(m["speedup/median"], 3.0, 1e-9);
  BOOST_CHECK_CLOSE(m["tokens"], 20.0, 1e-9);
  BOOST_CHECK_CLOSE(m["rate/correct_turn1"], 0.5, 1e-9);
  BOOST_CHECK_EQUAL(m.count("rate/hack"), 1u);
}

// Where the step's evaluation time went: the worker's phases, the builds and the evaluator's
// totals, each summed over the evaluated turns (an answer with no program adds nothing).
BOOST_AUTO_TEST_CASE(evaluation_time_is_summed_by_phase) {
  auto a = traj(1, 1.3, true, 2.0), b = traj(1, 0, false), unparsed = traj(2, 0, false);
  a.turns[0].verdict.phases = {{"compile", 0.5}, {"timing", 2.0}};
  a.turns[0].verdict.build_seconds = 20;
  a.turns[0].verdict.total_seconds = 3;
  b.turns[0].verdict.phases = {{"compile", 0.25}, {"correctness", 1.0}};
  b.turns[0].verdict.total_seconds = 1.5;
  unparsed.turns[0].verdict = {};
  unparsed.turns[0].verdict.total_seconds = 100; // not evaluated: not counted
  auto m = by_name(summarize_step({a, b, unparsed}, 1, "test"));
  BOOST_CHECK_CLOSE(m["eval_time/phase_compile_s"], 0.75, 1e-9);
  BOOST_CHECK_CLOSE(m["eval_time/phase_timing_s"], 2.0, 1e-9);
  BOOST_CHECK_CLOSE(m["eval_time/phase_correctness_s"], 1.0, 1e-9);
  BOOST_CHECK_CLOSE(m["eval_time/build_s"], 20.0, 1e-9);
  BOOST_CHECK_CLOSE(m["eval_time/total_s"], 4.5, 1e-9);
}

BOOST_AUTO_TEST_CASE(multi_turn_rates_and_entropy_use_the_seeds_names) {
  // A two-turn trajectory that failed and then succeeded, and a one-turn failure.
  auto two = traj(1, 1, false);
  auto second = two.turns[0];
  second.index = 1;
  second.verdict.correct = true;
  second.verdict.error = eval_error::none;
  two.turns.push_back(second);
  auto one = traj(1, 0, false);
  one.turns[0].verdict.compiled = false;
  one.turns[0].verdict.error = eval_error::compile;
  two.turns[0].logprobs = {-0.5f, -1.5f};
  two.turns[1].logprobs = {-1.0f, -1.0f};
  auto m = by_name(summarize_step({two, one}, 2, "test"));
  BOOST_CHECK_CLOSE(m["multiturn/success_rate"], 0.5, 1e-9);
  BOOST_CHECK_CLOSE(m["multiturn/avg_turns"], 1.5, 1e-9);
  BOOST_CHECK_CLOSE(m["multiturn/turn_0/compile_rate"], 0.5, 1e-9);
  BOOST_CHECK_CLOSE(m["multiturn/turn_0/correct_rate"], 0.0, 1e-9);
  BOOST_CHECK_CLOSE(m["multiturn/turn_1/correct_rate"], 1.0, 1e-9);
  BOOST_CHECK_CLOSE(m["multiturn/turn_1/format_rate"], 1.0, 1e-9);
  // Mean -logprob over the four tokens that have one: (0.5 + 1.5 + 1 + 1) / 4.
  BOOST_CHECK_CLOSE(m["policy/entropy"], 1.0, 1e-6);
}

BOOST_AUTO_TEST_CASE(kernelbench_correct_and_low_coverage_have_their_own_rates) {
  // `correct` (strict by default) stays the correct rate; KernelBench's verdict beside it.
  auto only_kb = traj(1, 0, false);
  only_kb.turns[0].verdict.kernelbench_correct = true;
  auto both = traj(1, 1, true, 2.0);
  both.turns[0].verdict.kernelbench_correct = true;
  auto idle = traj(2, 0, true, 1.5);
  idle.turns[0].verdict.kernelbench_correct = true;
  idle.turns[0].verdict.hack_flags = {"own_kernels_idle"};
  auto m = by_name(summarize_step({only_kb, both, idle, traj(2, 0, false)}, 3, "test"));
  BOOST_CHECK_CLOSE(m["rate/correct"], 0.5, 1e-9);
  BOOST_CHECK_CLOSE(m["rate/kernelbench_correct"], 0.75, 1e-9);
  BOOST_CHECK_CLOSE(m["rate/low_coverage"], 0.25, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()
