// Advantages within groups: GRPO and Dr. GRPO on single-turn groups, per-turn normalisation of
// discounted returns on multi-turn groups, and groups without signal dropped and reported.
// Expected values are worked out by hand in the comments.

#include "runtime/rl/advantages.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>

using namespace kbrl;
using kbrl::test::why;

namespace {

/// A trajectory of `group` whose turns score `scores`, sampled by `version`.
trajectory scored(uint64_t id, uint64_t group, std::vector<double> scores, uint64_t version = 0) {
  trajectory t;
  t.id = id;
  t.group_id = group;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    turn u;
    u.index = static_cast<int32_t>(i);
    u.score = scores[i];
    u.policy_version = version;
    u.prompt_tokens = {1, 2};
    u.completion_tokens = {3};
    u.logprobs = {-0.5f};
    t.turns.push_back(u);
  }
  return t;
}

constexpr double tol = 1e-12; // exact arithmetic up to rounding of a few operations

} // namespace

BOOST_AUTO_TEST_SUITE(advantages)

BOOST_AUTO_TEST_CASE(discounted_returns_run_back_from_the_last_turn) {
  // R2 = 4; R1 = 2 + 0.5 * 4 = 4; R0 = 1 + 0.5 * 4 = 3.
  auto r = rl::discounted_returns({1, 2, 4}, 0.5);
  BOOST_REQUIRE_EQUAL(r.size(), 3u);
  BOOST_CHECK_CLOSE(r[0], 3.0, 1e-12);
  BOOST_CHECK_CLOSE(r[1], 4.0, 1e-12);
  BOOST_CHECK_CLOSE(r[2], 4.0, 1e-12);
  BOOST_CHECK(rl::discounted_returns({}, 0.9).empty());
  // gamma 0: each turn its own score.
  auto own = rl::discounted_returns({1, 2, 4}, 0.0);
  BOOST_CHECK(own == (std::vector<double>{1, 2, 4}));
}

BOOST_AUTO_TEST_CASE(grpo_normalises_by_the_group_mean_and_sample_std) {
  std::vector<trajectory> ts{scored(1, 7, {1}), scored(2, 7, {0}), scored(3, 7, {0}),
                             scored(4, 7, {1})};
  rl::advantage_options o;
  auto report = rl::compute_advantages(ts, o);
  BOOST_REQUIRE_MESSAGE(report, why(report));
  // mean 0.5; sample std sqrt(4 * 0.25 / 3) = 0.5773502691896258
  const double sd = std::sqrt(1.0 / 3.0);
  const double a = 0.5 / (sd + 1e-4);
  BOOST_REQUIRE_EQUAL(ts.size(), 4u);
  BOOST_CHECK_SMALL(ts[0].turns[0].advantage - a, tol);
  BOOST_CHECK_SMALL(ts[1].turns[0].advantage + a, tol);
  BOOST_CHECK_SMALL(ts[2].turns[0].advantage + a, tol);
  BOOST_CHECK_SMALL(ts[3].turns[0].advantage - a, tol);
  BOOST_CHECK_EQUAL(ts[0].turns[0].return_value, 1.0);
  BOOST_CHECK_EQUAL(report->groups, 1u);
  BOOST_CHECK_EQUAL(report->groups_kept, 1u);
  BOOST_CHECK_EQUAL(report->turns_kept, 4u);
  BOOST_CHECK_SMALL(report->mean_score - 0.5, tol);
}

BOOST_AUTO_TEST_CASE(dr_grpo_only_subtracts_the_mean) {
  std::vector<trajectory> ts{scored(1, 7, {3}), scored(2, 7, {0}), scored(3, 7, {0})};
  rl::advantage_options o;
  o.kind = rl::advantage_kind::dr_grpo;
  auto report = rl::compute_advantages(ts, o);
  BOOST_REQUIRE_MESSAGE(report, why(report));
  BOOST_CHECK_SMALL(ts[0].turns[0].advantage - 2.0, tol);
  BOOST_CHECK_SMALL(ts[1].turns[0].advantage + 1.0, tol);
  BOOST_CHECK_SMALL(ts[2].turns[0].advantage + 1.0, tol);
}

BOOST_AUTO_TEST_CASE(groups_without_signal_are_dropped_and_reported) {
  // Group 1: all 0.1 (their float mean is not exactly 0.1: equality must be tested directly);
  // group 2: one trajectory; group 3: has signal; a trajectory without turns.
  std::vector<trajectory> ts{scored(1, 1, {0.1}), scored(2, 3, {1}), scored(3, 1, {0.1}),
                             scored(4, 2, {5}),   scored(5, 3, {0}), scored(6, 1, {0.1}),
                             scored(7, 4, {})};
  auto report = rl::compute_advantages(ts, {});
  BOOST_REQUIRE_MESSAGE(report, why(report));
  BOOST_CHECK_EQUAL(report->groups, 3u); // the turnless trajectory forms none
  BOOST_CHECK_EQUAL(report->groups_kept, 1u);
  BOOST_CHECK(report->dropped_groups == (std::vector<uint64_t>{1, 2}));
  BOOST_CHECK_EQUAL(report->trajectories_dropped, 5u);
  BOOST_REQUIRE_EQUAL(ts.size(), 2u);
  // The kept ones keep their order.
  BOOST_CHECK_EQUAL(ts[0].id, 2u);
  BOOST_CHECK_EQUAL(ts[1].id, 5u);
  BOOST_CHECK_GT(ts[0].turns[0].advantage, 0);
  BOOST_CHECK_LT(ts[1].turns[0].advantage, 0);
}

BOOST_AUTO_TEST_CASE(multi_turn_groups_normalise_returns_per_turn_index) {
  // gamma 0.5. Trajectory A scores (0, 1): returns (0.5, 1). B scores (1, 0, 2): returns
  // (1 + 0.5 * (0 + 0.5 * 2), 0 + 0.5 * 2, 2) = (1.5, 1, 2). C scores (0): return (0).
  // Turn 0: returns 0.5, 1.5, 0 -> mean 2/3, Dr. GRPO advantages -1/6, 5/6, -2/3.
  // Turn 1: returns 1, 1 -> equal: advantages 0.  Turn 2: B alone -> 0.
  std::vector<trajectory> ts{scored(1, 9, {0, 1}), scored(2, 9, {1, 0, 2}), scored(3, 9, {0})};
  rl::advantage_options o;
  o.kind = rl::advantage_kind::dr_grpo;
  o.gamma = 0.5;
  auto report = rl::compute_advantages(ts, o);
  BOOST_REQUIRE_MESSAGE(report, why(report));
  BOOST_REQUIRE_EQUAL(ts.size(), 3u);
  BOOST_CHECK_SMALL(ts[0].turns[0].return_value - 0.5, tol);
  BOOST_CHECK_SMALL(ts[1].turns[0].return_value - 1.5, tol);
  BOOST_CHECK_SMALL(ts[1].turns[1].return_value - 1.0, tol);
  BOOST_CHECK_SMALL(ts[0].turns[0].advantage + 1.0 / 6, tol);
  BOOST_CHECK_SMALL(ts[1].turns[0].advantage - 5.0 / 6, tol);
  BOOST_CHECK_SMALL(ts[2].turns[0].advantage + 2.0 / 3, tol);
  BOOST_CHECK_EQUAL(ts[0].turns[1].advantage, 0.0);
  BOOST_CHECK_EQUAL(ts[1].turns[1].advantage, 0.0);
  BOOST_CHECK_EQUAL(ts[1].turns[2].advantage, 0.0);
  BOOST_CHECK_EQUAL(report->turns_kept, 6u);

  // GRPO on the same group: turn 0 divided by its sample std.
  std::vector<trajectory> again{scored(1, 9, {0, 1}), scored(2, 9, {1, 0, 2}),
                                scored(3, 9, {0})};
  o.kind = rl::advantage_kind::grpo;
  BOOST_REQUIRE(rl::compute_advantages(again, o));
  const double mean = 2.0 / 3;
  const double sd = std::sqrt(((0.5 - mean) * (0.5 - mean) + (1.5 - mean) * (1.5 - mean)
                               + mean * mean) / 2);
  BOOST_CHECK_SMALL(again[1].turns[0].advantage - (1.5 - mean) / (sd + 1e-4), tol);
}

BOOST_AUTO_TEST_CASE(a_group_with_signal_only_in_a_later_turn_is_kept) {
  // Same first-turn returns (gamma 0 makes R_t = s_t), different second turns.
  std::vector<trajectory> ts{scored(1, 1, {1, 0}), scored(2, 1, {1, 1})};
  rl::advantage_options o;
  o.gamma = 0;
  auto report = rl::compute_advantages(ts, o);
  BOOST_REQUIRE_MESSAGE(report, why(report));
  BOOST_CHECK_EQUAL(ts.size(), 2u);
  BOOST_CHECK_EQUAL(ts[0].turns[0].advantage, 0.0);
  BOOST_CHECK_LT(ts[0].turns[1].advantage, 0);
  BOOST_CHECK_GT(ts[1].turns[1].advantage, 0);
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_refused_without_changing_anything) {
  std::vector<trajectory> ts{scored(1, 1, {1}), scored(2, 1, {std::nan("")})};
  auto report = rl::compute_advantages(ts, {});
  BOOST_REQUIRE(!report);
  BOOST_CHECK_NE(why(report).find("trajectory 2 turn 0"), std::string::npos);
  BOOST_CHECK_EQUAL(ts.size(), 2u);
  BOOST_CHECK_EQUAL(ts[0].turns[0].advantage, 0.0);

  std::vector<trajectory> ok{scored(1, 1, {1}), scored(2, 1, {0})};
  rl::advantage_options o;
  o.gamma = 1.5;
  auto bad_gamma = rl::compute_advantages(ok, o);
  BOOST_REQUIRE(!bad_gamma);
  BOOST_CHECK_NE(why(bad_gamma).find("gamma"), std::string::npos);
  o.gamma = 1;
  o.std_epsilon = 0;
  BOOST_CHECK(!rl::compute_advantages(ok, o));

  BOOST_CHECK(*rl::parse_advantage_kind("dr_grpo") == rl::advantage_kind::dr_grpo);
  auto unknown = rl::parse_advantage_kind("ppo");
  BOOST_REQUIRE(!unknown);
  BOOST_CHECK_NE(why(unknown).find("grpo or dr_grpo"), std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
