// The README's main command, shortened: `kbrl-node --role all --config config/quickstart/run.toml`
// trains the shipped tiny policy on the bundled problems (CPU, plain-torch backend) and leaves
// metrics, TensorBoard events, traces and a learner checkpoint; `--resume` continues it. The
// suite quickstart_learning (test_quickstart_learning.cpp) runs it long enough to see the reward
// rise.

#include "cluster_fixture.hpp"
#include "quickstart_run.hpp"
#include "rl_run_files.hpp"
#include "runtime/train/checkpoint_list.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using kbrl::test::contains;
using kbrl::test::event_files;
using kbrl::test::steps_of;
using kbrl::test::trace_steps;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(quickstart)

BOOST_AUTO_TEST_CASE(a_shortened_quickstart_writes_its_run_and_resumes) {
  test::temp_dir dir;
  const auto run = dir / "runs/quickstart";
  auto first = test::run_command(test::quickstart_command(dir, {"rl.steps=2"}), 300);
  BOOST_REQUIRE_MESSAGE(first.code == 0, first.output);
  BOOST_CHECK_MESSAGE(contains(first.output, "The RL run finished after step 2 of 2"),
                      first.output);
  // B x G = 4 x 8 episodes a step, as config/quickstart/run.toml says.
  BOOST_CHECK(steps_of(run + "/metrics.jsonl", "reward/mean")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}}));
  BOOST_CHECK(trace_steps(run + "/traces.jsonl") == (std::map<uint64_t, int>{{1, 32}, {2, 32}}));
  BOOST_CHECK_EQUAL(event_files(run + "/tensorboard").size(), 1u);
  auto latest = train::latest_checkpoint(fs::path(run) / "learner" / "checkpoints");
  BOOST_REQUIRE_MESSAGE(latest && *latest, "no learner checkpoint\n" << first.output);
  BOOST_CHECK_EQUAL((*latest)->cursor.policy_version, 2u);

  auto resumed = test::run_command(test::quickstart_resume_command(run, {"rl.steps=3"}), 300);
  BOOST_REQUIRE_MESSAGE(resumed.code == 0, resumed.output);
  BOOST_CHECK_MESSAGE(contains(resumed.output, "The RL run finished after step 3 of 3 (1 step(s)"),
                      resumed.output);
  BOOST_CHECK(steps_of(run + "/metrics.jsonl", "reward/mean")
              == (std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 1}}));
  BOOST_CHECK_EQUAL(event_files(run + "/tensorboard").size(), 2u);
}

BOOST_AUTO_TEST_SUITE_END()
