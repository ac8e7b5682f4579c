// The quickstart learns: the README's main command with its fixed seeds (run.seed = 0), run for
// rl.steps steps, raises the mean reward. Compared are the mean rewards of the first and the
// last few steps (a step's reward is the mean over 4 problems x 8 samples, so single steps are
// noisy); the margin is what the shipped policy clears in its own README run, about half of
// the rise measured there. Takes a few minutes on two cores.

#include "runtime/report/metrics_jsonl.hpp"
#include "cluster_fixture.hpp"
#include "quickstart_run.hpp"
#include "rl_run_files.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <numeric>
#include <sstream>

using namespace kbrl;

namespace {

double mean_of_steps(const std::map<uint64_t, double>& by_step, uint64_t first, uint64_t last) {
  double sum = 0;
  int n = 0;
  for (auto& [step, value] : by_step)
    if (step >= first && step <= last) {
      sum += value;
      ++n;
    }
  BOOST_REQUIRE_MESSAGE(n > 0, "no steps in [" << first << ", " << last << "]");
  return sum / n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(quickstart_learning)

BOOST_AUTO_TEST_CASE(the_quickstart_raises_the_reward) {
  constexpr uint64_t steps = 20, window = 5;
  constexpr double margin = 0.1;
  test::temp_dir dir;
  auto result = test::run_command(
    test::quickstart_command(dir, {"rl.steps=" + std::to_string(steps)}), 1500);
  BOOST_REQUIRE_MESSAGE(result.code == 0, result.output);
  auto reward = report::metric_by_step(dir / "runs/quickstart/metrics.jsonl", "reward/mean");
  BOOST_REQUIRE_EQUAL(reward.size(), steps);
  const double before = mean_of_steps(reward, 1, window);
  const double after = mean_of_steps(reward, steps - window + 1, steps);
  BOOST_TEST_MESSAGE("quickstart mean reward: steps 1-" << window << " " << before << ", steps "
                     << steps - window + 1 << "-" << steps << " " << after);
  BOOST_CHECK_MESSAGE(after >= before + margin,
                      "the mean reward did not rise by " << margin << ": " << before << " -> "
                                                         << after);
}

BOOST_AUTO_TEST_SUITE_END()
