// kbrl-eval's checks that need no evaluator: whether the backend can run on the devices given
// (said before anything starts) and whether any sample was judged (exit status 3 when none was).

#include "runtime/evalcli/device_check.hpp"
#include "runtime/report/sample_record.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;
using namespace kbrl::evalcli;

namespace {

bool says(const std::optional<std::string>& problem, const std::string& part) {
  return problem && problem->find(part) != std::string::npos;
}

report::sample_record with_error(const std::string& error) {
  report::sample_record r;
  r.error = error;
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_cli_checks)

BOOST_AUTO_TEST_CASE(a_gpu_backend_without_a_gpu_is_refused_up_front) {
  // The default backend on a CPU evaluator: every candidate would fail.
  auto p = device_problem("cuda", {}, 0);
  BOOST_CHECK_MESSAGE(says(p, "--backend cuda needs a GPU"), p.value_or("accepted"));
  BOOST_CHECK_MESSAGE(says(p, "--backend torch"), p.value_or("accepted"));
  BOOST_CHECK(says(device_problem("triton", {}, 2), "this machine has 2 CUDA device(s)"));
  // --gpu on a machine without CUDA, or past its last device.
  BOOST_CHECK(says(device_problem("cuda", {0}, 0), "--gpu 0: this machine has no CUDA device"));
  BOOST_CHECK(says(device_problem("torch", {1}, 1), "--gpu 1: this machine has 1 CUDA device(s)"));
  // What works: PyTorch-only candidates on the CPU, any backend on existing GPUs.
  BOOST_CHECK(!device_problem("torch", {}, 0));
  BOOST_CHECK(!device_problem("cuda", {0, 1}, 2));
  BOOST_CHECK(!backend_needs_gpu("torch"));
  BOOST_CHECK(backend_needs_gpu("triton"));
}

BOOST_AUTO_TEST_CASE(only_verdicts_about_the_candidate_count_as_judged) {
  for (auto e : {"none", "format", "static_check", "compile", "runtime", "mismatch", "timeout",
                 "crashed"})
    BOOST_CHECK_MESSAGE(report::judged(with_error(e)), e);
  for (auto e : {"infrastructure", report::generation_error, report::missing_error})
    BOOST_CHECK_MESSAGE(!report::judged(with_error(e)), e);
  BOOST_CHECK_EQUAL(report::judged_samples({with_error("infrastructure"), with_error("missing")}),
                    0u);
  BOOST_CHECK_EQUAL(report::judged_samples({with_error("missing"), with_error("mismatch")}), 1u);
}

BOOST_AUTO_TEST_SUITE_END()
