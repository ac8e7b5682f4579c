// The evaluation sandbox as a user meets it (kbrl-eval-kernel, a real process each time): with
// isolation "auto" and no working bubblewrap, kbrl refuses to run generated code instead of
// quietly running it unsandboxed; "none" set explicitly evaluates, and every verdict says so.
// KBRL_BWRAP points the sandbox probe at a missing program (the probe's answer is kept per
// process, hence one process per case).

#include "cluster_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace kbrl;

namespace {

const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-eval-kernel";
const std::string problem = std::string(KBRL_TEST_DATA) + "/problems/1_small_relu.py";
const std::string candidate =
  std::string(KBRL_TEST_DATA) + "/candidates_runtime/relu_correct_clamp.py";

test::command_result evaluate_without_bwrap(const std::string& isolation) {
  return test::run_command({"env", "KBRL_BWRAP=/nonexistent/bwrap", tool, "--problem", problem,
                            "--candidate", candidate, "--backend", "torch", "--trials", "2",
                            "--perf-trials", "3", "--json", "--isolation", isolation},
                           120);
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_sandbox)

BOOST_AUTO_TEST_CASE(auto_refuses_to_evaluate_without_a_sandbox) {
  auto r = evaluate_without_bwrap("auto");
  BOOST_TEST_MESSAGE(r.output);
  BOOST_CHECK(r.output.find("\"correct\":true") == std::string::npos);
  BOOST_CHECK_MESSAGE(r.output.find("no sandbox for the evaluation worker") != std::string::npos,
                      r.output);
  BOOST_CHECK(r.output.find("eval.isolation =") != std::string::npos); // what to do about it
}

BOOST_AUTO_TEST_CASE(none_set_explicitly_evaluates_and_every_verdict_says_so) {
  auto r = evaluate_without_bwrap("none");
  BOOST_TEST_MESSAGE(r.output);
  BOOST_CHECK_MESSAGE(r.output.find("\"correct\":true") != std::string::npos, r.output);
  BOOST_CHECK(r.output.find("no sandbox (eval.isolation = none)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
