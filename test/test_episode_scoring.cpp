// Answer parsing and rewards: the pure pieces an episode uses to turn a completion into a score.

#include "runtime/episode/answer_format.hpp"
#include "runtime/episode/rewards.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

const std::string program = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";

eval_result verdict(bool compiled, int passed, double speedup = 0) {
  eval_result v;
  v.compiled = compiled;
  v.trials_total = 5;
  v.trials_passed = passed;
  v.correct = compiled && passed == 5;
  v.speedup = speedup;
  v.error = !compiled ? eval_error::compile : v.correct ? eval_error::none : eval_error::mismatch;
  return v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(episode_scoring)

BOOST_AUTO_TEST_CASE(a_tagged_answer_gives_its_program_and_reasoning) {
  auto a = parse_answer("<think>fuse the ops</think>\nHere:\n<KERNEL>\n" + program + "</KERNEL>");
  BOOST_REQUIRE_MESSAGE(a.ok(), to_string(a.failure));
  BOOST_CHECK_EQUAL(a.code, "\n" + program);
  BOOST_CHECK_EQUAL(a.reasoning, "fuse the ops");
  BOOST_CHECK(a.visible.find("<think>") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_fenced_block_counts_unless_forbidden) {
  auto text = "Plan first.\n```python\n" + program + "```\nDone.";
  auto a = parse_answer(text);
  BOOST_REQUIRE(a.ok());
  BOOST_CHECK_EQUAL(a.code, program);
  answer_format strict;
  strict.allow_fenced = false;
  BOOST_CHECK(parse_answer(text, strict).failure == format_failure::no_code);
}

BOOST_AUTO_TEST_CASE(each_malformed_answer_has_its_category) {
  BOOST_CHECK(parse_answer("<think>still thinking").failure == format_failure::unterminated_think);
  answer_format think;
  think.require_think = true;
  BOOST_CHECK(parse_answer("<KERNEL>" + program + "</KERNEL>", think).failure
              == format_failure::missing_think);
  BOOST_CHECK(parse_answer("no code at all").failure == format_failure::no_code);
  BOOST_CHECK(parse_answer("<KERNEL>" + program).failure == format_failure::unterminated_code);
  BOOST_CHECK(parse_answer("```python\n" + program).failure == format_failure::unterminated_code);
  BOOST_CHECK(parse_answer("<KERNEL>" + program + "</KERNEL><KERNEL>" + program + "</KERNEL>").failure
              == format_failure::several_code_blocks);
  BOOST_CHECK(parse_answer("```\n" + program + "```\n```\n" + program + "```").failure
              == format_failure::several_code_blocks);
  BOOST_CHECK(parse_answer("<KERNEL>  \n </KERNEL>").failure == format_failure::empty_code);
  BOOST_CHECK(parse_answer("<KERNEL>class ModelNewer: pass</KERNEL>").failure
              == format_failure::no_model_new);
  // Code inside the reasoning is not the answer.
  BOOST_CHECK(parse_answer("<think><KERNEL>" + program + "</KERNEL></think>").failure
              == format_failure::no_code);
}

BOOST_AUTO_TEST_CASE(rewards_follow_the_weights_and_hacks_earn_nothing) {
  auto good = parse_answer("<think>x</think><KERNEL>" + program + "</KERNEL>");
  auto w = *reward_preset("kevin");
  auto fast = verdict(true, 5, 2.0);
  auto r = score_turn(good, &fast, 100, w);
  BOOST_CHECK_CLOSE(r.total, 0.3 + 2.0, 1e-9);
  auto slow_wrong = verdict(true, 3);
  BOOST_CHECK_EQUAL(score_turn(good, &slow_wrong, 100, w).total, 0.0);

  auto staged = *reward_preset("stage-correct");
  auto r2 = score_turn(good, &slow_wrong, 100, staged);
  BOOST_CHECK_CLOSE(r2.total, 0.2 * 1 + 0.2 * 1 + 0.5 * 0.6, 1e-9); // format, compiles, 3/5
  auto broken = verdict(false, 0);
  BOOST_CHECK_CLOSE(score_turn(good, &broken, 100, staged).total, 0.2, 1e-9);
  auto unparsed = parse_answer("no code");
  BOOST_CHECK_EQUAL(score_turn(unparsed, nullptr, 100, staged).total, 0.0);

  reward_weights logw;
  logw.speed = 1;
  logw.speed_cap = 4;
  auto huge = verdict(true, 5, 100.0);
  BOOST_CHECK_CLOSE(score_turn(good, &huge, 0, logw).speed, std::log(4.0), 1e-9); // capped

  eval_result hack = fast;
  hack.error = eval_error::static_check;
  auto h = score_turn(good, &hack, 100, w);
  BOOST_CHECK(h.hack);
  BOOST_CHECK_EQUAL(h.total, 0.0);
  BOOST_CHECK(!reward_preset("nonsense"));
}

BOOST_AUTO_TEST_CASE(low_time_coverage_earns_nothing_unless_kept) {
  auto good = parse_answer("<think>x</think><KERNEL>" + program + "</KERNEL>");
  auto w = *reward_preset("kevin");
  BOOST_CHECK(w.low_coverage == low_coverage_policy::zero); // the default
  for (const char* flag : {"own_kernels_idle", "low_time_coverage"}) {
    BOOST_TEST_CONTEXT(flag) {
      auto v = verdict(true, 5, 2.0);
      v.hack_flags = {"leftover_processes", flag};
      BOOST_CHECK(low_time_coverage(v));
      auto zeroed = score_turn(good, &v, 100, w);
      BOOST_CHECK(zeroed.hack);
      BOOST_CHECK_EQUAL(zeroed.total, 0.0);
      BOOST_CHECK_EQUAL(zeroed.correct, 0.0);
      auto kept_w = w;
      kept_w.low_coverage = low_coverage_policy::keep;
      auto kept = score_turn(good, &v, 100, kept_w);
      BOOST_CHECK(!kept.hack);
      BOOST_CHECK_CLOSE(kept.total, 0.3 + 2.0, 1e-9); // as without the flag
    }
  }
  // Other runtime flags do not zero the reward.
  auto flagged = verdict(true, 5, 2.0);
  flagged.hack_flags = {"timing_inconsistent", "leftover_processes"};
  BOOST_CHECK(!low_time_coverage(flagged));
  auto r = score_turn(good, &flagged, 100, w);
  BOOST_CHECK(!r.hack);
  BOOST_CHECK_CLOSE(r.total, 0.3 + 2.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(returns_discount_later_turns) {
  auto sum = turn_returns({0.0, 0.0, 1.0}, 0.4, return_aggregation::sum);
  BOOST_CHECK_CLOSE(sum[2], 1.0, 1e-9);
  BOOST_CHECK_CLOSE(sum[1], 0.4, 1e-9);
  BOOST_CHECK_CLOSE(sum[0], 0.16, 1e-9);
  auto mx = turn_returns({0.5, 0.0, 1.0}, 0.4, return_aggregation::max);
  BOOST_CHECK_CLOSE(mx[1], 0.4, 1e-9);
  BOOST_CHECK_CLOSE(mx[0], 0.5, 1e-9); // its own score beats the discounted future
  BOOST_CHECK(turn_returns({}, 0.4, return_aggregation::sum).empty());
}

BOOST_AUTO_TEST_SUITE_END()
