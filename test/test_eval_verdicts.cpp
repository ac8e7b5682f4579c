// The verdict codec of issue 16: the worker's `evaluate` answer read with and without the new
// fields (an older worker), the eval.correctness switch, and verdict_json() read back through the
// same codec (the turn logs) and printed for people (kbrl-eval-kernel).

#include "messages/errors.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/verdict_codec.hpp"
#include "runtime/eval/verdict_format.hpp"
#include "runtime/evalcli/turn_log.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace kbrl;
using namespace kbrl::eval;

namespace {

/// An answer of the issue-16 worker: strict check failed on trial 2 (KernelBench's passed), the
/// time coverage measured, the timing check answered.
const std::string new_answer = R"({"id": 7, "compiled": true, "correct": false,
  "trials_passed": 2, "trials_total": 3, "kernelbench_correct": true,
  "kernelbench_trials_passed": 3, "error": "mismatch", "error_excerpt": "trial 2: rel diff",
  "trials": [
    {"passed": true, "kernelbench_passed": true, "max_abs_diff": 0.0, "mean_abs_diff": 0.0,
     "max_rel_diff": 0.0, "norm_rel_diff": 0.0, "note": ""},
    {"passed": false, "kernelbench_passed": true, "max_abs_diff": 0.002, "mean_abs_diff": 1e-4,
     "max_rel_diff": 0.03, "norm_rel_diff": 0.001, "note": "strict: rel diff 0.03 > 1e-4"},
    {"passed": true, "kernelbench_passed": true, "max_abs_diff": 0.0, "mean_abs_diff": 0.0,
     "max_rel_diff": 0.0, "norm_rel_diff": 0.0, "note": ""}],
  "strict_tolerances": {"rtol": 1e-4, "floor": 1e-4, "norm_tol": 1e-4},
  "kernel_runtime": {"mean_ms": 0.5, "std_ms": 0.01, "min_ms": 0.49, "max_ms": 0.6, "trials": 100},
  "reference_runtime": {"mean_ms": 1.0, "std_ms": 0.02, "min_ms": 0.9, "max_ms": 1.1, "trials": 100},
  "hack_flags": ["low_time_coverage"], "time_coverage": 0.02,
  "kernels": [{"name": "at::native::vectorized_elementwise_kernel", "ms": 0.49, "own": false},
              {"name": "relu_kernel", "ms": 0.01, "own": true}],
  "timing_check": {"events_ms": 50.0, "wall_ms": 52.5, "overhead_ms": 0.5},
  "isolation": "process", "timing_input_sets": 2,
  "timing_note": "timed with 2 input set(s) instead of 3",
  "compile_seconds": 3.5, "correctness_seconds": 0.25, "timing_seconds": 1.0,
  "reference_seconds": 2.0, "sticky_cuda_error": false, "device": "NVIDIA H100",
  "phase_seconds": {"compile": 3.5, "coverage": 0.125, "timing": "not a number"}})";

/// An answer of the worker before issue 16: no KernelBench verdict, no coverage.
const std::string old_answer = R"({"id": 8, "compiled": true, "correct": true,
  "trials_passed": 3, "trials_total": 3, "error": "none", "error_excerpt": "",
  "trials": [{"passed": true, "max_abs_diff": 0.0, "mean_abs_diff": 0.0, "note": ""}],
  "kernel_runtime": {"mean_ms": 0.5, "std_ms": 0.0, "min_ms": 0.5, "max_ms": 0.5, "trials": 10},
  "hack_flags": [], "timing_input_sets": 3, "sticky_cuda_error": true, "device": "cpu"})";

engine_options options(const std::string& correctness = "strict") {
  engine_options o;
  o.correctness = correctness;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_verdicts)

BOOST_AUTO_TEST_CASE(an_answer_with_the_new_fields_is_read_whole) {
  auto a = parse_evaluate_answer(new_answer, options(), /*trials_asked=*/5);
  BOOST_REQUIRE_MESSAGE(a, test::why(a));
  auto& v = a->verdict;
  BOOST_CHECK(v.compiled);
  BOOST_CHECK(!v.correct); // strict, the default
  BOOST_CHECK(!v.strict_correct);
  BOOST_CHECK(v.kernelbench_correct);
  BOOST_CHECK_EQUAL(v.trials_passed, 2);
  BOOST_CHECK_EQUAL(v.kernelbench_trials_passed, 3);
  BOOST_CHECK_EQUAL(v.trials_total, 3); // answered, not the 5 asked
  BOOST_CHECK(v.error == eval_error::mismatch);
  BOOST_REQUIRE_EQUAL(v.trials.size(), 3u);
  BOOST_CHECK(!v.trials[1].passed && v.trials[1].kernelbench_passed);
  BOOST_CHECK_EQUAL(v.trials[1].max_rel_diff, 0.03);
  BOOST_CHECK_EQUAL(v.trials[1].norm_rel_diff, 0.001);
  BOOST_CHECK_EQUAL(v.time_coverage, 0.02);
  BOOST_REQUIRE_EQUAL(v.kernels.size(), 2u);
  BOOST_CHECK_EQUAL(v.kernels[1].name, "relu_kernel");
  BOOST_CHECK(v.kernels[1].own && !v.kernels[0].own);
  BOOST_CHECK_EQUAL(v.kernels[0].ms, 0.49);
  BOOST_CHECK_EQUAL(v.timing_events_ms, 50.0);
  BOOST_CHECK_EQUAL(v.timing_wall_ms, 52.5);
  BOOST_CHECK_EQUAL(v.timing_overhead_ms, 0.5);
  BOOST_CHECK_EQUAL(v.isolation, "process");
  BOOST_CHECK_EQUAL(v.timing_input_sets, 2);
  BOOST_CHECK_EQUAL(v.timing_note, "timed with 2 input set(s) instead of 3");
  BOOST_CHECK_EQUAL(v.kernel_runtime.mean_ms, 0.5);
  BOOST_CHECK_EQUAL(v.reference_runtime.mean_ms, 1.0); // as answered; the engine decides
  BOOST_CHECK_EQUAL(v.speedup, 0.0);                   // the engine's to compute
  BOOST_CHECK_EQUAL(v.compile_seconds, 3.5);
  BOOST_REQUIRE_EQUAL(v.hack_flags.size(), 1u);
  BOOST_CHECK_EQUAL(v.hack_flags[0], "low_time_coverage");
  BOOST_CHECK(v.device.empty()); // the engine's own name for its device
  BOOST_CHECK(!a->sticky_cuda_error);
  // phases in the worker's order; one that is not a number is left out
  BOOST_REQUIRE_EQUAL(v.phases.size(), 2u);
  BOOST_CHECK_EQUAL(v.phases[0].phase, "compile");
  BOOST_CHECK_EQUAL(v.phases[1].phase, "coverage");
  BOOST_CHECK_EQUAL(v.phases[1].seconds, 0.125);
}

BOOST_AUTO_TEST_CASE(an_older_worker_gets_its_correct_as_kernelbench_verdict) {
  auto a = parse_evaluate_answer(old_answer, options(), 3);
  BOOST_REQUIRE_MESSAGE(a, test::why(a));
  auto& v = a->verdict;
  BOOST_CHECK(v.correct && v.strict_correct && v.kernelbench_correct);
  BOOST_CHECK_EQUAL(v.kernelbench_trials_passed, 3);
  BOOST_REQUIRE_EQUAL(v.trials.size(), 1u);
  BOOST_CHECK(v.trials[0].kernelbench_passed);
  BOOST_CHECK_EQUAL(v.time_coverage, -1.0); // not measured
  BOOST_CHECK(v.kernels.empty());
  BOOST_CHECK(v.phases.empty());
  BOOST_CHECK(v.isolation.empty());
  BOOST_CHECK_EQUAL(v.timing_input_sets, 3);
  BOOST_CHECK_EQUAL(v.timing_wall_ms, 0.0);
  BOOST_CHECK(a->sticky_cuda_error);
  // An incorrect answer of an older worker: KernelBench's verdict is incorrect too.
  auto wrong = parse_evaluate_answer(
    R"({"compiled": true, "correct": false, "trials_passed": 1, "error": "mismatch",
        "trials": [{"passed": false}]})",
    options(), 3);
  BOOST_REQUIRE(wrong);
  BOOST_CHECK(!wrong->verdict.kernelbench_correct);
  BOOST_CHECK_EQUAL(wrong->verdict.kernelbench_trials_passed, 1);
  BOOST_CHECK(!wrong->verdict.trials[0].kernelbench_passed);
  BOOST_CHECK_EQUAL(wrong->verdict.trials_total, 3); // not answered: as asked
}

BOOST_AUTO_TEST_CASE(unreadable_answers_and_unknown_categories) {
  BOOST_CHECK(!parse_evaluate_answer("not json", options(), 3));
  BOOST_CHECK(!parse_evaluate_answer("[1, 2]", options(), 3));
  auto odd = parse_evaluate_answer(R"({"compiled": false, "error": "gremlins",
                                       "error_excerpt": ")" + std::string(100, 'x') + "\"}",
                                   [] {
                                     auto o = options();
                                     o.excerpt_bytes = 20;
                                     return o;
                                   }(),
                                   3);
  BOOST_REQUIRE(odd);
  BOOST_CHECK(odd->verdict.error == eval_error::infrastructure);
  BOOST_CHECK_LT(odd->verdict.error_excerpt.size(), 40u); // bounded
}

BOOST_AUTO_TEST_CASE(correctness_kernelbench_puts_its_verdict_into_correct) {
  auto a = parse_evaluate_answer(new_answer, options("kernelbench"), 3);
  BOOST_REQUIRE_MESSAGE(a, test::why(a));
  auto& v = a->verdict;
  BOOST_CHECK(v.correct);
  BOOST_CHECK(!v.strict_correct); // kept for display
  BOOST_CHECK_EQUAL(v.trials_passed, 3);
  BOOST_CHECK(v.error == eval_error::none); // the strict mismatch is not this verdict's

  // The other way round: strict correct, KernelBench's check not.
  eval_result r;
  r.compiled = r.correct = r.strict_correct = true;
  r.trials_passed = 3;
  r.kernelbench_trials_passed = 2;
  use_kernelbench_verdict(r);
  BOOST_CHECK(!r.correct);
  BOOST_CHECK_EQUAL(r.trials_passed, 2);
  BOOST_CHECK(r.error == eval_error::mismatch);
  // Failures that are not comparisons keep their category.
  eval_result crashed;
  crashed.error = eval_error::crashed;
  use_kernelbench_verdict(crashed);
  BOOST_CHECK(crashed.error == eval_error::crashed && !crashed.correct);
}

BOOST_AUTO_TEST_CASE(verdict_json_reads_back_through_the_same_codec) {
  auto a = parse_evaluate_answer(new_answer, options(), 3);
  BOOST_REQUIRE(a);
  auto v = a->verdict;
  v.id = 42;
  v.device = "NVIDIA H100 (gpu 0)";
  v.evaluator = "gpu1/evaluator.0";
  v.speedup = 2.0;
  v.total_seconds = 7.5;
  auto back = evalcli::parse_verdict(verdict_json(v), "test");
  BOOST_REQUIRE_MESSAGE(back, test::why(back));
  auto& b = *back;
  BOOST_CHECK(!b.correct && !b.strict_correct && b.kernelbench_correct);
  BOOST_CHECK_EQUAL(b.kernelbench_trials_passed, 3);
  BOOST_CHECK(b.error == eval_error::mismatch);
  BOOST_CHECK_EQUAL(b.time_coverage, 0.02);
  BOOST_REQUIRE_EQUAL(b.kernels.size(), 2u);
  BOOST_CHECK_EQUAL(b.kernels[1].name, "relu_kernel");
  BOOST_CHECK_EQUAL(b.timing_wall_ms, 52.5);
  BOOST_CHECK_EQUAL(b.timing_note, v.timing_note);
  BOOST_CHECK_EQUAL(b.isolation, "process");
  BOOST_REQUIRE_EQUAL(b.trials.size(), 3u);
  BOOST_CHECK_EQUAL(b.trials[1].max_rel_diff, 0.03);
  BOOST_CHECK_EQUAL(b.speedup, 2.0);
  BOOST_CHECK_EQUAL(b.device, v.device);
  BOOST_CHECK_EQUAL(b.evaluator, v.evaluator);
  BOOST_CHECK_EQUAL(b.total_seconds, 7.5);
  // The same verdict written again is the same text: nothing was lost on the way.
  b.id = v.id;
  BOOST_CHECK_EQUAL(verdict_json(b), verdict_json(v));

  // A turn log written before issue 16: KernelBench's verdict is its `correct`.
  auto old = evalcli::parse_verdict(
    R"({"id": 1, "compiled": true, "correct": true, "trials_passed": 5, "trials_total": 5,
        "error": "none", "error_excerpt": "", "trials": [], "speedup": 1.5, "hack_flags": []})",
    "old");
  BOOST_REQUIRE_MESSAGE(old, test::why(old));
  BOOST_CHECK(old->kernelbench_correct && old->strict_correct);
  BOOST_CHECK_EQUAL(old->time_coverage, -1.0);
  BOOST_CHECK(!evalcli::parse_verdict(R"({"error": "gremlins"})", "bad"));
}

BOOST_AUTO_TEST_CASE(verdict_text_shows_both_verdicts_coverage_and_timing_check) {
  auto a = parse_evaluate_answer(new_answer, options(), 3);
  BOOST_REQUIRE(a);
  auto v = a->verdict;
  v.speedup = 2.0;
  auto text = verdict_text(v);
  auto has = [&](const std::string& part) {
    BOOST_CHECK_MESSAGE(text.find(part) != std::string::npos, "no \"" << part << "\" in\n"
                                                                        << text);
  };
  has("incorrect (strict) / KernelBench: correct");
  has("2 of 3 trials pass the strict check");
  has("2x faster");
  has("trial 2: FAIL (KernelBench pass)");
  has("time coverage: 2.0 %");
  has("relu_kernel");
  has("timing check: events 50 ms, wall clock 52.5 ms, loop overhead 0.5 ms");
  has("timed with 2 input set(s) instead of 3");
  has("isolation process");
  has("flags: low_time_coverage");

  eval_result ok;
  ok.compiled = ok.correct = ok.strict_correct = ok.kernelbench_correct = true;
  BOOST_CHECK_EQUAL(verdict_text(ok).rfind("correct (strict) / KernelBench: correct", 0), 0u);
  eval_result wrong;
  wrong.compiled = true;
  wrong.error = eval_error::mismatch;
  wrong.trials_total = 3;
  BOOST_CHECK_EQUAL(verdict_text(wrong).rfind("incorrect (strict) / KernelBench: incorrect", 0),
                    0u);
  eval_result refused;
  refused.error = eval_error::static_check;
  BOOST_CHECK_EQUAL(verdict_text(refused).rfind("failed: static_check", 0), 0u);
  BOOST_CHECK(verdict_text(refused).find("time coverage") == std::string::npos); // -1: none
}

BOOST_AUTO_TEST_SUITE_END()
